package e2e

import (
	"fmt"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// reloadConfigs are the configs TestReloadOnNomad switches between with
// SIGHUP, in order; each changes one kind of setting.
var reloadConfigs = []struct {
	what string
	cfg  string
}{
	{"start: two quota-only VCs", `round_seconds = 4
vc "a" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e1" {}
  entity "e2" {}
}
vc "b" {
  gpus   = { v100 = 1, k80 = 1 }
  policy = "max_min_fairness_perf"
}
`},
	{"shares", `round_seconds = 4
vc "a" {
  gpus   = { v100 = 2, k80 = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e1" {}
  entity "e2" {}
}
vc "b" {
  gpus   = { k80 = 1 }
  policy = "max_min_fairness_perf"
}
`},
	{"a VC's policy", `round_seconds = 4
vc "a" {
  gpus   = { v100 = 2, k80 = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e1" {}
  entity "e2" {}
}
vc "b" {
  gpus   = { k80 = 1 }
  policy = "fifo_perf"
}
`},
	{"entity weights", `round_seconds = 4
vc "a" {
  gpus   = { v100 = 2, k80 = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e1" {}
  entity "e2" {
    weight = 3
  }
}
vc "b" {
  gpus   = { k80 = 1 }
  policy = "fifo_perf"
}
`},
	{"cells", `round_seconds = 4
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 2
  node  = true
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 2
  node  = true
}
cell "v100-node" "n1" {
  nomad_node = "v100-a"
}
cell "k80-node" "n2" {
  nomad_node = "k80-a"
}
vc "a" {
  quota  = { "v100-node" = 1 }
  policy = "max_min_fairness_water_filling_perf"
  entity "e1" {}
  entity "e2" {
    weight = 3
  }
}
vc "b" {
  quota  = { "k80-node" = 1 }
  policy = "fifo_perf"
}
`},
}

// TestReloadOnNomad: every kind of config change a reload takes — VC
// shares, a VC's policy, entity weights, a switch to cells — takes effect
// at the next round on a real Nomad, and /v1/status shows what runs: each
// VC's share, policy and entity weights, and jobs placed within the new
// shares or cells. VC a holds four jobs of two entities (e1: a0; e2: a1,
// a2, a3), VC b two jobs.
func TestReloadOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("k80-a", "k80", 2)},
		reloadConfigs[0].cfg)
	vcOf := map[string]string{}
	for _, id := range []string{"a0", "a1", "a2", "a3", "b0", "b1"} {
		vc, entity := id[:1], "e2"
		if id == "a0" {
			entity = "e1"
		}
		vcOf[id] = vc
		spec := strings.Replace(s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000000, 1), `"rondo.vc"    = "research"`,
			fmt.Sprintf(`"rondo.vc"    = %q
    "rondo.entity" = %q`, vc, entity), 1)
		s.submitSpec(id, spec)
	}
	a := s.startAgent("4s")
	// held counts the GPUs each VC's running jobs hold, per type.
	held := func(st agent.Status) map[string]map[string]int {
		h := map[string]map[string]int{"a": {}, "b": {}}
		for _, j := range st.Jobs {
			if j.State == "running" {
				h[vcOf[j.ID]][j.Type] += len(j.GPUs)
			}
		}
		return h
	}
	vcs := func(st agent.Status) map[string]agent.VC {
		m := map[string]agent.VC{}
		for _, v := range st.VCs {
			m[v.Name] = v
		}
		return m
	}
	xOf := func(st agent.Status, id string) float64 {
		x := 0.0
		for _, j := range st.Jobs {
			if j.ID == id {
				for _, v := range j.X {
					x += v
				}
			}
		}
		return x
	}
	s.waitFor(90*time.Second, "both VCs running within their shares", func() (bool, error) {
		h := held(s.status(a))
		return h["a"]["v100"] == 1 && h["a"]["k80"] == 1 && h["b"]["v100"] == 1 && h["b"]["k80"] == 1, nil
	})
	for i, step := range reloadConfigs[1:] {
		before := xOf(s.status(a), "a0")
		if err := os.WriteFile(s.cfgPath, []byte(step.cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		var check func(agent.Status) (bool, string)
		switch step.what {
		case "shares":
			check = func(st agent.Status) (bool, string) {
				h, v := held(st), vcs(st)
				ok := maps.Equal(v["a"].GPUs, map[string]int{"v100": 2, "k80": 1}) && maps.Equal(v["b"].GPUs, map[string]int{"k80": 1}) &&
					h["a"]["v100"] == 2 && h["a"]["k80"] == 1 && h["b"]["v100"] == 0 && h["b"]["k80"] == 1
				return ok, fmt.Sprintf("vcs %+v held %v", st.VCs, h)
			}
		case "a VC's policy":
			check = func(st agent.Status) (bool, string) {
				// Under FIFO, b's first job holds its one K80 and the
				// second has no share of it.
				v := vcs(st)
				return v["b"].Policy == "fifo_perf" && xOf(st, "b0") > 0.99 && xOf(st, "b1") < 0.01,
					fmt.Sprintf("vcs %+v x b0 %.2f b1 %.2f", st.VCs, xOf(st, "b0"), xOf(st, "b1"))
			}
		case "entity weights":
			// a's 3 GPUs: with equal weights e1 (a0 alone) is owed half,
			// more than the one GPU a0 can use (x = 1); at 1:3 a quarter.
			if before < 0.99 {
				t.Fatalf("before the weights change a0 has x = %.3f, want 1", before)
			}
			check = func(st agent.Status) (bool, string) {
				v := vcs(st)
				x := xOf(st, "a0")
				return v["a"].Entities["e2"] == 3 && x < 0.9, fmt.Sprintf("vcs %+v x a0 %.3f (was %.3f)", st.VCs, x, before)
			}
		case "cells":
			check = func(st agent.Status) (bool, string) {
				h, v := held(st), vcs(st)
				return v["a"].GPUs == nil && v["a"].Cells["v100-node"] == 1 && v["b"].Cells["k80-node"] == 1 &&
						h["a"]["k80"] == 0 && h["a"]["v100"] == 2 && h["b"]["v100"] == 0 && h["b"]["k80"] > 0,
					fmt.Sprintf("vcs %+v held %v", st.VCs, h)
			}
		}
		var last string
		s.waitFor(40*time.Second, "the reload of "+step.what+" in force", func() (bool, error) {
			ok, got := check(s.status(a))
			last = got
			return ok, nil
		})
		t.Logf("reload of %s: in force (%s)", step.what, last)
		if n := strings.Count(a.logs(), "decider_rebuilt=true"); n != i+1 {
			t.Fatalf("reload of %s: %d rebuilds of the decider logged, want %d", step.what, n, i+1)
		}
	}
}
