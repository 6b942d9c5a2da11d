#!/usr/bin/env bash
# Oracle of cumcm-2025-a-smoke-screen (Harbor convention): runs our Q1–Q5 reproduction, which reads the
# statement from ${ANCHORAGE_DATA_DIR:-/root/data} and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/cumcm-2025-a-smoke-screen_result.json (+ result1/2/3.xlsx).
set -euo pipefail
exec "${PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/solve.py"
