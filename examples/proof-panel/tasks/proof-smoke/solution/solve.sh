#!/usr/bin/env bash
# Oracle of proof-smoke: writes the reference proof and the numeric answer to the results folder.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
out="${ANCHORAGE_RESULTS_DIR:-/root/results}"
mkdir -p "$out"
cp "$here/solution.md" "$out/solution.md"
printf '{"experiment_result": {"quotient_at_12": %d}}\n' $(( (12*12*12 - 12) / 6 )) > "$out/proof-smoke_result.json"
