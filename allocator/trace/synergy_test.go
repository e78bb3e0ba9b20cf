package trace

import (
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/synergy"
)

func TestReadSynergyTraces(t *testing.T) {
	for _, name := range []string{"static-100.csv", "dynamic-100.csv"} {
		jobs, err := ReadSynergyFile("../synergy/data/traces/"+name, synergy.Default())
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 100 {
			t.Fatalf("%s: %d jobs", name, len(jobs))
		}
		for i, j := range jobs {
			if j.ID != i || j.ScaleFactor != 1 || j.Profile != j.Model || j.StepsPerS[SynergyType] <= 0 {
				t.Fatalf("%s: job %d: %+v", name, i, j)
			}
		}
	}
	jobs, _ := ReadSynergy(strings.NewReader("0,alexnet,8,23349,1\n"), synergy.Default())
	if j := jobs[0]; j.TotalSteps != 23349 || j.ArrivalS != 8 || j.StepsPerS["v100"] != 1/0.6 || j.DurationS != 23349*0.6 {
		t.Errorf("alexnet job: %+v", j)
	}
}

func TestReadSynergyErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0,alexnet,8,100\n", "line 1: 4 comma-separated fields, want 5"},
		{"x,alexnet,8,100,1\n", `line 1: job_id "x"`},
		{"0,alexnet,8,100,1\n0,gnmt,9,100,1\n", "line 2: job_id 0: already on line 1"},
		{"0,alexnet,-1,100,1\n", `line 1: arrival_s "-1"`},
		{"0,alexnet,NaN,100,1\n", `line 1: arrival_s "NaN"`},
		{"0,alexnet,9,100,1\n1,gnmt,8,100,1\n", "line 2: arrival_s 8: before the previous line's 9"},
		{"0,alexnet,8,0,1\n", `line 1: iterations "0"`},
		{"0,alexnet,8,1.5,1\n", `line 1: iterations "1.5"`},
		{"0,alexnet,8,100,0\n", `line 1: gpus "0"`},
		{"0,alexnett,8,100,1\n", `line 1: model "alexnett"`},
	} {
		_, err := ReadSynergy(strings.NewReader(c.in), synergy.Default())
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.in, err, c.want)
		}
	}
}
