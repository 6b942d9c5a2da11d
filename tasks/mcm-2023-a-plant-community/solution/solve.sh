#!/usr/bin/env bash
# Oracle of mcm-2023-a-plant-community (Harbor convention): runs our reproduction solve.py, which reads no
# data (the statement has none) and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2023-a-plant-community_result.json. PYTHON overrides the interpreter.
set -euo pipefail
# Small dense algebra: one BLAS thread (threads only contend on a shared 2-CPU sandbox).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/solve.py" "$@"
