package dl2

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand"

	"github.com/rondo-sched/rondo/policies/dl2/nn"
)

// Sample is one decision: the state, the feasible actions and the action.
type Sample struct {
	X    []float32
	Mask []bool
	A    int
}

func toSample(x []float64, mask []bool, a int) Sample {
	s := Sample{X: make([]float32, len(x)), Mask: append([]bool(nil), mask...), A: a}
	for i, v := range x {
		s.X[i] = float32(v)
	}
	return s
}

func (s *Sample) input(x []float64) []float64 {
	for i, v := range s.X {
		x[i] = float64(v)
	}
	return x
}

// Demonstrations runs the teacher over the traces and records each of its
// decisions as the model's layout encodes them (DL2 §4.2: the existing
// scheduler's decisions in the cluster's traces).
func Demonstrations(env *Env, traces [][]TraceJob, teacher Sizer, m *Model) ([]Sample, error) {
	l := m.Layout()
	typeOf := func(j *Job) int { return m.TypeIndex(j.Model) }
	x := make([]float64, l.Inputs())
	mask := make([]bool, l.Actions())
	var out []Sample
	rec := recorder{teacher: teacher, window: l.Window, on: func(s *Slot, job int, k Kind, stop bool, lastOff int) {
		off, a := lastOff, l.StopAction()
		if !stop {
			off = job / l.Window * l.Window
			a = l.Action(job-off, k)
		}
		l.Encode(s, off, typeOf, x)
		if l.Mask(s, off, mask) == 0 || !mask[a] {
			return // the teacher's action lies outside this window's view
		}
		out = append(out, toSample(x, mask, a))
	}}
	for _, tr := range traces {
		if _, err := env.Run(tr, &rec, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recorder wraps a teacher so that its actions reach on.
type recorder struct {
	teacher Sizer
	window  int
	on      func(s *Slot, job int, k Kind, stop bool, lastOff int)
	lastOff int
}

func (r *recorder) Name() string { return r.teacher.Name() }

func (r *recorder) Decide(s *Slot) {
	r.lastOff = 0
	s.OnAction = func(s *Slot, job int, k Kind, stop bool) {
		r.on(s, job, k, stop, r.lastOff)
		if !stop {
			r.lastOff = job / r.window * r.window
		}
	}
	r.teacher.Decide(s)
	s.OnAction = nil
}

// SLOptions are the supervised bootstrap's settings.
type SLOptions struct {
	Passes int     // passes over the samples (DL2: hundreds)
	Batch  int     // minibatch
	LR     float64 // Adam's learning rate
	Seed   int64
	// Progress is called after each pass with the mean cross-entropy.
	Progress func(pass int, loss float64)
}

// Supervised trains m's policy network to imitate the samples by
// cross-entropy over the feasible actions.
func Supervised(m *Model, samples []Sample, o SLOptions) float64 {
	if len(samples) == 0 {
		return 0
	}
	rng := rand.New(rand.NewSource(o.Seed))
	net := m.Policy
	adam := newAdam(net, o.LR)
	g := newGrads(net)
	tape := net.newTape()
	x := make([]float64, m.Layout().Inputs())
	probs := make([]float64, m.Actions)
	d := make([]float64, m.Actions)
	idx := rng.Perm(len(samples))
	var loss float64
	for pass := 0; pass < o.Passes; pass++ {
		rng.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		loss = 0
		for start := 0; start < len(idx); start += o.Batch {
			end := min(start+o.Batch, len(idx))
			g.Zero()
			for _, i := range idx[start:end] {
				s := &samples[i]
				out := net.Forward(s.input(x), tape)
				nn.MaskedSoftmax(out, s.Mask, probs)
				loss -= math.Log(max(probs[s.A], 1e-12))
				for k := range d {
					d[k] = probs[k]
				}
				d[s.A]--
				net.Backward(tape, d, g)
			}
			g.Scale(1 / float64(end-start))
			g.ClipNorm(5)
			adam.step(net, g)
		}
		loss /= float64(len(idx))
		if o.Progress != nil {
			o.Progress(pass, loss)
		}
	}
	return loss
}

// RLOptions are the online actor-critic's settings (DL2 §4.3). The
// ablations of Table 2 turn one technique off each.
type RLOptions struct {
	Steps   int     // slot updates (DL2 counts one update per slot as a step)
	Batch   int     // samples per update
	LR      float64 // Adam, the policy network
	ValueLR float64 // Adam, the value network (0: LR)
	// Warmup steps train only the critic: the supervised bootstrap leaves
	// it untrained, and advantages from an untrained critic undo what the
	// bootstrap learned.
	Warmup      int
	Gamma       float64 // reward discount per slot
	Entropy     float64 // entropy weight
	Epsilon     float64 // job-aware exploration probability (0: off)
	Replay      int     // replay buffer size in samples (0: the latest slot's samples only)
	ActorCritic bool    // false: an exponential moving average of rewards as baseline
	// SlotReward gives every decision of a slot the slot's reward and the
	// next slot's state (DL2 §4.3 as written). Default (false): the
	// decisions of a slot are steps of the MDP, each leading to the next
	// decision's state without reward and the last to the next slot with
	// the slot's reward, so the critic's TD error credits each action
	// with what it changed (per-action advantages; see docs/dl2.md).
	SlotReward bool
	// Shaping adds potential-based shaping (Ng et al. 1999) to the
	// per-decision steps: the potential of a state is the slot's reward
	// its allocation is expected to earn (the sizers' speed model), so a
	// decision's reward is the expected gain it adds and the slot's last
	// transition gets what was realized beyond the expectation. The
	// shaped returns differ from the plain ones by the first state's
	// potential only, so the best policy is unchanged; the critic no
	// longer has to resolve one task's effect inside a slot's reward.
	Shaping bool
	// CenterAdvantages subtracts the minibatch's mean advantage before
	// dividing by the standard deviation (default: the scale only).
	CenterAdvantages bool
	// UpdateEvery slots one update is made (0, 1: every slot; Steps
	// counts updates): fewer updates per slot of new data, each sample of
	// the replay buffer used in fewer updates.
	UpdateEvery int
	Seed        int64
	// Episode returns the trace of training episode i (new jobs each time).
	Episode func(i int) []TraceJob
	// EvalEvery steps, Eval measures the current model (greedy) and its
	// result goes into the learning curve.
	EvalEvery int
	Eval      func(m *Model) float64
	Progress  func(step int, curve []CurvePoint)
	// KeepBest ends training with the networks of the evaluation that
	// scored best (early stopping on the validation traces; report on
	// other traces).
	KeepBest bool
}

// episodeSlots bounds an RL episode (a 120-job trace takes about 150
// slots under DRF).
const episodeSlots = 3000

// CurvePoint is one point of a learning curve.
type CurvePoint struct {
	Step   int     `json:"step"`
	AvgJCT float64 `json:"avg_jct_s"`
}

// transition is one decision with the discounted rewards up to the next
// slot that decides (r, slots without a decision included), the discount
// left for that slot's value (disc) and its first state (next; nil: the
// episode ended).
type transition struct {
	s    Sample
	r    float64
	disc float64
	next []float32
	open bool // waiting for the next deciding slot's first state
}

// Reinforce improves m online: episodes of the environment decided by the
// current policy (sampling, exploration), one update per slot.
func Reinforce(env *Env, m *Model, o RLOptions) ([]CurvePoint, error) {
	rng := rand.New(rand.NewSource(o.Seed))
	pol := NewPolicy(m, nil)
	if pol.bad != "" {
		return nil, fmt.Errorf("dl2: %s", pol.bad)
	}
	pol.Rand = rng
	if o.Epsilon > 0 {
		pol.Explore = &Exploration{Epsilon: o.Epsilon, Ratio: 3, Rand: rng}
	}
	if !o.ActorCritic && !o.Shaping {
		// Without a critic a decision's advantage is its own reward less
		// the moving average: unshaped, that is the slot's reward.
		o.SlotReward = true
	}
	u := newUpdater(m, o, rng)
	var curve []CurvePoint
	var best *Model
	bestJCT := math.Inf(1)
	defer func() {
		if o.KeepBest && best != nil {
			copyNet(m.Policy, best.Policy)
			copyNet(m.Value, best.Value)
		}
	}()
	eval := func(step int) {
		if o.Eval != nil && o.EvalEvery > 0 && step%o.EvalEvery == 0 {
			v := o.Eval(m)
			if o.KeepBest && v >= 0 && v < bestJCT {
				bestJCT, best = v, m.Clone()
			}
			curve = append(curve, CurvePoint{Step: step, AvgJCT: v})
			if o.Progress != nil {
				o.Progress(step, curve)
			}
		}
	}
	eval(0)
	step, slots := 0, 0
	for ep := 0; step < o.Steps; ep++ {
		var cur []Sample
		var phi []float64
		var prev []transition
		pol.Record = func(s *Slot, x []float64, mask []bool, a int) {
			cur = append(cur, toSample(x, mask, a))
			phi = append(phi, potential(s, env.slotS()))
		}
		// flush closes the transitions waiting for the next deciding
		// slot's first state (nil: the episode ended) and updates.
		flush := func(next []float32, nextPhi float64) {
			for i := range prev {
				if prev[i].open {
					prev[i].next, prev[i].open = next, false
					if o.Shaping {
						prev[i].r += prev[i].disc * nextPhi
					}
				}
			}
			u.add(prev)
			if slots++; step < o.Steps && slots%max(o.UpdateEvery, 1) == 0 {
				u.update()
				step++
				eval(step)
			}
			prev = nil
		}
		// An episode is cut at episodeSlots: a policy that stops admitting
		// jobs would otherwise run one until MaxSlots; the cut episode's
		// last decisions end it (no bootstrap), and training goes on.
		epEnv := *env
		if epEnv.MaxSlots <= 0 || epEnv.MaxSlots > episodeSlots {
			epEnv.MaxSlots = episodeSlots
		}
		_, err := epEnv.Run(o.Episode(ep), pol, func(r *SlotRecord) {
			if len(cur) == 0 {
				// Nothing to decide this slot: its reward still counts.
				for i := range prev {
					if prev[i].open {
						prev[i].r += prev[i].disc * r.Reward
						prev[i].disc *= o.Gamma
					}
				}
				return
			}
			// The previous slot's transitions lead to this slot's first state.
			if prev != nil {
				flush(cur[0].X, phi[0])
			}
			last := len(cur) - 1
			for i, s := range cur {
				switch {
				case o.SlotReward:
					prev = append(prev, transition{s: s, r: r.Reward, disc: o.Gamma, open: true})
				case i == last && o.Shaping:
					prev = append(prev, transition{s: s, r: r.Reward - phi[i], disc: o.Gamma, open: true})
				case i == last:
					prev = append(prev, transition{s: s, r: r.Reward, disc: o.Gamma, open: true})
				case o.Shaping:
					// The expected gain of this decision in this slot.
					prev = append(prev, transition{s: s, r: phi[i+1] - phi[i], disc: 1, next: cur[i+1].X})
				default:
					// Inside the slot: no reward yet, the next decision's state.
					prev = append(prev, transition{s: s, disc: 1, next: cur[i+1].X})
				}
			}
			cur, phi = nil, nil
		})
		if err != nil && !errors.Is(err, ErrMaxSlots) {
			return curve, err
		}
		if prev != nil {
			flush(nil, 0)
		}
	}
	return curve, nil
}

// updater holds the optimizers and the replay buffer.
type updater struct {
	m         *Model
	o         RLOptions
	rng       *rand.Rand
	pa, va    netAdam
	pg, vg    netGrads
	pt, vt    netTape
	buf       []transition
	next      int
	latest    []transition
	steps     int
	ema       float64
	emaInit   bool
	x, probs  []float64
	d         []float64
	batchIdx  []int
	advs, tgt []float64
}

func newUpdater(m *Model, o RLOptions, rng *rand.Rand) *updater {
	return &updater{m: m, o: o, rng: rng,
		pa: newAdam(m.Policy, o.LR), va: newAdam(m.Value, cmp.Or(o.ValueLR, o.LR)),
		pg: newGrads(m.Policy), vg: newGrads(m.Value),
		pt: m.Policy.newTape(), vt: m.Value.newTape(),
		x: make([]float64, m.Layout().Inputs()), probs: make([]float64, m.Actions), d: make([]float64, m.Actions)}
}

func (u *updater) add(ts []transition) {
	u.latest = ts
	if u.o.Replay <= 0 {
		return
	}
	for _, t := range ts {
		if len(u.buf) < u.o.Replay {
			u.buf = append(u.buf, t)
		} else {
			u.buf[u.next] = t
			u.next = (u.next + 1) % u.o.Replay
		}
	}
}

func (u *updater) value(x []float32) float64 {
	if x == nil {
		return 0
	}
	for i, v := range x {
		u.x[i] = float64(v)
	}
	return u.m.Value.Forward(u.x, u.vt)[0]
}

// update is one actor-critic step on a minibatch.
func (u *updater) update() {
	pool := u.latest
	if u.o.Replay > 0 {
		pool = u.buf
	}
	if len(pool) == 0 {
		return
	}
	n := min(u.o.Batch, len(pool))
	u.batchIdx = u.batchIdx[:0]
	if u.o.Replay > 0 {
		for range n {
			u.batchIdx = append(u.batchIdx, u.rng.Intn(len(pool)))
		}
	} else {
		u.batchIdx = append(u.batchIdx, u.rng.Perm(len(pool))[:n]...)
	}
	// Targets and advantages with the current critic.
	u.advs, u.tgt = u.advs[:0], u.tgt[:0]
	for _, i := range u.batchIdx {
		t := &pool[i]
		target := t.r + t.disc*u.value(t.next)
		var adv float64
		if u.o.ActorCritic {
			adv = target - u.value(t.s.X)
		} else {
			if !u.emaInit {
				u.ema, u.emaInit = t.r, true
			}
			adv = t.r - u.ema
			u.ema = 0.99*u.ema + 0.01*t.r
		}
		u.tgt = append(u.tgt, target)
		u.advs = append(u.advs, adv)
	}
	// Normalize the advantages (scale only, unless centered) for a
	// steady step size.
	if u.o.CenterAdvantages {
		var mean float64
		for _, a := range u.advs {
			mean += a
		}
		mean /= float64(len(u.advs))
		for b := range u.advs {
			u.advs[b] -= mean
		}
	}
	var sd float64
	for _, a := range u.advs {
		sd += a * a
	}
	sd = math.Sqrt(sd/float64(len(u.advs))) + 1e-8
	u.pg.Zero()
	u.vg.Zero()
	for b, i := range u.batchIdx {
		t := &pool[i]
		x := t.s.input(u.x)
		out := u.m.Policy.Forward(x, u.pt)
		nn.MaskedSoftmax(out, t.s.Mask, u.probs)
		var h float64
		for _, p := range u.probs {
			if p > 0 {
				h -= p * math.Log(p)
			}
		}
		adv := u.advs[b] / sd
		for k, p := range u.probs {
			d := adv * p // -adv*(1[k=a]-p)
			if p > 0 {
				d += u.o.Entropy * p * (math.Log(p) + h)
			}
			u.d[k] = d
		}
		u.d[t.s.A] -= adv
		u.m.Policy.Backward(u.pt, u.d, u.pg)
		if u.o.ActorCritic {
			v := u.m.Value.Forward(x, u.vt)[0]
			u.m.Value.Backward(u.vt, []float64{v - u.tgt[b]}, u.vg)
		}
	}
	f := 1 / float64(len(u.batchIdx))
	if u.steps++; u.steps > u.o.Warmup {
		u.pg.Scale(f)
		u.pg.ClipNorm(5)
		u.pa.step(u.m.Policy, u.pg)
	}
	if u.o.ActorCritic {
		u.vg.Scale(f)
		u.vg.ClipNorm(5)
		u.va.step(u.m.Value, u.vg)
	}
}

// potential is the slot reward the allocation of s is expected to earn:
// each running job's expected epochs in the slot over its total.
func potential(s *Slot, slotS float64) float64 {
	var p float64
	for j := range s.Jobs {
		a := s.Alloc[j]
		if v := s.SpeedOf(j, a.PS, a.Workers); v > 0 {
			p += min(v*slotS, s.Jobs[j].Remaining()) / s.Jobs[j].Epochs
		}
	}
	return p
}

func (e *Env) slotS() float64 {
	if e.SlotS > 0 {
		return e.SlotS
	}
	return DefaultSlotS
}
