package main

// rondo simulate sweep -on-nomad: each point of the sweep (one policy spec,
// rate and seed) runs as its own Nomad batch job, one allocation, whose
// task is this same rondo binary running `simulate sweep` for that one
// point into its allocation directory; the results are read back through
// Nomad's allocation file system API (alloc/sweep/runs.jsonl, the local
// sweep's journal line for that run) and written exactly as the local
// sweep writes them. See cmd/rondo/README.md "Sweeps on Nomad".

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/sim/sweep"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// sweepNomad holds -on-nomad and the flags it adds to simulate sweep.
type sweepNomad struct {
	on                        bool
	conn                      nomadFlags
	binary, artifact, driver  string
	pool, datacenters         string
	cpu, memory, stderrTailKB int
}

// sweepNomadFlags are the flags of -on-nomad itself: they configure the
// jobs, not the simulation, and are never passed to a point's task.
var sweepNomadFlags = map[string]bool{
	"on-nomad": true, "nomad-binary": true, "nomad-artifact": true, "nomad-driver": true, "nomad-pool": true,
	"nomad-datacenters": true, "nomad-cpu": true, "nomad-memory": true,
	"address": true, "token": true, "namespace": true, "region": true, "ca-cert": true, "client-cert": true,
	"client-key": true, "tls-server-name": true, "tls-skip-verify": true,
}

// sweepDriverFlags configure the whole sweep's output or run: the point's
// task gets its own values (one point, -parallel 1, -out in its allocation
// directory) or none.
var sweepDriverFlags = map[string]bool{
	"policies": true, "rates": true, "seeds": true, "out": true, "parallel": true, "resume": true, "plot-only": true,
	"progress": true, "title": true, "ymax": true, "cdf-rate": true, "throughputs": true,
}

func (n *sweepNomad) register(f *flag.FlagSet) {
	f.BoolVar(&n.on, "on-nomad", false, "run each point as a Nomad batch job (one allocation) on the Nomad cluster at -address / $NOMAD_ADDR, and gather the results from the allocations")
	n.conn.register(f)
	f.StringVar(&n.binary, "nomad-binary", "", "with -on-nomad: path of the rondo binary on the Nomad clients (default: this binary's own path; the clients must have it there)")
	f.StringVar(&n.artifact, "nomad-artifact", "", "with -on-nomad: a go-getter URL of the rondo binary (e.g. https://host/rondo) that every point's task downloads instead of -nomad-binary")
	f.StringVar(&n.driver, "nomad-driver", "raw_exec", "with -on-nomad: the task driver, raw_exec or exec")
	f.StringVar(&n.pool, "nomad-pool", "", "with -on-nomad: the node pool of the points' jobs (default Nomad's default pool)")
	f.StringVar(&n.datacenters, "nomad-datacenters", "*", "with -on-nomad: comma-separated datacenters of the points' jobs")
	f.IntVar(&n.cpu, "nomad-cpu", 1000, "with -on-nomad: CPU of each point's task, MHz")
	f.IntVar(&n.memory, "nomad-memory", 2048, "with -on-nomad: memory of each point's task, MB")
	n.stderrTailKB = 2
}

// flagGiven reports whether name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// check refuses -on-nomad's flags without -on-nomad and bad values.
func (n *sweepNomad) check(fs *flag.FlagSet) error {
	if !n.on {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			if sweepNomadFlags[f.Name] && f.Name != "on-nomad" {
				stray = append(stray, "-"+f.Name)
			}
		})
		if len(stray) > 0 {
			return fmt.Errorf("%s: only with -on-nomad", strings.Join(stray, ", "))
		}
		return nil
	}
	if n.driver != "raw_exec" && n.driver != "exec" {
		return fmt.Errorf("-nomad-driver %q: want raw_exec or exec", n.driver)
	}
	if n.binary != "" && n.artifact != "" {
		return fmt.Errorf("-nomad-binary and -nomad-artifact: give one")
	}
	if n.cpu <= 0 || n.memory <= 0 {
		return fmt.Errorf("-nomad-cpu and -nomad-memory: want positive MHz and MB")
	}
	return nil
}

