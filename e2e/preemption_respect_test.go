package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// respectJobHCL is jobHCL for a never-finishing trainer that checkpoints
// every 6 s on its own and when told (a notice's checkpoint_now), but not
// when stopped (RONDO_CHECKPOINT_ON_STOP=false: a job too big to save
// within its kill timeout: a stop loses its work since its last
// checkpoint), a checkpoint costing it 0.5 s, on gpus GPUs of one
// allocation. (A job that checkpoints only when told accrues unsaved work
// without bound; the checkpoint-aware choice caps what it weighs of it, so
// such a job is stopped too, but later: the periodic checkpoints, as real
// trainers write them, keep the rotation brisk.)
func (s *stack) respectJobHCL(id string, gpus int) string {
	spec := s.jobHCL(id, "LM (batch size 20)", 100000000, 1)
	spec = strings.Replace(spec, `        RONDO_LEASE_ADDR     =`, `        RONDO_CHECKPOINT_INTERVAL = "6s"
        RONDO_CHECKPOINT_ON_STOP  = "false"
        RONDO_CHECKPOINT_COST     = "500ms"
        RONDO_LEASE_ADDR     =`, 1)
	return strings.Replace(spec, "count = 1", "count = "+strconv.Itoa(gpus), 1)
}

// jobAllocs are a job's allocations, oldest first.
func jobAllocs(c *api.Client, id string) []*api.AllocationListStub {
	allocs, _, _ := c.Allocations().List(&api.QueryOptions{Params: map[string]string{"resources": "true"},
		Filter: fmt.Sprintf("JobID == %q", id)})
	slices.SortFunc(allocs, func(a, b *api.AllocationListStub) int { return int(a.CreateIndex) - int(b.CreateIndex) })
	return allocs
}

