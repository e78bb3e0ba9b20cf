package dl2

import (
	"testing"
)

type greedyNorm struct{ byRemaining bool }

func (greedyNorm) Name() string { return "greedy" }
func (gz greedyNorm) Decide(s *Slot) {
	g, c := float64(max(s.Total.GPUs, 1)), float64(max(s.Total.CPUs, 1))
	for {
		bj, bk, bg := -1, AddWorker, 0.0
		for j := range s.Jobs {
			if !s.Running(j) {
				continue
			}
			a, d := s.Alloc[j], s.Jobs[j].Demand
			cur := s.SpeedOf(j, a.PS, a.Workers)
			norm := s.Jobs[j].Epochs
			if gz.byRemaining {
				norm = s.Jobs[j].Remaining()
			}
			for _, k := range [...]Kind{AddWorker, AddPS, AddBoth} {
				if !s.Feasible(j, k) {
					continue
				}
				var next, frac float64
				switch k {
				case AddWorker:
					next = s.SpeedOf(j, a.PS, a.Workers+1)
					frac = max(float64(d.WorkerGPUs)/g, float64(d.WorkerCPUs)/c)
				case AddPS:
					next = s.SpeedOf(j, a.PS+1, a.Workers)
					frac = float64(d.PSCPUs) / c
				case AddBoth:
					next = s.SpeedOf(j, a.PS+1, a.Workers+1)
					frac = max(float64(d.WorkerGPUs)/g, float64(d.WorkerCPUs+d.PSCPUs)/c)
				}
				if gain := (next - cur) / norm / frac; gain > bg {
					bj, bk, bg = j, k, gain
				}
			}
		}
		if bj < 0 {
			break
		}
		s.Apply(bj, bk)
	}
	s.Stop()
}

func TestZZProbe(t *testing.T) {
	env := Env{Servers: Servers(13, 2, 16), SlotS: 1200, Models: Table1(), Noise: 0.1, Seed: 1}
	for _, rate := range []float64{0.5, 1, 1.5, 2} {
		jobs := int(rate*100)
		var trs [][]TraceJob
		for i := 0; i < 3; i++ {
			trs = append(trs, Generate(GenOptions{Jobs: 120, JobsPerSlot: rate, Seed: int64(9000 + i)}, Table1()))
		}
		for name, sz := range map[string]Sizer{"drf": DRF{}, "optimus": Optimus{}, "tetris": Tetris{}, "gnorm": greedyNorm{}, "grem": greedyNorm{true}} {
			v, _ := Evaluate(&env, trs, sz)
			t.Logf("rate %d %-8s %.2f h", jobs, name, v/3600)
		}
	}
}

func TestZZStats(t *testing.T) {
	env := Env{Servers: Servers(13, 2, 16), SlotS: 1200, Models: Table1(), Noise: 0.1, Seed: 1}
	tr := Generate(GenOptions{Jobs: 120, Seed: 9000}, Table1())
	for _, f := range []string{"/tmp/dl2/m1.json", "/tmp/dl2/m2.json"} {
		m, err := LoadModel(f)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPolicy(m, t.Logf)
		var kinds [4]int
		var gpusFree, cpusFree, slots, running int
		p.Record = func(x []float64, mask []bool, a int) {
			if a == m.Layout().StopAction() {
				kinds[3]++
			} else {
				kinds[a%3]++
			}
		}
		r, _ := env.Run(tr, p, func(rec *SlotRecord) {
			slots++
			for _, f := range rec.Slot.Free {
				gpusFree += f.GPUs
				cpusFree += f.CPUs
			}
			for j := range rec.Slot.Jobs {
				if rec.Slot.Running(j) {
					running++
				}
			}
		})
		t.Logf("%s: avg %.2f h kinds w/ps/both/stop %v; per slot free GPUs %.1f CPUs %.1f running %.1f", f, r.AvgJCTS/3600, kinds, float64(gpusFree)/float64(slots), float64(cpusFree)/float64(slots), float64(running)/float64(slots))
	}
	for name, sz := range map[string]Sizer{"drf": DRF{}, "optimus": Optimus{}} {
		var gpusFree, cpusFree, slots, running int
		r, _ := env.Run(tr, sz, func(rec *SlotRecord) {
			slots++
			for _, f := range rec.Slot.Free {
				gpusFree += f.GPUs
				cpusFree += f.CPUs
			}
			for j := range rec.Slot.Jobs {
				if rec.Slot.Running(j) {
					running++
				}
			}
		})
		t.Logf("%s: avg %.2f h; per slot free GPUs %.1f CPUs %.1f running %.1f", name, r.AvgJCTS/3600, float64(gpusFree)/float64(slots), float64(cpusFree)/float64(slots), float64(running)/float64(slots))
	}
}

func TestZZReward(t *testing.T) {
	env := Env{Servers: Servers(13, 2, 16), SlotS: 1200, Models: Table1(), Noise: 0.1, Seed: 1}
	var trs [][]TraceJob
	for i := 0; i < 3; i++ {
		trs = append(trs, Generate(GenOptions{Jobs: 120, Seed: int64(9000 + i)}, Table1()))
	}
	m0, _ := LoadModel("/tmp/dl2/m0.json")
	m3, _ := LoadModel("/tmp/dl2/m3.json")
	for name, sz := range map[string]Sizer{"drf": DRF{}, "optimus": Optimus{}, "m0": NewPolicy(m0, nil), "m3": NewPolicy(m3, nil)} {
		var disc, jct float64
		for _, tr := range trs {
			g := 1.0
			r, _ := env.Run(tr, sz, func(rec *SlotRecord) { disc += g * rec.Reward; g *= 0.9 })
			jct += r.AvgJCTS
		}
		t.Logf("%-8s jct %.2f h discounted reward %.3f", name, jct/3/3600, disc/3)
	}
}