// nomadPoint is one point of the sweep and its job.
type nomadPoint struct {
	idx   int
	spec  string
	rate  float64
	seed  int64
	jobID string
}

const (
	sweepGroup = "point"
	sweepTask  = "simulate"
	// sweepResult is the point's journal, relative to the allocation
	// directory (the task writes it under $NOMAD_ALLOC_DIR).
	sweepResult = "alloc/sweep/runs.jsonl"
	// sweepLastFile in the output directory names the job prefix of the
	// sweep running into it, so that the next one purges its jobs should
	// it have been killed before it could.
	sweepLastFile = "nomad-sweep-prefix"
)

// sweepPrefix is a new sweep's job id prefix: unique per sweep.
func sweepPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "rondo-sweep-" + hex.EncodeToString(b)
}

// pointArgs are the point task's arguments: `simulate sweep` with every
// simulation flag given to this sweep (so that the point simulates exactly
// what the local sweep would), the point's policy spec, rate and seed, one
// run at a time, and its output in the allocation directory. A
// --throughputs file travels in the job (a template) as local/throughputs.json.
func (c *sweepCmd) pointArgs(p nomadPoint) []string {
	args := []string{"simulate", "sweep"}
	c.flags.Visit(func(f *flag.Flag) {
		if sweepNomadFlags[f.Name] || sweepDriverFlags[f.Name] {
			return
		}
		args = append(args, "-"+f.Name+"="+f.Value.String())
	})
	if c.tputFile != "" {
		args = append(args, "-throughputs=${NOMAD_TASK_DIR}/throughputs.json")
	}
	return append(args, "-policies="+p.spec, "-rates="+strconv.FormatFloat(p.rate, 'g', -1, 64),
		"-seeds="+strconv.FormatInt(p.seed, 10), "-parallel=1", "-out=${NOMAD_ALLOC_DIR}/sweep")
}

// pointJob is the batch job of one point: one group, one allocation, no
// restart and no rescheduling (a failed point is reported, and -resume
// runs it again).
func (c *sweepCmd) pointJob(p nomadPoint, prefix, namespace string, tputs []byte) *api.Job {
	n := &c.nomad
	task := &api.Task{Name: sweepTask, Driver: n.driver,
		Config:    map[string]any{"command": n.binary, "args": c.pointArgs(p)},
		Resources: &api.Resources{CPU: ptr(n.cpu), MemoryMB: ptr(n.memory)},
		// The journal and a failed point's stderr are all that is read.
		LogConfig: &api.LogConfig{MaxFiles: ptr(2), MaxFileSizeMB: ptr(5)},
	}
	if n.artifact != "" {
		task.Config["command"] = "local/rondo"
		task.Artifacts = []*api.TaskArtifact{{GetterSource: ptr(n.artifact), RelativeDest: ptr("local/rondo"), GetterMode: ptr("file")}}
	}
	if tputs != nil {
		// Delimiters no JSON file holds: the file goes through verbatim.
		task.Templates = []*api.Template{{EmbeddedTmpl: ptr(string(tputs)), DestPath: ptr("local/throughputs.json"),
			LeftDelim: ptr("<<rondo-sweep-no-template<<"), RightDelim: ptr(">>rondo-sweep-no-template>>")}}
	}
	var dcs []string
	for _, d := range strings.Split(n.datacenters, ",") {
		if d = strings.TrimSpace(d); d != "" {
			dcs = append(dcs, d)
		}
	}
	job := &api.Job{ID: ptr(p.jobID), Name: ptr(p.jobID), Type: ptr("batch"), Datacenters: dcs,
		Meta: map[string]string{"rondo_sweep": prefix, "rondo_sweep_policy": p.spec,
			"rondo_sweep_rate": strconv.FormatFloat(p.rate, 'g', -1, 64), "rondo_sweep_seed": strconv.FormatInt(p.seed, 10)},
		TaskGroups: []*api.TaskGroup{{Name: ptr(sweepGroup), Count: ptr(1), Tasks: []*api.Task{task},
			RestartPolicy:    &api.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")},
			ReschedulePolicy: &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)},
		}}}
	if namespace != "" {
		job.Namespace = ptr(namespace)
	}
	if n.pool != "" {
		job.NodePool = ptr(n.pool)
	}
	return job
}

