package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestPolicySolveWorkedExample(t *testing.T) {
	code, out, errOut := runCaptured(t, "policy", "solve", "--policy", "max_min_fairness_perf", "--input", "../../policies/testdata/worked_example.json")
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var res struct {
		Policy     string                        `json:"policy"`
		Objective  float64                       `json:"objective"`
		Allocation map[string]map[string]float64 `json:"allocation"`
		Effective  map[string]float64            `json:"effective_throughput"`
		SolveMS    float64                       `json:"solve_ms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Policy != "max_min_fairness_perf" || math.Abs(res.Allocation["j3"]["k80"]-0.91) > 0.01 {
		t.Fatalf("unexpected result: %s", out)
	}
}

func TestPolicySolveErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"policy", "solve", "--input", "../../policies/testdata/worked_example.json"}, "--policy is required"},
		{[]string{"policy", "solve", "--policy", "nope", "--input", "../../policies/testdata/worked_example.json"}, `unknown policy "nope"`},
		{[]string{"policy", "solve", "--policy", "las", "--input", "testdata/no-such-file.json"}, "no such file"},
		{[]string{"policy", "solve", "--policy", "las", "--input", "testdata/bad_problem.json"}, "jobs[0] (a).throughput.v100: must be a non-negative number"},
		{[]string{"policy", "solve", "--policy", "las", "--input", "testdata/zero_scale_problem.json"}, "testdata/zero_scale_problem.json: jobs[1] (b).scale_factor: must be at least 1, got 0"},
		{[]string{"policy", "solve", "--bogus"}, "flag provided but not defined"},
	} {
		code, _, errOut := runCaptured(t, tc.args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: code %d, stderr %q; want exit 1 and one line containing %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestPolicyListAndHelp(t *testing.T) {
	code, out, _ := runCaptured(t, "policy", "list")
	if code != 0 || !strings.Contains(out, "max_min_fairness_water_filling_perf\n") || !strings.Contains(out, "allox\n") {
		t.Fatalf("policy list: code %d, %q", code, out)
	}
	code, out, _ = runCaptured(t, "policy", "solve", "-h")
	if code != 0 || !strings.Contains(out, "Usage: rondo policy solve") || !strings.Contains(out, "-policy") {
		t.Fatalf("policy solve -h: code %d, %q", code, out)
	}
	code, _, _ = runCaptured(t, "no-such-command")
	if code != 1 {
		t.Fatalf("unknown command: code %d, want 1", code)
	}
}
