//go:build tools

// Package tools pins build-time dependencies: the nomad binary used by the
// e2e tests and `make run` is built from this module (`go build
// github.com/hashicorp/nomad`), so `go mod tidy` must keep its requirements.
package tools

import (
	_ "github.com/hashicorp/nomad"
)
