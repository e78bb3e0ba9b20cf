package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

func readCk(t *testing.T, dir string) checkpoint {
	t.Helper()
	var ck checkpoint
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ck); err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestSuspendResume runs the real binary: SIGTERM checkpoints and exits 0,
// a restart resumes from the checkpoint and finishes.
func TestSuspendResume(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "RONDO_CHECKPOINT_DIR="+dir, "NOMAD_META_rondo.model=LM (batch size 20)",
		"NOMAD_META_rondo.steps=400", "RONDO_GPU_TYPE=v100", "CUDA_VISIBLE_DEVICES=GPU-0")
	cmd := exec.Command(bin)
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the start line, so a slow machine cannot signal a trainer
	// that has not begun; then let it train about a second.
	started := bufio.NewScanner(stdout)
	if !started.Scan() || !strings.Contains(started.Text(), "resuming at") {
		t.Fatalf("no start line: %q", started.Text())
	}
	go io.Copy(io.Discard, stdout)
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	first := readCk(t, dir)
	if first.Steps <= 0 || first.Steps >= 400 {
		t.Fatalf("checkpoint after 1s at 64.7 steps/s: %+v", first)
	}
	cmd = exec.Command(bin)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if ck := readCk(t, dir); ck.Steps != 400 {
		t.Errorf("final checkpoint %+v", ck)
	}
	if want := "resuming at"; !strings.Contains(string(out), want) {
		t.Errorf("output %q", out)
	}
}

// TestPartnerRate: next to a partner (space sharing) the trainer runs at
// its pair throughput from Gavel's table, not its isolated one.
func TestPartnerRate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rondo-trainer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	a, b := "LM (batch size 20)", "ResNet-18 (batch size 64)"
	tb := throughputs.Default()
	pair, ok := tb.Pair(throughputs.Key{Model: a, ScaleFactor: 1}, throughputs.Key{Model: b, ScaleFactor: 1}, "v100")
	iso, _ := tb.Lookup(a, 1, "v100")
	if !ok || pair[0] <= 0 || pair[0] == iso {
		t.Fatalf("table: pair %v ok %v, isolated %v", pair, ok, iso)
	}
	for partner, want := range map[string]float64{"": iso, b: pair[0]} {
		cmd := exec.Command(bin, "-steps", "1", "-checkpoint-dir", t.TempDir(), "-model", a, "-type", "v100")
		cmd.Env = append(os.Environ(), "RONDO_PARTNER_MODEL="+partner)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("partner %q: %v\n%s", partner, err, out)
		}
		if !strings.Contains(string(out), fmt.Sprintf(": %.3f steps/s", want)) {
			t.Errorf("partner %q: want %.3f steps/s in %s", partner, want, out)
		}
	}
}
