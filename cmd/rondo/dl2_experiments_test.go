package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/policies/dl2"
)

// TestDL2Experiments produces docs/dl2/results.json, the tables of
// docs/dl2.md and its learning curves (`make dl2-experiments`, about half
// an hour on one core): every number is measured on the held-out test
// traces (seeds 1..5, generated as `rondo dl2 train` does), every model
// trained with `rondo dl2 train`'s defaults unless the row says otherwise.
func TestDL2Experiments(t *testing.T) {
	if os.Getenv("RONDO_DL2_EXPERIMENTS") == "" {
		t.Skip("RONDO_DL2_EXPERIMENTS=1 (make dl2-experiments) runs DL2's experiments and writes docs/dl2/")
	}
	out := filepath.Join("..", "..", "docs", "dl2")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	config := func(seed int64, args ...string) dl2.TrainConfig {
		c := newDL2Train()
		if err := c.flags.Parse(append([]string{"-seed", fmt.Sprint(seed)}, args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := dl2Config(c)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	base := config(1)
	test := base.Traces(base.TestSeed, base.TestTraces)
	res := map[string]any{}
	baselines := map[string]float64{}
	for name, sz := range dl2.Baselines() {
		v, err := dl2.Evaluate(&base.Env, test, sz)
		if err != nil {
			t.Fatal(err)
		}
		baselines[name] = v
	}
	res["baselines_avg_jct_s"] = baselines
	drf := baselines["drf"]
	t.Logf("baselines (h): drf %.3f fifo %.3f srtf %.3f tetris %.3f optimus %.3f", drf/3600, baselines["fifo"]/3600,
		baselines["srtf"]/3600, baselines["tetris"]/3600, baselines["optimus"]/3600)

	type run struct {
		Name     string           `json:"name"`
		Seed     int64            `json:"seed"`
		Args     []string         `json:"args"`
		Report   *dl2.TrainReport `json:"report"`
		WallS    float64          `json:"wall_s"`
		SLvsDRF  float64          `json:"sl_vs_drf"` // SL avg JCT / DRF's - 1
		RLvsDRF  float64          `json:"rl_vs_drf"` // after RL / DRF's - 1
		RLvsTchr float64          `json:"rl_vs_teacher"`
		Error    string           `json:"error,omitempty"`
	}
	var runs []run
	var trainOne func(name string, seed int64, args ...string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	// Two trainings at a time (RONDO_DL2_PARALLEL): each is deterministic
	// and shares nothing; the runs are sorted afterwards.
	par := 2
	if v, err := strconv.Atoi(os.Getenv("RONDO_DL2_PARALLEL")); err == nil && v > 0 {
		par = v
	}
	sem := make(chan struct{}, par)
	train := func(name string, seed int64, args ...string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			trainOne(name, seed, args...)
		}()
	}
	trainOne = func(name string, seed int64, args ...string) {
		cfg := config(seed, args...)
		start := time.Now()
		_, rep, err := dl2.Train(cfg)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			// A diverged run is a result too (and not in the means).
			t.Logf("%-14s seed %d: failed: %v", name, seed, err)
			runs = append(runs, run{Name: name, Seed: seed, Args: args, Error: err.Error()})
			return
		}
		r := run{Name: name, Seed: seed, Args: args, Report: rep, WallS: time.Since(start).Seconds(),
			SLvsDRF: rep.SLAvgJCT/drf - 1, RLvsDRF: rep.FinalAvgJCT/drf - 1, RLvsTchr: rep.FinalAvgJCT/rep.TeacherAvgJCT - 1}
		t.Logf("%-14s seed %d: teacher %.3f h, SL %.3f h (%+.1f%% vs DRF), RL %.3f h (%+.1f%% vs DRF), %.0f s", name, seed,
			rep.TeacherAvgJCT/3600, rep.SLAvgJCT/3600, 100*r.SLvsDRF, rep.FinalAvgJCT/3600, 100*r.RLvsDRF, r.WallS)
		runs = append(runs, r)
		if seed == 1 {
			if err := writeCurve(filepath.Join(out, "curve-"+name+".json"), rep); err != nil {
				t.Error(err)
			}
		}
	}
	for seed := int64(1); seed <= 5; seed++ {
		train("dl2", seed)
	}
	for seed := int64(1); seed <= 3; seed++ {
		train("mlp", seed, "-arch", "mlp")
		train("no-actor-critic", seed, "-no-actor-critic")
		train("no-explore", seed, "-no-explore")
		train("no-replay", seed, "-no-replay")
		train("no-shaping", seed, "-no-shaping")
		train("teacher-fifo", seed, "-teacher", "fifo")
		train("teacher-srtf", seed, "-teacher", "srtf")
	}
	// New job types: supervised and the first third of RL on Table 1's
	// first four models, two more types from a third of the steps on, the
	// last two from two thirds (DL2 §6.4); against the policy trained on
	// all types from the start (the dl2 rows, same seeds).
	first := []string{"resnet-50", "vgg-16", "resnext-110", "inception-bn"}
	rest := [][]string{{"seq2seq", "ctc"}, {"dssm", "wlm"}}
	for seed := int64(1); seed <= 3; seed++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cfg := config(seed, "-types", strings.Join(first, ","))
			_, rep, err := trainNewTypes(cfg, first, rest)
			if err != nil {
				t.Error(err)
				return
			}
			r := run{Name: "new-types", Seed: seed, Report: rep, RLvsDRF: rep.FinalAvgJCT/drf - 1, SLvsDRF: rep.SLAvgJCT/drf - 1}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("new-types seed %d: RL %.3f h (%+.1f%% vs DRF)", seed, rep.FinalAvgJCT/3600, 100*r.RLvsDRF)
			runs = append(runs, r)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	sort.Slice(runs, func(a, b int) bool {
		if runs[a].Name != runs[b].Name {
			return runs[a].Name < runs[b].Name
		}
		return runs[a].Seed < runs[b].Seed
	})
	res["runs"] = runs
	summary := map[string][2]float64{}
	for _, name := range []string{"dl2", "mlp", "no-actor-critic", "no-explore", "no-replay", "no-shaping", "teacher-fifo", "teacher-srtf", "new-types"} {
		var xs, ss []float64
		for _, r := range runs {
			if r.Name == name && r.Error == "" && r.Report.FinalAvgJCT > 0 {
				xs = append(xs, r.Report.FinalAvgJCT)
				ss = append(ss, r.Report.SLAvgJCT)
			}
		}
		m, sd := meanSD(xs)
		summary[name] = [2]float64{m, sd}
		sm, _ := meanSD(ss)
		t.Logf("%-16s after RL %.3f ± %.3f h (%+.1f%% vs DRF); SL only %.3f h (%+.1f%%)", name, m/3600, sd/3600, 100*(m/drf-1), sm/3600, 100*(sm/drf-1))
	}
	res["summary_avg_jct_s_mean_sd"] = summary
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "results.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// trainNewTypes is the new-types experiment: cfg's pipeline with the RL
// episodes' job types growing at a third and two thirds of the steps.
func trainNewTypes(cfg dl2.TrainConfig, first []string, rest [][]string) (*dl2.Model, *dl2.TrainReport, error) {
	steps := cfg.RL.Steps
	types := append([]string(nil), first...)
	sl := cfg
	sl.RL.Steps = 0
	m, rep, err := dl2.Train(sl) // supervised on the first four
	if err != nil {
		return nil, nil, err
	}
	for i, add := range append([][]string{nil}, rest...) {
		types = append(types, add...)
		part := cfg
		part.Model = m
		part.SL.Passes = 0
		part.TrainModels = append([]string(nil), types...)
		part.TrainSeed = cfg.TrainSeed + int64(1000*(i+1))
		part.RL.Steps = steps / 3
		part.Log = nil
		var r *dl2.TrainReport
		if m, r, err = dl2.Train(part); err != nil {
			return nil, nil, err
		}
		rep.Curve = append(rep.Curve, shift(r.Curve, i*steps/3)...)
		rep.FinalAvgJCT = r.FinalAvgJCT
	}
	return m, rep, nil
}

func shift(c []dl2.CurvePoint, by int) []dl2.CurvePoint {
	out := make([]dl2.CurvePoint, len(c))
	for i, p := range c {
		out[i] = dl2.CurvePoint{Step: p.Step + by, AvgJCT: p.AvgJCT}
	}
	return out
}

func meanSD(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s, q float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	for _, x := range xs {
		q += (x - m) * (x - m)
	}
	if len(xs) < 2 {
		return m, 0
	}
	return m, math.Sqrt(q / float64(len(xs)-1))
}
