package round

import (
	"slices"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// Preemption is one engine's preemption that respects the work (#21,
// allocator/engine preempt.go): the config's min_runtime,
// checkpoint_aware and reserve_after (hcl.Config.PreemptionOf). The zero
// value is Gavel's mechanism.
type Preemption struct {
	MinRuntimeS     float64
	CheckpointAware bool
	ReserveAfterS   float64
}

// Apply sets p on an engine's configuration.
func (p Preemption) Apply(c *engine.Config) {
	c.MinRuntimeS, c.CheckpointAware, c.ReserveAfterS = p.MinRuntimeS, p.CheckpointAware, p.ReserveAfterS
}

// engineOwn are the reasons only an engine knows: Annotate, remaking the
// merged plan's intents, cannot tell them.
func engineOwn(k engine.ReasonKind) bool {
	return k == engine.Pinned || k == engine.Noticed || k == engine.Reserved || k == engine.Backfills
}

// keepEngineIntents carries what the mechanisms said of their own jobs
// into the merged plan's intents, which engine.Annotate made anew from the
// merged plan (it reads Assignment.Checkpoint and Why, which the cell
// layer's rebuilt assignments no longer carry): a notice (JobIntent.Checkpoint: checkpoint now, stop next
// round) and the reasons only an engine knows (minimum runtime, notice,
// reservation, backfill), where the merged intent is the engine's (same
// job, same intent); an engine's intent for a job the merged plan gives
// none (a gang waiting on its reservation) is added. The plans'
// reservations are merged too, each named by its VC (vcs[i] for plans[i];
// "" for the opportunistic engine), their GPUs mapped by gpu (given the
// plan's index) when it is set and knows them.
func keepEngineIntents(out *engine.Plan, plans []*engine.Plan, vcs []string, gpu func(k int, addr string) (string, bool)) {
	at := make(map[string]int, len(out.Intents))
	for i, ji := range out.Intents {
		at[ji.Job] = i
	}
	for k, p := range plans {
		if p == nil {
			continue
		}
		for _, ji := range p.Intents {
			i, ok := at[ji.Job]
			switch {
			case !ok && ji.Reason.Kind == engine.Reserved:
				at[ji.Job] = len(out.Intents)
				out.Intents = append(out.Intents, ji)
			case !ok || out.Intents[i].Intent != ji.Intent:
			default:
				if ji.Checkpoint {
					out.Intents[i].Checkpoint = true
				}
				if engineOwn(ji.Reason.Kind) {
					out.Intents[i].Reason = ji.Reason
				}
			}
		}
		for _, r := range p.Reservations {
			r.GPUs = slices.Clone(r.GPUs)
			if r.VC == "" && k < len(vcs) {
				r.VC = vcs[k]
			}
			if gpu != nil {
				for g, addr := range r.GPUs {
					if id, ok := gpu(k, addr); ok {
						r.GPUs[g] = id
					}
				}
			}
			out.Reservations = append(out.Reservations, r)
		}
	}
}
