package nomad

import (
	"path"
	"slices"

	"github.com/hashicorp/nomad/api"
)

// Namespaces. The backend watches its home namespace (Config.Namespace,
// the agent's nomad { namespace }) and Config.Namespaces (the VCs'
// namespaces), or every namespace its token can read when they hold "*".
// Job ids are unique only per namespace, so everything the backend hands
// out (snapshot, events, intents, the agent's durable state, the lease
// API) names a job by its key (JobKey): the bare id in the home namespace,
// so a single-namespace agent's keys, state and checkpoint directories are
// what they were, and "namespace/id" in any other. Every read and write of
// a job goes to its own namespace (qopts, wopts).

// AllNamespaces among Config.Namespaces: watch every namespace.
const AllNamespaces = "*"

// DefaultNamespace is Nomad's default namespace: the home namespace when
// none is configured (or "*" is).
const DefaultNamespace = "default"

// JobKey is the key of job id in namespace ns for an agent whose home
// namespace is home: id in home (or when ns is ""), else "ns/id". A job id
// may itself hold a slash (a periodic child "p/periodic-1"): Observe
// refuses a job whose key another namespace's job already has.
func JobKey(home, ns, id string) string {
	if ns == "" || ns == home {
		return id
	}
	return ns + "/" + id
}

// HomeNamespace is the home namespace for a configured namespace: it,
// else "default" ("" or "*").
func HomeNamespace(configured string) string {
	if configured == "" || configured == AllNamespaces {
		return DefaultNamespace
	}
	return configured
}

// jobRef is a job's namespace and id in Nomad.
type jobRef struct{ ns, id string }

func (b *Backend) home() string { return HomeNamespace(b.cfg.Namespace) }

// Key is the key of job id in namespace ns (JobKey with the backend's
// home namespace).
func (b *Backend) Key(ns, id string) string { return JobKey(b.home(), ns, id) }

// KeyOf is a job's key.
func (b *Backend) KeyOf(job *api.Job) string { return b.Key(deref(job.Namespace), deref(job.ID)) }

// ref finds a job's namespace and id by its key: from the last Observe,
// else (a key restored from the state, say) the home namespace.
func (b *Backend) ref(key string) jobRef {
	if st := b.jobs[key]; st != nil && st.job != nil {
		return jobRef{deref(st.job.Namespace), deref(st.job.ID)}
	}
	if r, ok := b.refs[key]; ok {
		return r
	}
	return jobRef{b.home(), key}
}

// rawID is the job's id in its namespace.
func (b *Backend) rawID(key string) string { return b.ref(key).id }

// qopts and wopts address a job's own namespace.
func (b *Backend) qopts(key string) *api.QueryOptions {
	return &api.QueryOptions{Namespace: b.ref(key).ns}
}

func (b *Backend) wopts(key string) *api.WriteOptions {
	return &api.WriteOptions{Namespace: b.ref(key).ns}
}

// multi reports whether the backend watches more than its home namespace.
func (b *Backend) multi() bool {
	return slices.ContainsFunc(b.cfg.Namespaces, func(ns string) bool { return ns != b.home() })
}

// watched reports whether Observe schedules jobs of namespace ns ("": a
// listing that names none, the home namespace's).
func (b *Backend) watched(ns string) bool {
	return ns == "" || ns == b.home() || slices.Contains(b.cfg.Namespaces, ns) || slices.Contains(b.cfg.Namespaces, AllNamespaces)
}

// listOpts lists jobs and allocations: the home namespace alone, or every
// namespace (Nomad's "*": those the token may read), filtered by watched.
func (b *Backend) listOpts() *api.QueryOptions {
	if b.multi() {
		return &api.QueryOptions{Namespace: AllNamespaces}
	}
	return &api.QueryOptions{Namespace: b.home()}
}

// checkpointRoot is where a job's checkpoint directory goes:
// root/<job id> in the home namespace, root/<namespace>/<job id> in
// another (two namespaces' jobs of one id never share a directory).
func (b *Backend) checkpointRoot(job *api.Job) string {
	root, ns := b.cfg.CheckpointRoot, deref(job.Namespace)
	if root == "" || ns == "" || ns == b.home() {
		return root
	}
	return path.Join(root, ns)
}

// SetNamespaces replaces Config.Namespaces (config reload); it applies
// from the next Observe.
func (b *Backend) SetNamespaces(ns []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg.Namespaces = slices.Clone(ns)
	if b.w != nil {
		// The subscription's namespace may change: sync afresh.
		b.w.stop()
		b.w.synced = false
	}
}
