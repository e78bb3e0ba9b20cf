package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/fair"
	"github.com/rondo-sched/rondo/allocator/sim"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// Gandiva-fair on Nomad (#15): one gandiva_fair VC over two servers of two
// V100s, alice with 200 tickets and bob with 100, four never-finishing
// 1-GPU jobs each.
const (
	fairRoundS = 4
	// fairWindow is the measured window in quanta (one round each), a
	// multiple of fairPeriod.
	fairWindow = 24
	// fairPeriod is the stride schedule's period on a server (two GPUs,
	// two jobs of 2/3 and two of 1/3 of a GPU each: alice, alice, bob):
	// the received time at each end of the window is averaged over one.
	// Read at single rounds, the ends' phases in the pattern (which ties
	// between equal passes, broken by the credited time's jitter, shift)
	// put bob up to 2 GPU-quanta of 32 off: the ratio 1.82–2.20.
	fairPeriod = 3
	// fairTolerance bounds |alice/bob − 2| / 2 over the window.
	fairTolerance = 0.10
)

const fairConfig = `round_seconds = %d
vc "lab" {
  policy  = "gandiva_fair"
  quantum = "%ds"
  user "alice" {
    tickets = 200
  }
  user "bob" {
    tickets = 100
  }
}
`

// fairJobHCL is jobHCL in VC lab with meta rondo.user.
func (s *stack) fairJobHCL(id, user, model string, steps int, speedup float64) string {
	return strings.Replace(s.jobHCL(id, model, steps, speedup), `"rondo.vc"    = "research"`,
		`"rondo.vc"    = "lab"
    "rondo.user"  = "`+user+`"`, 1)
}

// labVC is VC lab in a status (its users, trades, migrations).
func labVC(t *testing.T, st agent.Status) agent.VC {
	t.Helper()
	for _, v := range st.VCs {
		if v.Name == "lab" {
			return v
		}
	}
	t.Fatalf("no VC lab in the status: %+v", st.VCs)
	return agent.VC{}
}

// userGPUS is a user's received GPU-seconds on V100 as the VC's users show
// them (Gandiva-fair's own account), and the same summed over the user's
// jobs from the agent's per-job received time (1 GPU each).
func userGPUS(t *testing.T, st agent.Status, user string) (users, jobs float64) {
	t.Helper()
	found := false
	for _, u := range labVC(t, st).Users {
		if u.User == user {
			users, found = u.ReceivedGPUS["v100"], true
		}
	}
	if !found {
		t.Fatalf("user %s not in VC lab's users", user)
	}
	for _, j := range st.Jobs {
		if j.User == user {
			jobs += j.ReceivedS["v100"] * float64(max(j.ScaleFactor, 1))
		}
	}
	return users, jobs
}

// suspendLine matches the backend's suspension log line (hclog's
// timestamp first).
var suspendLine = regexp.MustCompile(`^(\S+) \[INFO\] +rondo\S*: suspend: job=(\S+)`)

