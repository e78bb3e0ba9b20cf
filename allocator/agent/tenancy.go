package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// rejectNamespaces moves the jobs whose namespace may not use their VC
// (the VC lists namespaces and not the job's) from s.Jobs to s.Rejected,
// as rejectUndeclared does for undeclared VCs: the job waits, rejected,
// with a reason naming the VC and the namespace, until its VC or the
// config changes. A rule of the agent, whatever the backend: it applies to
// every job that carries a namespace (engine.Job.Namespace); a backend
// without namespaces (the simulator's traces) carries none and is not
// restricted. Like Kueue, a job already holding GPUs (a reload took its
// namespace off the VC) is left to run until it stops; it is refused at
// its next start.
func (a *Agent) rejectNamespaces(s *engine.Snapshot) {
	a.mu.Lock()
	allowed := map[string][]string{}
	for _, v := range a.cfg.VCs {
		if len(v.Namespaces) > 0 {
			allowed[v.Name] = v.Namespaces
		}
	}
	a.mu.Unlock()
	if len(allowed) == 0 {
		return
	}
	holds := map[string]bool{}
	for _, r := range s.Running {
		for _, id := range r.Jobs {
			holds[id] = true
		}
	}
	refused := func(j *engine.Job) bool {
		ns, ok := allowed[j.VC]
		return ok && j.Namespace != "" && !slices.Contains(ns, j.Namespace) && !holds[j.ID]
	}
	if !slices.ContainsFunc(s.Jobs, func(j engine.Job) bool { return refused(&j) }) {
		return
	}
	jobs := make([]engine.Job, 0, len(s.Jobs)) // the backend may share its list
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if !refused(j) {
			jobs = append(jobs, *j)
			continue
		}
		s.Rejected = append(s.Rejected, engine.Rejection{Job: j.ID, Namespace: j.Namespace, VC: j.VC, User: j.User,
			Reason: NamespaceReason(j.Namespace, j.VC, allowed[j.VC])})
	}
	s.Jobs = jobs
}

// NamespaceReason is why a job of namespace ns may not use vc, which
// admits only the namespaces allowed.
func NamespaceReason(ns, vc string, allowed []string) string {
	return fmt.Sprintf("namespace %q may not use VC %q (its namespaces: %s)", ns, vc, strings.Join(allowed, ", "))
}
