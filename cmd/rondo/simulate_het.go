package main

import (
	"fmt"

	"github.com/rondo-sched/rondo/allocator/sim"
)

// profileScaling applies --profiles-on-gpu to the run's placement:
// "scaled" (the default: a V100 profile scaled to the job's speed on its
// GPU type, synergy.Profile.OnGPU) or "same" (the profile as measured on
// every type). It needs --placement (or a config that places).
func (c *simulateCmd) profileScaling(p *sim.Placement) error {
	switch c.place.onGPU {
	case "", "scaled":
	case "same":
		if p != nil {
			p.SameOnEveryGPU = true
		}
	default:
		return fmt.Errorf("--profiles-on-gpu %q: want scaled or same", c.place.onGPU)
	}
	if p == nil && c.place.onGPU != "" {
		return fmt.Errorf("--profiles-on-gpu needs --placement (or a config that sets placement)")
	}
	return nil
}
