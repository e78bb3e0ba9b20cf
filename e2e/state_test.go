package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/state"
)

// allocatorClient applies jobs/acl/rondo-allocator.policy.hcl on an ACL
// agent and returns a client holding a token with only that policy.
func allocatorClient(t *testing.T, a *Agent) (*api.Client, string) {
	t.Helper()
	rules, err := os.ReadFile(moduleRoot(t) + "/jobs/acl/rondo-allocator.policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	mc := a.Client()
	if _, err := mc.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rondo-allocator", Rules: string(rules)}, nil); err != nil {
		t.Fatalf("apply policy: %v", err)
	}
	tok, _, err := mc.ACLTokens().Create(&api.ACLToken{Name: "rondo-allocator", Type: "client", Policies: []string{"rondo-allocator"}}, nil)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	c, err := api.NewClient(&api.Config{Address: a.HTTPAddr, SecretID: tok.SecretID})
	if err != nil {
		t.Fatal(err)
	}
	return c, tok.SecretID
}

func sleepJob(id string) *api.Job {
	job := api.NewBatchJob(id, id, "global", 50)
	task := api.NewTask("main", "raw_exec").SetConfig("command", "/bin/sleep").SetConfig("args", []string{"300"})
	task.Resources = &api.Resources{CPU: new(100), MemoryMB: new(32)}
	return job.AddTaskGroup(api.NewTaskGroup("g", 1).AddTask(task))
}

func isForbidden(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "Permission denied"))
}

