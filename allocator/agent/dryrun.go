package agent

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/loop"
	"github.com/rondo-sched/rondo/allocator/state"
)

// DryRun wraps a backend for `rondo agent -dry-run` (Nomad's `job plan`
// for the scheduler): Observe reads the cluster as usual, Enforce logs the
// plan — each job it would admit, resume, move, resize, retune, suspend or
// preempt, with its GPUs and nodes — and changes nothing. The durable
// hooks pass through to b where it has them (the saved history and credit
// are read, so the plan is the one the running agent would make), except
// Reconcile, which leaves a decision in flight to the agent that owns it.
// Pair it with ReadOnly on the store and no leader lock, so that a dry run
// never disturbs a running agent.
func DryRun(b loop.Backend, log hclog.Logger) loop.Backend {
	return &dryRun{b: b, log: log}
}

type dryRun struct {
	b   loop.Backend
	log hclog.Logger

	mu    sync.Mutex
	names map[string]string // node id -> name, from the last snapshot
	round int
}

func (d *dryRun) Observe() (*engine.Snapshot, error) {
	s, err := d.b.Observe()
	if s != nil {
		names := map[string]string{}
		for _, n := range s.Nodes {
			names[n.ID] = n.Name
		}
		d.mu.Lock()
		d.names = names
		d.mu.Unlock()
	}
	return s, err
}

// Enforce logs what enforcing p would change, one line per job, and a
// summary line; kept jobs are counted, not listed.
func (d *dryRun) Enforce(p *engine.Plan) error {
	d.mu.Lock()
	names := d.names
	d.round++
	round := d.round
	d.mu.Unlock()
	counts := map[engine.Intent]int{}
	for _, in := range p.Intents {
		counts[in.Intent]++
		if in.Intent == engine.IntentKeep && !in.Checkpoint {
			continue
		}
		args := []any{"job", in.Job}
		if in.VC != "" {
			args = append(args, "vc", in.VC)
		}
		if len(in.GPUs) > 0 {
			args = append(args, "type", in.Type, "gpus", strings.Join(in.GPUs, ","), "nodes", nodeNames(in.Servers, names))
		}
		if len(in.From) > 0 {
			args = append(args, "from", strings.Join(in.From, ","))
		}
		if in.Checkpoint {
			args = append(args, "checkpoint_now", true)
		}
		args = append(args, "reason", in.Reason.String())
		d.log.Info("dry run: would "+string(in.Intent), args...)
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, string(k))
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[engine.Intent(k)]))
	}
	d.log.Info("dry run: plan not enforced", "dry_round", round, "intents", strings.Join(parts, " "))
	return nil
}

// nodeNames names the nodes of ids (their id where the snapshot had none).
func nodeNames(ids []string, names map[string]string) string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		n := names[id]
		if n == "" {
			n = id
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return strings.Join(out, ",")
}

// Restore, Epoch and Intents are the backend's own (Durable).
func (d *dryRun) Restore(epoch time.Time, arrival map[string]float64, received map[string]map[string]float64) {
	if x, ok := d.b.(Durable); ok {
		x.Restore(epoch, arrival, received)
	}
}

func (d *dryRun) Epoch() time.Time {
	if x, ok := d.b.(Durable); ok {
		return x.Epoch()
	}
	return time.Time{}
}

func (d *dryRun) Intents(p *engine.Plan) []state.Intent {
	if x, ok := d.b.(Durable); ok {
		return x.Intents(p)
	}
	return nil
}

// Reconcile settles nothing: the decision in flight is the running
// agent's (or the next real start's) to settle.
func (d *dryRun) Reconcile(pending []state.Intent) (applied, rolledBack []string, err error) {
	d.log.Info("dry run: a decision is in flight in the saved state; left for the agent to reconcile", "pending", len(pending))
	return nil, nil, nil
}

// CreditMarks and RestoreCredit are the backend's own (Creditor).
func (d *dryRun) CreditMarks() map[string]state.Credit {
	if x, ok := d.b.(Creditor); ok {
		return x.CreditMarks()
	}
	return nil
}

func (d *dryRun) RestoreCredit(c map[string]state.Credit) {
	if x, ok := d.b.(Creditor); ok {
		x.RestoreCredit(c)
	}
}

// ReadOnly is a store that loads the saved state (a missing one is empty)
// and never saves: a dry run reads what the running agent keeps and
// writes nothing.
func ReadOnly(s Store) Store { return readOnly{s} }

type readOnly struct{ s Store }

func (r readOnly) Load(ctx context.Context) (*state.State, error) { return r.s.Load(ctx) }
func (readOnly) Save(context.Context, *state.State) error         { return nil }
