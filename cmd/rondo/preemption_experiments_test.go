package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/allocator/trace"
)

// The experiments of docs/preemption.md (#21): Gavel's continuous
// multi-GPU trace under max_min_fairness with realistic restart costs,
// today's mechanism against a minimum runtime, the checkpoint-aware choice
// and reservations. `make preemption-experiments` runs them (about a
// minute) and writes docs/preemption/results.json and the results tables
// of docs/preemption.md.

// preemptionBase is every run's command line but its seed and its row's
// flags.
var preemptionBase = []string{"simulate", "--policy", "max_min_fairness", "--trace", "continuous", "--multi-gpu",
	"--cluster", "v100=12,p100=12,k80=12", "--rate", "0.6", "--window", "100:400", "--round", "360",
	"--max-active", "150", "--max-time", "5000000", "--json"}

var preemptionSeeds = []int64{0, 1, 2}

// gracefulCSV is the reference row's table: the realistic costs as if
// every stop checkpointed first (a SIGTERM handler, as rondo-trainer's, or
// Gavel's checkpoint at every lease's end): nothing is ever unsaved
// (interval_s ~ 0) and a restart also pays the checkpoint (restore_s +
// checkpoint_s).
const gracefulCSV = "graceful.csv"

// freeCSV is the other reference row's: every cost 0 and nothing ever
// unsaved, `--preemption-cost 0` (Gavel's assumption) with this table's
// metrics (the large-gang wait).
const freeCSV = "free.csv"

// preemptionRows are the grid's rows: today's mechanism and each option,
// all with --preemption-cost realistic but the two reference rows.
var preemptionRows = []struct {
	Name, Label string
	Args        []string
}{
	{"free", "today's mechanism, free restarts (Gavel's assumption; reference)", []string{"--preemption-cost", "docs/preemption/" + freeCSV}},
	{"graceful", "today's mechanism, every stop checkpoints first (reference)", []string{"--preemption-cost", "docs/preemption/" + gracefulCSV}},
	{"today", "today's mechanism", []string{"--preemption-cost", "realistic"}},
	{"min12", "minimum runtime 12 min", []string{"--preemption-cost", "realistic", "--min-runtime", "720"}},
	{"min30", "minimum runtime 30 min", []string{"--preemption-cost", "realistic", "--min-runtime", "1800"}},
	{"min60", "minimum runtime 60 min", []string{"--preemption-cost", "realistic", "--min-runtime", "3600"}},
	{"ckpt", "checkpoint-aware", []string{"--preemption-cost", "realistic", "--checkpoint-aware"}},
	{"resv", "reservations (after 1 h)", []string{"--preemption-cost", "realistic", "--reserve-after", "3600"}},
	{"min30_resv", "minimum runtime 30 min + reservations", []string{"--preemption-cost", "realistic", "--min-runtime", "1800", "--reserve-after", "3600"}},
	{"all", "all three (30 min, checkpoint-aware, reservations)", []string{"--preemption-cost", "realistic", "--min-runtime", "1800", "--checkpoint-aware", "--reserve-after", "3600"}},
	{"all60", "all three with 60 min", []string{"--preemption-cost", "realistic", "--min-runtime", "3600", "--checkpoint-aware", "--reserve-after", "3600"}},
}

// preemptionRun is one run's record in results.json.
type preemptionRun struct {
	Seed   int64       `json:"seed"`
	Exit   int         `json:"exit"`
	Result *sim.Result `json:"result"`
}

