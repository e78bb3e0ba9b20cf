package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSimulateProfilesOnGPU: --profiles-on-gpu's errors, and a Gavel trace
// with --placement: its jobs take their models' profiles (TUNE retunes,
// and beats proportional on this small cluster either way).
func TestSimulateProfilesOnGPU(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "las", "--profiles-on-gpu", "same"}, "--profiles-on-gpu needs --placement"},
		{[]string{"--policy", "las", "--placement", "tune", "--profiles-on-gpu", "v100"}, `--profiles-on-gpu "v100": want scaled or same`},
	} {
		code, _, errOut := runCaptured(t, append([]string{"simulate"}, c.args...)...)
		if code != 1 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: code %d, %q; want one line with %q", c.args, code, errOut, c.want)
		}
	}
	run := func(extra ...string) (jct float64, retunes int) {
		t.Helper()
		args := append([]string{"simulate", "--policy", "las", "--trace", "continuous", "--jobs", "40", "--rate", "3",
			"--cluster", "v100=4,p100=4,k80=4", "--gpus-per-server", "4", "--json"}, extra...)
		code, out, errOut := runCaptured(t, args...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", args, code, errOut)
		}
		var r struct {
			AvgJCTS  float64 `json:"avg_jct_s"`
			Retunes  int     `json:"retunes"`
			JobsDone int     `json:"jobs_done"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.JobsDone != 40 {
			t.Fatalf("%v: %v %+v", args, err, r)
		}
		return r.AvgJCTS, r.Retunes
	}
	prop, _ := run("--placement", "proportional")
	for _, on := range []string{"scaled", "same"} {
		tune, retunes := run("--placement", "tune", "--profiles-on-gpu", on)
		if retunes == 0 || !(tune < prop) {
			t.Errorf("%s: TUNE %.0f s (%d retunes), proportional %.0f s", on, tune, retunes, prop)
		}
	}
}
