#!/usr/bin/env bash
# Oracle of mcm-2023-c-wordle (Harbor convention): runs our reproduction solve.py, which reads the official
# data from ${ANCHORAGE_DATA_DIR:-/root/data} and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2023-c-wordle_result.json. PYTHON overrides the interpreter.
set -euo pipefail
# One OpenMP thread: the boosting model is tiny, and spinning threads on a shared 2-CPU machine cost minutes.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/solve.py" "$@"
