package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/round"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// TestSimulateVC: --vc-config with a Philly trace runs the comparison
// (quota-only, cells, private clusters) in the one simulator: the report's
// tables, and in --json every VC's guaranteed delays under cells equal to
// its private cluster's (no anomaly), on the 1-type demo cluster and the
// 3-type one.
func TestSimulateVC(t *testing.T) {
	cfg := "../../docs/vc-demo/cluster.hcl"
	code, out, errOut := runCaptured(t, "simulate", "--vc-config", cfg, "--trace", "philly", "--jobs", "150", "--seeds", "0,1")
	if code != 0 || !strings.Contains(out, "| intern | 8 |") || !strings.Contains(out, "| cells |") ||
		!strings.Contains(out, "VC policies prod=fifo,research=fifo,dev=fifo,intern=fifo") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	type delay struct {
		Avg float64 `json:"avg_s"`
		Max float64 `json:"max_s"`
	}
	var got struct {
		Results []struct {
			Jobs int `json:"jobs"`
			GPUs int `json:"gpus"`
			VCs  []struct {
				VC           string `json:"vc"`
				QuotaGPUs    int    `json:"quota_gpus"`
				Guaranteed   int    `json:"guaranteed_jobs"`
				CellsAnomaly int    `json:"cells_anomaly_jobs"`
				PrivateCells delay  `json:"private_cells"`
				Cells        delay  `json:"cells"`
				PrivateJCT   delay  `json:"private_cells_jct"`
				JCT          delay  `json:"cells_jct"`
			} `json:"vcs"`
			Cells struct {
				Utilization float64 `json:"utilization"`
			} `json:"cells"`
		} `json:"results"`
	}
	for _, tc := range []struct {
		cfg  string
		gpus int
		args []string
	}{
		{cfg, 128, []string{"--vc-share", "prod=1,intern=1", "--vc-gpus", "prod=1|2,intern=8", "--load", "1.2"}},
		{"../../docs/vc-demo/hetero-cells.hcl", 48, []string{"--load", "1.2"}},
	} {
		dir := t.TempDir()
		args := append([]string{"simulate", "--vc-config", tc.cfg, "--jobs", "120", "--json", "--out", dir, "--max-duration", "86400"}, tc.args...)
		code, out, errOut = runCaptured(t, args...)
		if code != 0 {
			t.Fatalf("%s: code %d, err %q", tc.cfg, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Results) != 1 || got.Results[0].Jobs != 120 || got.Results[0].GPUs != tc.gpus {
			t.Fatalf("%s: %v: %s", tc.cfg, err, out)
		}
		waited := false
		for _, v := range got.Results[0].VCs {
			if v.CellsAnomaly != 0 || v.Cells != v.PrivateCells || v.JCT != v.PrivateJCT {
				t.Errorf("%s: cells differ from the private cluster: %+v", tc.cfg, v)
			}
			waited = waited || v.Cells.Max > 3600
		}
		if !waited || !(got.Results[0].Cells.Utilization > 0) {
			t.Errorf("%s: no VC waited an hour (the trace does not load the cluster): %s", tc.cfg, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "vc-summary.md")); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"--vc-config", cfg, "--seeds", "x"},
		{"--vc-config", cfg, "--vc-share", "nobody=1"},
		{"--vc-config", cfg, "--vc-gpus", "prod=0"},
		{"--vc-config", cfg, "--trace", "/nonexistent.csv"},
		{"--vc-config", "/nonexistent.hcl"},
		{"--vc-config", "../../docs/vc-demo/hetero-quota.hcl", "--trace", "philly"},
	} {
		if code, _, _ := runCaptured(t, append([]string{"simulate"}, args...)...); code != 1 {
			t.Errorf("%v: code %d", args, code)
		}
	}
}

