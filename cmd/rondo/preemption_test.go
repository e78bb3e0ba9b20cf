package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/round"
)

// engineRespect reads an engine's preemption settings (engine.Config's,
// which the engine does not export once built).
func engineRespect(t *testing.T, m any) round.Preemption {
	t.Helper()
	e, ok := m.(*engine.Engine)
	if !ok {
		t.Fatalf("mechanism %T, want *engine.Engine", m)
	}
	cfg := reflect.ValueOf(e).Elem().FieldByName("cfg")
	return round.Preemption{MinRuntimeS: cfg.FieldByName("MinRuntimeS").Float(),
		CheckpointAware: cfg.FieldByName("CheckpointAware").Bool(), ReserveAfterS: cfg.FieldByName("ReserveAfterS").Float()}
}

// TestDeciderPreemption: min_runtime, checkpoint_aware and reserve_after
// reach every engine the agent builds (and `rondo simulate --vc-config`,
// the same vcDecider): the single engine (its VC's, else the top
// level's), quota-only VCs' and cells VCs' engines (each VC's own over the
// top level's) and the opportunistic engine (the top level's); a reload
// that changes one changes the decider's key.
func TestDeciderPreemption(t *testing.T) {
	dir := t.TempDir()
	load := func(src string) *agentSettings {
		t.Helper()
		path := filepath.Join(dir, "agent.hcl")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newAgentCmd()
		c.config = path
		s, err := c.load()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	top := "min_runtime = \"30m\"\ncheckpoint_aware = true\nreserve_after = \"1h\"\n"
	def := round.Preemption{MinRuntimeS: 1800, CheckpointAware: true, ReserveAfterS: 3600}

	// The single engine: the top level's without VCs, else its VC's.
	for src, want := range map[string]round.Preemption{
		top: def,
		top + "vc \"r\" {\n  min_runtime = \"5m\"\n}\n": {MinRuntimeS: 300, CheckpointAware: true, ReserveAfterS: 3600},
		"vc \"r\" {}\n": {},
	} {
		d, err := newDecider(load(src), hclog.NewNullLogger(), false)
		if err != nil {
			t.Fatal(err)
		}
		if got := engineRespect(t, d); got != want {
			t.Errorf("%q: single engine %+v, want %+v", src, got, want)
		}
	}

	// Quota-only VCs.
	s := load(top + `vc "a" {
  gpus        = { v100 = 2 }
  min_runtime = "0s"
}
vc "b" {
  gpus             = { v100 = 2 }
  checkpoint_aware = false
  reserve_after    = "90s"
}
`)
	d, err := newDecider(s, hclog.NewNullLogger(), false)
	if err != nil {
		t.Fatal(err)
	}
	q := d.(*round.Quota)
	for i, want := range []round.Preemption{{MinRuntimeS: 0, CheckpointAware: true, ReserveAfterS: 3600},
		{MinRuntimeS: 1800, CheckpointAware: false, ReserveAfterS: 90}} {
		if got := engineRespect(t, q.VCs[i].Engine); got != want {
			t.Errorf("quota vc %s: %+v, want %+v", q.VCs[i].Name, got, want)
		}
	}
	if got := engineRespect(t, q.Opp); got != def {
		t.Errorf("quota opportunistic: %+v, want %+v", got, def)
	}
	key := deciderKey(s)

	// VCs over cells.
	cells := `cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 4
  node  = true
}
cell "v100-node" "n0" {
  nomad_node = "gpu-node-0"
}
vc "a" {
  quota         = { "v100" = 2 }
  reserve_after = "2m"
}
vc "b" {
  quota = { "v100" = 2 }
}
`
	d, err = newDecider(load(top+cells), hclog.NewNullLogger(), false)
	if err != nil {
		t.Fatal(err)
	}
	cl := d.(*round.Cells)
	for i, want := range []round.Preemption{{MinRuntimeS: 1800, CheckpointAware: true, ReserveAfterS: 120}, def} {
		if got := engineRespect(t, cl.VCs[i].Engine); got != want {
			t.Errorf("cells vc %s: %+v, want %+v", cl.VCs[i].Name, got, want)
		}
	}
	if got := engineRespect(t, cl.Opp); got != def {
		t.Errorf("cells opportunistic: %+v, want %+v", got, def)
	}

	// A reload that changes a setting rebuilds the decider.
	s2 := load(top + `vc "a" {
  gpus        = { v100 = 2 }
  min_runtime = "1s"
}
vc "b" {
  gpus             = { v100 = 2 }
  checkpoint_aware = false
  reserve_after    = "90s"
}
`)
	if deciderKey(s2) == key {
		t.Errorf("min_runtime changed, the decider's key did not")
	}
}