// allocStdout is a trainer allocation's stdout so far.
func allocStdout(c *api.Client, alloc string) string {
	al, _, err := c.Allocations().Info(alloc, nil)
	if err != nil {
		return ""
	}
	r, err := c.AllocFS().Cat(al, "alloc/logs/train.stdout.0", nil)
	if err != nil {
		return ""
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// trainerCheckpoint is rondo-trainer's checkpoint.json.
type trainerCheckpoint struct {
	Steps float64   `json:"steps"`
	At    time.Time `json:"at"`
}

func readTrainerCheckpoint(dir string) (trainerCheckpoint, error) {
	var ck trainerCheckpoint
	b, err := os.ReadFile(filepath.Join(dir, "checkpoint.json"))
	if err == nil {
		err = json.Unmarshal(b, &ck)
	}
	return ck, err
}

var (
	noticeLine   = regexp.MustCompile(`checkpoint now: checkpointed at ([0-9.]+)/`)
	anyRoundLine = regexp.MustCompile(`round: round=([0-9]+) `)
)

// stopRound is the round whose enforcement stopped job id (the agent's log:
// the backend's "suspend: job=id" after the round's "round: round=N" line),
// the first after round from; 0 when none did.
func stopRound(logs, id string, from int) int {
	round := 0
	for _, l := range strings.Split(logs, "\n") {
		if m := anyRoundLine.FindStringSubmatch(l); m != nil {
			round, _ = strconv.Atoi(m[1])
		}
		if round > from && (strings.Contains(l, "suspend: job="+id+" ") || strings.Contains(l, "preempt: job="+id+" ")) {
			return round
		}
	}
	return 0
}

// TestPreemptionRespectsWorkOnNomad (#21): the engine's minimum runtime,
// checkpoint-aware notice and gang reservation, carried out on Nomad. One
// client of 2 fake V100s, one VC (a single engine) under
// max_min_fairness_perf, 3 s rounds, min_runtime 12 s (4 rounds),
// checkpoint_aware, reserve_after 9 s (3 rounds); trainers that checkpoint
// every 6 s and when told, and lose their unsaved work when stopped.
//
//   - Minimum runtime: a and b run; c arrives with the highest priority
//     (no GPU time yet) and waits while both are inside their minimum
//     runtime (their status reason says so); it starts only once one of
//     them has run 12 s.
//   - Notice: the first job given notice (c's arrival, then rotation,
//     displace jobs) is the one stopped, the round after its notice: in
//     the notice round it was kept with checkpoint_now in its lease
//     answers (its status shows the notice); its trainer checkpointed
//     (the steps its checkpoint holds, and the checkpoint_at it reported,
//     advanced); it was stopped the next round without checkpointing;
//     when it runs again it resumes from the notice's checkpoint (its
//     steps continue from the checkpointed count, not from 0). Every
//     notice the polls see stops its job the round after.
//   - Reservation: a 2-GPU gang g arrives while 1-GPU jobs rotate under
//     their minimum runtimes; it gets a reservation on both GPUs (the
//     status's reservations) and then runs on them.
func TestPreemptionRespectsWorkOnNomad(t *testing.T) {
	const (
		round   = 3 * time.Second
		minRun  = 12 * time.Second
		reserve = 9 * time.Second
	)
	cfg := fmt.Sprintf(`round_seconds    = %d
min_runtime      = %q
checkpoint_aware = true
reserve_after    = %q
vc "research" {
  policy = "max_min_fairness_perf"
}
`, int(round.Seconds()), minRun.String(), reserve.String())
	s := startStackWith(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2)}, cfg)
	c := s.c.API
	t0 := time.Now()
	a := s.startAgent(round.String())
	since := func() string { return fmt.Sprintf("%.1fs", time.Since(t0).Seconds()) }
	if dir := os.Getenv("RONDO_E2E_LOGS"); dir != "" {
		// The agent's log (every round's plan), kept for a look after.
		t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "preemption-respect-agent.log"), []byte(a.logs()), 0o644) })
	}

	// Every status poll, kept by round (the last poll of each), and the
	// rounds that gave each job notice.
	byRound := map[int]agent.Status{}
	notices := map[string][]int{}
	poll := func() agent.Status {
		st := s.status(a)
		byRound[st.Round] = st
		for _, j := range st.Jobs {
			if j.CheckpointNow && !slices.Contains(notices[j.ID], st.Round) {
				notices[j.ID] = append(notices[j.ID], st.Round)
				t.Logf("%s: round %d gives %s notice: %s", since(), st.Round, j.ID, j.Reason)
			}
		}
		return st
	}
	job := func(st agent.Status, id string) agent.JobStatus {
		for _, j := range st.Jobs {
			if j.ID == id {
				return j
			}
		}
		return agent.JobStatus{}
	}
	running := func(id string) *api.AllocationListStub {
		for _, al := range liveAllocs(c, id) {
			if al.ClientStatus == "running" {
				return al
			}
		}
		return nil
	}

	// (a) The minimum runtime.
	s.submitSpec("a", s.respectJobHCL("a", 1))
	s.submitSpec("b", s.respectJobHCL("b", 1))
	started := map[string]time.Time{}
	s.waitFor(60*time.Second, "a and b to run", func() (bool, error) {
		poll()
		for _, id := range []string{"a", "b"} {
			al := running(id)
			if al == nil {
				return false, nil
			}
			started[id] = time.Unix(0, al.CreateTime)
		}
		return true, nil
	})
	t.Logf("%s: a and b run", since())
	s.submitSpec("c", s.respectJobHCL("c", 1))
	cSubmitted := time.Now()
	pinnedSeen := 0
	var cStart time.Time
	s.waitFor(90*time.Second, "c to run", func() (bool, error) {
		st := poll()
		if cj := job(st, "c"); cj.State == "queued" {
			aj, bj := job(st, "a"), job(st, "b")
			if aj.State == "running" && bj.State == "running" && strings.Contains(aj.Reason, "inside its minimum runtime") &&
				strings.Contains(bj.Reason, "inside its minimum runtime") {
				if pinnedSeen == 0 {
					t.Logf("%s: round %d: c waits; a: %s; b: %s", since(), st.Round, aj.Reason, bj.Reason)
				}
				pinnedSeen++
			}
		}
		if al := running("c"); al != nil {
			cStart = time.Unix(0, al.CreateTime)
			return true, nil
		}
		return false, nil
	})
	pinEnd := started["a"]
	if started["b"].Before(pinEnd) {
		pinEnd = started["b"]
	}
	pinEnd = pinEnd.Add(minRun)
	t.Logf("%s: c runs %.1fs after its submission, %.1fs after the first minimum runtime ended", since(),
		cStart.Sub(cSubmitted).Seconds(), cStart.Sub(pinEnd).Seconds())
	if pinnedSeen == 0 {
		t.Errorf("no round showed c waiting while a and b were inside their minimum runtime")
	}
	if cStart.Before(pinEnd) {
		t.Errorf("c started at %v, before a or b had run %v (a started %v, b %v)", cStart, minRun, started["a"], started["b"])
	}

	// (b) A planned preemption: the first job given notice (c's arrival
	// displaces one; rotation goes on) is the one stopped, and in the
	// round after its notice: a notice means a stop.
	var victim string
	var nr, stopR int
	var ck trainerCheckpoint
	s.waitFor(90*time.Second, "the first job given notice to be stopped", func() (bool, error) {
		poll()
		if victim == "" {
			for id, rs := range notices {
				if victim == "" || rs[0] < nr {
					victim, nr = id, rs[0]
				}
			}
			if victim == "" {
				return false, nil
			}
		}
		if running(victim) != nil {
			return false, nil
		}
		sr := stopRound(a.logs(), victim, nr)
		if sr == 0 {
			return false, nil
		}
		// Stopped: nothing writes its checkpoint until it runs again (and
		// then not before RONDO_CHECKPOINT_INTERVAL).
		c, err := readTrainerCheckpoint(filepath.Join(s.ckpt, victim))
		if err != nil {
			return false, err
		}
		stopR, ck = sr, c
		return true, nil
	})
	if stopR != nr+1 {
		t.Errorf("%s got notice at round %d but was stopped at round %d", victim, nr, stopR)
	}
	if st, ok := byRound[stopR]; ok && job(st, victim).Intent != "suspend" {
		t.Errorf("round %d: %s's intent %q, want suspend", stopR, victim, job(st, victim).Intent)
	}
	allocs := jobAllocs(c, victim)
	var stopped *api.AllocationListStub
	for _, al := range allocs {
		if strings.Contains(allocStdout(c, al.ID), "not checkpointed (RONDO_CHECKPOINT_ON_STOP=false)") {
			stopped = al // the last one stopped
		}
	}
	if stopped == nil {
		t.Fatalf("%s: no stopped allocation", victim)
	}
	out := allocStdout(c, stopped.ID)
	ms := noticeLine.FindAllStringSubmatch(out, -1)
	if len(ms) == 0 {
		t.Fatalf("%s's trainer never acted on checkpoint_now:\n%s", victim, out)
	}
	notice := ms[len(ms)-1][1]
	if fmt.Sprintf("%.0f", ck.Steps) != notice || ck.At.IsZero() || !strings.Contains(out, "its last checkpoint holds "+notice+"\n") {
		t.Fatalf("%s's checkpoint %+v after its stop, want the notice's, %s steps:\n%s", victim, ck, notice, out)
	}
	// The checkpoint_at it reported advanced to the notice's checkpoint.
	before := job(byRound[nr], victim).CheckpointAt
	if before != nil && !before.Before(ck.At) {
		t.Errorf("%s's checkpoint_at at its notice round %d, %v, is not before the notice's checkpoint %v", victim, nr, before, ck.At)
	}
	s.waitFor(10*time.Second, victim+"'s checkpoint_at in the status", func() (bool, error) {
		j := job(poll(), victim)
		return j.CheckpointAt != nil && j.CheckpointAt.Equal(ck.At), nil
	})
	if j := job(byRound[nr], victim); j.Intent != "keep" || !strings.HasPrefix(j.Reason, "checkpoint now") {
		t.Errorf("round %d: %s's intent %q (%s), want a keep with notice", nr, victim, j.Intent, j.Reason)
	}
	t.Logf("%s: %s got notice at round %d, checkpointed %s steps at %s (checkpoint_at before: %v), stopped at round %d", since(),
		victim, nr, notice, ck.At.Sub(t0).Round(100*time.Millisecond), before, stopR)
	// It runs again, from that checkpoint.
	var resumed *api.AllocationListStub
	s.waitFor(90*time.Second, victim+" to run again", func() (bool, error) {
		poll()
		al := running(victim)
		if al == nil || al.CreateIndex <= stopped.CreateIndex {
			return false, nil
		}
		resumed = al
		_, ok := resumedAt(c, al.ID)
		return ok, nil
	})
	at, _ := resumedAt(c, resumed.ID)
	t.Logf("%s: %s runs again, resuming at %.0f steps", since(), victim, at)
	if fmt.Sprintf("%.0f", at) != notice {
		t.Errorf("%s resumed at %.0f steps, want its notice's checkpoint, %s", victim, at, notice)
	}
	noOverlap(t, c, victim)

	// (c) A gang's reservation.
	s.submitSpec("g", s.respectJobHCL("g", 2))
	gSubmitted := time.Now()
	type seenReservation struct {
		GPUs  []string
		Round int
		Seen  time.Time
	}
	var resv *seenReservation
	var gAlloc *api.AllocationListStub
	s.waitFor(120*time.Second, "the gang to run", func() (bool, error) {
		st := poll()
		for _, r := range st.Reservations {
			if r.Job == "g" && resv == nil {
				resv = &seenReservation{slices.Sorted(slices.Values(r.GPUs)), st.Round, time.Now()}
				t.Logf("%s: round %d reserves %v for g (waited %.1fs), from t=%.0fs; g: %s", since(), st.Round, r.GPUs,
					time.Since(gSubmitted).Seconds(), r.StartS, job(st, "g").Reason)
			}
		}
		gAlloc = running("g")
		return gAlloc != nil, nil
	})
	gStart := time.Unix(0, gAlloc.CreateTime)
	t.Logf("%s: g runs on %v, %.1fs after its submission", since(), allocGPUs(gAlloc), gStart.Sub(gSubmitted).Seconds())
	if resv == nil {
		t.Fatalf("g ran without a reservation in any status")
	}
	if got := slices.Sorted(slices.Values(allocGPUs(gAlloc))); !slices.Equal(got, resv.GPUs) {
		t.Errorf("g runs on %v, its reservation was %v", got, resv.GPUs)
	}
	if gStart.Before(resv.Seen.Add(-round)) {
		t.Errorf("g started at %v, before its reservation (seen %v)", gStart, resv.Seen)
	}
	for _, id := range []string{"a", "b", "c", "g"} {
		noOverlap(t, c, id)
	}
	checkDisjoint(t, c, "a", "b", "c", "g")
	// Every notice the polls saw stopped its job the round after (the
	// GPUs never idle here: more jobs than GPUs throughout).
	last, logs := poll().Round, a.logs()
	for id, rs := range notices {
		for _, r := range rs {
			if sr := stopRound(logs, id, r); sr != r+1 && !(sr == 0 && r+1 >= last) {
				t.Errorf("%s got notice at round %d, stopped at round %d", id, r, sr)
			}
		}
	}
	t.Logf("total %s; notices %v", since(), notices)
}
