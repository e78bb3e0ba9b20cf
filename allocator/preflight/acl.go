package preflight

import (
	"strings"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
)

// PolicyFile is the allocator's minimal ACL policy, named in the fixes.
const PolicyFile = "jobs/acl/rondo-allocator.policy.hcl"

// Token is what Nomad said of the token (ACLTokens().Self()).
type Token struct {
	// Disabled: the cluster runs without ACLs; nothing else is set.
	Disabled bool
	// Err: Nomad refused the token or could not answer.
	Err            error
	Name, Type     string
	Policies       []string
	ExpirationTime string
}

// TokenOf reads Nomad's answer to token/self.
func TokenOf(tok *api.ACLToken, err error) Token {
	if rnomad.ACLsDisabled(tok, err) {
		return Token{Disabled: true}
	}
	if err != nil {
		return Token{Err: err}
	}
	t := Token{Name: tok.Name, Type: tok.Type, Policies: tok.Policies}
	if tok.ExpirationTime != nil {
		t.ExpirationTime = tok.ExpirationTime.String()
	}
	return t
}

// Probe is one capability the agent needs, tried with a harmless request.
type Probe struct {
	// Capability as the policy names it ("submit-job", "variables write",
	// "node read") and Scope where (`namespace "default"`).
	Capability, Scope string
	// Why the agent needs it.
	Why string
	// Err is the request's error: nil (or an answer past the ACL check:
	// not found, a check-and-set conflict) means allowed.
	Err error
}

// CheckToken reports the token: ACLs off (a warning: any client may then
// submit to the GPU pool and rewrite the allocator's state), a refused
// token (an error), a management token (a warning: more than the agent
// needs), else the token's name and policies.
func CheckToken(t Token) Finding {
	switch {
	case t.Disabled:
		return warn("acl", "ACLs are disabled on this cluster: the token is not checked and any client may submit jobs to the GPU pool or rewrite the allocator's state; enable ACLs and give the agent a token of %s", PolicyFile)
	case t.Err != nil && rnomad.Forbidden(t.Err):
		return fail("acl", "Nomad refused the token (%v): set -token or NOMAD_TOKEN to the allocator's token", t.Err)
	case t.Err != nil:
		return fail("acl", "reading the token (token/self): %v", t.Err)
	case t.Type == "management":
		return warn("acl", "token %q is a management token: the agent needs only %s", t.Name, PolicyFile)
	}
	exp := ""
	if t.ExpirationTime != "" {
		exp = ", expires " + t.ExpirationTime
	}
	return ok("acl", "token %q (%s, policies %s%s)", t.Name, t.Type, strings.Join(t.Policies, ", "), exp)
}

// CheckProbes reports each capability: allowed, denied (an error naming
// the capability, where, what for and the policy that grants it), or not
// checked (a warning).
func CheckProbes(probes []Probe) []Finding {
	var out []Finding
	for _, p := range probes {
		switch {
		case p.Err == nil:
			out = append(out, ok("acl", "token may %s in %s", p.Capability, p.Scope))
		case rnomad.Forbidden(p.Err):
			out = append(out, fail("acl", "token lacks %s in %s (%s): add it to the token's policy (%s)", p.Capability, p.Scope, p.Why, PolicyFile))
		default:
			out = append(out, warn("acl", "could not check %s in %s: %v", p.Capability, p.Scope, p.Err))
		}
	}
	return out
}

// CheckPreemption reports whether preemption is on for the schedulers of
// the job types Rondo schedules (rnomad.PreemptionOff, what the agent's
// Setup turns on when its token may).
func CheckPreemption(conf *api.SchedulerConfiguration, err error) Finding {
	switch {
	case err != nil && rnomad.Forbidden(err):
		return warn("preemption", "cannot read the scheduler configuration (the token lacks operator read): check it with `nomad operator scheduler get-config`")
	case err != nil:
		return warn("preemption", "reading the scheduler configuration: %v", err)
	}
	if off := rnomad.PreemptionOff(conf); len(off) > 0 {
		return fail("preemption", "preemption is off for %s jobs: guaranteed jobs cannot evict opportunistic ones; run `%s`",
			strings.Join(off, " and "), rnomad.EnablePreemption)
	}
	return ok("preemption", "preemption is on for batch and service jobs")
}
