package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rhcl "github.com/rondo-sched/rondo/hcl"
)

func TestSimulateVC(t *testing.T) {
	cfg := "../../docs/vc-demo/cluster.hcl"
	code, out, errOut := runCaptured(t, "simulate", "--vc-config", cfg, "--trace", "philly", "--jobs", "150", "--seeds", "0,1")
	if code != 0 || !strings.Contains(out, "| intern | 8 |") || !strings.Contains(out, "| cells |") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	dir := t.TempDir()
	code, out, errOut = runCaptured(t, "simulate", "--vc-config", cfg, "--jobs", "100", "--json", "--out", dir,
		"--vc-share", "prod=1,intern=1", "--max-duration", "86400", "--vc-gpus", "prod=1|2,intern=8")
	if code != 0 {
		t.Fatalf("code %d, err %q", code, errOut)
	}
	var got struct {
		Results []struct {
			Jobs int `json:"jobs"`
			VCs  []struct {
				VC        string `json:"vc"`
				QuotaGPUs int    `json:"quota_gpus"`
				Cells     int    `json:"cells_anomaly_jobs"`
			} `json:"vcs"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Results) != 1 || got.Results[0].Jobs != 100 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, v := range got.Results[0].VCs {
		if v.Cells != 0 {
			t.Errorf("cells anomaly: %+v", v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "vc-summary.md")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--vc-config", cfg, "--seeds", "x"},
		{"--vc-config", cfg, "--vc-share", "nobody=1"},
		{"--vc-config", cfg, "--vc-gpus", "prod=0"},
		{"--vc-config", cfg, "--trace", "/nonexistent.csv"},
		{"--vc-config", "/nonexistent.hcl"},
	} {
		if code, _, _ := runCaptured(t, append([]string{"simulate"}, args...)...); code != 1 {
			t.Errorf("%v: code %d", args, code)
		}
	}
}

func TestSimulateVCTimeSharing(t *testing.T) {
	cfg := "../../docs/vc-demo/cluster.hcl"
	code, out, errOut := runCaptured(t, "simulate", "--vc-config", cfg, "--jobs", "120", "--seeds", "0",
		"--max-duration", "86400", "--time-sharing", "--vc-policy", "prod=las")
	if code != 0 || !strings.Contains(out, "| prod | las | 56 |") || !strings.Contains(out, "| research | fifo | 40 |") ||
		!strings.Contains(out, "0, 0 of 1") {
		t.Fatalf("code %d, out %q, err %q", code, out, errOut)
	}
	for _, bad := range [][]string{{"--vc-policy", "nobody=las"}, {"--vc-policy", "prod=nonsense"}, {"--opp-policy", "nonsense"}} {
		args := append([]string{"simulate", "--vc-config", cfg, "--jobs", "20", "--time-sharing"}, bad...)
		if code, _, _ := runCaptured(t, args...); code == 0 {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestSimulateVCSim: --vc-config with a Gavel trace runs the VCs in the
// simulator through the agent's deciders (cells: vcnomad; quota-only:
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
		{[]string{"--trace", bad}, "rondo simulate: " + bad + `: line 3: vc: "nobody" is not a VC of ../../docs/vc-demo/hetero-cells.hcl` + "\n"},
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
