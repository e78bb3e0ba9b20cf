package nomad

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/allocator/throughputs"
)

// Space sharing (Gavel's colocated pairs) on the device plugin's MPS
// shares: the plugin advertises each GPU of a profile as instances
// <uuid>/<profile>/<k> of nvidia/gpu-share/<model>-<profile> beside the
// exclusive nvidia/gpu instance <uuid>. The engine only ever sees GPUs by
// uuid; a pair assignment on a GPU is carried out as its two jobs pinned
// to share 0 and share 1 of that GPU. Nomad sees a GPU and its shares as
// unrelated devices: keeping a GPU from being held exclusively and shared
// at once is the allocator's job (every assignment holds its GPUs alone,
// and a job changing between exclusive and shared use stops first).

// shareType is the device type of the plugin's MPS shares.
const shareType = "gpu-share"

// shareRequest is the device name a shared job requests (any share group:
// the ids pin it).
const shareRequest = "nvidia/gpu-share"

// Env the trainer reads to learn its partner (pair throughput).
const (
	EnvPartner      = "RONDO_PARTNER"
	EnvPartnerModel = "RONDO_PARTNER_MODEL"
)

// gpuOf is the GPU a device instance id names: a share id's uuid part, an
// exclusive GPU's id itself.
func gpuOf(id string) string {
	if i := strings.IndexByte(id, '/'); i >= 0 {
		return id[:i]
	}
	return id
}

// observeShares records a node's share devices: the healthy share ids of
// each GPU, in instance order (share k of a GPU is member k of a pair).
func (b *Backend) observeShares(d *api.NodeDeviceResource) {
	for _, in := range d.Instances {
		if g := gpuOf(in.ID); g != in.ID && in.Healthy {
			b.shares[g] = append(b.shares[g], in.ID)
		}
	}
}

// shareableTypes are the GPU types every healthy GPU of which has two
// healthy shares: the types a pair may be planned on. A type with some
// GPUs unshared gets no pairs (the engine places a unit on any GPU of its
// type).
func (b *Backend) shareableTypes(gpus []engine.GPU) map[string]bool {
	ok := map[string]bool{}
	for _, g := range gpus {
		if g.Failed {
			continue
		}
		two := len(b.shares[g.ID]) >= 2
		if v, seen := ok[g.Type]; !seen || v {
			ok[g.Type] = two
		}
	}
	for t, v := range ok {
		if !v {
			delete(ok, t)
		}
	}
	return ok
}

// pairs lists the colocations the policy may plan (Gavel's): every two
// active jobs of equal scale factor in one share group (Config.ShareGroup:
// one VC, or the opportunistic jobs), neither elastic, in snapshot order
// (earlier job first, as in the simulator). A pair carries the table's
// measurements on the shareable types, [0, 0] (cannot share there)
// included, as the simulator's; a shareable type the table did not
// measure the two models on is Unknown, for the estimating stage
// (round.PairEstimates). A pair with neither is not offered. Throughput
// maps are shared per model pair (the engine does per-map work once).
func (b *Backend) pairs(snap *engine.Snapshot, shareable map[string]bool) []engine.Pair {
	if b.cfg.ShareGroup == nil || len(shareable) == 0 {
		return nil
	}
	type member struct {
		id, group, model string
		sf               int
	}
	var ms []member
	for _, j := range snap.Jobs {
		st := b.jobs[j.ID]
		if st == nil || st.elastic != nil {
			continue
		}
		g, ok := b.cfg.ShareGroup(j.VC, j.Class == engine.Opportunistic)
		if !ok {
			continue
		}
		ms = append(ms, member{j.ID, g, st.policy.Model, j.ScaleFactor})
	}
	types := make([]string, 0, len(shareable))
	for t := range shareable {
		types = append(types, t)
	}
	sort.Strings(types)
	type known struct {
		tp      map[string][2]float64
		unknown []string
	}
	memo := map[[2]throughputs.Key]known{}
	var out []engine.Pair
	for i, a := range ms {
		for _, c := range ms[i+1:] {
			if a.sf != c.sf || a.group != c.group {
				continue
			}
			k := [2]throughputs.Key{{Model: a.model, ScaleFactor: a.sf}, {Model: c.model, ScaleFactor: c.sf}}
			kn, seen := memo[k]
			if !seen {
				useful := false
				for _, t := range types {
					if v, ok := b.cfg.Throughputs.Pair(k[0], k[1], t); ok {
						if kn.tp == nil {
							kn.tp = map[string][2]float64{}
						}
						kn.tp[t] = v
						useful = useful || v[0] > 0 && v[1] > 0
					} else {
						kn.unknown = append(kn.unknown, t)
					}
				}
				if !useful && len(kn.unknown) == 0 {
					kn = known{}
				}
				memo[k] = kn
			}
			if kn.tp == nil && kn.unknown == nil {
				continue
			}
			key := engine.UnitKey([]string{a.id, c.id})
			out = append(out, engine.Pair{Jobs: [2]string{a.id, c.id}, Throughput: kn.tp, Unknown: kn.unknown, ReceivedS: b.led.Pair(key)})
		}
	}
	return out
}

