// Package ledger is Rondo's one account of received time: how long each
// job, alone, and each colocated pair, together, has actually run on each
// GPU type. It is the denominator of Gavel's priorities (X over the
// fraction of time received since the last recompute), so both backends
// keep it the same way: they credit what enforcement ran (the simulator
// each micro-task's run, the Nomad backend the time between two looks at
// a job that held GPUs, and a restarted agent's downtime), and the
// snapshot reads the cumulative values, so observing twice credits
// nothing twice.
package ledger

// Ledger holds the accounts. It is not safe for concurrent use.
type Ledger struct {
	jobs  map[string]Account
	pairs map[string]Account
}

// Account is one job's or pair's received time, seconds per GPU type.
type Account map[string]float64

// Credit records seconds run on a GPU of type typ. A backend that holds a
// job's account credits it directly (one map access, not two: the
// simulator credits every micro-task).
func (a Account) Credit(typ string, seconds float64) { a[typ] += seconds }

// New makes an empty ledger.
func New() *Ledger {
	return &Ledger{jobs: map[string]Account{}, pairs: map[string]Account{}}
}

// Job is a job's account, seconds per GPU type, created empty on first
// use. The map is live (later credits show in it): a snapshot may hold it,
// but only the ledger writes it.
func (l *Ledger) Job(id string) Account {
	m := l.jobs[id]
	if m == nil {
		m = Account{}
		l.jobs[id] = m
	}
	return m
}

// Credit records that the job ran alone for seconds on a GPU of type typ.
func (l *Ledger) Credit(id, typ string, seconds float64) {
	l.Job(id).Credit(typ, seconds)
}

// Pair is a colocated pair's account (keyed by engine.UnitKey of its two
// jobs), nil until the pair first ran.
func (l *Ledger) Pair(key string) Account { return l.pairs[key] }

// CreditPair records that the pair ran together for seconds on a GPU of
// type typ; opened is true when this is the pair's first run (its account
// was just created).
func (l *Ledger) CreditPair(key, typ string, seconds float64) (opened bool) {
	m := l.pairs[key]
	if m == nil {
		m = Account{}
		l.pairs[key] = m
		opened = true
	}
	m[typ] += seconds
	return opened
}

// Restore sets a job's account (a restarted agent's saved state).
func (l *Ledger) Restore(id string, received map[string]float64) {
	m := l.Job(id)
	clear(m)
	for t, v := range received {
		m[t] = v
	}
}

// Forget drops a job's account (it finished or left).
func (l *Ledger) Forget(id string) { delete(l.jobs, id) }

// ForgetPair drops a pair's account (one of its jobs left).
func (l *Ledger) ForgetPair(key string) { delete(l.pairs, key) }
