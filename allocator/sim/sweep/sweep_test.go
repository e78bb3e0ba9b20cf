package sweep

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/placement"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/trace"
)

func smallConfig() Config {
	return Config{
		Policies: []string{"max_min_fairness_perf", "max_min_fairness"},
		Rates:    []float64{0.15, 0.3},
		Seeds:    []int64{0, 1},
		Options: sim.Options{
			Cluster:     sim.Cluster{Types: map[string]int{"v100": 3, "p100": 3, "k80": 3}, GPUsPerServer: 1},
			Engine:      engine.Config{RoundS: 360},
			WindowStart: 5, WindowEnd: 25, MaxActive: 200,
		},
		Parallel: 3,
	}
}

func TestExecuteSmallSweep(t *testing.T) {
	cfg := smallConfig()
	calls := 0
	cfg.Progress = func(done, total int, r *Run) {
		calls++
		if total != 8 || done != calls {
			t.Errorf("progress %d/%d after %d calls", done, total, calls)
		}
	}
	runs, err := Execute(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 8 || calls != 8 {
		t.Fatalf("%d runs, %d progress calls; want 8", len(runs), calls)
	}
	// Ordered by policy as given, then rate, then seed.
	want := []struct {
		p string
		r float64
		s int64
	}{{"max_min_fairness_perf", 0.15, 0}, {"max_min_fairness_perf", 0.15, 1}, {"max_min_fairness_perf", 0.3, 0}}
	for i, w := range want {
		if runs[i].Policy != w.p || runs[i].Rate != w.r || runs[i].Seed != w.s {
			t.Errorf("run %d = %s/%g/%d, want %s/%g/%d", i, runs[i].Policy, runs[i].Rate, runs[i].Seed, w.p, w.r, w.s)
		}
	}
	for _, r := range runs {
		if r.Error != "" || !r.Finished() {
			t.Fatalf("%s rate %g seed %d: error %q finished %v", r.Policy, r.Rate, r.Seed, r.Error, r.Finished())
		}
		if len(r.JCTs) != 20 || r.SimHoursPerWallS <= 0 {
			t.Errorf("%s: %d JCTs, %g sim-h/s", r.Policy, len(r.JCTs), r.SimHoursPerWallS)
		}
	}
	// Same trace and policy in a sequential run gives the same result:
	// parallel runs do not share state.
	one := cfg
	one.Policies, one.Rates, one.Seeds, one.Parallel, one.Progress = []string{"max_min_fairness_perf"}, []float64{0.3}, []int64{1}, 1, nil
	seq, err := Execute(one)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seq[0].Result.AvgJCTS, runs[3].Result.AvgJCTS; got != want {
		t.Errorf("sequential avg JCT %v, parallel %v", got, want)
	}

	pts := Summarize(runs)
	if len(pts) != 4 {
		t.Fatalf("%d points, want 4", len(pts))
	}
	for _, p := range pts {
		var jcts []float64
		for _, r := range runs {
			if r.Policy == p.Policy && r.Rate == p.Rate {
				jcts = append(jcts, r.Result.AvgJCTS/3600)
			}
		}
		m, sd := MeanSD(jcts)
		if p.Finished != 2 || math.Abs(p.AvgJCTH-m) > 1e-12 || math.Abs(p.AvgJCTHSD-sd) > 1e-12 {
			t.Errorf("point %+v: want mean %g sd %g over 2 runs", p, m, sd)
		}
	}

	dir := t.TempDir()
	rep := &Report{Runs: runs, Points: pts}
	if err := WriteFiles(dir, rep); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "runs.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil || len(rows) != 9 || rows[0][0] != "policy" {
		t.Fatalf("runs.csv: %d rows, err %v", len(rows), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 8 || len(back.Points) != 4 {
		t.Fatalf("results.json: %d runs %d points, err %v", len(back.Runs), len(back.Points), err)
	}
}

func TestUnfinishedRunsAreDropped(t *testing.T) {
	done := &sim.Result{Finished: true, AvgJCTS: 3600}
	runs := []Run{
		{Policy: "a", Rate: 1, Seed: 0, Result: done},
		{Policy: "a", Rate: 1, Seed: 1, Result: &sim.Result{Finished: true, AvgJCTS: 3 * 3600}},
		{Policy: "a", Rate: 2, Seed: 0, Result: &sim.Result{Finished: false, AvgJCTS: 99 * 3600}},
		{Policy: "a", Rate: 2, Seed: 1, Error: "boom"},
		{Policy: "b", Rate: 1, Seed: 0, Result: done},
		{Policy: "b", Rate: 2, Seed: 0, Result: done},
	}
	pts := Summarize(runs)
	if len(pts) != 4 {
		t.Fatalf("%d points", len(pts))
	}
	if p := pts[0]; p.Finished != 2 || p.AvgJCTH != 2 || p.AvgJCTHSD != 1 {
		t.Errorf("a@1 = %+v, want mean 2 sd 1", p)
	}
	if p := pts[1]; p.Finished != 0 || p.Runs != 2 {
		t.Errorf("a@2 = %+v, want 0 of 2 finished", p)
	}
	if r := HighestCommonRate(pts); r != 1 {
		t.Errorf("highest common rate %g, want 1", r)
	}
	fig := JCTFigure(pts, "t", "", 0)
	if len(fig.Series) != 2 || len(fig.Series[0].X) != 1 || fig.Series[0].BlowUpX != 2 || fig.Series[1].BlowUpX != 0 {
		t.Errorf("series %+v", fig.Series)
	}
}

// svgElements parses the document and counts elements by name, failing on
// malformed XML.
func svgElements(t *testing.T, doc []byte) (map[string]int, []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	count := map[string]int{}
	var texts []string
	inText := false
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("malformed SVG: %v\n%s", err, doc)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = v.Name.Local
				if v.Name.Space != "http://www.w3.org/2000/svg" {
					t.Errorf("root namespace %q", v.Name.Space)
				}
			}
			count[v.Name.Local]++
			inText = v.Name.Local == "text"
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(v))
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q", root)
	}
	return count, texts
}

