package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/sim/sweep"
)

// TestSweepNomadFlags: -on-nomad's flags are refused without it, and bad
// values with it, before anything talks to Nomad.
func TestSweepNomadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-nomad-driver", "exec"}, "-nomad-driver: only with -on-nomad"},
		{[]string{"-address", "http://127.0.0.1:1", "-nomad-cpu", "10"}, "-address, -nomad-cpu: only with -on-nomad"},
		{[]string{"-on-nomad", "-nomad-driver", "docker"}, `-nomad-driver "docker": want raw_exec or exec`},
		{[]string{"-on-nomad", "-nomad-binary", "/x", "-nomad-artifact", "https://h/rondo"}, "give one"},
		{[]string{"-on-nomad", "-nomad-memory", "0"}, "want positive MHz and MB"},
		{[]string{"-on-nomad", "-address", "127.0.0.1:4646"}, "want http(s)://host:port"},
		{[]string{"-on-nomad", "-address", "http://127.0.0.1:1"}, "nomad at http://127.0.0.1:1"},
	} {
		args := append([]string{"simulate", "sweep", "--policies", "fifo", "--rates", "1", "--seeds", "0", "--out", dir}, tc.args...)
		code, _, errOut := runCaptured(t, args...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q, want one line with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestSweepPointJob: a point's job runs `simulate sweep` with every
// simulation flag of the sweep and the point's own spec, rate and seed
// (the rate as exact as a float64 prints), none of the sweep's output or
// Nomad flags; the arguments parse; one allocation, no restart, no
// rescheduling; an artifact replaces the binary path; a --throughputs file
// travels as a template.
func TestSweepPointJob(t *testing.T) {
	c := newSweep()
	args := []string{"--cluster", "v100=2", "--policies", "fifo,las+compat", "--rates", "0.4:1.2:0.4", "--seeds", "0:1",
		"--window", "5:25", "--gavel-compat", "--max-active", "200", "--out", "/tmp/x", "--progress", "--title", "T",
		"--throughputs", "t.json", "-on-nomad", "-address", "http://nomad:4646", "-nomad-cpu", "500", "-parallel", "7"}
	if err := c.flags.Parse(args); err != nil {
		t.Fatal(err)
	}
	rates, _ := parseFloats(c.rates)
	p := nomadPoint{idx: 5, spec: "las+compat", rate: rates[2], seed: 1, jobID: "rondo-sweep-abcd-5"}
	got := c.pointArgs(p)
	want := []string{"simulate", "sweep", "-cluster=v100=2", "-gavel-compat=true", "-max-active=200", "-window=5:25",
		"-throughputs=${NOMAD_TASK_DIR}/throughputs.json", "-policies=las+compat", "-rates=1.2", "-seeds=1", "-parallel=1",
		"-out=${NOMAD_ALLOC_DIR}/sweep"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args\n got %q\nwant %q", got, want)
	}
	w := newSweep()
	if err := w.flags.Parse(got[2:]); err != nil || w.policies != "las+compat" || w.rates != "1.2" || !w.compat || w.nomad.on {
		t.Errorf("the point's args parse: %v %+v", err, w)
	}
	c.nomad.binary = "/opt/rondo"
	job := c.pointJob(p, "rondo-sweep-abcd", "research", []byte(`{"v100": {}}`))
	tg := job.TaskGroups[0]
	task := tg.Tasks[0]
	if *job.ID != "rondo-sweep-abcd-5" || *job.Type != "batch" || *job.Namespace != "research" || *tg.Count != 1 ||
		*tg.RestartPolicy.Attempts != 0 || *tg.ReschedulePolicy.Attempts != 0 || *tg.ReschedulePolicy.Unlimited ||
		task.Driver != "raw_exec" || task.Config["command"] != "/opt/rondo" || *task.Resources.CPU != 500 ||
		job.Meta["rondo_sweep"] != "rondo-sweep-abcd" || job.Meta["rondo_sweep_rate"] != "1.2" || job.NodePool != nil {
		t.Errorf("job %+v\ntask %+v", job, task)
	}
	if len(task.Templates) != 1 || *task.Templates[0].EmbeddedTmpl != `{"v100": {}}` || *task.Templates[0].DestPath != "local/throughputs.json" ||
		*task.Templates[0].LeftDelim == "{{" {
		t.Errorf("templates %+v", task.Templates)
	}
	c.nomad.binary, c.nomad.artifact, c.nomad.pool = "", "https://files/rondo", "batch"
	job = c.pointJob(p, "rondo-sweep-abcd", "", nil)
	task = job.TaskGroups[0].Tasks[0]
	if task.Config["command"] != "local/rondo" || len(task.Artifacts) != 1 || *task.Artifacts[0].GetterSource != "https://files/rondo" ||
		*job.NodePool != "batch" || job.Namespace != nil || task.Templates != nil {
		t.Errorf("artifact job %+v\ntask %+v", job, task)
	}
}

// TestSweepNomadPoints: the points are the local sweep's, in its order
// (policy as given, rate, seed), a static trace's at rate 0.
func TestSweepNomadPoints(t *testing.T) {
	cfg := sweepConfigForTest([]string{"fifo", "las"}, []float64{1, 2}, []int64{0, 1})
	ps, err := nomadPoints(cfg, "p")
	if err != nil || len(ps) != 8 {
		t.Fatalf("%v %v", ps, err)
	}
	var keys []string
	for i, p := range ps {
		if p.idx != i {
			t.Errorf("point %d idx %d", i, p.idx)
		}
		keys = append(keys, p.jobID+" "+sweep.RunKey(p.spec, p.rate, p.seed))
	}
	want := "p-0 fifo|1|0,p-1 fifo|1|1,p-2 fifo|2|0,p-3 fifo|2|1,p-4 las|1|0,p-5 las|1|1,p-6 las|2|0,p-7 las|2|1"
	if strings.Join(keys, ",") != want {
		t.Errorf("points %s\nwant %s", strings.Join(keys, ","), want)
	}
	cfg.Trace.Static, cfg.Trace.Jobs = true, 10
	if ps, _ := nomadPoints(cfg, "p"); len(ps) != 4 || ps[1].rate != 0 {
		t.Errorf("static: %v", ps)
	}
	cfg.Trace.Static = false
	cfg.Rates = []float64{0}
	if _, err := nomadPoints(cfg, "p"); err == nil || !strings.Contains(err.Error(), "want a positive number") {
		t.Errorf("rate 0: %v", err)
	}
}

func sweepConfigForTest(policies []string, rates []float64, seeds []int64) sweep.Config {
	return sweep.Config{Policies: policies, Rates: rates, Seeds: seeds}
}
