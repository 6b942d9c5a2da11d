//go:build tools

// Package tools pins the command tools/kube/build.sh builds (Kueue's manager, cmd/kueue), so `go mod tidy` keeps its
// dependencies in go.sum.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
