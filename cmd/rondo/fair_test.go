package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/sim"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// `rondo simulate` runs gandiva_fair alone over the cluster, from
// --policy (every user at the default tickets) and from a config's one
// gandiva_fair VC (its users' tickets): the JSON result groups the GPU
// time by user, in the tickets' ratio when every user has more work than
// GPUs.
func TestSimulateGandivaFair(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	for i := 0; i < 8; i++ {
		u := []string{"alice", "bob"}[i%2]
		b.WriteString(`{"id":` + string(rune('0'+i)) + `,"model":"ResNet-18 (batch size 64)","scale_factor":1,"total_steps":1e12,"priority":1,"arrival_s":0,"user":"` + u + `","vc":"lab"}` + "\n")
	}
	tr := filepath.Join(dir, "t.jsonl")
	cfg := filepath.Join(dir, "lab.hcl")
	os.WriteFile(tr, []byte(b.String()), 0o644)
	os.WriteFile(cfg, []byte("round_seconds = 360\nvc \"lab\" {\n  policy = \"gandiva_fair\"\n  user \"alice\" {\n    tickets = 200\n  }\n}\n"), 0o644)
	for _, tc := range []struct {
		args  []string
		ratio float64
	}{
		{[]string{"--policy", "gandiva_fair"}, 1},
		{[]string{"--vc-config", cfg}, 2},
	} {
		args := append([]string{"simulate", "--trace", tr, "--cluster", "v100=4", "--gpus-per-server", "2", "--max-time", "36000", "--json"}, tc.args...)
		code, out, errOut := runCaptured(t, args...)
		if code != 0 && !strings.Contains(errOut, "stopped at") {
			t.Fatalf("%v: %d %s", tc.args, code, errOut)
		}
		var r sim.Result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, out)
		}
		if len(r.Users) != 2 {
			t.Fatalf("%v: users %+v", tc.args, r.Users)
		}
		got := r.Users[0].GPUS["v100"] / r.Users[1].GPUS["v100"]
		if r.Users[0].User != "alice" || got < 0.9*tc.ratio || got > 1.1*tc.ratio {
			t.Errorf("%v: alice/bob GPU time %.3f, want %v within 10%%", tc.args, got, tc.ratio)
		}
	}
}

// A quantum that a -round override makes a fraction of a round is an
// error naming the VC, not a silent truncation.
func TestFairQuantumWholeRounds(t *testing.T) {
	v := rhcl.VC{Name: "lab", Policy: rhcl.GandivaFairPolicy, Quantum: 6 * time.Minute}
	if _, err := fairMechanism(v, 360, false); err != nil {
		t.Fatal(err)
	}
	if _, err := fairMechanism(v, 420, false); err == nil || !strings.Contains(err.Error(), `vc "lab": quantum 6m0s is not a whole number of rounds`) {
		t.Fatalf("got %v", err)
	}
}