// TestAllocatorStateACL runs the allocator's Nomad operations with a token
// from the minimal policy on an ACL-enabled agent: the state store, the
// leader lock, job and node operations; and checks what the policy forbids.
func TestAllocatorStateACL(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	if testing.Short() {
		t.Skip("e2e: starts a Nomad agent")
	}
	a := StartAgent(t, AgentOptions{ACL: true})
	c, token := allocatorClient(t, a)
	ctx := context.Background()

	t.Run("policy allows the allocator's operations", func(t *testing.T) {
		resp, _, err := c.Jobs().Register(sleepJob("acl-ok"), nil)
		if err != nil {
			t.Fatalf("register: %v", err)
		}
		_ = resp
		if _, _, err := c.Jobs().List(nil); err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		if _, _, err := c.Jobs().Allocations("acl-ok", false, nil); err != nil {
			t.Fatalf("job allocations: %v", err)
		}
		if _, _, err := c.Allocations().List(nil); err != nil {
			t.Fatalf("list allocations: %v", err)
		}
		if _, _, err := c.Jobs().Scale("acl-ok", "g", new(0), "rondo suspend", false, nil, nil); err != nil {
			t.Fatalf("scale: %v", err)
		}
		nodes, _, err := c.Nodes().List(nil)
		if err != nil || len(nodes) != 1 {
			t.Fatalf("list nodes: %v", err)
		}
		if _, _, err := c.Nodes().Info(nodes[0].ID, nil); err != nil {
			t.Fatalf("node info: %v", err)
		}
		if _, _, err := c.Operator().SchedulerGetConfiguration(nil); err != nil {
			t.Fatalf("scheduler config: %v", err)
		}
		if _, _, err := c.Variables().Create(&api.Variable{Path: "rondo/probe", Items: api.VariableItems{"k": "v"}}, nil); err != nil {
			t.Fatalf("write rondo/ variable: %v", err)
		}
		if _, err := c.Variables().Delete("rondo/probe", nil); err != nil {
			t.Fatalf("delete rondo/ variable: %v", err)
		}

		// Forbidden: variables outside rondo/, node writes, scheduler config.
		if _, _, err := c.Variables().Create(&api.Variable{Path: "other/x", Items: api.VariableItems{"k": "v"}}, nil); !isForbidden(err) {
			t.Errorf("write other/x: want 403, got %v", err)
		}
		if _, _, err := c.Variables().Read("nomad/jobs/acl-ok", nil); !isForbidden(err) {
			t.Errorf("read nomad/jobs/acl-ok: want 403, got %v", err)
		}
		if _, err := c.Nodes().ToggleEligibility(nodes[0].ID, false, nil); !isForbidden(err) {
			t.Errorf("node eligibility: want 403, got %v", err)
		}
		if _, _, err := c.Operator().SchedulerSetConfiguration(&api.SchedulerConfiguration{}, nil); !isForbidden(err) {
			t.Errorf("scheduler set-config: want 403, got %v", err)
		}
	})

	t.Run("round trip inline and chunked", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			inline int
			jobs   int
		}{{"inline", 0, 3}, {"chunked", 2048, 400}} {
			s := state.NewStore(c, state.Options{Path: "rondo/rt-" + tc.name, InlineLimit: tc.inline, ChunkSize: 1024})
			st, err := s.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Round != 0 || len(st.Received) != 0 {
				t.Fatalf("fresh state not empty: %+v", st)
			}
			for i := range tc.jobs {
				job := fmt.Sprintf("job-%03d", i)
				st.AddReceived(job, "a100", time.Duration(i)*time.Second)
				st.AddReceived(job, "v100", 90*time.Second)
				st.SetThroughput(job, "a100", state.Measurement{StepsPerSec: float64(i) + 0.5, Samples: 3, At: time.Unix(1700000000, 0).UTC()})
			}
			st.Begin(state.Decision{ID: "d7", Round: 7, Intents: []state.Intent{{Job: "job-001", Action: "admit", Node: "n1", GPUs: []string{"GPU-1"}, JobModifyIndex: 42}}})
			// Two saves: the second flips the chunk slot.
			for range 2 {
				if err := s.Save(ctx, st); err != nil {
					t.Fatalf("%s: save: %v", tc.name, err)
				}
			}
			got, err := state.NewStore(c, state.Options{Path: "rondo/rt-" + tc.name}).Load(ctx)
			if err != nil {
				t.Fatalf("%s: load: %v", tc.name, err)
			}
			if got.Round != 7 || len(got.Received) != tc.jobs || got.Received["job-002"]["a100"] != 2 ||
				got.Throughput["job-002"]["a100"].StepsPerSec != 2.5 || got.InFlight == nil || got.InFlight.Intents[0].JobModifyIndex != 42 {
				t.Fatalf("%s: round trip lost data: round %d, %d jobs, inflight %+v", tc.name, got.Round, len(got.Received), got.InFlight)
			}
			if tc.name == "chunked" {
				v, _, err := c.Variables().Read("rondo/rt-chunked", nil)
				if err != nil || v.Items["format"] != "chunked" || v.Items["chunks"] == "1" {
					t.Fatalf("expected a multi-chunk state, meta %v (%v)", v.Items, err)
				}
			}
		}
	})

	t.Run("check-and-set conflict", func(t *testing.T) {
		for _, inline := range []int{0, 512} {
			path := fmt.Sprintf("rondo/cas-%d", inline)
			opts := state.Options{Path: path, InlineLimit: inline, ChunkSize: 256}
			s1, s2 := state.NewStore(c, opts), state.NewStore(c, opts)
			st1, err := s1.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			st2, err := s2.Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fill := func(st *state.State, tag string) {
				for i := range 40 {
					st.AddReceived(fmt.Sprintf("%s-%d", tag, i), "a100", time.Second)
				}
			}
			fill(st1, "one")
			fill(st2, "two")
			if err := s1.Save(ctx, st1); err != nil {
				t.Fatal(err)
			}
			if err := s2.Save(ctx, st2); !errors.Is(err, state.ErrConflict) {
				t.Fatalf("inline=%d: second writer: want ErrConflict, got %v", inline, err)
			}
			// The loser's failed save left the winner's state intact.
			got, err := state.NewStore(c, opts).Load(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Received["one-0"]; !ok || got.Received["two-0"] != nil {
				t.Fatalf("inline=%d: state after conflict is not the winner's: %v", inline, got.Received)
			}
			// The winner keeps writing; the loser recovers by reloading.
			if err := s1.Save(ctx, st1); err != nil {
				t.Fatalf("winner's next save: %v", err)
			}
			if _, err := s2.Load(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("crash between decision recorded and applied", func(t *testing.T) {
		opts := state.Options{Path: "rondo/crash"}
		s := state.NewStore(c, opts)
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		st.Begin(state.Decision{ID: "r3", Round: 3, Intents: []state.Intent{
			{Job: "a", Action: "admit", JobModifyIndex: 10},
			{Job: "b", Action: "suspend", JobModifyIndex: 11},
		}})
		if err := s.Save(ctx, st); err != nil { // decision recorded
			t.Fatal(err)
		}
		st.MarkApplied("", "a")
		if err := s.Save(ctx, st); err != nil { // first intent applied
			t.Fatal(err)
		}
		// "crash": b's intent applied in Nomad or not, never recorded. A new
		// allocator (new Store) reloads.
		st2, err := state.NewStore(c, opts).Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st2.InFlight == nil || st2.InFlight.ID != "r3" || st2.Round != 3 {
			t.Fatalf("in-flight decision lost: %+v", st2.InFlight)
		}
		p := st2.Pending()
		if len(p) != 1 || p[0].Job != "b" || p[0].JobModifyIndex != 11 {
			t.Fatalf("pending after reload = %+v, want only b", p)
		}
	})

	t.Run("kill -9 mid-save leaves a consistent state", func(t *testing.T) {
		// The helper saves large chunked states in a loop; kill it at
		// several points and check each time that the state it left is one
		// whole version (every counter equal to the round).
		path := "rondo/kill9"
		for i, delay := range []time.Duration{700 * time.Millisecond, 1100 * time.Millisecond, 1500 * time.Millisecond} {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStateCrashHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "RONDO_STATE_HELPER="+a.HTTPAddr, "RONDO_STATE_HELPER_TOKEN="+token, "RONDO_STATE_HELPER_PATH="+path)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait for the first save of this run so each kill lands in the
			// loop, not in the helper's start-up.
			sc := bufio.NewScanner(out)
			started := false
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "saved") {
					started = true
					break
				}
			}
			if !started {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper run %d never saved", i)
			}
			go func() { // drain
				for sc.Scan() {
				}
			}()
			time.Sleep(delay)
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()

			st, err := state.NewStore(c, state.Options{Path: path}).Load(ctx)
			if err != nil {
				t.Fatalf("run %d: load after kill -9: %v", i, err)
			}
			if st.Round < 1 || len(st.Received) != helperJobs {
				t.Fatalf("run %d: round %d, %d jobs", i, st.Round, len(st.Received))
			}
			for job, m := range st.Received {
				if m["a100"] != float64(st.Round) {
					t.Fatalf("run %d: torn state: %s has %v at round %d", i, job, m["a100"], st.Round)
				}
			}
			if st.InFlight != nil && st.InFlight.Round != st.Round {
				t.Fatalf("run %d: in-flight decision of round %d in state of round %d", i, st.InFlight.Round, st.Round)
			}
			t.Logf("run %d: killed at round %d, in flight: %v, pending %d", i, st.Round, st.InFlight != nil, len(st.Pending()))
		}
	})

	t.Run("leader lock is exclusive", func(t *testing.T) {
		opts := state.LeaderOptions{Path: "rondo/leader-test", TTL: 10 * time.Second, RetryInterval: 100 * time.Millisecond}
		l1, err := state.Lock(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := state.Lock(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l1.Acquire(ctx); err != nil {
			t.Fatalf("first acquire: %v", err)
		}
		if _, err := l2.Acquire(ctx); !errors.Is(err, api.ErrLockConflict) {
			t.Fatalf("second acquire: want ErrLockConflict, got %v", err)
		}
		if err := l2.Renew(ctx); err == nil {
			t.Fatal("renew by a non-holder succeeded")
		}
		if err := l1.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := l2.Acquire(ctx); err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// Two allocators racing through RunAsLeader never overlap. Each has
		// its own client, as two processes would (see RunAsLeader's doc).
		c2, err := api.NewClient(&api.Config{Address: a.HTTPAddr, SecretID: token})
		if err != nil {
			t.Fatal(err)
		}
		var active, maxActive, runs atomic.Int32
		var waited atomic.Bool
		var wg sync.WaitGroup
		for _, c := range []*api.Client{c, c2} {
			wg.Go(func() {
				o := opts
				o.OnWait = func() { waited.Store(true) }
				err := state.RunAsLeader(ctx, c, o, func(ctx context.Context) error {
					n := active.Add(1)
					for {
						m := maxActive.Load()
						if n <= m || maxActive.CompareAndSwap(m, n) {
							break
						}
					}
					time.Sleep(400 * time.Millisecond)
					active.Add(-1)
					runs.Add(1)
					return nil
				})
				if err != nil {
					t.Errorf("RunAsLeader: %v", err)
				}
			})
		}
		wg.Wait()
		if runs.Load() != 2 || maxActive.Load() != 1 || !waited.Load() {
			t.Fatalf("runs %d, max concurrent leaders %d, a follower waited %v", runs.Load(), maxActive.Load(), waited.Load())
		}
	})
}

const helperJobs = 300

// TestStateCrashHelper is the process TestAllocatorStateACL kills with
// SIGKILL; it does nothing unless started by it.
func TestStateCrashHelper(t *testing.T) {
	addr := os.Getenv("RONDO_STATE_HELPER")
	if addr == "" {
		t.Skip("helper process for the kill -9 test")
	}
	c, err := api.NewClient(&api.Config{Address: addr, SecretID: os.Getenv("RONDO_STATE_HELPER_TOKEN")})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Small chunks: many writes per save, so kills land between them.
	s := state.NewStore(c, state.Options{Path: os.Getenv("RONDO_STATE_HELPER_PATH"), InlineLimit: 1024, ChunkSize: 512})
	st, err := s.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for r := st.Round + 1; ; r++ {
		var intents []state.Intent
		for i := range helperJobs {
			job := fmt.Sprintf("job-%04d-%x", i, i*7919)
			st.Received[job] = map[string]float64{"a100": float64(r)}
			intents = append(intents, state.Intent{Job: job, Action: "keep", JobModifyIndex: uint64(r)})
		}
		st.Begin(state.Decision{ID: fmt.Sprint("round-", r), Round: r, Intents: intents})
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		for _, in := range intents[:helperJobs/2] {
			st.MarkApplied("", in.Job)
		}
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		st.Finish()
		if err := s.Save(ctx, st); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("saved round %d\n", r)
	}
}
