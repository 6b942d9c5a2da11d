#!/usr/bin/env bash
# `make test`: set everything up, lint, run the whole suite — each phase timed, the table printed at the end, so every
# CI log shows where its budget went (the pytest run adds its own table: time per test folder and the 25 slowest).
#
#   system    Debian packages (apt, as root)            venv    the virtualenv and the package's dev tools
#   in parallel, each with its own prefix:              go      the Kubernetes, node, registry and S3 binaries
#                                                       images  the agent, verifier, operator and task images
#                                                       agents  the pinned agent CLIs (npm)
#                                                       lint    ruff, mypy strict (its cache: see Makefile), import-linter
#   tests     pytest (PYTEST_ARGS; three workers, see Makefile)
#
# Every phase runs even when one before failed (a lint failure still shows the tests); the exit status is 1 when
# any failed. A second run reuses what is cached by version or content (binaries, images, CLIs, reproductions).
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
record=$(mktemp)
trap 'rm -f "$record"' EXIT
start_all=$SECONDS

# phase NAME COMMAND...: run it, its output prefixed with [NAME], and record its time and exit status
phase() {
  local name=$1 start=$SECONDS rc
  shift
  echo "=== $name: $*"
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  rc=${PIPESTATUS[0]}
  echo "$name $((SECONDS - start)) $rc" >> "$record"
  echo "=== $name: exit $rc after $((SECONDS - start)) s"
  return "$rc"
}

phase system "$MAKE" --no-print-directory system
phase venv "$MAKE" --no-print-directory venv
phase go "$MAKE" --no-print-directory kube s3 &
phase images "$MAKE" --no-print-directory images-cached &
phase agents "$MAKE" --no-print-directory agents &
phase lint "$MAKE" --no-print-directory lint &
wait
phase tests "$MAKE" --no-print-directory unit

status=0
echo
echo "make test: time per phase (the builds ran side by side)"
printf '  %-8s %8s  %s\n' phase seconds result
while read -r name seconds rc; do
  printf '  %-8s %8s  %s\n' "$name" "$seconds" "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
  [ "$rc" = 0 ] || status=1
done < "$record"
printf '  %-8s %8s\n' total "$((SECONDS - start_all))"
exit "$status"