func ptr[T any](v T) *T { return &v }

// nomadPoints are the sweep's points (sweep.Points), each with its job id.
func nomadPoints(cfg sweep.Config, prefix string) ([]nomadPoint, error) {
	points, err := sweep.Points(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]nomadPoint, len(points))
	for i, p := range points {
		out[i] = nomadPoint{idx: i, spec: p.Spec.Label, rate: p.Rate, seed: p.Seed, jobID: fmt.Sprintf("%s-%d", prefix, i)}
	}
	return out, nil
}

// executeOnNomad runs the points not in cfg.Done as Nomad jobs and returns
// every run in the local sweep's order, and how many points Nomad failed to
// run (each reported through logLine with its allocation and stderr tail,
// recorded as a run with an error, not journaled). Jobs are purged as their
// results are read, and all of them on the way out (an error, Ctrl-C).
func (c *sweepCmd) executeOnNomad(cfg sweep.Config, onRun func(done, total int, r *sweep.Run, journal bool),
	logLine func(string)) ([]sweep.Run, int, error) {
	n := &c.nomad
	conf, err := n.conn.config(rhcl.Nomad{})
	if err != nil {
		return nil, 0, err
	}
	client, err := api.NewClient(conf)
	if err != nil {
		return nil, 0, err
	}
	if n.artifact == "" && n.binary == "" {
		if n.binary, err = os.Executable(); err != nil {
			return nil, 0, fmt.Errorf("-nomad-binary: this binary's path: %v", err)
		}
	}
	var tputs []byte
	if c.tputFile != "" {
		if tputs, err = os.ReadFile(c.tputFile); err != nil {
			return nil, 0, err
		}
	}
	prefix := sweepPrefix()
	points, err := nomadPoints(cfg, prefix)
	if err != nil {
		return nil, 0, err
	}
	runs := make([]sweep.Run, len(points))
	prior := map[string]sweep.Run{}
	for _, r := range cfg.Done {
		prior[sweep.RunKey(r.Policy, r.Rate, r.Seed)] = r
	}
	var queue []nomadPoint
	for _, p := range points {
		if r, ok := prior[sweep.RunKey(p.spec, p.rate, p.seed)]; ok {
			runs[p.idx] = r
			continue
		}
		queue = append(queue, p)
	}
	if _, err := client.Status().Leader(); err != nil {
		return nil, 0, fmt.Errorf("nomad at %s: %v", conf.Address, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c.purgeEarlier(ctx, client, logLine)
	if len(queue) == 0 {
		return runs, 0, nil
	}
	last := filepath.Join(c.outDir, sweepLastFile)
	if err := os.WriteFile(last, []byte(prefix+"\n"), 0o644); err != nil {
		return nil, 0, err
	}
	// As the local sweep: the higher rates (the longer runs) first.
	sort.SliceStable(queue, func(i, j int) bool { return queue[i].rate > queue[j].rate })
	namespace := conf.Namespace
	limit := "no limit: Nomad queues them"
	if c.parallel > 0 {
		limit = fmt.Sprintf("at most %d at a time", c.parallel)
	}
	logLine(fmt.Sprintf("nomad: sweep %s: %d points as batch jobs %s-N on %s (%s, %s)", prefix, len(queue), prefix,
		conf.Address, n.driver, limit))

	g := &nomadGather{c: c, client: client, prefix: prefix, byJob: map[string]nomadPoint{}, live: map[string]bool{},
		logLine: logLine, onRun: onRun, total: len(queue)}
	for _, p := range queue {
		g.byJob[p.jobID] = p
	}
	regCtx, regCancel := context.WithCancel(ctx)
	regDone := make(chan struct{})
	defer func() {
		// Registrations stop before the purge, so that none outlives it.
		regCancel()
		<-regDone
		g.purgeAll()
	}()
	slots := make(chan struct{}, max(c.parallel, 1))
	g.release = func() {
		if c.parallel > 0 {
			<-slots
		}
	}
	regErr := make(chan error, 1)
	go func() {
		defer close(regDone)
		regErr <- func() error {
			for i, p := range queue {
				if c.parallel > 0 {
					select {
					case slots <- struct{}{}:
					case <-regCtx.Done():
						return regCtx.Err()
					}
				} else if regCtx.Err() != nil {
					return regCtx.Err()
				}
				g.mu.Lock()
				g.live[p.jobID] = true
				g.mu.Unlock()
				resp, _, err := client.Jobs().Register(c.pointJob(p, prefix, namespace, tputs), nil)
				if err != nil {
					return fmt.Errorf("registering %s: %v", p.jobID, err)
				}
				if i == 0 {
					if err := g.checkPlaceable(regCtx, resp.EvalID); err != nil {
						return err
					}
				}
			}
			return nil
		}()
	}()
	failed, err := g.watch(ctx, regErr)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted: %d of %d points done; the sweep's jobs are purged; run the same command with -resume to go on", g.done, len(queue))
		}
		return nil, 0, err
	}
	for idx, r := range g.results {
		runs[idx] = r
	}
	_ = os.Remove(last)
	return runs, failed, nil
}

