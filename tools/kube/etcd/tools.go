//go:build tools

// Package tools pins the etcd server package tools/kube/build.sh builds, so `go mod tidy` keeps its
// dependencies in go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3/etcdmain"