// runningPairs turns the jobs that hold shares into the placement in
// force: two jobs holding shares of exactly the same GPUs are a pair
// (credited together, as the simulator credits a pair's micro-task); a
// job alone on shares is not reported as running, so the round places it
// afresh (it moves to exclusive use or gets a partner). order is the
// snapshot's job order.
func (b *Backend) runningPairs(order []string) []engine.Assignment {
	byGPUs := map[string][]string{}
	var keys []string
	for _, id := range order {
		st := b.jobs[id]
		if st == nil || !st.shared || len(st.gpus) == 0 {
			continue
		}
		k := strings.Join(st.gpus, ",")
		if byGPUs[k] == nil {
			keys = append(keys, k)
		}
		byGPUs[k] = append(byGPUs[k], id)
	}
	var out []engine.Assignment
	for _, k := range keys {
		ids := byGPUs[k]
		if len(ids) != 2 {
			// Its partner left during the interval (a lone sharer is
			// never kept): the time ran in the pair, whose account is
			// gone with the partner. The job's own account is not
			// credited, as the simulator credits a pair's micro-task to
			// the pair only.
			continue
		}
		a, c := b.jobs[ids[0]], b.jobs[ids[1]]
		typ := b.gpuTyp[a.gpus[0]]
		key := engine.UnitKey(ids)
		b.led.CreditPair(key, typ, max(a.sinceS, c.sinceS))
		b.pairKeys[key] = [2]string{ids[0], ids[1]}
		as := engine.Assignment{Jobs: ids, Type: typ, GPUs: a.gpus, Servers: a.servers, Action: engine.Keep}
		if a.res != nil && c.res != nil {
			// Both members' grants, or none: a zero grant would read as a change.
			as.Resources = []engine.Resources{*a.res, *c.res}
		}
		out = append(out, as)
	}
	return out
}

// forgetPairs drops the pair accounts of a job that left.
func (b *Backend) forgetPairs(id string) {
	for key, p := range b.pairKeys {
		if p[0] == id || p[1] == id {
			b.led.ForgetPair(key)
			delete(b.pairKeys, key)
		}
	}
}

// PinShared rewrites the GPU group of job to run as member k (0 or 1) of a
// pair: one allocation per GPU (the plugin gives one process the shares of
// one GPU only), each requesting one share, pinned to share k of the
// assignment's GPUs and to their nodes. shares maps a GPU to its share ids.
func PinShared(job *api.Job, group string, a engine.Assignment, k int, shares map[string][]string) error {
	tg := groupOf(job, group)
	if tg == nil {
		return fmt.Errorf("no group %q", group)
	}
	if len(a.GPUs) == 0 || len(a.Servers) == 0 {
		return fmt.Errorf("assignment without GPUs")
	}
	var ids []string
	for _, g := range a.GPUs {
		if len(shares[g]) <= k {
			return fmt.Errorf("GPU %s has %d shares, member %d needs one", g, len(shares[g]), k)
		}
		ids = append(ids, shares[g][k])
	}
	count := len(a.GPUs)
	tg.Count = &count
	pinNodes(tg, a.Servers)
	pinDevices(tg, shareRequest, 1, ids)
	return nil
}

// setPartner writes (partner != "") or clears the partner env of the GPU
// tasks: the trainer runs at the pair throughput next to its partner.
func setPartner(job *api.Job, group, partner, model string) {
	tg := groupOf(job, group)
	if tg == nil {
		return
	}
	for _, t := range tg.Tasks {
		if !gpuTask(t) {
			continue
		}
		if partner == "" {
			delete(t.Env, EnvPartner)
			delete(t.Env, EnvPartnerModel)
			continue
		}
		if t.Env == nil {
			t.Env = map[string]string{}
		}
		t.Env[EnvPartner], t.Env[EnvPartnerModel] = partner, model
	}
}

func groupOf(job *api.Job, group string) *api.TaskGroup {
	for _, g := range job.TaskGroups {
		if deref(g.Name) == group {
			return g
		}
	}
	return nil
}

func gpuTask(t *api.Task) bool {
	if t.Resources == nil {
		return false
	}
	return slices.ContainsFunc(t.Resources.Devices, func(d *api.RequestedDevice) bool { return isGPURequest(d.Name) })
}