// TestPreemptionExperiments writes docs/preemption/results.json and the
// tables of docs/preemption.md between their markers.
func TestPreemptionExperiments(t *testing.T) {
	if os.Getenv("RONDO_PREEMPTION_EXPERIMENTS") == "" {
		t.Skip("RONDO_PREEMPTION_EXPERIMENTS=1 (make preemption-experiments) runs the experiments of docs/preemption.md")
	}
	root := filepath.Join("..", "..")
	out := filepath.Join(root, "docs", "preemption")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, gracefulCSV), gracefulCosts(), 0o644); err != nil {
		t.Fatal(err)
	}
	free := "# Reference only (docs/preemption.md): restarts cost nothing and lose nothing, as --preemption-cost 0 (Gavel's\n" +
		"# assumption), with the restart metrics. Written by make preemption-experiments.\n" +
		"model,start_s,restore_s,checkpoint_s,interval_s\n*,0,0,0,1e-6\n"
	if err := os.WriteFile(filepath.Join(out, freeCSV), []byte(free), 0o644); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name  string          `json:"name"`
		Label string          `json:"label"`
		Args  []string        `json:"args"`
		Runs  []preemptionRun `json:"runs"`
	}
	res := struct {
		Command string   `json:"command"`
		Base    []string `json:"base_args"`
		Seeds   []int64  `json:"seeds"`
		Rows    []row    `json:"rows"`
	}{Command: "make preemption-experiments", Base: preemptionBase, Seeds: preemptionSeeds}
	for _, r := range preemptionRows {
		rw := row{Name: r.Name, Label: r.Label, Args: r.Args}
		for _, seed := range preemptionSeeds {
			args := append(append(append([]string{}, preemptionBase...), "--seed", fmt.Sprint(seed)), r.Args...)
			for i, a := range args {
				if strings.HasPrefix(a, "docs/") {
					args[i] = filepath.Join(root, a)
				}
			}
			code, stdout, stderr := runCaptured(t, args...)
			if code != 0 && code != 2 {
				t.Fatalf("%s seed %d: exit %d: %s", r.Name, seed, code, stderr)
			}
			var sr sim.Result
			if err := json.Unmarshal([]byte(stdout), &sr); err != nil {
				t.Fatalf("%s seed %d: %v: %s", r.Name, seed, err, stdout)
			}
			sr.WallS, sr.SolveMSP50, sr.SolveMSMax = 0, 0, 0 // results.json stays the same run to run
			rw.Runs = append(rw.Runs, preemptionRun{Seed: seed, Exit: code, Result: &sr})
			t.Logf("%-11s seed %d: done %d/%d, avg JCT %.1f h, p99 %.1f h, %d preemptions, %.0f GPU-h lost, gang p99 wait %.1f h",
				r.Name, seed, sr.JobsDone, sr.JobsInWindow, sr.AvgJCTS/3600, sr.P99JCTS/3600, sr.Preemptions, sr.LostGPUS/3600, sr.LargeGangWaitP99S/3600)
		}
		res.Rows = append(res.Rows, rw)
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	// The tables, from the records just written.
	var tables strings.Builder
	h := func(s float64) string { return strconv.FormatFloat(s/3600, 'f', 1, 64) }
	gpus := 0
	if types, err := sim.ParseCluster(preemptionBase[slices.Index(preemptionBase, "--cluster")+1]); err == nil {
		for _, n := range types {
			gpus += n
		}
	}
	fmt.Fprintf(&tables, "Means over seeds %v. JCTs, waits and rho are over the runs that finished; preemptions, restarts and\n", preemptionSeeds)
	tables.WriteString("GPU time lost over every run, marked † when a run did not finish (counted until it was stopped; the lost\n")
	tables.WriteString("share, GPU time lost over GPU time busy, compares them).\n\n")
	tables.WriteString("| configuration | avg JCT (h) | p99 JCT (h) | preemptions | restarts (migrations) | GPU-h lost to restarts | lost share of busy GPU time | large-gang wait p99 (h) | large-gang wait avg (h) | rho avg | rho max | finished |\n")
	tables.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, rw := range res.Rows {
		var fin, all []*sim.Result
		var stuck []string
		for _, r := range rw.Runs {
			all = append(all, r.Result)
			if r.Result.Finished {
				fin = append(fin, r.Result)
			} else {
				stuck = append(stuck, fmt.Sprintf("seed %d: %d/%d done when stopped at %.0f h, %d jobs active", r.Seed, r.Result.JobsDone,
					r.Result.JobsInWindow, r.Result.EndS/3600, r.Result.PeakActive))
			}
		}
		mean := func(rs []*sim.Result, f func(*sim.Result) float64) float64 {
			s := 0.0
			for _, r := range rs {
				s += f(r)
			}
			return s / float64(len(rs))
		}
		status := fmt.Sprintf("%d/%d", len(fin), len(rw.Runs))
		dagger := ""
		if len(stuck) > 0 {
			status += " (" + strings.Join(stuck, "; ") + ")"
			dagger = " †"
		}
		counters := fmt.Sprintf("%.0f%s | %.0f (%.0f)%s | %.0f%s | %.1f%%%s", mean(all, func(r *sim.Result) float64 { return float64(r.Preemptions) }), dagger,
			mean(all, func(r *sim.Result) float64 { return float64(r.Restarts) }), mean(all, func(r *sim.Result) float64 { return float64(r.Migrations) }), dagger,
			mean(all, func(r *sim.Result) float64 { return r.LostGPUS / 3600 }), dagger,
			100*mean(all, func(r *sim.Result) float64 { return r.LostGPUS / (r.Utilization * float64(gpus) * r.EndS) }), dagger)
		if len(fin) == 0 {
			fmt.Fprintf(&tables, "| %s | — | — | %s | — | — | — | — | %s |\n", rw.Label, counters, status)
			continue
		}
		fmt.Fprintf(&tables, "| %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |\n", rw.Label,
			h(mean(fin, func(r *sim.Result) float64 { return r.AvgJCTS })), h(mean(fin, func(r *sim.Result) float64 { return r.P99JCTS })), counters,
			h(mean(fin, func(r *sim.Result) float64 { return r.LargeGangWaitP99S })), h(mean(fin, func(r *sim.Result) float64 { return r.LargeGangWaitAvgS })),
			mean(fin, func(r *sim.Result) float64 { return r.FTFRhoAvg }), mean(fin, func(r *sim.Result) float64 { return r.FTFRhoMax }), status)
	}
	tables.WriteString("\nPer seed: avg JCT (h) / large-gang wait p99 (h); — where the run did not finish.\n\n| configuration |")
	for _, s := range preemptionSeeds {
		fmt.Fprintf(&tables, " seed %d |", s)
	}
	tables.WriteString("\n|---|" + strings.Repeat("---:|", len(preemptionSeeds)) + "\n")
	for _, rw := range res.Rows {
		fmt.Fprintf(&tables, "| %s |", rw.Label)
		for _, r := range rw.Runs {
			if !r.Result.Finished {
				tables.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&tables, " %s / %s |", h(r.Result.AvgJCTS), h(r.Result.LargeGangWaitP99S))
		}
		tables.WriteString("\n")
	}
	doc := filepath.Join(root, "docs", "preemption.md")
	if err := replaceBlock(doc, "<!-- results: make preemption-experiments -->", "<!-- end results -->", tables.String()); err != nil {
		t.Fatal(err)
	}
}

