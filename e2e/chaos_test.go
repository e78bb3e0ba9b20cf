package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
	"github.com/rondo-sched/rondo/internal/crashpoint"
)

// chaosConfig: one engine under LAS over every GPU (jobs rotate every
// round, so enforcement writes every round), short rounds, the lease ID
// kept on this host so that a restarted agent resumes its own lease.
const chaosConfig = `agent {
  round = "3s"
}
high_availability {
  lease_file = %q
}
tasks {
  checkpoint_root = %q
  lease_address   = %q
}
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// chaosPlan is the soak's size: make test's short version by default,
// the full soak (make chaos) with RONDO_CHAOS set.
type chaosPlan struct {
	jobs, kills, serverRestarts, clientLosses int
	// coldEvery: every coldEvery-th agent restart goes without the lease
	// file (a standby on another host): it waits for Nomad to expire the
	// dead agent's lease. 0: never.
	coldEvery int
	// steps per job: ResNet-18 (batch size 64) at 24.1 steps/s on a V100.
	steps  int
	finish time.Duration // for every job to finish after the chaos
	seed   int64
}

func chaosPlanFromEnv(t *testing.T) chaosPlan {
	p := chaosPlan{jobs: 20, kills: 3, serverRestarts: 1, clientLosses: 1, steps: 240, finish: 5 * time.Minute, seed: 1}
	if os.Getenv("RONDO_CHAOS") != "" {
		// ~16 min of chaos on 6 GPUs, which train at about two thirds of
		// their speed meanwhile (every round rotates them): 20 jobs of
		// ~4 GPU-minutes each outlast it, so every event hits running
		// jobs (the first full soak's jobs had reached 4,750 steps).
		p = chaosPlan{jobs: 20, kills: 100, serverRestarts: 10, clientLosses: 10, coldEvery: 10, steps: 6000, finish: 30 * time.Minute, seed: 1}
	}
	for env, dst := range map[string]*int{"RONDO_CHAOS_KILLS": &p.kills, "RONDO_CHAOS_SERVER_RESTARTS": &p.serverRestarts,
		"RONDO_CHAOS_CLIENT_LOSSES": &p.clientLosses, "RONDO_CHAOS_STEPS": &p.steps} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a count", env, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("RONDO_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("RONDO_CHAOS_SEED=%q", v)
		}
		p.seed = n
	}
	return p
}

// chaosKill is one kill -9 of the agent: at a crash point (the agent
// kills itself there, RONDO_CRASH_AT) or at a random moment of a round
// (point "timer": the test sends SIGKILL).
type chaosKill struct {
	point string
	n     int64 // the point's n-th hit in that agent's life
	cold  bool  // restarted without the lease file
}

func (k chaosKill) env() []string {
	if k.point == "timer" {
		return nil
	}
	return []string{fmt.Sprintf("%s=%s:%d", crashpoint.Env, k.point, k.n)}
}

// chaosKills draws the kills: each crash point and the timer equally
// often (in shuffled cycles), n the first or second round of the agent's
// life (the enforce point: one of its first six writes to Nomad). The
// short version kills on the timer, at record and mid-enforcement.
func chaosKills(p chaosPlan, rng *rand.Rand) []chaosKill {
	if p.kills == 3 && p.coldEvery == 0 {
		return []chaosKill{{point: "timer"}, {point: crashpoint.Record, n: 1}, {point: crashpoint.Enforce, n: 2}}
	}
	kinds := append(append([]string{}, crashpoint.Points...), "timer")
	var out []chaosKill
	for len(out) < p.kills {
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			if len(out) == p.kills {
				break
			}
			ck := chaosKill{point: k, n: 1 + rng.Int63n(2)}
			if k == crashpoint.Enforce {
				ck.n = 1 + rng.Int63n(6)
			}
			ck.cold = p.coldEvery > 0 && (len(out)+1)%p.coldEvery == 0
			out = append(out, ck)
		}
	}
	// The first agent starts the jobs: it is killed on the timer once
	// every GPU is busy (a crash point could end it before any start).
	if len(out) > 0 {
		out[0] = chaosKill{point: "timer"}
	}
	return out
}

// chaosWatch samples the cluster while the chaos runs and keeps every
// violation: two live allocations of one job, a checkpoint (progress)
// going backwards, the durable state's round or a job's received time
// going backwards, a job's durable progress going backwards (but for a job
// lost with its client, which resumes from its last checkpoint).
type chaosWatch struct {
	mu         sync.Mutex
	violations []string
	samples    int
	ckpt       map[string]float64
	received   map[string]map[string]float64
	progress   map[string]float64
	forgiven   map[string]time.Time // lost with a client: less progress accepted until then
	overlaps   map[string]int       // lines of the job's overlaps.log seen
	round      int64
}

// fail records a violation (w.mu held).
func (w *chaosWatch) fail(format string, args ...any) {
	if len(w.violations) < 50 {
		w.violations = append(w.violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
	}
}

// forgive lets the jobs of a lost client report less progress for the
// next two minutes (the work after their last checkpoint died with the
// machine; they resume from the checkpoint).
func (w *chaosWatch) forgive(ids []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		w.forgiven[id] = time.Now().Add(2 * time.Minute)
	}
}

func (w *chaosWatch) sample(s *stack, store *state.Store, ids []string) {
	c := s.c.API
	allocs, _, aerr := c.Allocations().List(nil)
	ck, ckAt := map[string]float64{}, map[string]time.Time{}
	overlaps := map[string][]string{}
	for _, id := range ids {
		// The trainer's run lock logs a run started while another still
		// ran (cmd/rondo-trainer runlock.go): a double run, whatever the
		// checkpoints show.
		if b, err := os.ReadFile(filepath.Join(s.ckpt, id, "overlaps.log")); err == nil {
			overlaps[id] = strings.Split(strings.TrimSpace(string(b)), "\n")
		}
		var c struct {
			Steps float64   `json:"steps"`
			At    time.Time `json:"at"`
		}
		if b, err := os.ReadFile(filepath.Join(s.ckpt, id, "checkpoint.json")); err == nil && json.Unmarshal(b, &c) == nil {
			ck[id], ckAt[id] = c.Steps, c.At
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, serr := store.Load(ctx)

	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if aerr == nil {
		running := map[string][]string{}
		for _, a := range allocs {
			if a.DesiredStatus == "run" && a.ClientStatus == "running" {
				running[a.JobID] = append(running[a.JobID], a.ID[:8]+"@"+a.NodeName)
			}
		}
		for id, l := range running {
			if len(l) > 1 {
				w.fail("job %s has %d live allocations: %v", id, len(l), l)
			}
		}
	}
	for _, id := range ids {
		for _, line := range overlaps[id][min(w.overlaps[id], len(overlaps[id])):] {
			w.fail("job %s ran twice: %s", id, line)
		}
		w.overlaps[id] = max(w.overlaps[id], len(overlaps[id]))
		if prev := w.ckpt[id]; ck[id] < prev {
			var who []string
			if aerr == nil {
				for _, a := range allocs {
					if a.JobID == id {
						who = append(who, fmt.Sprintf("%.8s %s/%s node %.8s", a.ID, a.DesiredStatus, a.ClientStatus, a.NodeID))
					}
				}
			}
			w.fail("job %s checkpoint went backwards: %.3f -> %.3f steps (written %s); allocations %v", id, prev, ck[id],
				ckAt[id].Format("15:04:05.000"), who)
		}
		w.ckpt[id] = max(w.ckpt[id], ck[id])
	}
	if serr != nil {
		return // the server restarting
	}
	if st.Round < w.round {
		w.fail("state round went backwards: %d -> %d", w.round, st.Round)
	}
	w.round = max(w.round, st.Round)
	for id, byType := range st.Received {
		if w.received[id] == nil {
			w.received[id] = map[string]float64{}
		}
		for typ, v := range byType {
			if prev := w.received[id][typ]; v < prev-1e-6 {
				w.fail("job %s received time on %s went backwards: %.2f -> %.2f s", id, typ, prev, v)
			}
			w.received[id][typ] = max(w.received[id][typ], v)
		}
	}
	// A job's durable progress (its last report, saved with the round)
	// never goes backwards across agent kills; only a job lost with its
	// client may report less for a while (forgive).
	for id, v := range st.Progress {
		forgiven := time.Now().Before(w.forgiven[id])
		if prev, ok := w.progress[id]; ok && v < prev-1e-6 && !forgiven {
			w.fail("job %s durable progress went backwards: %.0f -> %.0f steps", id, prev, v)
		}
		if v > w.progress[id] || forgiven {
			w.progress[id] = v
		}
	}
}

var chaosRoundLine = regexp.MustCompile(`round: round=(\d+)`)

// lastRound is the number of the last round an agent's log reports done.
func lastRound(logs string) int {
	m := chaosRoundLine.FindAllStringSubmatch(logs, -1)
	if len(m) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(m[len(m)-1][1])
	return n
}

// TestChaosOnNomad is the chaos soak of #18 (docs/chaos.md): 20 jobs on
// three clients of two V100s, 3 s rounds, the agent under its leader lock
// with a lease file. The agent is killed with SIGKILL again and again, at
// each phase of the round (crash points: observe, decide, record, after a
// write of the enforcement, enforced) and at random moments (the timer),
// and restarted at once (it resumes its lease), or every coldEvery-th
// time without its lease file (it waits for Nomad to expire the dead
// agent's lease); the Nomad server is restarted and clients are lost (the
// machine killed with its tasks, back once Nomad marks it down). A
// watcher samples the cluster throughout. Asserted: zero jobs lost (every
// job finishes, no allocation failed), zero double runs (never two live
// allocations of a job, and no two allocations' task runs overlap, a lost
// client's ending at its loss), no checkpoint, durable round or received
// time going backwards, every crash point killed where it was asked to,
// every warm restart resumed its lease. Each kill is logged (point, round,
// downtime) to $RONDO_CHAOS_OUT/kills.log with every agent's log beside it
// when RONDO_CHAOS_OUT is set. make test runs the short version (3 kills,
// one server restart, one client loss); make chaos the full soak.
func TestChaosOnNomad(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	p := chaosPlanFromEnv(t)
	rng := rand.New(rand.NewSource(p.seed))
	clients := []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 2), cluster.UniformClient("v100-b", "v100", 2),
		cluster.UniformClient("v100-c", "v100", 2)}
	s := startStackOpts(t, clients, "", func(o *cluster.Options) {
		// A lost client is marked down 5-8 s after its last heartbeat;
		// the failover TTL (the heartbeat TTL a new leader gives every
		// client) keeps clients up across a server restart (~2.5 s) and
		// lets a client lost soon after one be marked down in ~20 s.
		o.ServerHCL = `  min_heartbeat_ttl = "3s"
  heartbeat_grace = "5s"
  failover_heartbeat_ttl = "15s"`
	})
	leaseFile := filepath.Join(t.TempDir(), "run", "leader-lease")
	if err := os.WriteFile(s.cfgPath, []byte(fmt.Sprintf(chaosConfig, leaseFile, s.ckpt, "http://"+s.leaseAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("RONDO_CHAOS_OUT")
	if out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := s.c.API
	var ids []string
	for i := 0; i < p.jobs; i++ {
		id := fmt.Sprintf("c%02d", i)
		ids = append(ids, id)
		s.submitSpec(id, s.bareJobHCL(id, "ResNet-18 (batch size 64)", p.steps))
	}
	kills := chaosKills(p, rng)
	t.Logf("chaos: %d jobs of %d steps, %d kills, %d server restarts, %d client losses, seed %d",
		p.jobs, p.steps, len(kills), p.serverRestarts, p.clientLosses, p.seed)

	w := &chaosWatch{ckpt: map[string]float64{}, received: map[string]map[string]float64{}, progress: map[string]float64{},
		forgiven: map[string]time.Time{}, overlaps: map[string]int{}}
	store := state.NewStore(c, state.Options{})
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(500 * time.Millisecond):
			}
			w.sample(s, store, ids)
		}
	}()
	defer func() {
		select {
		case <-stopWatch:
		default:
			close(stopWatch)
		}
		<-watched
	}()

	var killLog []string
	logKill := func(format string, args ...any) {
		line := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
		killLog = append(killLog, line)
		t.Log(line)
	}
	var agentLogs []string // every incarnation's log file
	start := func(k *chaosKill) *agentProc {
		var env []string
		if k != nil {
			env = k.env()
		}
		a := s.runAgentEnv(env, "-lease-addr", s.leaseAddr)
		agentLogs = append(agentLogs, a.log)
		return a
	}
	finished := func() bool {
		for _, id := range ids {
			if s.checkpointSteps(id) < float64(p.steps) {
				return false
			}
		}
		return true
	}
	// lostAt: per client, when it was killed (for the allocation spans).
	lostAt := map[string][]time.Time{}
	eventsWhileActive := 0
	// The other events, spread evenly over the kills: a server restart a
	// third of the way through each stretch, a client loss two thirds.
	serverAfter, clientAfter := map[int]bool{}, map[int]bool{}
	for i := 0; i < p.serverRestarts; i++ {
		span := max(len(kills)/p.serverRestarts, 1)
		serverAfter[min(i*span+span/3, len(kills)-1)] = true
	}
	for i := 0; i < p.clientLosses; i++ {
		span := max(len(kills)/p.clientLosses, 1)
		clientAfter[min(i*span+2*span/3, len(kills)-1)] = true
	}

	a := start(&kills[0])
	s.waitFor(120*time.Second, "every GPU running a job", func() (bool, error) {
		n := 0
		for _, id := range ids {
			if l := liveAllocs(c, id); len(l) == 1 && l[0].ClientStatus == "running" {
				n++
			}
		}
		return n == 6, nil
	})
	for i, k := range kills {
		active := !finished()
		began := time.Now()
		prevRound := lastRound(a.logs())
		what := k.point
		if k.point == "timer" {
			// A random moment of a round: wait for this agent's next
			// round to be done, then up to one round length more.
			s.waitFor(90*time.Second, "a round of the agent", func() (bool, error) {
				select {
				case <-a.done:
					return false, fmt.Errorf("agent exited by itself:\n%s", tail(a.logs(), 3000))
				default:
				}
				return lastRound(a.logs()) > prevRound, nil
			})
			time.Sleep(time.Duration(rng.Int63n(int64(3 * time.Second))))
			a.kill9()
		} else {
			what = fmt.Sprintf("%s:%d", k.point, k.n)
			select {
			case <-a.done:
			case <-time.After(90 * time.Second):
				// The point was not reached (no writes left to make,
				// say): a timer kill instead, logged as such.
				a.kill9()
				what += " (not reached in 90 s; killed by the timer)"
			}
			logs := a.logs()
			if !strings.Contains(what, "not reached") && !strings.Contains(logs, "crashpoint: SIGKILL at "+fmt.Sprintf("%s:%d", k.point, k.n)) {
				t.Errorf("kill %d: the agent exited without its crash point %s:%d:\n%s", i+1, k.point, k.n, tail(logs, 3000))
			}
		}
		logs := a.logs()
		lines := strings.Split(strings.TrimSpace(logs), "\n")
		last := lines[len(lines)-1]
		if len(last) > 160 {
			last = last[:160]
		}
		if active {
			eventsWhileActive++
		}
		if k.cold {
			os.Remove(leaseFile)
		}
		var next *chaosKill
		if i+1 < len(kills) {
			next = &kills[i+1]
		}
		restarted := time.Now()
		a = start(next)
		// The new agent's first round: the downtime of this kill.
		s.waitFor(120*time.Second, "the restarted agent's first round", func() (bool, error) {
			select {
			case <-a.done:
				if next != nil && strings.Contains(a.logs(), "crashpoint: SIGKILL") {
					return true, nil // its own crash point came first
				}
				return false, fmt.Errorf("agent exited by itself:\n%s", tail(a.logs(), 3000))
			default:
			}
			return lastRound(a.logs()) > 0 || strings.Contains(a.logs(), "crashpoint: SIGKILL"), nil
		})
		resumed := strings.Contains(a.logs(), "leader lease resumed")
		if !k.cold && !resumed {
			t.Errorf("kill %d: the warm restart did not resume its lease:\n%s", i+1, tail(a.logs(), 2000))
		}
		logKill("kill %3d at %-40s cold=%-5v round=%d active=%v waited=%.1fs down=%.1fs last=%q", i+1, what, k.cold, lastRound(logs),
			active, restarted.Sub(began).Seconds(), time.Since(restarted).Seconds(), last)

		if serverAfter[i] {
			active := !finished()
			t0 := time.Now()
			if err := s.c.RestartServer(60 * time.Second); err != nil {
				t.Fatal(err)
			}
			if active {
				eventsWhileActive++
			}
			logKill("server restart after kill %d: %.1fs active=%v", i+1, time.Since(t0).Seconds(), active)
		}
		if clientAfter[i] {
			active := !finished()
			// The client holding the most running jobs.
			onNode := map[string][]string{}
			nodeName := nodeNames(t, c)
			// (A round's enforcement may be stopping every job: wait for
			// its starts.)
			cluster.WaitFor(15*time.Second, "running jobs", func() (bool, error) {
				allocs, _, err := c.Allocations().List(nil)
				if err != nil {
					return false, nil
				}
				onNode = map[string][]string{}
				for _, al := range allocs {
					if al.DesiredStatus == "run" && al.ClientStatus == "running" {
						onNode[nodeName[al.NodeID]] = append(onNode[nodeName[al.NodeID]], al.JobID)
					}
				}
				return len(onNode) > 0, nil
			})
			victim := clients[0].Name
			for _, cs := range clients {
				if len(onNode[cs.Name]) > len(onNode[victim]) {
					victim = cs.Name
				}
			}
			w.forgive(onNode[victim])
			t0 := time.Now()
			lostAt[victim] = append(lostAt[victim], t0)
			if err := s.c.KillClient(victim); err != nil {
				t.Fatal(err)
			}
			s.waitNodeDown(victim)
			down := time.Since(t0)
			if err := s.c.RestartClient(victim, 60*time.Second); err != nil {
				t.Fatal(err)
			}
			if active {
				eventsWhileActive++
			}
			logKill("client loss after kill %d: %s (%d jobs on it) down after %.1fs, back after %.1fs active=%v",
				i+1, victim, len(onNode[victim]), down.Seconds(), time.Since(t0).Seconds(), active)
		}
	}
	chaosEnd := time.Now()
	s.waitFor(p.finish, "every job finished", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("the last agent exited:\n%s", tail(a.logs(), 3000))
		default:
		}
		if !finished() {
			return false, nil
		}
		for _, id := range ids { // and Nomad has seen the last task end
			if job, _, err := c.Jobs().Info(id, nil); err != nil || job.Status == nil || *job.Status != "dead" {
				return false, nil
			}
		}
		return true, nil
	})
	logKill("every job finished %.0fs after the last event; %d of %d events while jobs ran", time.Since(chaosEnd).Seconds(),
		eventsWhileActive, len(kills)+p.serverRestarts+p.clientLosses)
	close(stopWatch)
	<-watched

	// Zero jobs lost: each job's last allocation completed its steps, none
	// failed; zero double runs: no two task runs of a job overlap.
	nodeName := nodeNames(t, c)
	for _, id := range ids {
		allocs, _, err := c.Jobs().Allocations(id, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, al := range allocs {
			ts := al.TaskStates["train"]
			if al.ClientStatus == "failed" {
				// Two failures are Nomad's, not the job's, and Rondo places
				// the job again: a task killed with its client, which the
				// returning client may report failed (its task could not be
				// restored) rather than leave lost; and an allocation whose
				// task never started (its setup failed: fetching its
				// workload identity from a server that was restarting).
				// Any other failure (the trainer exiting non-zero: a torn
				// checkpoint) fails the test.
				var events []string
				trainerFailed := false
				if ts != nil {
					for _, e := range ts.Events {
						events = append(events, fmt.Sprintf("%s %s (exit %d) %s", time.Unix(0, e.Time).Format("15:04:05.000"),
							e.Type, e.ExitCode, e.DisplayMessage))
						if e.Type == api.TaskTerminated && e.ExitCode != 0 {
							trainerFailed = true
						}
					}
				}
				node := nodeName[al.NodeID]
				withClient := false
				if ts != nil && !ts.StartedAt.IsZero() {
					for _, at := range lostAt[node] {
						if at.After(ts.StartedAt) && (ts.FinishedAt.IsZero() || !ts.FinishedAt.Before(at)) {
							withClient = true
						}
					}
				}
				switch {
				case withClient && !trainerFailed:
					t.Logf("job %s: allocation %.8s on %s, lost with the client, reported failed by it on its return: %v", id, al.ID, node, events)
				case (ts == nil || ts.StartedAt.IsZero()) && !trainerFailed:
					t.Logf("job %s: allocation %.8s on %s failed before its task started: %v", id, al.ID, node, events)
				default:
					t.Errorf("job %s: allocation %.8s on %s failed: %v", id, al.ID, node, events)
				}
			}
		}
		// A run killed with its client ended at the client's loss, the
		// first after its start: Nomad never hears of it (lost), or hears
		// of it from the client on its return (failed, finished then).
		noOverlapWith(t, c, id, func(al *api.AllocationListStub, ts *api.TaskState) time.Time {
			for _, at := range lostAt[nodeName[al.NodeID]] {
				if at.After(ts.StartedAt) {
					return at // noOverlapWith takes it only before the finish
				}
			}
			return time.Time{}
		})
		job, _, err := c.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if job.Status != nil && *job.Status != "dead" {
			t.Errorf("job %s is %s after finishing its steps", id, *job.Status)
		}
	}
	w.mu.Lock()
	for _, v := range w.violations {
		t.Error(v)
	}
	t.Logf("watcher: %d samples, %d violations", w.samples, len(w.violations))
	w.mu.Unlock()
	if eventsWhileActive < (len(kills)+p.serverRestarts+p.clientLosses)*9/10 {
		t.Errorf("only %d events while jobs ran: the jobs are too short for the chaos", eventsWhileActive)
	}
	if out != "" {
		head := fmt.Sprintf("# chaos soak: %d jobs x %d steps, %d kills, %d server restarts, %d client losses, seed %d, %s\n",
			p.jobs, p.steps, len(kills), p.serverRestarts, p.clientLosses, p.seed, time.Now().UTC().Format(time.RFC3339))
		if err := os.WriteFile(filepath.Join(out, "kills.log"), []byte(head+strings.Join(killLog, "\n")+"\n"), 0o644); err != nil {
			t.Error(err)
		}
		for i, l := range agentLogs {
			if b, err := os.ReadFile(l); err == nil {
				os.WriteFile(filepath.Join(out, fmt.Sprintf("agent-%03d.log", i+1)), b, 0o644)
			}
		}
	}
}