func TestSVGWellFormed(t *testing.T) {
	pts := []Point{
		{Policy: "aware <LAS> & co", Rate: 0.4, Finished: 3, AvgJCTH: 10, AvgJCTHSD: 1},
		{Policy: "aware <LAS> & co", Rate: 0.8, Finished: 3, AvgJCTH: 12, AvgJCTHSD: 2},
		{Policy: "agnostic", Rate: 0.4, Finished: 3, AvgJCTH: 15, AvgJCTHSD: 1},
		{Policy: "agnostic", Rate: 0.8, Finished: 0},
	}
	svg := JCTFigure(pts, "Figure 8", "36+36+36 GPUs", 0).SVG()
	count, texts := svgElements(t, svg)
	if count["polyline"] != 2 || count["polygon"] != 2 || count["circle"] != 3 {
		t.Errorf("elements %v: want 2 lines, 2 bands, 3 markers", count)
	}
	joined := strings.Join(texts, "|")
	for _, want := range []string{"Figure 8", "aware <LAS> & co", "agnostic", "Average JCT (hours)", "Input job rate (jobs/hr)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("text %q missing from %q", want, joined)
		}
	}
	if !bytes.Contains(svg, []byte(`class="blowup"`)) {
		t.Error("no blow-up segment for the unfinished policy")
	}
	// Tick labels are present on both axes.
	if c := strings.Count(string(svg), "<text x="); c < 8 {
		t.Errorf("only %d tick labels", c)
	}

	runs := []Run{{Policy: "p", Rate: 1, Result: &sim.Result{Finished: true}, JCTs: []float64{3600, 7200, 36000, 360000}}}
	cdf := CDFFigure(runs, 1, "CDF", "")
	if len(cdf.Series) != 1 || cdf.Series[0].Y[len(cdf.Series[0].Y)-1] != 1 {
		t.Fatalf("cdf series %+v", cdf.Series)
	}
	count, _ = svgElements(t, cdf.SVG())
	if count["polyline"] != 1 {
		t.Errorf("cdf elements %v", count)
	}
}

func TestNiceTicks(t *testing.T) {
	ticks, lo, hi := niceTicks(0, 6.4, 8)
	if lo != 0 || hi < 6.4 || len(ticks) < 4 || len(ticks) > 12 {
		t.Errorf("ticks %v [%g, %g]", ticks, lo, hi)
	}
	lt, llo, lhi := logTicks(0.3, 400)
	if llo != 0.1 || lhi != 1000 || lt[0] != 0.1 {
		t.Errorf("log ticks %v [%g, %g]", lt, llo, lhi)
	}
}

func TestParseSpec(t *testing.T) {
	sp, err := ParseSpec("max_min_fairness_perf+ideal+compat")
	if err != nil || sp.Policy != "max_min_fairness_perf" || !sp.Ideal || sp.Compat == nil || !*sp.Compat {
		t.Errorf("%+v %v", sp, err)
	}
	if _, err := ParseSpec("las+fast"); err == nil {
		t.Error("unknown modifier accepted")
	}
	if sp, err := ParseSpec("fifo+tune"); err != nil || sp.Policy != "fifo" || sp.Placement != placement.Tune || sp.Label != "fifo+tune" {
		t.Errorf("fifo+tune: %+v %v", sp, err)
	}
	if _, err := ParseSpec("fifo+tune+opt"); err == nil || !strings.Contains(err.Error(), "two placement modes") {
		t.Errorf("fifo+tune+opt: %v", err)
	}
	if _, err := Execute(Config{Policies: []string{"fifo+tune"}, Seeds: []int64{0}, Rates: []float64{1}}); err == nil ||
		!strings.Contains(err.Error(), "needs servers with cores and memory") {
		t.Errorf("placement without servers: %v", err)
	}
	if _, err := Execute(Config{Policies: []string{"las"}, Seeds: []int64{0}, Rates: []float64{-1}}); err == nil {
		t.Error("negative rate accepted")
	}
}

