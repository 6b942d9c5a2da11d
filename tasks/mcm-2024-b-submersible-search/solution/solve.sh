#!/usr/bin/env bash
# Oracle of mcm-2024-b-submersible-search (Harbor convention): runs our reproduction solve.py, which reads the official
# data from ${ANCHORAGE_DATA_DIR:-/root/data} and writes
# ${ANCHORAGE_RESULTS_DIR:-/root/results}/mcm-2024-b-submersible-search_result.json. PYTHON overrides the interpreter.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${PYTHON:-python3}" "$here/solve.py" "$@"
