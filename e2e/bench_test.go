package e2e

import (
	"cmp"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/engine"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// ackTransport records when the last write (register, scale) returned.
type ackTransport struct {
	base   http.RoundTripper
	writes atomic.Int64
	last   atomic.Int64 // unix nanos
	// allocLists: full allocation listings (enforcement's waits read
	// the event stream's memory instead where they can).
	allocLists atomic.Int64
}

func (t *ackTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/allocations" && r.URL.Query().Get("prefix") == "" {
		t.allocLists.Add(1)
	}
	resp, err := t.base.RoundTrip(r)
	if r.Method != http.MethodGet && err == nil && resp.StatusCode < 300 {
		t.writes.Add(1)
		t.last.Store(time.Now().UnixNano())
	}
	return resp, err
}

// benchJob is a one-GPU job that opted in to Rondo; its task is Nomad's
// mock driver (in-process, no executor) with log collection off, so a
// thousand of them run on this small machine.
func benchJob(id string) *api.Job {
	job := api.NewBatchJob(id, id, "global", 50)
	job.Meta = map[string]string{"rondo.vc": "research", "rondo.model": "LM (batch size 20)", "rondo.steps": "1000000"}
	task := api.NewTask("train", "mock_driver").SetConfig("run_for", "1h")
	task.LogConfig = &api.LogConfig{Disabled: new(true)}
	one := uint64(1)
	task.Resources = &api.Resources{CPU: new(1), MemoryMB: new(10),
		Devices: []*api.RequestedDevice{{Name: "nvidia/gpu", Count: &one}}}
	tg := api.NewTaskGroup("train", 1).AddTask(task)
	tg.RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail")}
	return job.AddTaskGroup(tg)
}

// benchGPUs is TestScaleBench's cluster: four clients of 250 fake GPUs.
const benchGPUs = 1000