// TestGandivaFairOnNomad: Gandiva-fair's mechanism (allocator/fair) on a
// real Nomad cluster.
//
// SharesByTickets: with 8 jobs on 4 GPUs, over 24 quanta starting one
// period (3 quanta: alice, alice, bob on each server) after all eight
// ran, alice (200 tickets) receives twice bob's (100) GPU time within
// 10%, by the VC's users in /v1/status and by the sum of their jobs'
// received time, each end's read averaged over a period (the stride
// schedule's sawtooth). Every task start in the window is timed against its
// round's start (as calibrateStartCost does), and every task stop of a
// suspension against the start of the round that suspended it: the
// switch latency that fair.SwitchS stands for (the mean start latency
// must stay below it).
//
// MigrationFromCheckpoint: both of bob's jobs on one server leave; that
// server's load falls to half the other's, load balancing moves a job
// there (the VC's migrations count grows), and the moved job resumes on
// its new server from its checkpoint (its steps never go back) and keeps
// training.
func TestGandivaFairOnNomad(t *testing.T) {
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("v100-b", "v100", 2)},
		fmt.Sprintf(fairConfig, fairRoundS, fairRoundS))
	c := s.c.API
	user := map[string]string{}
	var ids []string
	for i := 0; i < 4; i++ {
		for _, u := range []string{"alice", "bob"} {
			id := fmt.Sprintf("%s%d", u, i)
			ids = append(ids, id)
			user[id] = u
			s.submitSpec(id, s.fairJobHCL(id, u, "ResNet-18 (batch size 64)", 1000000000, 1))
		}
	}
	ag := s.startAgent(fmt.Sprintf("%ds", fairRoundS))
	t1 := s.firstRound(ag, fairRoundS)
	R := float64(fairRoundS)
	roundStart := func(at time.Time) time.Time {
		k := math.Floor(at.Sub(t1).Seconds() / R)
		return t1.Add(time.Duration(k * R * float64(time.Second)))
	}

	if dir := os.Getenv("RONDO_E2E_LOGS"); dir != "" {
		// The agent's log (every round's plan) and the mechanism's state
		// after every round (passes, tickets, bindings: the durable
		// state's engine history) for a look after the test.
		stop := make(chan struct{})
		done := make(chan struct{})
		var hist bytes.Buffer
		go func() {
			defer close(done)
			store := state.NewStore(c, state.Options{})
			last := int64(-1)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				st, err := store.Load(context.Background())
				if err != nil || st == nil || st.Round == last {
					continue
				}
				last = st.Round
				fmt.Fprintf(&hist, "{\"round\":%d,\"engine\":%s}\n", st.Round, st.Engine)
			}
		}()
		defer func() {
			close(stop)
			<-done
			os.WriteFile(filepath.Join(dir, "gandiva-fair.log"), []byte(ag.logs()), 0o644)
			os.WriteFile(filepath.Join(dir, "gandiva-fair.history.jsonl"), hist.Bytes(), 0o644)
		}()
	}
	t.Run("SharesByTickets", func(t *testing.T) {
		s.t = t
		// Start of the window: every job has run (the stride schedule is
		// in its steady state) and the users show their tickets.
		var first agent.Status
		s.waitFor(120*time.Second, "all eight jobs to have run", func() (bool, error) {
			first = s.status(ag)
			n := 0
			for _, j := range first.Jobs {
				if j.Refused != "" {
					return false, fmt.Errorf("job %s refused: %s", j.ID, j.Refused)
				}
				if j.VC == "lab" && j.Rounds > 0 {
					n++
				}
			}
			return n == len(ids), nil
		})
		// Jobs join with equal passes, so each runs once in the first
		// rounds whatever its tickets: the window starts one period (3
		// quanta) after that.
		joined := first.Round
		s.waitFor(60*time.Second, "a period after all eight ran", func() (bool, error) {
			first = s.status(ag)
			return first.Round >= joined+fairPeriod, nil
		})
		for _, j := range first.Jobs {
			if j.User != user[j.ID] {
				t.Errorf("job %s: user %q in the status, want %q", j.ID, j.User, user[j.ID])
			}
		}
		for _, u := range labVC(t, first).Users {
			t.Logf("user %s: %d tickets, fair share %v, share %v", u.User, u.Tickets, u.FairShare, u.Share)
		}
		// The users' received time at every round of the window and of
		// the period after each end.
		samples := map[int]agent.Status{first.Round: first}
		var last agent.Status
		s.waitFor(time.Duration((fairWindow+fairPeriod)*fairRoundS+60)*time.Second, "the window's quanta", func() (bool, error) {
			last = s.status(ag)
			if _, ok := samples[last.Round]; !ok {
				samples[last.Round] = last
			}
			return last.Round >= first.Round+fairWindow+fairPeriod-1, nil
		})
		// at is the users' and the jobs' GPU-seconds at round r, or
		// averaged over the period from r (the stride schedule's
		// sawtooth cancels).
		at := func(r int, user string, period int) (users, jobs float64) {
			n := 0
			for k := r; k < r+period; k++ {
				if st, ok := samples[k]; ok {
					u, j := userGPUS(t, st, user)
					users, jobs, n = users+u, jobs+j, n+1
				}
			}
			if n == 0 {
				t.Fatalf("no status read at rounds %d..%d", r, r+period-1)
			}
			return users / float64(n), jobs / float64(n)
		}
		r0, r1 := first.Round, first.Round+fairWindow
		end, ok := samples[r1]
		if !ok {
			t.Fatalf("no status read at round %d", r1)
		}
		window := end.LastRound.Sub(first.LastRound).Seconds()
		ratios := func(period int) (float64, float64, float64, float64) {
			a0, aj0 := at(r0, "alice", period)
			b0, bj0 := at(r0, "bob", period)
			a1, aj1 := at(r1, "alice", period)
			b1, bj1 := at(r1, "bob", period)
			return a1 - a0, b1 - b0, aj1 - aj0, bj1 - bj0
		}
		ra, rb, _, _ := ratios(1)
		da, db, dja, djb := ratios(fairPeriod)
		t.Logf("over %d quanta (rounds %d..%d, %.1fs, %.1f GPU-s offered): alice %.1f GPU-s, bob %.1f GPU-s, ratio %.3f at the window's ends; averaged over a period at each end: alice %.1f, bob %.1f, ratio %.3f (users' received_gpu_s), %.1f / %.1f = %.3f (jobs' received_s)",
			fairWindow, r0, r1, window, 4*window, ra, rb, ra/rb, da, db, da/db, dja, djb, dja/djb)
		if db <= 0 || djb <= 0 {
			t.Fatalf("bob received no GPU time in the window")
		}
		if r := da / db; math.Abs(r-2)/2 > fairTolerance {
			t.Errorf("alice/bob GPU time %.3f (users' received_gpu_s), want 2 within %.0f%%", r, 100*fairTolerance)
		}
		if r := dja / djb; math.Abs(r-2)/2 > fairTolerance {
			t.Errorf("alice/bob GPU time %.3f (jobs' received_s), want 2 within %.0f%%", r, 100*fairTolerance)
		}
		if used := (ra + rb) / (4 * window); used < 0.9 {
			t.Errorf("the jobs received %.0f%% of the window's GPU time, want at least 90%%", 100*used)
		}
		if m := labVC(t, last).Migrations; m != 0 {
			t.Errorf("%d migrations with no departure", m)
		}

		// Switch latency: task starts in the window against their round's
		// start; stops of suspended tasks against the round that
		// suspended them (the agent's log line).
		from, to := first.LastRound, end.LastRound.Add(time.Duration(R*float64(time.Second)))
		suspends := map[string][]time.Time{}
		for _, line := range strings.Split(ag.logs(), "\n") {
			if m := suspendLine.FindStringSubmatch(line); m != nil {
				if at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1]); err == nil {
					suspends[m[2]] = append(suspends[m[2]], at)
				}
			}
		}
		var starts, stops []float64
		for _, id := range ids {
			allocs, _, err := c.Jobs().Allocations(id, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, al := range allocs {
				ts := al.TaskStates["train"]
				created := time.Unix(0, al.CreateTime)
				if ts == nil || ts.StartedAt.IsZero() || created.Before(from) || !created.Before(to) {
					continue
				}
				starts = append(starts, ts.StartedAt.Sub(roundStart(created)).Seconds())
				if ts.FinishedAt.IsZero() || ts.FinishedAt.After(to) {
					continue
				}
				// The suspension: the latest log line before the stop.
				var at time.Time
				for _, x := range suspends[id] {
					if !x.After(ts.FinishedAt) && x.After(ts.StartedAt) {
						at = x
					}
				}
				if !at.IsZero() {
					stops = append(stops, ts.FinishedAt.Sub(roundStart(at)).Seconds())
				}
			}
		}
		if len(starts) < fairWindow {
			t.Fatalf("%d task starts in the window of %d quanta, want at least %d (jobs should rotate)", len(starts), fairWindow, fairWindow)
		}
		stat := func(v []float64) string {
			if len(v) == 0 {
				return "none"
			}
			sort.Float64s(v)
			return fmt.Sprintf("mean %.2fs, median %.2fs, min %.2fs, max %.2fs over %d", mean(v), sim.Percentile(v, 50), v[0], v[len(v)-1], len(v))
		}
		ms := mean(starts)
		t.Logf("switch latency after the round start: task start %s; suspended task stop %s (fair.SwitchS %.1fs)",
			stat(starts), stat(stops), fair.SwitchS)
		if ms >= fair.SwitchS {
			t.Errorf("MEAN START LATENCY %.2fs >= fair.SwitchS %.1fs: SwitchS MUST BE RAISED", ms, fair.SwitchS)
		}
		if len(stops) == 0 {
			t.Errorf("no suspended task's stop measured (no %q lines matched)", "suspend: job=")
		}
	})

	t.Run("MigrationFromCheckpoint", func(t *testing.T) {
		s.t = t
		// Each job's server: every allocation so far ran on its bound one.
		node := map[string]string{}
		for _, id := range ids {
			allocs, _, err := c.Jobs().Allocations(id, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, al := range allocs {
				if n := node[id]; n != "" && n != al.NodeName {
					t.Fatalf("job %s ran on %s and %s before any departure", id, n, al.NodeName)
				}
				node[id] = al.NodeName
			}
		}
		bobs := map[string][]string{}
		for _, id := range ids {
			if user[id] == "bob" {
				bobs[node[id]] = append(bobs[node[id]], id)
			}
		}
		under := ""
		for n, l := range bobs {
			if under == "" || len(l) > len(bobs[under]) || len(l) == len(bobs[under]) && n < under {
				under = n
			}
		}
		layout := map[string][]string{}
		for _, id := range ids {
			layout[node[id]] = append(layout[node[id]], id)
		}
		t.Logf("servers: %v; stopping %v on %s", layout, bobs[under][:2], under)
		// Leave mid-round, once the round's starts ran: a job purged while
		// its start is being enforced stalls that round until the ack
		// timeout (the backend waits for it to run on its GPUs: "timed
		// out after 15s waiting for started jobs"), and the jobs running
		// through the long round are credited it, so stride holds them
		// back for rounds after.
		r := s.status(ag).Round
		var cur agent.Status
		s.waitFor(30*time.Second, "a new round", func() (bool, error) {
			cur = s.status(ag)
			return cur.Round > r, nil
		})
		time.Sleep(time.Until(cur.LastRound.Add(2 * time.Second)))
		before := labVC(t, s.status(ag)).Migrations
		gone := map[string]bool{}
		for _, id := range bobs[under][:2] {
			if _, _, err := c.Jobs().Deregister(id, true, nil); err != nil {
				t.Fatal(err)
			}
			gone[id] = true
		}
		left := time.Now()
		// The checkpoints of the remaining jobs, polled: none may go back
		// (a restart from 0). kept is the highest a job had while Nomad
		// held no allocation of it on the underloaded server (read after
		// looking: its task there had not started), what it must resume
		// from once moved.
		ckpt, kept := map[string]float64{}, map[string]float64{}
		poll := func() error {
			for _, id := range ids {
				if gone[id] {
					continue
				}
				got := s.checkpointSteps(id)
				if got < ckpt[id] {
					return fmt.Errorf("job %s's checkpoint went back from %.0f to %.0f steps: restarted", id, ckpt[id], got)
				}
				ckpt[id] = got
			}
			return nil
		}
		var moved, movedAlloc string
		var migrations, departedRound, migratedRound int
		var migratedAfter time.Duration
		s.waitFor(120*time.Second, "a migration onto "+under+" and the moved job running there", func() (bool, error) {
			if err := poll(); err != nil {
				return false, err
			}
			st := s.status(ag)
			active := 0
			for _, j := range st.Jobs {
				if j.State != "done" {
					active++
				}
			}
			if departedRound == 0 && active == len(ids)-len(gone) {
				departedRound = st.Round
			}
			migrations = labVC(t, st).Migrations
			if migrations > before && migratedRound == 0 {
				migratedRound, migratedAfter = st.Round, time.Since(left)
			}
			for _, id := range ids {
				if gone[id] || node[id] == under {
					continue
				}
				there := ""
				for _, al := range liveAllocs(c, id) {
					if al.NodeName == under {
						there = al.ID
						if al.ClientStatus == "running" && migrations > before {
							moved, movedAlloc = id, al.ID
							return true, nil
						}
					}
				}
				if there == "" {
					kept[id] = s.checkpointSteps(id)
				}
			}
			return false, nil
		})
		t.Logf("migrations +%d (counted at round %d, %.1fs after the departures, seen at round %d): %s moved %s → %s, running there %.1fs after the departures (checkpoint %.0f steps before the move)",
			migrations-before, migratedRound, migratedAfter.Seconds(), departedRound, moved, node[moved], under, time.Since(left).Seconds(), kept[moved])
		if kept[moved] <= 0 {
			t.Errorf("%s had no checkpoint before the move", moved)
		}
		// It resumed from its checkpoint, not from 0, and keeps training
		// on its new server.
		var resumed float64
		s.waitFor(60*time.Second, moved+" training on "+under, func() (bool, error) {
			if err := poll(); err != nil {
				return false, err
			}
			got := ckpt[moved]
			if resumed == 0 {
				resumed = got
			}
			for _, al := range liveAllocs(c, moved) {
				if al.NodeName != under {
					return false, fmt.Errorf("%s runs on %s after moving to %s", moved, al.NodeName, under)
				}
			}
			return got > kept[moved]+100, nil
		})
		t.Logf("%s: checkpoint %.0f steps before the move, %.0f when first seen on %s, %.0f now", moved, kept[moved], resumed, under, ckpt[moved])
		// The trainer's own word: the step it resumed at on the new server.
		if at, ok := resumedAt(c, movedAlloc); !ok {
			t.Errorf("%s: no resume line in the new allocation's stdout", moved)
		} else {
			t.Logf("%s's trainer on %s: resuming at %.0f steps", moved, under, at)
			if at < kept[moved]-1 {
				t.Errorf("%s's trainer resumed at %.0f steps, below its checkpoint %.0f before the move: not from its checkpoint", moved, at, kept[moved])
			}
		}
		if !strings.Contains(ag.logs(), "migrate: job="+moved) && !strings.Contains(ag.logs(), "resume: job="+moved) {
			t.Errorf("no migrate or resume log line for %s", moved)
		}
		noOverlap(t, c, moved)
		// Balanced now: 3 jobs on each server.
		after := map[string]int{}
		for _, id := range ids {
			if !gone[id] {
				n := node[id]
				if id == moved {
					n = under
				}
				after[n]++
			}
		}
		t.Logf("jobs per server after the move: %v", after)
		for _, line := range strings.Split(ag.logs(), "\n") {
			if strings.Contains(line, "round failed") && !strings.Contains(line, "context canceled") {
				t.Logf("agent: %s", line)
			}
		}
		// How long bob's remaining jobs waited after the departures (the
		// rounds' plans): bob is owed a third of the GPUs throughout.
		plans := roundPlans(ag.logs())
		for _, id := range ids {
			if user[id] != "bob" || gone[id] {
				continue
			}
			ran := -1
			for r := departedRound; r <= departedRound+30 && ran < 0; r++ {
				if slices.Contains(plans[r], id) {
					ran = r
				}
			}
			t.Logf("%s first ran at round %d after the departures at round %d", id, ran, departedRound)
		}
	})
}

var resumingAt = regexp.MustCompile(`resuming at ([0-9.]+)/`)

// resumedAt reads the step a trainer allocation started at from its
// stdout ("rondo-trainer: ... resuming at S/T").
func resumedAt(c *api.Client, alloc string) (float64, bool) {
	al, _, err := c.Allocations().Info(alloc, nil)
	if err != nil {
		return 0, false
	}
	r, err := c.AllocFS().Cat(al, "alloc/logs/train.stdout.0", nil)
	if err != nil {
		return 0, false
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	m := resumingAt.FindSubmatch(b)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	return v, err == nil
}

var planLine = regexp.MustCompile(`round plan: round=(\d+) plan=".*?; plan: (.*?); suspend:`)
var planJob = regexp.MustCompile(`(\S+)@\S+\[`)

// roundPlans are the jobs each round's plan runs (keep or start), from
// the agent's debug log.
func roundPlans(logs string) map[int][]string {
	out := map[int][]string{}
	for _, line := range strings.Split(logs, "\n") {
		m := planLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		for _, j := range planJob.FindAllStringSubmatch(m[2], -1) {
			out[r] = append(out[r], j[1])
		}
	}
	return out
}
