//go:build tools

// Package tools pins the command tools/kube/build.sh builds, so `go mod tidy` keeps its dependencies in go.sum.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/pkg/cmd"
