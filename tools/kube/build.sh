#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries that the real-cluster tests and `anchorage dev cluster` run: the control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) and the node (kubelet, kube-proxy)
# from tools/kube/kubernetes in one `go build`, etcd (tools/kube/etcd), CoreDNS (tools/kube/coredns),
# kube-router (tools/kube/kube-router), the pause program (tools/kube/pause), the registry (tools/kube/registry) and
# Kueue's manager (tools/kube/kueue), each from its Go module through the Go module proxy, into the cache by version:
#   ${ANCHORAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/anchorage}/{kube,etcd,coredns,kube-router,pause,registry,kueue}/<version>/
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

# The file `go build -o DIR/` writes for a package: its last path element, or the one before a major version
# suffix (go.etcd.io/etcd/server/v3 -> server).
output_name() {
  local name; name=$(basename "$1")
  if [[ $name =~ ^v[0-9]+$ ]]; then name=$(basename "$(dirname "$1")"); fi
  echo "$name"
}

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
  local start=$SECONDS pkgs=()
  for spec in "${missing[@]}"; do pkgs+=("${spec#*=}"); done
  # one invocation for all of a module's binaries: the packages they share compile once, in parallel
  (cd "$here/$module" && nice -n 10 go build -ldflags "-s -w $ldflags" -o "$tmp/" "${pkgs[@]}")
  for spec in "${missing[@]}"; do mv "$tmp/$(output_name "${spec#*=}")" "$out/${spec%%=*}"; done
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
  kubectl=k8s.io/kubernetes/cmd/kubectl \
  kubelet=k8s.io/kubernetes/cmd/kubelet \
  kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
build etcd "$cache/etcd/$etcd_version" "" etcd=go.etcd.io/etcd/server/v3

# The real nodes' own parts (devcluster/anchorage_devcluster/realnode.py): CoreDNS with the plugins of
# tools/kube/coredns/main.go, kube-router (its NetworkPolicy controller) and the pod sandbox's pause program.
# Keyed by the pinned version and a hash of what the build reads beside it, so an edit rebuilds.
# (devcluster/anchorage_devcluster/binaries.py computes the same key: sha256 over go.mod, go.sum and the .go files
# in byte order of their names, each preceded by its name and a newline)
sources() {
  local f
  for f in $(cd "$here/$1" && ls go.mod go.sum *.go 2>/dev/null | LC_ALL=C sort); do
    printf '%s\n' "$f"; cat "$here/$1/$f"
  done | sha256sum | cut -c1-10
}
coredns_version=$(pinned coredns github.com/coredns/coredns)
router_version=$(pinned kube-router github.com/cloudnativelabs/kube-router/v2)
build coredns "$cache/coredns/$coredns_version-$(sources coredns)" \
  "-X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" coredns=anchorage.dev/tools/kube/coredns
build kube-router "$cache/kube-router/$router_version-$(sources kube-router)" \
  "-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$router_version" \
  kube-router=github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
build pause "$cache/pause/$(sources pause)" "" pause=anchorage.dev/tools/kube/pause
registry_version=$(pinned registry github.com/distribution/distribution/v3)
build registry "$cache/registry/$registry_version-$(sources registry)" \
  "-X github.com/distribution/distribution/v3/version.version=$registry_version" \
  registry=anchorage.dev/tools/kube/registry

# Kueue's manager (batch admission: devcluster/anchorage_devcluster/kueue.py runs it as a Deployment with the CRDs,
# RBAC and webhooks of the same module's config/). Its own build, keyed like the node's parts.
kueue_version=$(pinned kueue sigs.k8s.io/kueue)
build kueue "$cache/kueue/$kueue_version-$(sources kueue)" \
  "-X sigs.k8s.io/kueue/pkg/version.GitVersion=$kueue_version -X sigs.k8s.io/kueue/pkg/version.BuildDate=1970-01-01" \
  kueue=sigs.k8s.io/kueue/cmd/kueue
# and the module's own manifests (config/default: CRDs, RBAC, webhooks, the manager's Deployment) rendered beside it by
# the pinned kubectl's built-in kustomize, so a cluster needs neither Go nor the module at install time
kueue_out="$cache/kueue/$kueue_version-$(sources kueue)"
if [ ! -s "$kueue_out/manifests.yaml" ]; then
  kueue_module=$(cd "$here/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
  "$cache/kube/$kube_version/kubectl" kustomize "$kueue_module/config/default" > "$kueue_out/.manifests.yaml"
  mv "$kueue_out/.manifests.yaml" "$kueue_out/manifests.yaml"
  echo "kube: rendered Kueue's manifests into $kueue_out/manifests.yaml"
fi
# The tests' kstatus program: sigs.k8s.io/cli-utils' status computation (what Flux, Argo CD and kpt read) over a list
# on stdin, so the operator's conditions are held to the library itself (tests/kube/test_real_kstatus.py).
kstatus_version=$(pinned kstatus sigs.k8s.io/cli-utils)
build kstatus "$cache/kstatus/$kstatus_version-$(sources kstatus)" "" kstatus=anchorage.dev/tools/kube/kstatus
