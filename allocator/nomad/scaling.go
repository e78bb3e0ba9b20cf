package nomad

import (
	"fmt"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/hcl"
)

// ScalingBounds applies the GPU group's Nomad `scaling { min max }` block
// to a job's policy: an opted-in job with such a block and no rondo.elastic
// meta is elastic over [max(min, 1), max] workers. When both are given the
// meta wins; a pair that disagrees is reported in warnings (naming the job
// and group), as is a block the Nomad Autoscaler acts on (enabled, with a
// policy), since the autoscaler and Rondo would both change the group's
// count. A scaling min of 0 agrees with any meta min: Rondo lowers the
// block's min to 0 when it admits the job (LowerScalingMin), so that it can
// suspend it by scaling to 0.
func ScalingBounds(jobID string, pol hcl.JobPolicy, tg *api.TaskGroup) (hcl.JobPolicy, []string) {
	if tg == nil || tg.Scaling == nil {
		return pol, nil
	}
	s := tg.Scaling
	group := deref(tg.Name)
	var warns []string
	if autoscaled(s) {
		warns = append(warns, fmt.Sprintf("job %q group %q: the Nomad Autoscaler also targets this group (scaling { enabled = true, policy { ... } }); "+
			"it and Rondo would both change the group's count: set enabled = false or remove the policy", jobID, group))
	}
	if s.Max == nil || *s.Max < 1 {
		return pol, warns
	}
	lo, hi := 1, int(*s.Max)
	if s.Min != nil && *s.Min > 1 {
		lo = int(*s.Min)
	}
	if lo > hi {
		return pol, append(warns, fmt.Sprintf("job %q group %q: scaling min %d above max %d: not used as elastic bounds", jobID, group, lo, hi))
	}
	if pol.Elastic() {
		if hi != pol.ElasticMax || (s.Min != nil && *s.Min > 0 && lo != pol.ElasticMin) {
			warns = append(warns, fmt.Sprintf("job %q group %q: meta %s = \"%d:%d\" and scaling { min = %d max = %d } disagree; %s wins",
				jobID, group, hcl.MetaElastic, pol.ElasticMin, pol.ElasticMax, deref(s.Min), hi, hcl.MetaElastic))
		}
		return pol, warns
	}
	if hi > 65536 {
		return pol, append(warns, fmt.Sprintf("job %q group %q: scaling max %d above 65536: not used as elastic bounds", jobID, group, hi))
	}
	pol.ElasticMin, pol.ElasticMax = lo, hi
	return pol, warns
}

// autoscaled: a scaling block the Nomad Autoscaler acts on (enabled, which
// is Nomad's default, with a non-empty policy).
func autoscaled(s *api.ScalingPolicy) bool {
	return (s.Enabled == nil || *s.Enabled) && len(s.Policy) > 0
}

// LowerScalingMin prepares an admission of a job whose group has a scaling
// block with min above 0: Nomad refuses a count below the block's min, and
// Rondo suspends by scaling to 0. The bounds in force are kept in meta
// rondo.elastic (when the job is elastic and the meta does not say them),
// and the block's min becomes 0. It reports whether it changed the job.
func LowerScalingMin(job *api.Job, group string, pol hcl.JobPolicy) bool {
	tg := groupOf(job, group)
	if tg == nil || tg.Scaling == nil || tg.Scaling.Min == nil || *tg.Scaling.Min <= 0 {
		return false
	}
	if pol.Elastic() && job.Meta[hcl.MetaElastic] == "" {
		if job.Meta == nil {
			job.Meta = map[string]string{}
		}
		job.Meta[hcl.MetaElastic] = fmt.Sprintf("%d:%d", pol.ElasticMin, pol.ElasticMax)
	}
	zero := int64(0)
	tg.Scaling.Min = &zero
	return true
}
