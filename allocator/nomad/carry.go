package nomad

import (
	"fmt"
	"slices"

	"github.com/hashicorp/nomad/api"
	leaseclient "github.com/rondo-sched/rondo/allocator/lease/client"
	"github.com/rondo-sched/rondo/hcl"
)

// Admitted reports whether job (as Nomad holds it) is one Rondo admitted:
// opted in (rondo.vc), not stopped, its GPU group pinned to nodes by Rondo.
// Its count, pins, pool and priority are then Rondo's (suspended: count 0).
func Admitted(job *api.Job) bool {
	if job == nil || job.Meta[hcl.MetaVC] == "" || deref(job.Stop) {
		return false
	}
	tg, _ := gpuGroup(job)
	return tg != nil && hasNodePin(tg)
}

// rondoMeta are the job meta keys Rondo writes when it starts a job (not
// the user's policy keys).
var rondoMeta = []string{MetaGPUs, MetaCores, MetaMemGB, MetaOwnResources}

// rondoEnv are the task env keys Rondo adds to the tasks it starts.
var rondoEnv = []string{CheckpointEnv, LeaseAddrEnv, EnvPartner, EnvPartnerModel, EnvCores, EnvMemMB}

// CarryPlacement makes a user's new version of a job Rondo admitted (old,
// as Nomad holds it; see Admitted) keep what Rondo owns: the node pool and
// priority, the meta Rondo recorded, and in the GPU group (and a two-role
// job's parameter-server group) the count, the node pins, the GPU device
// requests with their id pins, the task env and workload identity Rondo
// added, and a CPU and memory grant in force. The update then changes only
// what the user changed, in place or by a restart on the same GPUs, and
// never starts a second set of allocations or a suspended job. It reports
// false (and leaves upd alone) when old is not admitted or upd opts out
// (no rondo.vc). Notes say what of the user's version Rondo's overrides: a
// GPU request of another size (resizing takes a stop and a new run).
func CarryPlacement(old, upd *api.Job) (bool, []string) {
	if !Admitted(old) || upd == nil || upd.Meta[hcl.MetaVC] == "" {
		return false, nil
	}
	notes := resizeNotes(old, upd)
	upd.NodePool, upd.Priority = old.NodePool, old.Priority
	for _, k := range rondoMeta {
		if v, ok := old.Meta[k]; ok {
			if upd.Meta == nil {
				upd.Meta = map[string]string{}
			}
			upd.Meta[k] = v
		}
	}
	if v := old.Meta[hcl.MetaElastic]; v != "" && upd.Meta[hcl.MetaElastic] == "" {
		// Recorded by LowerScalingMin from the scaling block.
		if tg, _ := gpuGroup(old); tg != nil && tg.Scaling != nil {
			upd.Meta[hcl.MetaElastic] = v
		}
	}
	tg, _ := gpuGroup(old)
	groups := []string{deref(tg.Name)}
	if ps := old.Meta[hcl.MetaPSGroup]; ps != "" {
		groups = append(groups, ps)
	}
	granted := old.Meta[MetaCores] != ""
	for _, name := range groups {
		og, ng := groupOf(old, name), groupOf(upd, name)
		if og == nil || ng == nil {
			continue
		}
		ng.Count = og.Count
		cs := slices.DeleteFunc(slices.Clone(ng.Constraints), func(c *api.Constraint) bool { return c.LTarget == nodeTarget })
		for _, c := range og.Constraints {
			if c.LTarget == nodeTarget {
				cs = append(cs, c)
			}
		}
		ng.Constraints = cs
		if og.Scaling != nil && ng.Scaling != nil && og.Scaling.Min != nil && *og.Scaling.Min == 0 {
			ng.Scaling.Min = og.Scaling.Min
		}
		for _, ot := range og.Tasks {
			nt := groupTask(ng, ot.Name)
			if nt == nil {
				continue
			}
			carryTask(ot, nt, granted)
		}
	}
	return true, notes
}

// resizeNotes compares the size the user's version asks with the admitted
// job's: an elastic job's GPUs per worker (Rondo never rewrites them), a
// fixed job's GPUs in all (rondo.gpus: Rondo reshapes its count and
// devices when it places it).
func resizeNotes(old, upd *api.Job) []string {
	otg, odev := gpuGroup(old)
	ntg, ndev := gpuGroup(upd)
	if ntg == nil || ndev == nil || deref(otg.Name) != deref(ntg.Name) {
		return nil
	}
	pol, err := hcl.PolicyFromMeta(upd.Meta)
	if err != nil {
		return nil
	}
	if pol, _ = ScalingBounds(deref(upd.ID), pol, ntg); pol.Elastic() {
		if o, n := max(deref(odev.Count), 1), max(deref(ndev.Count), 1); o != n {
			return []string{fmt.Sprintf("group %q: the file asks %d GPUs per worker, the admitted job runs %d: Rondo's is kept; to resize, stop the job and run it again",
				deref(ntg.Name), n, o)}
		}
		return nil
	}
	if want, was := max(deref(ntg.Count), 1)*int(max(deref(ndev.Count), 1)), scaleFactor(old); want != was {
		return []string{fmt.Sprintf("group %q: the file asks %d GPUs in all, the admitted job was sized at %d: Rondo's count and GPUs are kept; to resize, stop the job and run it again",
			deref(ntg.Name), want, was)}
	}
	return nil
}

func groupTask(tg *api.TaskGroup, name string) *api.Task {
	for _, t := range tg.Tasks {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func carryTask(ot, nt *api.Task, granted bool) {
	if ot.Resources != nil {
		var gpu []*api.RequestedDevice
		for _, d := range ot.Resources.Devices {
			if isGPURequest(d.Name) {
				gpu = append(gpu, d)
			}
		}
		if len(gpu) > 0 || granted {
			if nt.Resources == nil {
				nt.Resources = &api.Resources{}
			}
			if len(gpu) > 0 {
				devs := slices.DeleteFunc(slices.Clone(nt.Resources.Devices), func(d *api.RequestedDevice) bool { return isGPURequest(d.Name) })
				nt.Resources.Devices = append(gpu, devs...)
			}
			if granted && len(gpu) > 0 {
				r := ot.Resources
				nt.Resources.CPU, nt.Resources.Cores = r.CPU, r.Cores
				nt.Resources.MemoryMB, nt.Resources.MemoryMaxMB = r.MemoryMB, r.MemoryMaxMB
			}
		}
	}
	for _, k := range rondoEnv {
		if v, ok := ot.Env[k]; ok {
			if _, set := nt.Env[k]; !set {
				if nt.Env == nil {
					nt.Env = map[string]string{}
				}
				nt.Env[k] = v
			}
		}
	}
	for _, w := range ot.Identities {
		if w != nil && w.Name == leaseclient.IdentityName &&
			!slices.ContainsFunc(nt.Identities, func(x *api.WorkloadIdentity) bool { return x != nil && x.Name == w.Name }) {
			nt.Identities = append(nt.Identities, w)
		}
	}
}
