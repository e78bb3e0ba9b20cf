package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
