#!/usr/bin/env bash
# Oracle of cumcm-2025-c-nipt (Harbor convention): runs our reproduction solve.py, which reads the
# official workbook from ${ANCHORAGE_DATA_DIR:-/root/data}/attachments and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/cumcm-2025-c-nipt_result.json. PYTHON overrides the interpreter.
set -euo pipefail
# Deterministic numerics: one BLAS/OpenMP thread (a reduction split over threads sums in another order, and
# threads only contend on a shared 2-CPU sandbox) and a fixed hash seed (the order of sets of strings).
# Each stays overridable, to rerun on purpose with another thread count (tests/anchors/test_reproductions.py).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
       PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/solve.py" "$@"