// purgeEarlier purges the jobs of an earlier sweep into the same output
// directory that was killed before it could purge them itself.
func (c *sweepCmd) purgeEarlier(ctx context.Context, client *api.Client, logLine func(string)) {
	b, err := os.ReadFile(filepath.Join(c.outDir, sweepLastFile))
	prev := strings.TrimSpace(string(b))
	if err != nil || !strings.HasPrefix(prev, "rondo-sweep-") {
		return
	}
	jobs, _, err := client.Jobs().PrefixList(prev + "-")
	if err != nil {
		return
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		_, _, _ = client.Jobs().Deregister(j.ID, true, nil)
	}
	if len(jobs) > 0 {
		logLine(fmt.Sprintf("nomad: purged %d jobs left by an earlier sweep into %s (%s)", len(jobs), c.outDir, prev))
	}
}

// nomadGather follows the sweep's allocations and reads their results.
type nomadGather struct {
	c       *sweepCmd
	client  *api.Client
	prefix  string
	byJob   map[string]nomadPoint
	logLine func(string)
	onRun   func(done, total int, r *sweep.Run, journal bool)
	release func()
	total   int

	mu   sync.Mutex
	live map[string]bool // registered, not yet purged

	done    int
	results map[int]sweep.Run
}

// checkPlaceable fails the sweep at its first job when no client could
// ever run it (every node filtered out: the driver, the pool, the
// datacenters); a cluster that is only full queues the jobs.
func (g *nomadGather) checkPlaceable(ctx context.Context, evalID string) error {
	if evalID == "" {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ev, _, err := g.client.Evaluations().Info(evalID, nil)
		if err != nil || (ev.Status != "complete" && ev.Status != "failed") {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		m := ev.FailedTGAllocs[sweepGroup]
		if m == nil || m.NodesExhausted > 0 {
			return nil
		}
		var why []string
		for k, v := range m.ConstraintFiltered {
			why = append(why, fmt.Sprintf("%s on %d", k, v))
		}
		for k, v := range m.ClassFiltered {
			why = append(why, fmt.Sprintf("class %s: %d", k, v))
		}
		sort.Strings(why)
		return fmt.Errorf("no Nomad client can run the sweep's jobs (driver %s, pool %q, datacenters %q): %d nodes evaluated, %d filtered out (%s); enable the driver on the clients or choose another with -nomad-driver, -nomad-pool, -nomad-datacenters",
			g.c.nomad.driver, g.c.nomad.pool, g.c.nomad.datacenters, m.NodesEvaluated, m.NodesFiltered, strings.Join(why, "; "))
	}
	return nil
}

// watch follows the sweep's allocations with blocking queries until every
// point has a result or has failed; it returns the number failed.
func (g *nomadGather) watch(ctx context.Context, regErr <-chan error) (int, error) {
	g.results = map[int]sweep.Run{}
	seen := map[string]bool{} // allocations handled
	failed := 0
	var index uint64
	var lastQuery time.Time
	registering := true
	for g.done < g.total {
		if registering {
			select {
			case err := <-regErr:
				if err != nil {
					return 0, err
				}
				registering = false
			default:
			}
		}
		// One blocking query at most every second, without task states
		// (a failed allocation's are read alone): a 1,000-point sweep's
		// allocations are listed at most once a second, however many
		// change.
		if wait := time.Until(lastQuery.Add(time.Second)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		lastQuery = time.Now()
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: 5 * time.Second,
			Filter: fmt.Sprintf("JobID matches %q", "^"+g.prefix+"-[0-9]+$"),
			Params: map[string]string{"task_states": "false"}}).WithContext(ctx)
		stubs, meta, err := g.client.Allocations().List(q)
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err != nil {
			g.logLine(fmt.Sprintf("nomad: listing allocations: %v (retrying)", err))
			select {
			case <-time.After(2 * time.Second):
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			continue
		}
		if meta.LastIndex < index {
			index = 0 // the index went back (a restored server): start over
		} else {
			index = meta.LastIndex
		}
		sort.Slice(stubs, func(i, j int) bool { return stubs[i].CreateIndex < stubs[j].CreateIndex })
		for _, a := range stubs {
			p, ok := g.byJob[a.JobID]
			if !ok || seen[a.ID] || a.DesiredStatus != "run" {
				continue
			}
			switch a.ClientStatus {
			case "complete":
				seen[a.ID] = true
				r, err := g.result(ctx, a, p)
				if err != nil {
					failed++
					g.fail(p, a, err.Error())
					continue
				}
				g.finish(p, r, true)
			case "failed":
				seen[a.ID] = true
				failed++
				g.fail(p, a, "failed")
			case "lost":
				// Nomad places a replacement of a lost allocation.
				seen[a.ID] = true
				g.logLine(fmt.Sprintf("nomad: %s rate=%g seed=%d: allocation %s lost with node %s; Nomad places it again",
					p.spec, p.rate, p.seed, a.ID, a.NodeID))
			}
		}
	}
	return failed, nil
}

// result reads a completed allocation's journal line: the point's run.
func (g *nomadGather) result(ctx context.Context, a *api.AllocationListStub, p nomadPoint) (sweep.Run, error) {
	var b []byte
	var err error
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		if b, err = g.fsGet(ctx, "cat", a, map[string]string{"path": sweepResult}); err == nil {
			break
		}
		time.Sleep(time.Duration(try+1) * time.Second)
	}
	if err != nil {
		return sweep.Run{}, fmt.Errorf("exited 0 but its result %s could not be read: %v", sweepResult, err)
	}
	var line struct {
		sweep.Run
		JCTs []float64 `json:"jcts"`
	}
	b = bytes.TrimSpace(b)
	if bytes.Count(b, []byte("\n")) != 0 || json.Unmarshal(b, &line) != nil {
		return sweep.Run{}, fmt.Errorf("exited 0 but its result %s is not one journal line (%d bytes)", sweepResult, len(b))
	}
	r := line.Run
	r.JCTs = line.JCTs
	if sweep.RunKey(r.Policy, r.Rate, r.Seed) != sweep.RunKey(p.spec, p.rate, p.seed) {
		return sweep.Run{}, fmt.Errorf("its result is of another point (%s rate=%g seed=%d)", r.Policy, r.Rate, r.Seed)
	}
	return r, nil
}

