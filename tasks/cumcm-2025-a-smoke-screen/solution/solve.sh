#!/usr/bin/env bash
# Oracle of cumcm-2025-a-smoke-screen (Harbor convention): runs our Q1–Q5 reproduction, which reads the
# statement from ${ANCHORAGE_DATA_DIR:-/root/data} and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/cumcm-2025-a-smoke-screen_result.json (+ result1/2/3.xlsx).
set -euo pipefail
# Deterministic numerics: one BLAS/OpenMP thread (a reduction split over threads sums in another order, and
# threads only contend on a shared 2-CPU sandbox) and a fixed hash seed (the order of sets of strings).
# Each stays overridable, to rerun on purpose with another thread count (tests/anchors/test_reproductions.py).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
       PYTHONHASHSEED="${PYTHONHASHSEED:-0}"
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/solve.py"
