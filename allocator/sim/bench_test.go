package sim

import (
	"fmt"
	"testing"

	"github.com/rondo-sched/rondo/allocator/placement"
)

// BenchmarkSynergyContinuous: one 128-GPU point of Synergy's continuous
// experiment, 9 jobs/h, FIFO + TUNE, in Rondo's model and in compat mode
// (the reference simulator takes about 5 to 9 minutes for it here). Run
// with `go test -run '^$' -bench SynergyContinuous -benchtime 1x
// ./allocator/sim/`.
func BenchmarkSynergyContinuous(b *testing.B) {
	for _, compat := range []bool{false, true} {
		b.Run(fmt.Sprintf("rate=9/fifo/tune/compat=%v", compat), func(b *testing.B) {
			var r *Result
			for range b.N {
				var err error
				if r, err = synergyContinuous(128, 9, 4000, 5000, "fifo", placement.Tune, compat); err != nil {
					b.Fatal(err)
				}
				if !r.Finished {
					b.Fatal("unfinished")
				}
			}
			b.ReportMetric(r.AvgJCTS/3600, "avg_jct_h")
			b.ReportMetric(float64(r.Rounds), "rounds")
		})
	}
}
