package fair

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
	"github.com/rondo-sched/rondo/policies/fairshare"
)

// Status is the scheduler's state for /v1/status.
type Status struct {
	Users []UserStatus `json:"users"`
	// Trades in force (fairshare.TradeShares at the last recompute).
	Trades  []fairshare.Trade `json:"trades,omitempty"`
	Refused []Refusal         `json:"refused,omitempty"`
	// Migrations done by load balancing since the start.
	Migrations int `json:"migrations"`
	Rounds     int `json:"rounds"`
}

// UserStatus is one user's tickets, shares and received GPU time.
type UserStatus struct {
	User    string `json:"user"`
	Tickets int    `json:"tickets"`
	Jobs    int    `json:"jobs"`
	// FairShare is GPUs per type before trading, Share after.
	FairShare map[string]float64 `json:"fair_share"`
	Share     map[string]float64 `json:"share"`
	// ReceivedGPUS is GPU-seconds credited per type since the start.
	ReceivedGPUS map[string]float64 `json:"received_gpu_s"`
}

// Refusal is a job that is never scheduled, with the reason.
type Refusal struct {
	Job    string `json:"job"`
	Reason string `json:"reason"`
}

// userShares is Status as the plan carries it to /v1/status.
func (s *Scheduler) userShares() engine.UserShares {
	st := s.Status()
	out := engine.UserShares{Trades: st.Trades, Migrations: st.Migrations}
	for _, u := range st.Users {
		out.Users = append(out.Users, engine.UserShare{User: u.User, Tickets: u.Tickets, FairShare: u.FairShare,
			Share: u.Share, ReceivedGPUS: u.ReceivedGPUS})
	}
	if len(st.Refused) > 0 {
		out.Refused = make(map[string]string, len(st.Refused))
		for _, r := range st.Refused {
			out.Refused[r.Job] = r.Reason
		}
	}
	return out
}

// Status returns the scheduler's state (copies).
func (s *Scheduler) Status() Status {
	st := s.st
	out := Status{Migrations: st.Migrations, Rounds: st.Rounds, Trades: append([]fairshare.Trade(nil), st.Trades...)}
	names := map[string]int{}
	for _, js := range st.Jobs {
		names[js.User]++
	}
	for u := range st.Fair {
		names[u] += 0
	}
	for u := range st.Received {
		names[u] += 0
	}
	for u, n := range names {
		out.Users = append(out.Users, UserStatus{User: u, Tickets: s.tickets(u), Jobs: n,
			FairShare: cloneRecv(st.Fair[u]), Share: cloneRecv(st.Shares[u]), ReceivedGPUS: cloneRecv(st.Received[u])})
	}
	sort.Slice(out.Users, func(a, b int) bool { return out.Users[a].User < out.Users[b].User })
	for id, r := range st.Refused {
		out.Refused = append(out.Refused, Refusal{Job: id, Reason: r})
	}
	sort.Slice(out.Refused, func(a, b int) bool { return out.Refused[a].Job < out.Refused[b].Job })
	return out
}

// MarshalHistory saves what a restarted scheduler needs to decide as
// before: passes, bindings, job tickets, the quantum phase (rounds), the
// shares and trades, events' baselines, received time, refusals.
func (s *Scheduler) MarshalHistory() ([]byte, error) { return json.Marshal(s.st) }

// UnmarshalHistory restores a history; bad input leaves the scheduler
// unchanged.
func (s *Scheduler) UnmarshalHistory(b []byte) error {
	st := newState()
	if err := json.Unmarshal(b, st); err != nil {
		return fmt.Errorf("fair: history: %w", err)
	}
	if err := st.check(); err != nil {
		return fmt.Errorf("fair: history: %w", err)
	}
	if st.Jobs == nil {
		st.Jobs = map[string]*jobState{}
	}
	if st.Received == nil {
		st.Received = map[string]map[string]float64{}
	}
	if st.Refused == nil {
		st.Refused = map[string]string{}
	}
	for _, js := range st.Jobs {
		if js.LastRecv == nil {
			js.LastRecv = map[string]float64{}
		}
	}
	s.st, s.alloc = st, nil
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func (st *state) check() error {
	if st.Rounds < 0 || st.Migrations < 0 || st.GPUCount < 0 {
		return errors.New("negative counter")
	}
	if !st.Seen && (len(st.Jobs) > 0 || st.Rounds > 0) {
		return errors.New("jobs or rounds before the first round")
	}
	for id, js := range st.Jobs {
		if js == nil || js.GPUs <= 0 || js.User == "" || !finite(js.Pass) || !finite(js.Tickets) || js.Tickets <= 0 {
			return fmt.Errorf("job %q: bad state", id)
		}
		if (js.Type == "") != (len(js.Servers) == 0) {
			return fmt.Errorf("job %q: half a binding", id)
		}
		for _, v := range js.LastRecv {
			if !finite(v) {
				return fmt.Errorf("job %q: received time %v", id, v)
			}
		}
	}
	for _, sh := range []fairshare.Shares{st.Fair, st.Shares} {
		for u, m := range sh {
			for t, v := range m {
				if !finite(v) || v < 0 {
					return fmt.Errorf("share of %q on %q: %v", u, t, v)
				}
			}
		}
	}
	for _, tr := range st.Trades {
		if !finite(tr.Price) || !finite(tr.Amount) {
			return errors.New("bad trade")
		}
	}
	return nil
}
