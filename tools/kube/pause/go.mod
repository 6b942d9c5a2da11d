// The pod sandbox process of the dev cluster's real nodes (containerd's sandbox image), built by
// tools/kube/build.sh; no dependencies.
module anchorage.dev/tools/kube/pause

go 1.24.0
