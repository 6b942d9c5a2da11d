#!/usr/bin/env bash
# Oracle of smoke-inventory (Harbor convention): runs the reproduction, which reads the attachment CSV and
# writes /root/results/smoke-inventory_result.json. ANCHORAGE_DATA_DIR / ANCHORAGE_RESULTS_DIR relocate both.
set -euo pipefail
# Deterministic numerics: one BLAS/OpenMP thread (a reduction split over threads sums in another order, and
# threads only contend on a shared 2-CPU sandbox) and a fixed hash seed (the order of sets of strings).
# Each stays overridable, to rerun on purpose with another thread count (tests/anchors/test_reproductions.py).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
       PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
exec python3 "$(dirname "${BASH_SOURCE[0]}")/solve.py"
