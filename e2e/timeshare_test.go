package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
)

// Time shares: over a window of rounds in which the allocation X does not
// change, each job's received time per GPU type, over the window's length,
// is X within a tolerance.
const (
	shareRoundS    = 4
	shareRounds    = 50 // the measured window
	shareTolerance = 0.05
)

// shareConfig: one engine for the whole cluster, no cells, so that the
// policy's X is over the cluster's GPUs.
const shareConfig = `round_seconds = %d
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// testTimeShares runs six jobs of different models (none finishes) on the
// 2 V100 + 2 K80 cluster under one max-min fairness engine and compares
// the time each received per type over 50 rounds with the policy's X (both
// from the agent's /v1/status), within 0.05 (2.5 rounds of the window).
//
// The mix has one job whose X is split over both types (ResNet-18 here).
// The engine replayed alone on this mix, round lengths jittered by up to
// ±25%, stays within 0.04 of X over 50 rounds (TestTimeShareMechanismError
// in allocator/engine; 0.06–0.10 over 20 rounds), so 0.05 fails only when
// the Nomad path loses or misplaces time. The earlier mix (A3C instead of
// Recommendation 1024) has two split jobs; when both are picked for V100
// in a round, a K80 goes to a job with no K80 share, and the mechanism
// itself, not Nomad, is up to 0.14 off X over 50 rounds (median 0.04–0.06)
// and up to 0.10 over 150 (p90 0.05–0.07): no window length made that mix
// robust at 0.05 (docs/checks.md).
func testTimeShares(s *stack) {
	t := s.t
	models := []string{"ResNet-18 (batch size 64)", "LM (batch size 20)", "Transformer (batch size 64)", "CycleGAN",
		"Recommendation (batch size 2048)", "Recommendation (batch size 1024)"}
	cfg := filepath.Join(t.TempDir(), "shares.hcl")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(shareConfig, shareRoundS)), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := s.cfgPath
	s.cfgPath = cfg
	defer func() { s.cfgPath = saved }()
	var ids []string
	for i, m := range models {
		id := fmt.Sprintf("share%d", i)
		ids = append(ids, id)
		s.submit(id, m, 100000000, 1)
	}
	ag := s.startAgent(fmt.Sprintf("%ds", shareRoundS))
	// Start of the window: every job has its X (the allocation was computed
	// with all six) and has been through a round.
	var first agent.Status
	s.waitFor(90*time.Second, "all six jobs allocated", func() (bool, error) {
		first = s.status(ag)
		n := 0
		for _, j := range first.Jobs {
			if len(j.X) > 0 {
				n++
			}
		}
		return n == len(ids) && first.Round >= 2, nil
	})
	var last agent.Status
	s.waitFor(time.Duration(shareRounds*shareRoundS+60)*time.Second, "the window's rounds", func() (bool, error) {
		last = s.status(ag)
		return last.Round >= first.Round+shareRounds, nil
	})
	ag.stop()
	window := last.LastRound.Sub(first.LastRound).Seconds()
	byID := func(st agent.Status) map[string]agent.JobStatus {
		m := map[string]agent.JobStatus{}
		for _, j := range st.Jobs {
			m[j.ID] = j
		}
		return m
	}
	a, b := byID(first), byID(last)
	var lines []string
	worst := 0.0
	for _, id := range ids {
		ja, jb := a[id], b[id]
		if jb.State == "done" || ja.State == "done" {
			t.Fatalf("job %s finished: it should run through the window", id)
		}
		types := []string{}
		for typ := range jb.X {
			types = append(types, typ)
		}
		sort.Strings(types)
		line := fmt.Sprintf("  %s %-34s", id, models[len(lines)])
		for _, typ := range types {
			if math.Abs(ja.X[typ]-jb.X[typ]) > 1e-9 {
				t.Fatalf("job %s: X on %s changed in the window (%.3f → %.3f): a recompute", id, typ, ja.X[typ], jb.X[typ])
			}
			got := (jb.ReceivedS[typ] - ja.ReceivedS[typ]) / window
			d := got - jb.X[typ]
			worst = math.Max(worst, math.Abs(d))
			line += fmt.Sprintf("  %s X %.3f got %.3f", typ, jb.X[typ], got)
			if math.Abs(d) > shareTolerance {
				t.Errorf("job %s on %s: received %.3f of the time, X %.3f (tolerance %.3f)", id, typ, got, jb.X[typ], shareTolerance)
			}
		}
		lines = append(lines, line)
	}
	t.Logf("time shares over %d rounds (%.1fs), worst |share − X| %.3f:\n%s", last.Round-first.Round, window, worst,
		strings.Join(lines, "\n"))
}
