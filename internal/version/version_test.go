package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		s    []debug.BuildSetting
		want string
	}{
		{nil, "dev"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}}, "dev-1a2b3c4d5e6f"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "1a2b3c4d5e6f7a8b9c0d"}, {Key: "vcs.modified", Value: "true"}}, "dev-1a2b3c4d5e6f-dirty"},
	} {
		if got := fromBuildInfo(tc.s); got != tc.want {
			t.Errorf("fromBuildInfo(%v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