// gracefulCosts is the reference table (gracefulCSV) made from the
// realistic one.
func gracefulCosts() []byte {
	var b bytes.Buffer
	b.WriteString("# Reference only (docs/preemption.md): allocator/sim/costs/realistic.csv as if every stop checkpointed first\n")
	b.WriteString("# (a SIGTERM handler, or Gavel's checkpoint at each lease's end): nothing is unsaved (interval_s ~ 0), a restart\n")
	b.WriteString("# pays its restore and the stop's checkpoint. Written by make preemption-experiments.\n")
	b.WriteString("model,start_s,restore_s,checkpoint_s,interval_s\n")
	for _, r := range sim.RealisticCosts().Rows {
		fmt.Fprintf(&b, "%s,%g,%g,%g,1e-6\n", r.Model, r.StartS, math.Round((r.RestoreS+r.CheckpointS)*10)/10, r.CheckpointS)
	}
	return b.Bytes()
}

// replaceBlock replaces the text between two marker lines of a file.
func replaceBlock(path, begin, end, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q block", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + text + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// The structural facts of docs/preemption.md on small traces, in `make
// test`: nothing here is fitted, each is a direction.
func TestPreemptionStructural(t *testing.T) {
	sim1 := func(args ...string) *sim.Result {
		t.Helper()
		code, stdout, stderr := runCaptured(t, append([]string{"simulate", "--json", "--round", "360"}, args...)...)
		if code != 0 && code != 2 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var r sim.Result
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("%v: %v: %s", args, err, stdout)
		}
		return &r
	}
	// A minimum runtime stops and loses less than today's mechanism on
	// the same trace and time span.
	gavel := []string{"--policy", "max_min_fairness", "--trace", "continuous", "--multi-gpu", "--cluster", "v100=4,p100=4,k80=4",
		"--rate", "0.5", "--jobs", "40", "--max-time", "300000", "--preemption-cost", "realistic"}
	today, pinned := sim1(gavel...), sim1(append(gavel, "--min-runtime", "1800")...)
	if pinned.Preemptions >= today.Preemptions || pinned.LostGPUS >= today.LostGPUS || pinned.JobsDone < today.JobsDone {
		t.Errorf("min runtime 30 min: %d preemptions, %.0f GPU-s lost, %d done; today's: %d, %.0f, %d",
			pinned.Preemptions, pinned.LostGPUS, pinned.JobsDone, today.Preemptions, today.LostGPUS, today.JobsDone)
	}
	// A gang among single-GPU jobs pinned at staggered times never finds
	// its 8 GPUs free at once; a reservation gets them.
	dir := t.TempDir()
	file := filepath.Join(dir, "gang.jsonl")
	if err := os.WriteFile(file, starvingTrace(t), 0o644); err != nil {
		t.Fatal(err)
	}
	gang := []string{"--policy", "max_min_fairness", "--trace", file, "--cluster", "v100=8", "--preemption-cost", "realistic", "--min-runtime", "3600"}
	without, with := sim1(gang...), sim1(append(gang, "--reserve-after", "1800")...)
	if !without.Finished || !with.Finished || with.Reserved == 0 || !(with.LargeGangWaitP99S < without.LargeGangWaitP99S) {
		t.Errorf("gang wait p99 %.0f s with a reservation (%d reserved), %.0f s without; finished %v, %v",
			with.LargeGangWaitP99S, with.Reserved, without.LargeGangWaitP99S, with.Finished, without.Finished)
	}
	t.Logf("today's %d preemptions, %.1f GPU-h lost; min runtime %d, %.1f; gang wait p99 %.1f h without a reservation, %.1f h with",
		today.Preemptions, today.LostGPUS/3600, pinned.Preemptions, pinned.LostGPUS/3600, without.LargeGangWaitP99S/3600, with.LargeGangWaitP99S/3600)
}

// starvingTrace: 60 single-GPU ResNet-18 jobs of about 2 h arriving every
// 10 min on 8 V100s, and an 8-GPU gang of about 1 h at 20 min.
func starvingTrace(t *testing.T) []byte {
	tb := throughputs.Default()
	const model = "ResNet-18 (batch size 32)"
	one, ok1 := tb.Isolated(throughputs.Key{Model: model, ScaleFactor: 1}, "v100")
	eight, ok8 := tb.Isolated(throughputs.Key{Model: model, ScaleFactor: 8}, "v100")
	if !ok1 || !ok8 {
		t.Fatalf("no v100 throughputs for %s", model)
	}
	var jobs []trace.Job
	for i := range 60 {
		jobs = append(jobs, trace.Job{Model: model, ScaleFactor: 1, TotalSteps: math.Round(one * 7200), Priority: 1, ArrivalS: float64(i) * 600})
		if i == 2 {
			jobs = append(jobs, trace.Job{Model: model, ScaleFactor: 8, TotalSteps: math.Round(eight * 3600), Priority: 1, ArrivalS: 1200})
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for i, j := range jobs {
		j.ID = i
		if err := enc.Encode(j); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}