func TestJournalResume(t *testing.T) {
	cfg := smallConfig()
	cfg.Policies, cfg.Rates, cfg.Seeds = []string{"max_min_fairness_perf"}, []float64{0.3}, []int64{0, 1}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Progress = func(done, total int, r *Run) {
		if err := AppendJournal(f, r); err != nil {
			t.Error(err)
		}
	}
	first, err := Execute(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"policy": "torn`) // a sweep killed mid-line
	f.Close()
	done, err := ReadJournal(path)
	if err != nil || len(done) != 2 {
		t.Fatalf("journal: %d runs, err %v", len(done), err)
	}
	if len(done[0].JCTs) != 20 || done[0].Result == nil || !done[0].Finished() {
		t.Fatalf("journal lost data: %+v", done[0])
	}
	// Resuming with both runs done runs nothing and returns them.
	cfg.Done, cfg.Seeds = done, []int64{0, 1, 2}
	ran := 0
	cfg.Progress = func(done, total int, r *Run) {
		ran++
		if total != 1 || r.Seed != 2 {
			t.Errorf("resumed sweep ran seed %d (%d/%d)", r.Seed, done, total)
		}
	}
	again, err := Execute(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ran != 1 || len(again) != 3 || again[0].Result.AvgJCTS != first[0].Result.AvgJCTS || again[2].Seed != 2 {
		t.Errorf("resume: ran %d, runs %d", ran, len(again))
	}
}

// Runs start longest first — higher rates, then the packing policies —
// while the results keep the given order.
func TestStartOrderLongestFirst(t *testing.T) {
	cfg := smallConfig()
	cfg.Policies = []string{"max_min_fairness", "gandiva", "max_min_fairness_packed"}
	cfg.Rates = []float64{0.15, 0.3}
	cfg.Seeds = []int64{0}
	cfg.Options.WindowStart, cfg.Options.WindowEnd = 0, 4
	cfg.Parallel = 1 // one worker: progress order is start order
	var started []string
	cfg.Progress = func(done, total int, r *Run) {
		started = append(started, fmt.Sprintf("%s@%g", r.Policy, r.Rate))
	}
	runs, err := Execute(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gandiva@0.3", "max_min_fairness_packed@0.3", "max_min_fairness@0.3",
		"gandiva@0.15", "max_min_fairness_packed@0.15", "max_min_fairness@0.15"}
	if !slices.Equal(started, want) {
		t.Errorf("start order %v, want %v", started, want)
	}
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%s@%g", r.Policy, r.Rate))
	}
	wantRuns := []string{"max_min_fairness@0.15", "max_min_fairness@0.3", "gandiva@0.15", "gandiva@0.3",
		"max_min_fairness_packed@0.15", "max_min_fairness_packed@0.3"}
	if !slices.Equal(got, wantRuns) {
		t.Errorf("results %v, want %v", got, wantRuns)
	}
}

// TestSynergySweep: placement specs over Synergy's synthetic workload on a
// small cluster of Synergy servers: every run is the one rondo simulate
// would make (same trace, seed, mode and model), TUNE is not slower than
// proportional, and the compat model runs on the reference's grid.
func TestSynergySweep(t *testing.T) {
	for _, compat := range []bool{false, true} {
		cfg := Config{
			Policies: []string{"fifo+proportional", "fifo+tune"},
			Rates:    []float64{1.5},
			Seeds:    []int64{42},
			Trace:    Trace{Synergy: true},
			Options: sim.Options{
				Cluster:     sim.Cluster{Types: map[string]int{"v100": 16}, GPUsPerServer: 8},
				Engine:      engine.Config{RoundS: 300},
				WindowStart: 20, WindowEnd: 80,
				Placement: &sim.Placement{CoresPerServer: 24, MemGBPerServer: 500, Compat: compat},
			},
			Parallel: 2,
		}
		if compat {
			cfg.Options.RoundGrid, cfg.Options.FinishAtRoundEnd = true, true
		}
		runs, err := Execute(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, mode := range []placement.Mode{placement.Proportional, placement.Tune} {
			r := runs[i]
			if !r.Finished() || len(r.JCTs) != 60 {
				t.Fatalf("compat %v %s: error %q, %d JCTs", compat, r.Policy, r.Error, len(r.JCTs))
			}
			g, err := trace.NewSynergyGenerator(trace.SynergyOptions{Seed: 42, Rate: 1.5})
			if err != nil {
				t.Fatal(err)
			}
			o := cfg.Options
			o.Engine.Policy, o.Engine.Seed = "fifo", 42
			p := *o.Placement
			p.Mode = func(string) placement.Mode { return mode }
			o.Placement = &p
			want, err := sim.Run(&sim.GeneratorSource{G: g}, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Result.AvgJCTS != want.AvgJCTS || r.Result.Rounds != want.Rounds {
				t.Errorf("compat %v %s: avg JCT %v in %d rounds, a direct run %v in %d", compat, r.Policy,
					r.Result.AvgJCTS, r.Result.Rounds, want.AvgJCTS, want.Rounds)
			}
		}
		if prop, tune := runs[0].Result.AvgJCTS, runs[1].Result.AvgJCTS; tune > prop {
			t.Errorf("compat %v: TUNE %.0f s, proportional %.0f s", compat, tune, prop)
		}
	}
}