// fail records a point Nomad did not run to a result, with its allocation,
// node, task events and stderr tail.
func (g *nomadGather) fail(p nomadPoint, a *api.AllocationListStub, what string) {
	var events []string
	states := a.TaskStates
	if full, _, err := g.client.Allocations().Info(a.ID, &api.QueryOptions{Namespace: a.Namespace}); err == nil {
		states = full.TaskStates
	}
	if ts := states[sweepTask]; ts != nil {
		for _, e := range ts.Events {
			if e.DisplayMessage != "" && e.Type != "Received" && e.Type != "Task Setup" && e.Type != "Started" {
				events = append(events, e.Type+": "+e.DisplayMessage)
			}
		}
	}
	tail := g.stderrTail(a)
	msg := fmt.Sprintf("nomad: allocation %s (job %s, node %s) %s", a.ID, a.JobID, a.NodeName, what)
	if len(events) > 0 {
		msg += "; events: " + strings.Join(events, "; ")
	}
	lines := []string{fmt.Sprintf("FAILED %s rate=%g seed=%d: %s", p.spec, p.rate, p.seed, msg)}
	if tail != "" {
		lines = append(lines, "  stderr (tail):")
		for _, l := range strings.Split(strings.TrimRight(tail, "\n"), "\n") {
			lines = append(lines, "    "+l)
		}
		msg += "; stderr: " + lastLine(tail)
	} else {
		lines = append(lines, "  stderr: (empty)")
	}
	g.logLine(strings.Join(lines, "\n"))
	g.finish(p, sweep.Run{Policy: p.spec, Rate: p.rate, Seed: p.seed, Error: msg}, false)
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// stderrTail is the last few KB of the task's stderr ("" when unreadable).
func (g *nomadGather) stderrTail(a *api.AllocationListStub) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := g.fsGet(ctx, "logs", a, map[string]string{"task": sweepTask, "type": "stderr", "origin": "end",
		"offset": strconv.Itoa(g.c.nomad.stderrTailKB << 10), "plain": "true"})
	if err != nil {
		return ""
	}
	return string(b)
}

