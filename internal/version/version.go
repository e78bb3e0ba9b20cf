// Package version is the build's version: "dev" unless the build sets it
// with -ldflags "-X github.com/rondo-sched/rondo/internal/version.Version=..."
// (the Makefile does, from `git describe --always --dirty --tags`).
package version

import "runtime"

// Version is the build's version.
var Version = "dev"

// GoVersion is the Go toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }
