// Package version is the build's version: what the build set with
// -ldflags "-X github.com/rondo-sched/rondo/internal/version.Version=..."
// (the Makefile does, from `git describe --always --dirty --tags`), else
// the VCS revision Go stamps into builds from a checkout ("dev-1a2b3c4d",
// "-dirty" when the tree had changes), else "dev".
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the build's version (init fills it in when the build did not).
var Version = "dev"

func init() {
	if Version != "dev" {
		return
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		Version = fromBuildInfo(info.Settings)
	}
}

// fromBuildInfo is "dev-<12 hex of vcs.revision>[-dirty]", or "dev".
func fromBuildInfo(settings []debug.BuildSetting) string {
	rev, dirty := "", false
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(12, len(rev))]
	if dirty {
		v += "-dirty"
	}
	return v
}

// GoVersion is the Go toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }
