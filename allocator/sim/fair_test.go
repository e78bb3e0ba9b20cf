package sim_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/fair"
	"github.com/rondo-sched/rondo/allocator/round"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/sim/sweep"
	"github.com/rondo-sched/rondo/allocator/trace"
	"github.com/rondo-sched/rondo/policies/fairshare"
	"github.com/rondo-sched/rondo/policies/fairshare/fairlp"
)

// The Gandiva-fair experiments of docs/gandiva-fair.md, in the simulator
// through the agent's decider (round.Single over allocator/fair). With
// RONDO_WRITE_DOCS=1 they also write the figures under docs/figures.

// userSeries records, every round, each user's GPU-seconds received so
// far (its jobs' credited time × GPUs) from the snapshots a decider sees.
type userSeries struct {
	next  *round.Single
	times []float64
	gpuS  []map[string]float64
	plans []*engine.Plan
	// With market set (trading runs): each plan's users' values, demands
	// and the running jobs' utility rate (reference-GPU equivalents).
	market  bool
	values  []fairshare.Value
	demands []map[string]float64
	utilty  []float64
}

func (u *userSeries) Round(s *engine.Snapshot) (*engine.Plan, error) {
	m := map[string]float64{}
	for _, j := range s.Jobs {
		for _, v := range j.ReceivedS {
			m[j.User] += v * float64(max(j.ScaleFactor, 1))
		}
	}
	u.times, u.gpuS = append(u.times, s.TimeS), append(u.gpuS, m)
	p, err := u.next.Round(s)
	u.plans = append(u.plans, p)
	if u.market && err == nil {
		by := map[string][]map[string]float64{}
		demand := map[string]float64{}
		tput := map[string]map[string]float64{}
		for _, j := range s.Jobs {
			by[j.User] = append(by[j.User], j.Throughput)
			demand[j.User] += float64(max(j.ScaleFactor, 1))
			tput[j.ID] = j.Throughput
		}
		ref := fairshare.ReferenceType(by)
		rate := 0.0
		for _, a := range p.Assignments {
			if r := tput[a.Jobs[0]][ref]; r > 0 {
				rate += tput[a.Jobs[0]][a.Type] / r * float64(len(a.GPUs))
			}
		}
		u.values, u.demands, u.utilty = append(u.values, fairshare.Valuations(by)), append(u.demands, demand), append(u.utilty, rate)
	}
	return p, err
}

// gpus is user's average GPUs between rounds a and b (indices).
func (u *userSeries) gpus(user string, a, b int) float64 {
	return (u.gpuS[b][user] - u.gpuS[a][user]) / (u.times[b] - u.times[a])
}

func writeDocs() bool { return os.Getenv("RONDO_WRITE_DOCS") != "" }