// TestScaleBench times one allocator round against a real Nomad server for
// N jobs (RONDO_BENCH=200,1000,10000): observe, decide, and enforce — every
// register call acknowledged, then every allocation running on its GPUs —
// and two more rounds (steady under an integral policy: every running job
// kept, beyond 1,000 jobs the rest waiting at the gate; a full rotation
// under aware LAS, below), with the live heap after each. One
// server, four clients with 250 fake GPUs each (v100, p100, k80, v100). It
// is skipped unless RONDO_BENCH is set; docs/performance.md records the
// numbers.
func TestScaleBench(t *testing.T) {
	spec := os.Getenv("RONDO_BENCH")
	if spec == "" || testing.Short() {
		t.Skip("scale benchmark: set RONDO_BENCH=200,1000")
	}
	var sizes []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 10000 {
			t.Fatalf("RONDO_BENCH: bad size %q (1..10000)", f)
		}
		sizes = append(sizes, n)
	}
	// Aware LAS (the default) gives identical jobs a mix of every type and
	// so moves every job each round (engine TestIdenticalJobsRotateUnderLAS):
	// rounds 2 and 3 measure a full rotation. An integral policy
	// (RONDO_BENCH_POLICY=fifo_perf) keeps them: steady rounds.
	policy := cmp.Or(os.Getenv("RONDO_BENCH_POLICY"), "max_min_fairness_perf")
	c := fakeGPUCluster(t, "rondo-bench-", cluster.Options{LogLevel: "WARN",
		ClientCPUMHz: 4000, ClientMemoryMB: 8192, StartTimeout: 180 * time.Second,
		Clients: []cluster.ClientSpec{cluster.UniformClient("c0", "v100", 250), cluster.UniformClient("c1", "p100", 250),
			cluster.UniformClient("c2", "k80", 250), cluster.UniformClient("c3", "v100", 250)}})
	tr := &ackTransport{base: http.DefaultTransport}
	for _, n := range sizes {
		cluster.PurgeJobs(c.API, 600*time.Second)
		c.API.System().GarbageCollect()
		// Submit n jobs; they wait in pool "default". The first half goes
		// 8 registrations at a time (as the backend writes), the second 32
		// at a time: the write rate the server sustains at each.
		var rates []string
		for _, half := range [][3]int{{0, n / 2, 8}, {n / 2, n, 32}} {
			lo, hi, par := half[0], half[1], half[2]
			if hi == lo {
				continue
			}
			var wg sync.WaitGroup
			sem := make(chan struct{}, par)
			errs := make(chan error, hi-lo)
			begin := time.Now()
			for i := lo; i < hi; i++ {
				wg.Add(1)
				sem <- struct{}{}
				go func(i int) {
					defer wg.Done()
					defer func() { <-sem }()
					if _, _, err := c.API.Jobs().Register(benchJob(fmt.Sprintf("b%05d", i)), nil); err != nil {
						errs <- err
					}
				}(i)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			rates = append(rates, fmt.Sprintf("%.0f/s at %d", float64(hi-lo)/time.Since(begin).Seconds(), par))
		}
		line := fmt.Sprintf("BENCH jobs=%d registers=%s", n, strings.Join(rates, ", "))
		t.Log(line)
		fmt.Println(line)
		client, err := api.NewClient(&api.Config{Address: c.Address, HttpClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		// Observe from the event stream unless RONDO_BENCH_WATCH=0; with
		// it, each round also times a re-listing Observe (Watch off) right
		// after the one the round uses.
		watch := os.Getenv("RONDO_BENCH_WATCH") != "0"
		b, err := rnomad.New(rnomad.Config{Client: client, AckTimeout: 10 * time.Minute, Watch: watch,
			Progress: func(*api.Job) (float64, bool) { return 0, false }})
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{Policy: policy, RoundS: 360})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for round := 1; round <= 3; round++ {
			w0, l0, a0 := tr.writes.Load(), tr.allocLists.Load(), b.AckReads()
			start := time.Now()
			snap, err := b.Observe()
			if err != nil {
				t.Fatal(err)
			}
			observed := time.Since(start)
			relisted := ""
			if watch {
				b.SetWatch(false)
				t0 := time.Now()
				if _, err := b.Observe(); err != nil {
					t.Fatal(err)
				}
				relisted = fmt.Sprintf(" relist_observe=%v", time.Since(t0).Round(time.Millisecond))
				b.SetWatch(true)
				start = start.Add(time.Since(t0)) // not part of the round
			}
			plan, err := e.Round(snap)
			if err != nil {
				t.Fatal(err)
			}
			decided := time.Since(start)
			if err := b.Enforce(plan); err != nil {
				t.Fatal(err)
			}
			running := time.Since(start)
			acked := time.Duration(0)
			if w := tr.writes.Load() - w0; w > 0 {
				acked = time.Unix(0, tr.last.Load()).Sub(start)
			}
			starts := 0
			for _, a := range plan.Assignments {
				if a.Action == engine.Start {
					starts++
				}
			}
			// More jobs than the 1,000 GPUs: the rest wait at the gate.
			if round == 1 && (len(snap.Jobs) != n || starts != min(n, benchGPUs)) {
				t.Fatalf("%d jobs: observed %d, started %d", n, len(snap.Jobs), starts)
			}
			// The backend's and engine's memory (the agent's, less its
			// HTTP servers and state): live heap after a collection.
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			from, relists := b.WatchStats()
			line := fmt.Sprintf("BENCH policy=%s jobs=%d round=%d running=%d starts=%d writes=%d observe=%v%s watch=%v from_stream=%d relists=%d alloc_lists=%d ack_reads_from_stream=%d decide=%v all_writes_acked=%v all_running=%v heap_mib=%.0f",
				policy, n, round, len(snap.Running), starts, tr.writes.Load()-w0, observed.Round(time.Millisecond), relisted, watch, from, relists,
				tr.allocLists.Load()-l0, b.AckReads()-a0,
				(decided - observed).Round(time.Millisecond), acked.Round(time.Millisecond), running.Round(time.Millisecond), float64(ms.HeapAlloc)/(1<<20))
			t.Log(line)
			fmt.Println(line)
		}
	}
}
