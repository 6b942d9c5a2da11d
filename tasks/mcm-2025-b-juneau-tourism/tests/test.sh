#!/usr/bin/env bash
# Verifier of mcm-2025-b-juneau-tourism: scores /root/results with the Anchorage scorer (the verifier image's entry point).
#
# Where the task is: our sandbox and operator mount the whole task, so the task root is the parent of tests/.
# Harbor uploads only this tests/ directory (to /tests); then a minimal task root is made around it, since
# tests/ holds everything scoring needs (score_config.json, expected_result.json, invariants.yaml).
# ANCHORAGE_TASK_DIR, ANCHORAGE_RESULTS_DIR and ANCHORAGE_VERIFIER_LOGS override the three locations;
# ANCHORAGE_SCORING_PROFILE picks the scoring profile (default paper; see docs/design-notes.md).
set -euo pipefail

tests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
task_dir="${ANCHORAGE_TASK_DIR:-$(dirname "$tests_dir")}"
results_dir="${ANCHORAGE_RESULTS_DIR:-/root/results}"
logs_dir="${ANCHORAGE_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$logs_dir"

if [ ! -f "$task_dir/task.toml" ]; then
  # Only tests/ is here (Harbor): give the scorer a minimal task root around it.
  task_dir="$(mktemp -d)/mcm-2025-b-juneau-tourism"
  mkdir -p "$task_dir"
  ln -s "$tests_dir" "$task_dir/tests"
  printf 'schema_version = "1.4"
artifacts = ["/root/results/mcm-2025-b-juneau-tourism_result.json"]
' > "$task_dir/task.toml"
  printf 'verifier-only task root of mcm-2025-b-juneau-tourism
' > "$task_dir/instruction.md"
fi

anchorage score --task "$task_dir" "$results_dir" --reward-file "$logs_dir/reward.json" --json \
  --profile "${ANCHORAGE_SCORING_PROFILE:-paper}" > "$logs_dir/score.json"