// fsGet reads /v1/client/fs/<op>/<alloc> through the Nomad server (which
// forwards it to the allocation's client) on the client's one connection
// pool. (api.AllocFS first tries the node itself with a new HTTP client
// each call: at hundreds of points their connections reach Nomad's
// per-client limit and it answers 429.)
func (g *nomadGather) fsGet(ctx context.Context, op string, a *api.AllocationListStub, params map[string]string) ([]byte, error) {
	q := (&api.QueryOptions{Namespace: a.Namespace, Params: params}).WithContext(ctx)
	rc, err := g.client.Raw().Response("/v1/client/fs/"+op+"/"+a.ID, q)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// finish reports a point and purges its job.
func (g *nomadGather) finish(p nomadPoint, r sweep.Run, journal bool) {
	g.done++
	g.results[p.idx] = r
	g.purge(p.jobID)
	g.release()
	g.onRun(g.done, g.total, &r, journal)
}

func (g *nomadGather) purge(jobID string) {
	g.mu.Lock()
	live := g.live[jobID]
	delete(g.live, jobID)
	g.mu.Unlock()
	if live {
		if _, _, err := g.client.Jobs().Deregister(jobID, true, nil); err != nil {
			g.logLine(fmt.Sprintf("nomad: purging %s: %v", jobID, err))
		}
	}
}

// purgeAll purges every job of the sweep still registered, and any the
// server lists under its prefix (a registration in flight). Jobs with
// running points (an error, Ctrl-C) are stopped first and purged once
// their allocations have stopped (at most 20 s), so that Nomad records
// the stop of each.
func (g *nomadGather) purgeAll() {
	g.mu.Lock()
	ids := map[string]bool{}
	for id := range g.live {
		ids[id] = true
	}
	g.live = map[string]bool{}
	g.mu.Unlock()
	if jobs, _, err := g.client.Jobs().PrefixList(g.prefix + "-"); err == nil {
		for _, j := range jobs {
			ids[j.ID] = true
		}
	}
	if len(ids) == 0 {
		return
	}
	for id := range ids {
		_, _, _ = g.client.Jobs().Deregister(id, false, nil)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		allocs, _, err := g.client.Allocations().List(&api.QueryOptions{
			Filter: fmt.Sprintf("JobID matches %q and ClientStatus in [\"pending\", \"running\"]", "^"+g.prefix+"-[0-9]+$"),
			Params: map[string]string{"task_states": "false"}})
		if err != nil || len(allocs) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for id := range ids {
		if _, _, err := g.client.Jobs().Deregister(id, true, nil); err != nil {
			g.logLine(fmt.Sprintf("nomad: purging %s: %v", id, err))
		}
	}
}
