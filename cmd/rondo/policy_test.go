package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
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

// gandivaFairProblem: two users on 4 v100 + 4 k80 with six 1-GPU jobs each,
// throughputs from Gavel's table (allocator/throughputs, scale factor 1):
// alice trains ResNet-50 (batch size 64), 7.1x faster on v100; bob
// Transformer (batch size 16), 2.0x faster.
func gandivaFairProblem(t *testing.T, users string) string {
	t.Helper()
	var jobs []string
	for i := 0; i < 6; i++ {
		jobs = append(jobs,
			fmt.Sprintf(`{"id":"a%d","user":"alice","throughput":{"v100":4.395,"k80":0.619}}`, i),
			fmt.Sprintf(`{"id":"b%d","user":"bob","throughput":{"v100":11.064,"k80":5.467}}`, i))
	}
	js := `{"gpu_types":{"v100":{"count":4},"k80":{"count":4}},"users":` + users + `,"jobs":[` + strings.Join(jobs, ",") + `]}`
	path := filepath.Join(t.TempDir(), "problem.json")
	if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPolicySolveGandivaFair: equal tickets give each user 2 v100 + 2 k80;
// bob (speedup 2.02) sells v100 to alice (7.10) at his own speedup, as much
// as alice's 2 k80 pay for.
func TestPolicySolveGandivaFair(t *testing.T) {
	code, out, errOut := runCaptured(t, "policy", "solve", "--policy", "gandiva_fair", "--input",
		gandivaFairProblem(t, `{"alice":{"tickets":100},"bob":{"tickets":100}}`))
	if code != 0 {
		t.Fatalf("code %d: %s", code, errOut)
	}
	var res struct {
		Policy     string                        `json:"policy"`
		Allocation map[string]map[string]float64 `json:"allocation"`
		FairShares map[string]map[string]float64 `json:"fair_shares"`
		UserShares map[string]map[string]float64 `json:"user_shares"`
		Trades     []struct {
			Buyer, Seller, Fast, Slow string
			Price, Amount             float64
		} `json:"trades"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	for _, u := range []string{"alice", "bob"} {
		if !near(res.FairShares[u]["v100"], 2) || !near(res.FairShares[u]["k80"], 2) {
			t.Fatalf("fair shares %v", res.FairShares)
		}
	}
	price := 11.064 / 5.467
	if res.Policy != "gandiva_fair" || len(res.Trades) != 1 || res.Trades[0].Buyer != "alice" || res.Trades[0].Seller != "bob" ||
		res.Trades[0].Fast != "v100" || !near(res.Trades[0].Price, price) || !near(res.Trades[0].Amount, 2/price) {
		t.Fatalf("trades: %s", out)
	}
	if !near(res.UserShares["alice"]["v100"], 2+2/price) || res.UserShares["alice"]["k80"] > 1e-9 || !near(res.UserShares["bob"]["k80"], 4) {
		t.Fatalf("user shares %v", res.UserShares)
	}
	if !near(res.Allocation["a0"]["v100"], (2+2/price)/6) {
		t.Fatalf("a0 gets %v", res.Allocation["a0"])
	}
}

func TestPolicySolveGandivaFairBadTickets(t *testing.T) {
	path := gandivaFairProblem(t, `{"alice":{"tickets":0},"bob":{"tickets":100}}`)
	code, _, errOut := runCaptured(t, "policy", "solve", "--policy", "gandiva_fair", "--input", path)
	want := path + ": users.alice.tickets: must be a positive integer"
	if e := strings.TrimSpace(errOut); code != 1 || !strings.HasSuffix(e, want) || strings.Contains(e, "\n") {
		t.Fatalf("code %d, stderr %q; want exit 1 and one line ending %q", code, errOut, want)
	}
}
