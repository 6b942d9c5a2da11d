#!/usr/bin/env bash
# Builds the pinned Kubernetes control plane that the real-cluster tests and `anchorage dev cluster` run:
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (tools/kube/kubernetes), etcd
# (tools/kube/etcd), each from its Go module through the Go module proxy, into the cache by version:
#   ${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}/{kube,etcd}/<version>/
# (Simulated nodes for load tests are the node agent's simulate mode, not kwok: they must write what
# Anchorage's pod programs would, which kwok cannot.)
# A binary already there is reused, so a second run (or a clean clone on the same machine) costs nothing.
# Called by `make kube` (part of `make test`). Without Go it says so and exits 0: the tests that need the
# binaries then skip with that reason. Set ANCHORAGE_KUBE_BUILD=0 to never build.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}
export PATH="$PATH:/usr/local/go/bin"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-trimpath

if [ "${ANCHORAGE_KUBE_BUILD:-1}" = 0 ]; then
  echo "kube: ANCHORAGE_KUBE_BUILD=0, not building the control plane"; exit 0
fi
if ! command -v go >/dev/null; then
  echo "kube: Go is not installed (no 'go' on PATH nor in /usr/local/go/bin): the real control plane" \
       "cannot be built and the real-cluster tests will skip. Install Go >= 1.24 and run 'make kube'."
  exit 0
fi

# The version a build module pins, read from its go.mod's require line.
pinned() {
  awk -v m="$2" '$1 == "require" && $2 == m {print $3; exit} $1 == m && $2 ~ /^v/ {print $2; exit}' "$here/$1/go.mod"
}

kube_version=$(pinned kubernetes k8s.io/kubernetes)
etcd_version=$(pinned etcd go.etcd.io/etcd/server/v3)
if [ -z "$kube_version" ] || [ -z "$etcd_version" ]; then
  echo "kube: cannot read the pinned versions from $here/*/go.mod" >&2; exit 1
fi

# build <module folder> <output folder> <ldflags> <name=package>... : builds the missing binaries into a
# temporary folder beside the output and moves each into place, so a half-built binary is never found.
build() {
  local module=$1 out=$2 ldflags=$3; shift 3
  local missing=() spec
  for spec in "$@"; do [ -x "$out/${spec%%=*}" ] || missing+=("$spec"); done
  if [ ${#missing[@]} = 0 ]; then echo "kube: reusing $out"; return; fi
  mkdir -p "$out"
  local tmp; tmp=$(mktemp -d "$out/.build.XXXXXX")
  echo "kube: building ${missing[*]%%=*} into $out (takes several minutes the first time)"
  local start=$SECONDS
  for spec in "${missing[@]}"; do
    (cd "$here/$module" && nice -n 10 go build -ldflags "-s -w $ldflags" -o "$tmp/${spec%%=*}" "${spec#*=}")
  done
  for spec in "${missing[@]}"; do mv "$tmp/${spec%%=*}" "$out/${spec%%=*}"; done
  rmdir "$tmp"
  echo "kube: built ${missing[*]%%=*} in $((SECONDS - start)) s"
}

minor=${kube_version#v1.}; minor=${minor%%.*}
component=k8s.io/component-base/version
client=k8s.io/client-go/pkg/version
kube_flags=""
for pkg in $component $client; do
  kube_flags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  kube_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build kubernetes "$cache/kube/$kube_version" "$kube_flags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl
build etcd "$cache/etcd/$etcd_version" "" etcd=go.etcd.io/etcd/server/v3