func docsPath(t *testing.T, name string) string {
	p := filepath.Join("..", "..", "docs", "figures", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// paperJobs: users A and B each run two 2-GPU jobs from t=0; user C's one
// 2-GPU job arrives at the 10th round. No job finishes in the run.
func paperJobs() []trace.Job {
	var jobs []trace.Job
	for i, u := range []string{"A", "A", "B", "B", "C"} {
		j := trace.Job{ID: i, Model: "ResNet-18 (batch size 64)", ScaleFactor: 2, TotalSteps: 1e12, Priority: 1, User: u}
		if u == "C" {
			j.ArrivalS = 10 * 360
		}
		jobs = append(jobs, j)
	}
	return jobs
}

// TestGandivaFairPaperExample is Gandiva-fair's Figure 1: two servers of
// 4 GPUs, users A and B with two 2-GPU jobs each (4 GPUs each), then user
// C arrives with one 2-GPU job: over the 100 quanta after C arrives, GPU
// time per user is 3/3/2 within 0.1 GPU (and 4/4 before). Quantum = one
// 6-minute round.
func TestGandivaFairPaperExample(t *testing.T) {
	m, err := fair.New(fair.Config{RoundS: 360, QuantumRounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	rec := &userSeries{next: &round.Single{Mechanism: m}}
	o := sim.Options{Nodes: sim.ServerNodes(map[string]int{"v100": 8}, 4), Decider: rec,
		Engine: engine.Config{Policy: "gandiva_fair", RoundS: 360}, MaxTimeS: 111 * 360, RoundGrid: true}
	if _, err := sim.Run(&sim.SliceSource{Jobs: paperJobs()}, o); err != nil {
		t.Fatal(err)
	}
	at := func(ts float64) int { return sort.SearchFloat64s(rec.times, ts-1e-6) }
	before, arrive, end := at(1*360), at(10*360), at(110*360)
	if end >= len(rec.times) || rec.times[end] != 110*360 || rec.times[arrive] != 10*360 {
		t.Fatalf("rounds at %v", rec.times)
	}
	for u, want := range map[string]float64{"A": 4, "B": 4} {
		if got := rec.gpus(u, before, arrive); math.Abs(got-want) > 0.1 {
			t.Errorf("before C: user %s %.3f GPUs, want %v", u, got, want)
		}
	}
	for u, want := range map[string]float64{"A": 3, "B": 3, "C": 2} {
		got := rec.gpus(u, arrive, end)
		t.Logf("100 quanta after C arrives: user %s %.3f GPUs (want %v)", u, got, want)
		if math.Abs(got-want) > 0.1 {
			t.Errorf("user %s %.3f GPUs over 100 quanta, want %v within 0.1", u, got, want)
		}
	}
	if writeDocs() {
		fig := &sweep.Figure{Title: "Gandiva-fair's example: GPUs per user (two 4-GPU servers)", XLabel: "quantum (6-minute rounds)",
			YLabel: "GPUs (mean of the last 10 quanta)", YMin: 0, YMax: 5,
			Note: "A and B: two 2-GPU jobs each from t=0; C: one 2-GPU job from quantum 10 (go test ./allocator/sim -run TestGandivaFairPaperExample)"}
		for _, u := range []string{"A", "B", "C"} {
			s := sweep.Series{Name: "user " + u}
			for k := 1; k <= end; k++ {
				a := max(0, k-10)
				if k > arrive && a < arrive {
					a = arrive // the window starts at C's arrival
				}
				s.X, s.Y = append(s.X, float64(k)), append(s.Y, rec.gpus(u, a, k))
			}
			fig.Series = append(fig.Series, s)
		}
		if err := os.WriteFile(docsPath(t, "gandiva_fair_paper.svg"), fig.SVG(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// userOfModel gives each model family one of n users, so that users'
// speedups differ (as teams training different models).
func userOfModel(model string, n int) string {
	h := 0
	for _, c := range model {
		if c == ' ' || c == '(' {
			break
		}
		h = h*31 + int(c)
	}
	if h < 0 {
		h = -h
	}
	return fmt.Sprintf("u%d", h%n)
}

// tradingRun replays a multi-user continuous trace on 8 v100 + 8 p100 +
// 16 k80 (servers of 4) under gandiva_fair with or without trading.
func tradingRun(t *testing.T, jobs []trace.Job, trading bool) (*sim.Result, *userSeries) {
	m, err := fair.New(fair.Config{RoundS: 360, QuantumRounds: 1, Trading: trading})
	if err != nil {
		t.Fatal(err)
	}
	rec := &userSeries{next: &round.Single{Mechanism: m}, market: true}
	o := sim.Options{Nodes: sim.ServerNodes(map[string]int{"v100": 8, "p100": 8, "k80": 16}, 4), Decider: rec,
		Engine: engine.Config{Policy: "gandiva_fair", RoundS: 360}}
	res, err := sim.Run(&sim.SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec
}

func tradingJobs(t *testing.T, n int, seed int64) []trace.Job {
	jobs, err := trace.Generate(trace.Options{Seed: seed, Rate: 6}, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		jobs[i].User = userOfModel(jobs[i].Model, 6)
	}
	return jobs
}

// TestGandivaFairTradingTrace: trading on a multi-user trace. Reports
// the average JCT, makespan and each user's average JCT with and without
// trading.
func TestGandivaFairTradingTrace(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		jobs := tradingJobs(t, 200, seed)
		off, recOff := tradingRun(t, jobs, false)
		on, recOn := tradingRun(t, jobs, true)
		trades, markets, gapSum := 0, 0, 0.0
		for i, p := range recOn.plans {
			if p == nil || len(p.Users) == 0 {
				continue
			}
			us := p.Users[0]
			fairS, after := fairshare.Shares{}, fairshare.Shares{}
			for _, x := range us.Users {
				fairS[x.User], after[x.User] = x.FairShare, x.Share
			}
			v := recOn.values[i]
			// Every plan: each GPU type conserved, no user below its
			// no-trade utility, the total never lower.
			for _, x := range us.Users {
				if b, a := fairshare.Utility(fairS, v, x.User), fairshare.Utility(after, v, x.User); a < b-1e-9*math.Max(1, b) {
					t.Fatalf("seed %d round %d: user %s utility %.6f after trading, %.6f before", seed, i, x.User, a, b)
				}
			}
			for _, ty := range []string{"v100", "p100", "k80"} {
				a, b := 0.0, 0.0
				for u := range fairS {
					a, b = a+after[u][ty], b+fairS[u][ty]
				}
				if math.Abs(a-b) > 1e-9*math.Max(1, b) {
					t.Fatalf("seed %d round %d: %s %.9f GPUs after trading, %.9f before", seed, i, ty, a, b)
				}
			}
			if len(us.Trades) == 0 {
				continue
			}
			trades++
			if !p.Recomputed {
				continue
			}
			// The best allocation keeping every user at or above its
			// no-trade utility (one LP): trading's gap to it.
			_, best, err := fairlp.BestIR(fairS, v, recOn.demands[i])
			if err != nil {
				t.Fatal(err)
			}
			if best > 0 {
				markets++
				gapSum += (best - fairshare.TotalUtility(after, v)) / best
			}
		}
		// The utility rate (reference-GPU equivalents of the running jobs)
		// while jobs arrive: the queue is long; the tail after the last
		// arrival drains a few jobs and is not compared.
		last := jobs[len(jobs)-1].ArrivalS
		mean := func(rec *userSeries) float64 {
			s, n := 0.0, 0.0
			for i, v := range rec.utilty {
				if rec.times[i] <= last {
					s, n = s+v, n+1
				}
			}
			return s / math.Max(1, n)
		}
		if mean(recOn) <= mean(recOff) {
			t.Errorf("seed %d: trading did not raise the utility rate (%.2f -> %.2f)", seed, mean(recOff), mean(recOn))
		}
		t.Logf("seed %d: utility rate %.2f -> %.2f reference GPUs (%+.1f%%); avg JCT %.0f s -> %.0f s (%+.1f%%), makespan %.0f -> %.0f s; rounds with trades %d of %d; mean gap to the best individually rational allocation %.3f over %d recomputes with trades",
			seed, mean(recOff), mean(recOn), 100*(mean(recOn)/mean(recOff)-1),
			off.AvgJCTS, on.AvgJCTS, 100*(on.AvgJCTS/off.AvgJCTS-1), off.MakespanS, on.MakespanS, trades, len(recOn.plans),
			gapSum/math.Max(1, float64(markets)), markets)
		for i := range on.Users {
			t.Logf("  user %s (%d jobs): avg JCT %.0f -> %.0f s", on.Users[i].User, on.Users[i].Jobs, off.Users[i].AvgJCTS, on.Users[i].AvgJCTS)
		}
		if writeDocs() && seed == 1 {
			fig := &sweep.Figure{Title: "Gandiva-fair with and without trading: jobs done", XLabel: "hours", YLabel: "jobs done",
				Note: "200 jobs (Gavel's continuous trace, 6 jobs/h, seed 1), users by model family; 8 v100 + 8 p100 + 16 k80 (go test ./allocator/sim -run TestGandivaFairTradingTrace)"}
			for _, r := range []struct {
				name string
				res  *sim.Result
			}{{"without trading", off}, {"with trading", on}} {
				var ends []float64
				for _, j := range r.res.Jobs {
					if j.Done {
						ends = append(ends, j.FinishS/3600)
					}
				}
				sort.Float64s(ends)
				sr := sweep.Series{Name: r.name}
				for k, e := range ends {
					sr.X, sr.Y = append(sr.X, e), append(sr.Y, float64(k+1))
				}
				fig.Series = append(fig.Series, sr)
			}
			if err := os.WriteFile(docsPath(t, "gandiva_fair_trading.svg"), fig.SVG(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// benchJobs is the speed benchmark's trace: 1,000 jobs of Gavel's
// continuous trace (multi-GPU) at 30 jobs/h, 20 users (five model
// families, four teams each).
func benchJobs(t testing.TB, n int) []trace.Job {
	jobs, err := trace.Generate(trace.Options{Seed: 7, Rate: 30, MultiGPU: true}, n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range jobs {
		jobs[i].User = fmt.Sprintf("%s-t%d", userOfModel(jobs[i].Model, 5), i%4)
	}
	return jobs
}

// TestGandivaFairSpeedTrace runs the speed benchmark's trace on 200 GPUs
// (64 v100, 64 p100, 72 k80; servers of 8) with trading, and reports the
// wall time (docs/gandiva-fair.md; the CLI's wall_s on the committed
// trace is the recorded number). With RONDO_WRITE_DOCS=1 it writes the
// trace to docs/gandiva-fair/.
func TestGandivaFairSpeedTrace(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	jobs := benchJobs(t, n)
	m, err := fair.New(fair.Config{RoundS: 360, QuantumRounds: 1, Trading: true})
	if err != nil {
		t.Fatal(err)
	}
	o := sim.Options{Nodes: sim.ServerNodes(map[string]int{"v100": 64, "p100": 64, "k80": 72}, 8), Decider: &round.Single{Mechanism: m},
		Engine: engine.Config{Policy: "gandiva_fair", RoundS: 360}}
	res, err := sim.Run(&sim.SliceSource{Jobs: jobs}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d jobs, 200 GPUs: %d rounds, wall %.2f s, avg JCT %.0f s, done %d, peak active %d", n, res.Rounds, res.WallS, res.AvgJCTS, res.JobsDone, res.PeakActive)
	if res.JobsDone != n {
		t.Errorf("%d of %d jobs done", res.JobsDone, n)
	}
	if writeDocs() && n == 1000 {
		dir := filepath.Join("..", "..", "docs", "gandiva-fair")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "trace-1000.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := trace.WriteJSONL(f, jobs); err != nil {
			t.Fatal(err)
		}
	}
}
