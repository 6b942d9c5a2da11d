#!/usr/bin/env bash
# Oracle of smoke-inventory (Harbor convention): runs the reproduction, which reads the attachment CSV and
# writes /root/results/smoke-inventory_result.json. ANCHORAGE_DATA_DIR / ANCHORAGE_RESULTS_DIR relocate both.
set -euo pipefail
exec python3 "$(dirname "${BASH_SOURCE[0]}")/solve.py"
