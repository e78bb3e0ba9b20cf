package fair

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// benchLoop is 200 GPUs (25 servers × 8), 1,000 jobs of 20 users (1-, 2-,
// 4-, 8- and a few 16-GPU gangs), two types' throughputs; every 10th
// round one job leaves and one arrives (an event).
func benchLoop(b *testing.B, rounds, every int) {
	rng := rand.New(rand.NewPCG(1, 2))
	gpus := cluster("v100", 25, 8)
	s, err := New(Config{QuantumRounds: 1})
	if err != nil {
		b.Fatal(err)
	}
	next := 0
	mk := func() engine.Job {
		next++
		size := []int{1, 1, 1, 2, 2, 4, 8, 16}[rng.IntN(8)]
		if size == 16 && rng.IntN(4) > 0 {
			size = 1
		}
		return job(fmt.Sprintf("j%05d", next), fmt.Sprintf("u%02d", rng.IntN(20)), size, nil)
	}
	var jobs []engine.Job
	for i := 0; i < 1000; i++ {
		jobs = append(jobs, mk())
	}
	var running []engine.Assignment
	idx := map[string]int{}
	for r := 0; r < rounds; r++ {
		if every > 0 && r%every == every-1 {
			k := rng.IntN(len(jobs))
			jobs = append(jobs[:k:k], jobs[k+1:]...)
			jobs = append(jobs, mk())
		}
		snap := &engine.Snapshot{TimeS: float64(r) * 360, GPUs: gpus, Jobs: jobs, Running: running}
		p, err := s.Round(snap)
		if err != nil {
			b.Fatal(err)
		}
		clear(idx)
		for i := range jobs {
			idx[jobs[i].ID] = i
		}
		for _, a := range p.Assignments {
			jobs[idx[a.Jobs[0]]].ReceivedS[a.Type] += 360
		}
		running = p.Assignments
	}
}

func BenchmarkRound(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchLoop(b, 100, 10)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100)/1e6, "ms/round")
}

// BenchmarkRoundNoEvents: only the first round is an event.
func BenchmarkRoundNoEvents(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchLoop(b, 100, 0)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100)/1e6, "ms/round")
}

// BenchmarkRoundEvents: an arrival and a departure every round.
func BenchmarkRoundEvents(b *testing.B) {
	for i := 0; i < b.N; i++ {
		benchLoop(b, 100, 1)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100)/1e6, "ms/round")
}
