package main

import (
	"fmt"
	"time"

	"github.com/rondo-sched/rondo/allocator/fair"
	"github.com/rondo-sched/rondo/allocator/round"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// fairMechanism is a gandiva_fair VC's mechanism (allocator/fair): its
// users' tickets, trading, quantum in rounds (default fair.DefaultQuantumRounds
// for the round length) and migration bound; nil for any other VC. reset:
// its first round recomputes shares and tickets whatever history it is
// given (a reload).
func fairMechanism(v rhcl.VC, roundS float64, reset bool) (round.Mechanism, error) {
	if !v.GandivaFair() {
		return nil, nil
	}
	tickets := map[string]int{}
	for _, u := range v.Users {
		tickets[u.Name] = u.Tickets
	}
	rd := time.Duration(roundS * float64(time.Second))
	if v.Quantum > 0 && (rd <= 0 || v.Quantum%rd != 0) {
		// The config's round_seconds was checked; a -round flag overrides it.
		return nil, fmt.Errorf("vc %q: quantum %v is not a whole number of rounds (round %v)", v.Name, v.Quantum, rd)
	}
	q := v.QuantumRounds(rd)
	if q == 0 {
		q = fair.DefaultQuantumRounds(roundS)
	}
	return fair.New(fair.Config{RoundS: roundS, QuantumRounds: q, Tickets: tickets, Trading: v.Trading,
		TradeMargin: v.TradeMargin, MaxMigrations: v.MaxMigrations, ResetFirst: reset})
}
