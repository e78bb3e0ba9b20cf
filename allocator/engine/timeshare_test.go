package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// e2e/timeshare_test.go checks on Nomad that each job's received time per
// type over 50 rounds is the policy's X within 0.05. That checks the Nomad
// path only if the mechanism alone is well within 0.05 on the same jobs:
// these tests replay the engine alone on the e2e's cluster (2 V100 + 2 K80)
// and jobs, every round's length jittered (Nomad's rounds are not exact),
// crediting each round to the jobs it placed as the Nomad backend does.

// timeShareMix is the e2e's job mix (keep in step with e2e/timeshare_test.go).
var timeShareMix = []string{"ResNet-18 (batch size 64)", "LM (batch size 20)", "Transformer (batch size 64)", "CycleGAN",
	"Recommendation (batch size 2048)", "Recommendation (batch size 1024)"}

// twoSplitMix is the e2e's earlier mix: two jobs (ResNet-18, A3C) have X
// on both types.
var twoSplitMix = []string{"ResNet-18 (batch size 64)", "LM (batch size 20)", "Transformer (batch size 64)", "A3C",
	"CycleGAN", "Recommendation (batch size 2048)"}

// replayShares runs max_min_fairness_perf on the mix with 4 s rounds
// jittered uniformly by ±jitter, and returns, per window length, the worst
// |received share − X| over (job, type) for the window starting at round
// start.
func replayShares(t *testing.T, mix []string, seed uint64, jitter float64, start int, windows []int) []float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	tb := throughputs.Default()
	s := &Snapshot{}
	for _, typ := range []string{"v100", "k80"} {
		for i := range 2 {
			s.GPUs = append(s.GPUs, GPU{ID: fmt.Sprint(typ, i), Type: typ, Server: fmt.Sprint(typ, "-s", i)})
		}
	}
	for i, m := range mix {
		j := Job{ID: fmt.Sprint(i), ScaleFactor: 1, Weight: 1, Throughput: map[string]float64{},
			TotalSteps: 1e12, RemainingSteps: 1e12, ReceivedS: map[string]float64{}}
		for _, typ := range []string{"v100", "k80"} {
			v, ok := tb.Lookup(m, 1, typ)
			if !ok {
				t.Fatalf("no throughput for %s on %s", m, typ)
			}
			j.Throughput[typ] = v
		}
		s.Jobs = append(s.Jobs, j)
	}
	e, err := New(Config{Policy: "max_min_fairness_perf", RoundS: 4})
	if err != nil {
		t.Fatal(err)
	}
	type mark struct {
		at   float64
		recv []map[string]float64
	}
	var marks []mark
	last := start + slices.Max(windows)
	for round := 0; round <= last; round++ {
		m := mark{at: s.TimeS}
		for _, j := range s.Jobs {
			m.recv = append(m.recv, map[string]float64{"v100": j.ReceivedS["v100"], "k80": j.ReceivedS["k80"]})
		}
		marks = append(marks, m)
		p, err := e.Round(s)
		if err != nil {
			t.Fatal(err)
		}
		if round > 0 && p.Recomputed {
			t.Fatalf("round %d recomputed: X must stay fixed", round)
		}
		length := 4 * (1 + jitter*(2*r.Float64()-1))
		for _, a := range p.Assignments {
			for i := range s.Jobs {
				if s.Jobs[i].ID == a.Jobs[0] {
					s.Jobs[i].ReceivedS[a.Type] += length
				}
			}
		}
		s.Running = p.Assignments
		s.TimeS += length
	}
	a := e.Allocation()
	var out []float64
	for _, w := range windows {
		from, to := marks[start], marks[start+w]
		worst := 0.0
		for m, id := range a.JobIDs {
			var i int
			fmt.Sscan(id, &i)
			for k, typ := range a.Types {
				got := (to.recv[i][typ] - from.recv[i][typ]) / (to.at - from.at)
				worst = math.Max(worst, math.Abs(got-a.X[m][k]))
			}
		}
		out = append(out, worst)
	}
	return out
}

// shareStats replays runs runs (seeds 0.., windows starting at rounds 2–6)
// and returns, per window, the sorted worst errors.
func shareStats(t *testing.T, mix []string, runs int, jitter float64, windows []int) [][]float64 {
	t.Helper()
	out := make([][]float64, len(windows))
	for seed := range runs {
		w := replayShares(t, mix, uint64(seed), jitter, 2+seed%5, windows)
		for i := range windows {
			out[i] = append(out[i], w[i])
		}
	}
	for i := range out {
		slices.Sort(out[i])
	}
	return out
}

func quantile(sorted []float64, q float64) float64 {
	return sorted[int(math.Round(q*float64(len(sorted)-1)))]
}

// TestTimeShareMechanismError: on the e2e's mix the mechanism alone keeps
// every (job, type) within 0.04 of X over 50 rounds (the e2e allows 0.05),
// over 200 replays with rounds jittered by ±25%.
func TestTimeShareMechanismError(t *testing.T) {
	st := shareStats(t, timeShareMix, 200, 0.25, []int{50})[0]
	t.Logf("50 rounds, ±25%% jitter, 200 replays: worst |share − X| median %.3f, p99 %.3f, max %.3f",
		quantile(st, 0.5), quantile(st, 0.99), st[len(st)-1])
	if m := st[len(st)-1]; m > 0.04 {
		t.Errorf("mechanism alone %.3f off X over 50 rounds: the e2e's 0.05 would test the mechanism, not Nomad", m)
	}
}

// TestLongTimeShareMechanismError: 1,000 replays of both mixes at three
// window lengths and two jitters (docs/checks.md). Asserts the e2e mix's
// bound; the two-split mix's error is recorded, not asserted: it is the
// mechanism's (both split jobs picked for V100 in one round leave a K80
// to a job with no K80 share), and does not shrink with the window.
func TestLongTimeShareMechanismError(t *testing.T) {
	if os.Getenv("RONDO_LONG") == "" {
		t.Skip("full-size check: set RONDO_LONG=1 (make test-long)")
	}
	windows := []int{20, 50, 150}
	for _, mix := range []struct {
		name string
		jobs []string
	}{{"e2e mix", timeShareMix}, {"two-split mix", twoSplitMix}} {
		for _, jitter := range []float64{0.05, 0.25} {
			st := shareStats(t, mix.jobs, 1000, jitter, windows)
			for i, w := range windows {
				t.Logf("%s, ±%.0f%% jitter, %d rounds: worst |share − X| median %.3f, p90 %.3f, p99 %.3f, max %.3f",
					mix.name, jitter*100, w, quantile(st[i], 0.5), quantile(st[i], 0.9), quantile(st[i], 0.99), st[i][len(st[i])-1])
				if mix.name == "e2e mix" && w == 50 && st[i][len(st[i])-1] > 0.04 {
					t.Errorf("e2e mix, ±%.0f%% jitter: mechanism alone %.3f off X over 50 rounds", jitter*100, st[i][len(st[i])-1])
				}
			}
		}
	}
}
