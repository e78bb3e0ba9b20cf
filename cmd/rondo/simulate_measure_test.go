package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSimulateMeasureNoise: --measure-noise 0 is the plain run; a positive
// sigma runs the estimator on noisy reports and says how far off its
// estimates were; bad values and unsupported modes are one-line errors.
func TestSimulateMeasureNoise(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness_perf", "--cluster", "v100=2,p100=2,k80=2", "--trace", "static", "--jobs", "12", "--seed", "3", "--json"}
	for _, tc := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--measure-noise", "-0.1"}, "rondo simulate: --measure-noise -0.1: want a finite SIGMA ≥ 0\n"},
		{[]string{"--measure-noise", "NaN"}, "rondo simulate: --measure-noise NaN: want a finite SIGMA ≥ 0\n"},
		{[]string{"--measure-noise", "0.1", "--ideal"}, "rondo simulate: --measure-noise is not supported with --ideal (nothing runs in rounds to measure)\n"},
	} {
		code, out, errOut := runCaptured(t, append(args, tc.extra...)...)
		if code != 1 || errOut != tc.want || out != "" {
			t.Errorf("%v: code %d, stderr %q, stdout %q: want 1, %q", tc.extra, code, errOut, out, tc.want)
		}
	}
	if code, _, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/cluster.hcl", "--trace", "philly", "--measure-noise", "0.1"); code != 1 ||
		errOut != "rondo simulate: --measure-noise with --vc-config needs a Gavel trace (--trace continuous|static|FILE), not a Philly one\n" {
		t.Errorf("--vc-config, a Philly trace and --measure-noise: code %d, %q", code, errOut)
	}
	if code, _, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/hetero-cells.hcl", "--measure-noise", "-1"); code != 1 ||
		errOut != "rondo simulate: --measure-noise -1: want a finite SIGMA ≥ 0\n" {
		t.Errorf("--vc-config and --measure-noise -1: code %d, %q", code, errOut)
	}

	run := func(extra ...string) map[string]any { t.Helper(); return runSimJSON(t, append(args, extra...)...) }
	plain, zero, noisy := run(), run("--measure-noise", "0"), run("--measure-noise", "0.1")
	if !reflect.DeepEqual(plain, zero) {
		t.Errorf("--measure-noise 0 changed the run:\n%v\n%v", plain, zero)
	}
	if _, ok := plain["estimate_error_mean"]; ok {
		t.Errorf("a run without measurements reports an estimate error: %v", plain)
	}
	e, _ := noisy["estimate_error_mean"].(float64)
	if noisy["finished"] != true || e <= 0 || e > 0.1 {
		t.Errorf("--measure-noise 0.1: finished %v, estimate error %v (want in (0, 0.1])", noisy["finished"], noisy["estimate_error_mean"])
	}
	for range 3 {
		if again := run("--measure-noise", "0.1"); !reflect.DeepEqual(noisy, again) {
			t.Errorf("--measure-noise 0.1 with one seed gave two runs:\n%v\n%v", noisy, again)
		}
	}
	code, out, errOut := runCaptured(t, args[:len(args)-1]...)
	if code != 0 || strings.Contains(out, "measured throughputs") {
		t.Errorf("text output without noise: code %d %q %q", code, out, errOut)
	}
	code, out, errOut = runCaptured(t, append(args[:len(args)-1:len(args)-1], "--measure-noise", "0.1")...)
	if code != 0 || !strings.Contains(out, "measured throughputs (noise sigma 0.1): estimates off by ") {
		t.Errorf("text output with noise: code %d %q %q", code, out, errOut)
	}
}

// TestSimulateMeasureNoiseVCs: the estimator runs with VCs on three GPU
// types and failures injected (both VC deciders, as the agent builds
// them): every job finishes, the failures are the same, and the estimates
// the deciders used are off by what sigma 0.1 allows; noise 0 is the plain
// run.
func TestSimulateMeasureNoiseVCs(t *testing.T) {
	for _, cfg := range [][]string{
		{"--vc-config", "../../docs/vc-demo/hetero-cells.hcl", "--faults", "../../docs/vc-demo/faults.csv"},
		{"--vc-config", "../../docs/vc-demo/hetero-quota.hcl", "--cluster", "v100=16,p100=16,k80=16", "--gpus-per-server", "8",
			"--faults", "../../docs/vc-demo/faults-quota.csv"},
	} {
		run := func(extra ...string) map[string]any {
			t.Helper()
			return runSimJSON(t, append(append([]string{"simulate", "--trace", "continuous", "--rate", "3", "--jobs", "40", "--multi-gpu", "--json"}, cfg...), extra...)...)
		}
		plain, zero, noisy := run(), run("--measure-noise", "0"), run("--measure-noise", "0.1")
		if !reflect.DeepEqual(plain, zero) {
			t.Errorf("%v: --measure-noise 0 changed the run:\n%v\n%v", cfg[1], plain, zero)
		}
		e, _ := noisy["estimate_error_mean"].(float64)
		t.Logf("%s: avg JCT %.0f s, with sigma 0.1 %.0f s, estimates off by %.2f%%", cfg[1], plain["avg_jct_s"], noisy["avg_jct_s"], 100*e)
		if noisy["finished"] != true || noisy["jobs_done"] != 40.0 || noisy["gpu_failures"] != plain["gpu_failures"] || e <= 0 || e > 0.1 {
			t.Errorf("%v with --measure-noise 0.1: %v", cfg[1], noisy)
		}
	}
}

// TestSimulateHidePairs: --hide-pairs out of [0, 1) is a one-line error; a
// packed run with half the pairs hidden reports how many and their error,
// and finishes.
func TestSimulateHidePairs(t *testing.T) {
	args := []string{"simulate", "--policy", "max_min_fairness_packed", "--cluster", "v100=2,p100=2,k80=2", "--trace", "static", "--jobs", "12", "--seed", "3", "--json"}
	for _, v := range []string{"1", "-0.5", "NaN"} {
		code, out, errOut := runCaptured(t, append(args, "--hide-pairs", v)...)
		if want := "rondo simulate: --hide-pairs " + v + ": want a fraction in [0, 1)\n"; code != 1 || errOut != want || out != "" {
			t.Errorf("--hide-pairs %s: code %d, stderr %q: want %q", v, code, errOut, want)
		}
	}
	code, out, errOut := runCaptured(t, append(args, "--hide-pairs", "0.5")...)
	var res map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("code %d, %s %s", code, out, errOut)
	}
	if n, _ := res["hidden_pairs"].(float64); n < 100 || res["hidden_pair_mre"].(float64) <= 0 || res["finished"] != true {
		t.Errorf("result %v", res)
	}
}
