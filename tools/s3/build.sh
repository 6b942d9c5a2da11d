#!/usr/bin/env bash
# Builds the pinned S3 server the store's tests and the dev cluster run: versitygw (Apache-2.0, its posix backend),
# from its Go module through the Go module proxy (tools/s3/versitygw pins the version), into the cache by version:
#   ${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}/s3/<version>/versitygw
# A binary already there is reused, so a second run (or a clean clone on the same machine) costs nothing; the build
# goes to a temporary name beside it and is moved into place, so a half-built binary is never found.
# Called by `make s3` (part of `make test`). Without Go it says so and exits 0: the tests that need the server then
# skip with that reason. Set ANCHORAGE_S3_BUILD=0 to never build. (Why versitygw: docs/design-notes.md, "Store".)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath

if [ "${ANCHORAGE_S3_BUILD:-1}" = 0 ]; then
  echo "s3: ANCHORAGE_S3_BUILD=0, not building the S3 server"; exit 0
fi
if ! command -v go >/dev/null; then
  echo "s3: Go is not installed (no 'go' on PATH nor in /usr/local/go/bin): the S3 server cannot be built and" \
       "the tests against it will skip. Install Go >= 1.25 and run 'make s3'."
  exit 0
fi

module=github.com/versity/versitygw
version=$(awk -v m="$module" '$1 == "require" && $2 == m {print $3; exit} $1 == m && $2 ~ /^v/ {print $2; exit}' \
  "$here/versitygw/go.mod")
if [ -z "$version" ]; then
  echo "s3: cannot read the pinned version from $here/versitygw/go.mod" >&2; exit 1
fi

out="$cache/s3/$version"
if [ -x "$out/versitygw" ]; then echo "s3: reusing $out/versitygw"; exit 0; fi
mkdir -p "$out"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "s3: building versitygw $version into $out (about a minute the first time)"
start=$SECONDS
(cd "$here/versitygw" && nice -n 10 go build -o "$tmp/versitygw" \
  -ldflags "-s -w -X main.Version=$version -X main.Build=$version -X main.BuildTime=1970-01-01T00:00:00Z" \
  "$module/cmd/versitygw")
mv "$tmp/versitygw" "$out/versitygw"
echo "s3: built versitygw $version in $((SECONDS - start)) s"
