package nomad

import (
	"github.com/rondo-sched/rondo/allocator/engine"
)

// fillWork puts on the snapshot's jobs what preemption that respects the
// work reads (#21, allocator/engine preempt.go): RunSinceS (observeJob:
// the oldest live allocation holding the job's GPUs), and from what the
// job reported (Config.Checkpoints):
//
//   - CheckpointAtS: its checkpoint_at; a running job's is at least its
//     RunSinceS (a run starts from its checkpoint: nothing before is
//     unsaved); 0 when it never said.
//   - CheckpointS: its checkpoint_s, else the mean of the jobs of its
//     model that reported one, else 0.
//   - RestoreS: its restore_s, else its measured start latency (the round
//     that last (re)started it to its first report), else the mean of the
//     jobs of its model that have either, else 0.
//
// The means are over the jobs observed now (Model ""  is a model too: the
// jobs that name none).
func (b *Backend) fillWork(jobs []engine.Job) {
	if b.cfg.Checkpoints == nil {
		return
	}
	type mean struct {
		sum float64
		n   int
	}
	ckByModel, restoreByModel := map[string]*mean{}, map[string]*mean{}
	add := func(m map[string]*mean, model string, v float64) {
		if m[model] == nil {
			m[model] = &mean{}
		}
		m[model].sum += v
		m[model].n++
	}
	hasCk := make([]bool, len(jobs))
	hasRestore := make([]bool, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		ck, ok := b.cfg.Checkpoints(j.ID)
		if !ok {
			continue
		}
		if !ck.At.IsZero() {
			j.CheckpointAtS = ck.At.Sub(b.epoch).Seconds()
			if j.RunSinceS > 0 && j.CheckpointAtS < j.RunSinceS {
				j.CheckpointAtS = j.RunSinceS
			}
		}
		if ck.WriteS != nil {
			j.CheckpointS, hasCk[i] = *ck.WriteS, true
			add(ckByModel, j.Model, j.CheckpointS)
		}
		switch {
		case ck.RestoreS != nil:
			j.RestoreS, hasRestore[i] = *ck.RestoreS, true
		case ck.StartLatencyS != nil:
			j.RestoreS, hasRestore[i] = *ck.StartLatencyS, true
		}
		if hasRestore[i] {
			add(restoreByModel, j.Model, j.RestoreS)
		}
	}
	for i := range jobs {
		j := &jobs[i]
		if m := ckByModel[j.Model]; !hasCk[i] && m != nil {
			j.CheckpointS = m.sum / float64(m.n)
		}
		if m := restoreByModel[j.Model]; !hasRestore[i] && m != nil {
			j.RestoreS = m.sum / float64(m.n)
		}
	}
}
