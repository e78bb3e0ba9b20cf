package dl2

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestTeacher(t *testing.T) {
	for name, sz := range Baselines() {
		if sz.Name() != name {
			t.Errorf("%s named %s", name, sz.Name())
		}
		if got, err := Teacher(name); err != nil || got.Name() != name {
			t.Errorf("Teacher(%s) = %v, %v", name, got, err)
		}
	}
	_, err := Teacher("dl2")
	if err == nil || err.Error() != `dl2: unknown teacher "dl2" (known: drf, fifo, optimus, srtf, tetris)` {
		t.Errorf("error %v", err)
	}
}

func traceJobs(ms Models, specs ...string) []Job {
	var out []Job
	for i, sp := range specs {
		var model string
		var rem float64
		fmt.Sscanf(sp, "%s %g", &model, &rem)
		out = append(out, ms.JobFor(TraceJob{ID: fmt.Sprintf("j%d", i), Model: model, ArrivalS: float64(i), Epochs: rem}))
	}
	return out
}

func counts(s *Slot) string {
	var b []string
	for _, a := range s.Alloc {
		b = append(b, fmt.Sprintf("%d:%d", a.PS, a.Workers))
	}
	return strings.Join(b, " ")
}

func TestBaselineDecisions(t *testing.T) {
	ms := Table1()
	cases := []struct {
		sz      Sizer
		servers []Server
		jobs    []string
		want    string // PS:workers per job
	}{
		// Equal shares: two ctc jobs split 8 GPUs evenly.
		{DRF{}, Servers(4, 2, 16), []string{"ctc 10", "ctc 10"}, "4:4 4:4"},
		// A 2-GPU job's share grows twice as fast per task (one big
		// server: no fragmentation of the 2-GPU workers).
		{DRF{}, Servers(1, 12, 192), []string{"resnet-50 10", "ctc 10"}, "3:3 6:6"},
		// FIFO: the first job to its maximum, the rest to the next.
		{FIFO{}, Servers(6, 2, 32), []string{"ctc 10", "ctc 10"}, "8:8 4:4"},
		// SRTF: the shorter job first (the second here).
		{SRTF{}, Servers(6, 2, 32), []string{"ctc 100", "ctc 10"}, "4:4 8:8"},
		// Tetris: same demands (same alignment): the shorter first.
		{Tetris{}, Servers(6, 2, 32), []string{"wlm 100", "wlm 10"}, "4:4 8:8"},
	}
	for _, c := range cases {
		s := NewSlot(c.servers, traceJobs(ms, c.jobs...), ms.Speed())
		c.sz.Decide(s)
		if got := counts(s); got != c.want {
			t.Errorf("%s on %v: %s, want %s", c.sz.Name(), c.jobs, got, c.want)
		}
	}
}

// Optimus stops where no feasible +worker or +PS shortens any job.
func TestOptimusLocalOptimum(t *testing.T) {
	ms := Table1()
	for _, name := range ms.Names() {
		s := NewSlot(Servers(20, 4, 64), traceJobs(ms, name+" 100"), ms.Speed())
		Optimus{}.Decide(s)
		a := s.Alloc[0]
		cur := remainingS(s, 0, a.PS, a.Workers)
		if s.Feasible(0, AddWorker) && remainingS(s, 0, a.PS, a.Workers+1) < cur {
			t.Errorf("%s: stopped at %d:%d, a worker more is faster", name, a.PS, a.Workers)
		}
		if s.Feasible(0, AddPS) && remainingS(s, 0, a.PS+1, a.Workers) < cur {
			t.Errorf("%s: stopped at %d:%d, a PS more is faster", name, a.PS, a.Workers)
		}
		if a.Workers < 2 {
			t.Errorf("%s: only %d:%d on an empty cluster", name, a.PS, a.Workers)
		}
	}
}

// On random slots every baseline applies only feasible actions, ends
// where its rule stops (no +both fits for DRF, FIFO, SRTF and Tetris)
// and records its stop when something was still feasible.
func TestBaselinesRandomSlots(t *testing.T) {
	ms := Table1()
	names := ms.Names()
	rng := rand.New(rand.NewSource(3))
	for n := 0; n < 300; n++ {
		servers := make([]Server, 1+rng.Intn(8))
		for i := range servers {
			servers[i] = Server{GPUs: 1 + rng.Intn(4), CPUs: 8 + rng.Intn(25)}
		}
		var specs []string
		for j := rng.Intn(12); j > 0; j-- {
			specs = append(specs, fmt.Sprintf("%s %d", names[rng.Intn(len(names))], 1+rng.Intn(200)))
		}
		for name, sz := range Baselines() {
			s := NewSlot(servers, traceJobs(ms, specs...), ms.Speed())
			var last string
			s.OnAction = func(s *Slot, j int, k Kind, stop bool) {
				if stop {
					last = "stop"
					return
				}
				last = "act"
				if !s.Feasible(j, k) {
					t.Fatalf("%s: infeasible %v for job %d", name, k, j)
				}
			}
			sz.Decide(s)
			if err := Check(servers, s); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s.AnyFeasible() && last != "stop" {
				t.Errorf("%s: no stop recorded with actions left", name)
			}
			if name != "optimus" {
				for j := range s.Jobs {
					if s.Feasible(j, AddBoth) {
						t.Errorf("%s: stopped with +both feasible for job %d", name, j)
					}
				}
			}
		}
	}
}