// TestSimulateVCFlags: the comparison's older flags: --time-sharing is
// accepted (every run time-shares), --vc-policy overrides a VC's policy
// (and changes its delays: FIFO and LAS differ on the same trace),
// --first-fit is accepted with a warning, --opp-policy takes only the
// agent's opportunistic policy.
func TestSimulateVCFlags(t *testing.T) {
	cfg := "../../docs/vc-demo/cluster.hcl"
	base := []string{"simulate", "--vc-config", cfg, "--jobs", "150", "--seeds", "0", "--max-duration", "86400", "--load", "1.2", "--json"}
	internAvg := func(extra ...string) float64 {
		t.Helper()
		code, out, errOut := runCaptured(t, append(append([]string{}, base...), extra...)...)
		if code != 0 {
			t.Fatalf("%v: code %d, err %q", extra, code, errOut)
		}
		var got struct {
			Summary struct {
				VCs []struct {
					VC    string `json:"vc"`
					Cells struct {
						Avg float64 `json:"avg_s"`
					}
				} `json:"vcs"`
			} `json:"summary"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil || got.Summary.VCs[3].VC != "intern" {
			t.Fatalf("%v: %s", err, out)
		}
		return got.Summary.VCs[3].Cells.Avg
	}
	fifo := internAvg()
	if ts := internAvg("--time-sharing"); ts != fifo {
		t.Errorf("--time-sharing changed the result: %g vs %g", ts, fifo)
	}
	// LAS time-shares intern's node: its jobs start sooner.
	if las := internAvg("--vc-policy", "intern=las"); !(las < fifo/2) {
		t.Errorf("--vc-policy intern=las: average delay %g s, FIFO %g s", las, fifo)
	}
	code, out, errOut := runCaptured(t, "simulate", "--vc-config", cfg, "--jobs", "20", "--vc-policy", "prod=las", "--first-fit",
		"--opp-policy", rhcl.DefaultVCPolicy)
	if code != 0 || !strings.Contains(out, "prod=las,research=fifo") || !strings.Contains(errOut, "--first-fit is ignored") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	for _, bad := range [][]string{{"--vc-policy", "nobody=las"}, {"--vc-policy", "prod=nonsense"}, {"--opp-policy", "nonsense"}, {"--opp-policy", "las"}} {
		args := append([]string{"simulate", "--vc-config", cfg, "--jobs", "20", "--time-sharing"}, bad...)
		if code, _, _ := runCaptured(t, args...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestQuotaOnlyConfig: the quota-only baseline of a cells config gives
// each VC, per GPU type, exactly the GPUs of its quota cells (3-type
// demo config), and a VC's private cluster is its quota cells.
func TestQuotaOnlyConfig(t *testing.T) {
	cfg, diags := rhcl.LoadPath("../../docs/vc-demo/hetero-cells.hcl")
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	shares, err := round.CellShares(specFromConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	q := quotaOnlyConfig(cfg, shares)
	want := map[string]map[string]int{"prod": {"v100": 8, "p100": 8, "k80": 8}, "research": {"v100": 8, "p100": 8}}
	if !q.QuotaOnly() || len(q.Cells) != 0 || len(q.VCs) != 2 {
		t.Fatalf("%+v", q)
	}
	for _, v := range q.VCs {
		if !reflect.DeepEqual(v.GPUs, want[v.Name]) || v.Policy != cfg.VCs[0].Policy && v.Name == "prod" {
			t.Errorf("vc %s: %v (policy %s), want %v", v.Name, v.GPUs, v.Policy, want[v.Name])
		}
	}
	p := privateConfig(cfg, 1)
	nodes, err := cellNodes(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || nodes[0].GPUs["v100"]+nodes[1].GPUs["v100"] != 8 || nodes[0].GPUs["p100"]+nodes[1].GPUs["p100"] != 8 {
		t.Errorf("research's private cluster: %+v", nodes)
	}
}

// TestSimulateVCSim: --vc-config with a Gavel trace runs the VCs in the
// simulator through the agent's deciders (cells: round.Cells; quota-only:
// round.Quota): every job finishes, the JSON carries the per-VC metrics
// (each VC's guaranteed jobs and the opportunistic ones), and --faults
// names nodes (nomad_node, or <type>-s<i> for quota-only clusters).
func TestSimulateVCSim(t *testing.T) {
	type vcOut struct {
		Name     string `json:"name"`
		Jobs     int    `json:"jobs"`
		JobsDone int    `json:"jobs_done"`
	}
	var got struct {
		Policy        string  `json:"policy"`
		JobsDone      int     `json:"jobs_done"`
		Finished      bool    `json:"finished"`
		GPUFailures   int     `json:"gpu_failures"`
		VCs           []vcOut `json:"vcs"`
		Opportunistic *vcOut  `json:"opportunistic"`
	}
	for _, tc := range []struct {
		args   []string
		policy string
	}{
		{[]string{"--vc-config", "../../docs/vc-demo/hetero-cells.hcl", "--faults", "../../docs/vc-demo/faults.csv"}, "VCs of cells"},
		{[]string{"--vc-config", "../../docs/vc-demo/hetero-quota.hcl", "--cluster", "v100=16,p100=16,k80=16", "--gpus-per-server", "8",
			"--faults", "../../docs/vc-demo/faults-quota.csv"}, "quota-only VCs"},
	} {
		args := append([]string{"simulate", "--trace", "continuous", "--rate", "3", "--jobs", "40", "--multi-gpu", "--json"}, tc.args...)
		code, out, errOut := runCaptured(t, args...)
		if code != 0 {
			t.Fatalf("%v: code %d: %s", tc.args, code, errOut)
		}
		got.VCs, got.Opportunistic = nil, nil
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %v: %s", tc.args, err, out)
		}
		sum := 0
		for _, v := range got.VCs {
			sum += v.JobsDone
		}
		if got.Opportunistic != nil {
			sum += got.Opportunistic.JobsDone
		}
		if got.Policy != tc.policy || !got.Finished || got.JobsDone != 40 || got.GPUFailures != 9 || len(got.VCs) != 2 ||
			got.VCs[0].Name != "prod" || got.VCs[1].Name != "research" || got.Opportunistic == nil || sum != 40 {
			t.Errorf("%v: %s", tc.args, out)
		}
	}
	code, out, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/hetero-cells.hcl", "--trace", "static", "--jobs", "12")
	if code != 0 || !strings.Contains(out, "policy VCs of cells: 12/12 jobs") || !strings.Contains(out, "\nvc prod: ") ||
		!strings.Contains(out, "\nvc research: ") {
		t.Errorf("text: code %d, %q, %q", code, out, errOut)
	}

	// A JSON-lines trace may name each job's vc and class; a vc the config
	// does not declare is an error naming the file and line.
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	lines := `{"id":0,"model":"ResNet-18 (batch size 64)","scale_factor":1,"total_steps":1000,"arrival_s":0,"vc":"research"}
{"id":1,"model":"ResNet-18 (batch size 64)","scale_factor":2,"total_steps":1000,"arrival_s":10,"vc":"prod","opportunistic":true}
`
	if err := os.WriteFile(good, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/hetero-cells.hcl", "--trace", good, "--json", "--opportunistic", "0")
	if code != 0 || !strings.Contains(out, `"vcs":[{"name":"research","jobs":1,"jobs_done":1`) || !strings.Contains(out, `"opportunistic":{"name":"opportunistic","jobs":1,"jobs_done":1`) {
		t.Errorf("vc from the trace: code %d, %s, %s", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(lines+`{"id":2,"model":"ResNet-18 (batch size 64)","scale_factor":1,"total_steps":5,"vc":"nobody"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", bad}, "rondo simulate: " + bad + `: line 3: vc: VC "nobody" is not declared in ../../docs/vc-demo/hetero-cells.hcl (declared: prod, research)` + "\n"},
		{[]string{"--trace", "static", "--jobs", "4", "--faults", "testdata/faults.csv"}, "rondo simulate: testdata/faults.csv:3: target: \"gpu:v100:0\": unknown node \"v100\" (the cluster has k80-0, k80-1, p100-0, p100-1, v100-0, v100-1)\n"},
		{[]string{"--trace", "static", "--jobs", "4", "--policy", "fifo"}, "--policy does not apply to --vc-config with a Gavel trace"},
		{[]string{"--trace", "static", "--jobs", "4", "--seeds", "0,1"}, "--seeds does not apply"},
		{[]string{"--trace", "static", "--jobs", "4", "--opportunistic", "2"}, "--opportunistic 2: want a fraction in [0, 1]"},
	} {
		args := append([]string{"simulate", "--vc-config", "../../docs/vc-demo/hetero-cells.hcl"}, tc.args...)
		if code, _, errOut := runCaptured(t, args...); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: code %d, %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
	if code, _, errOut := runCaptured(t, "simulate", "--vc-config", "../../docs/vc-demo/hetero-quota.hcl", "--cluster", "v100=4,p100=16,k80=16",
		"--trace", "static", "--jobs", "4"); code != 1 || !strings.Contains(errOut, `vc "prod": a share of 8 v100 GPUs, --cluster has 4`) {
		t.Errorf("share larger than the cluster: code %d, %q", code, errOut)
	}
}

// TestVCCellNodes: a cell selected by node pool/class lays out its nodes
// as <cell>/<i> with the cell's pool and class (one per node cell, the
// chain's leaf type), so that the decider's selectors bind them.
func TestVCCellNodes(t *testing.T) {
	cfg, diags := rhcl.LoadPath("../../hcl/testdata/selectors.hcl")
	if diags.HasErrors() {
		t.Fatal(rhcl.FormatDiagnostics(diags))
	}
	nodes, err := cellNodes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, fmt.Sprintf("%s %s %s %v", n.Name, n.Pool, n.Class, n.GPUs))
	}
	want := []string{"east/0 gpu-east  map[v100:1]", "east/1 gpu-east  map[v100:1]", "big/0 gpu-west dgx map[v100:1]", "any-dgx/0  dgx map[v100:1]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodes %q, want %q", got, want)
	}
}
