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

# The machine's busy and total CPU ticks since boot (/proc/stat's first line; idle and iowait count as not busy).
ticks() { awk 'NR == 1 { t = 0; for (i = 2; i <= 9; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }

# phase NAME COMMAND...: run it, its output prefixed with [NAME], and record its time, exit status and how busy the
# machine's CPU was over its span (the whole machine's: phases that run side by side share it)
phase() {
  local name=$1 start=$SECONDS rc cpu0 cpu1
  shift
  cpu0=$(ticks)
  echo "=== $name: $*"
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  rc=${PIPESTATUS[0]}
  cpu1=$(ticks)
  echo "$name $((SECONDS - start)) $rc $(echo "$cpu0 $cpu1" | awk '{ d = $4 - $2; print (d > 0 ? int(100 * ($3 - $1) / d + 0.5) : 0) }')" \
    >> "$record"
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
echo "make test: time per phase (the builds ran side by side; CPU: how busy the machine's cores were over the phase)"
printf '  %-8s %8s %5s  %s\n' phase seconds CPU result
while read -r name seconds rc busy; do
  printf '  %-8s %8s %4s%%  %s\n' "$name" "$seconds" "$busy" "$([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")"
  [ "$rc" = 0 ] || status=1
done < "$record"
printf '  %-8s %8s\n' total "$((SECONDS - start_all))"
exit "$status"
