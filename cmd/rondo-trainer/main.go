// Command rondo-trainer is a fake training job for tests and the demo: it
// "trains" at the throughput Gavel measured for a model on the GPU type it
// was given, checkpoints its progress to a host directory, resumes from it
// on start, checkpoints and exits 0 on SIGTERM (a Rondo suspension), and
// exits 0 once it has done its steps.
//
// Inputs (flag, else environment):
//
//	-model          job meta rondo.model (e.g. "ResNet-50 (batch size 64)")
//	-steps          job meta rondo.steps
//	-scale-factor   job meta rondo.gpus, else the number of CUDA_VISIBLE_DEVICES
//	-type           RONDO_GPU_TYPE (jobs set it from node meta
//	                ${meta.rondo_gpu_type}), else a known type word in the
//	                first visible GPU's uuid, else v100
//	-checkpoint-dir RONDO_CHECKPOINT_DIR, else $NOMAD_ALLOC_DIR/checkpoint
//	                (lost on reschedule: jobs should pass a host path)
//	-speedup        RONDO_SPEEDUP (default 1): multiplies the throughput
//	-partner-model  RONDO_PARTNER_MODEL: the model of the job it shares its
//	                GPUs with (space sharing, set by the allocator); it then
//	                runs at its pair throughput next to that model
//
// With RONDO_LEASE_ADDR set (and a workload identity named "rondo" with
// audience "rondo-lease"), allocation index 0 reports its progress and
// throughput to the allocator's lease API every RONDO_REPORT_INTERVAL
// (default 1s) and asks for its lease. When the lease does not continue it
// checkpoints at once and keeps running until the allocator stops it (a
// task that exited on its own would look finished to Nomad); errors from
// the API (an allocator restarting) are logged and ignored.
//
// Only allocation index 0 writes the checkpoint, so a multi-node job keeps
// one progress record.
//
// Checkpoints (preemption that respects the work, #21). The checkpoint
// records when it was written ("at"). Environment:
//
//	RONDO_CHECKPOINT_INTERVAL  how often it checkpoints on its own (default
//	                           500ms; 0: never, only when told or done)
//	RONDO_CHECKPOINT_ON_STOP   false: a stop (SIGTERM) or a lease that ends
//	                           does not checkpoint (a job too large to save
//	                           within its kill timeout): what it did since
//	                           its last checkpoint is lost (default true)
//	RONDO_CHECKPOINT_COST      how long writing a checkpoint takes (a
//	                           duration, default 0; training pauses)
//	RONDO_RESTORE_COST         how long loading it takes before the first
//	                           step (default 0)
//	RONDO_PROGRESS_INTERVAL    how often it prints a progress line with its
//	                           ETA (default 30s; 0: never)
//
// A lease answer with checkpoint_now (a notice: the allocator stops the job
// at stop_at) makes it checkpoint at once, once per notice, and train on
// ("rondo-trainer: checkpoint now: checkpointed at S/T, stop at ..."). Its
// reports carry checkpoint_at (its last checkpoint, the one it resumed
// from until it writes one), checkpoint_s (how long its last write took)
// and, from its first step, restore_s (process start to that step, the
// checkpoint loaded).
//
// Two-role elastic jobs (DL2: job meta rondo.ps and rondo.ps_group): the
// task of the group rondo.ps_group names (NOMAD_GROUP_NAME), or with
// RONDO_ROLE=ps, is a parameter server: it asks for its lease, trains
// nothing, and exits 0 once the workers' checkpoint says the job is done
// (or on SIGTERM). Every worker, not only index 0, asks the lease API every
// interval and trains with the batch it answers (its share of the total
// batch over the workers in force, which a live resize changes without a
// restart): it prints each new value ("batch 86 of 256, worker 0 of 3,
// 1 ps") and writes it to $NOMAD_ALLOC_DIR/rondo-trainer.json (role,
// index, workers, ps, batch, total_batch, steps). With rondo.epochs, index
// 0 also reports epochs_done (steps / rondo.steps × rondo.epochs) and
// writes it to the checkpoint ("epochs"). The throughput does not depend
// on the worker count (as for one-role elastic jobs).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/allocator/lease/client"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	"github.com/rondo-sched/rondo/internal/progress"
)

type checkpoint struct {
	Steps  float64  `json:"steps"`
	Total  float64  `json:"total"`
	Epochs *float64 `json:"epochs,omitempty"`
	// At is when it was written (absent in older checkpoints).
	At time.Time `json:"at,omitzero"`
}

// envDuration reads a duration from the environment (def when unset).
// progressLine is the trainer's periodic log line: steps done of total,
// percent, rate and the ETA at that rate.
func progressLine(steps, total, rate float64) string {
	eta := "?"
	if rate > 0 {
		eta = progress.Duration(time.Duration((total - steps) / rate * float64(time.Second)))
	}
	pct := 0.0
	if total > 0 {
		pct = 100 * steps / total
	}
	return fmt.Sprintf("rondo-trainer: progress %.0f/%.0f steps (%.1f%%), %.3f steps/s, eta %s", steps, total, pct, rate, eta)
}

func envDuration(key string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(key)
	if v == "" {
		return def, nil
	}
	if v == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration >= 0", key, v)
	}
	return d, nil
}

// work is what the reporter tells the lease API of the task's checkpoints
// and restart (under its mutex).
type work struct {
	mu       sync.Mutex
	steps    float64
	ckAt     time.Time // the last checkpoint (written, or resumed from)
	ckS      float64   // how long the last write took
	wrote    bool      // ckS is known: it wrote one this run
	restoreS float64   // process start to the first step
	trained  bool      // restoreS is known
}

// twoRole is what a two-role job's task knows of itself.
type twoRole struct {
	role   string // lease.RoleWorker or lease.RolePS
	index  int
	epochs float64 // rondo.epochs, 0: not declared
	// Set by the lease answers (mu).
	mu                      sync.Mutex
	workers, ps, batch, tot int
	seen                    bool
	file                    string // $NOMAD_ALLOC_DIR/rondo-trainer.json
}

// roleOf reads a two-role job's task's role from its env (nil for any
// other job).
func roleOf() *twoRole {
	if meta("ps") == "" {
		return nil
	}
	r := &twoRole{role: lease.RoleWorker}
	if v := os.Getenv("RONDO_ROLE"); v != "" {
		r.role = v
	} else if g := meta("ps_group"); g != "" && os.Getenv("NOMAD_GROUP_NAME") == g {
		r.role = lease.RolePS
	}
	r.index, _ = strconv.Atoi(envOr("NOMAD_ALLOC_INDEX", "0"))
	if e, err := strconv.ParseFloat(meta("epochs"), 64); err == nil && e > 0 {
		r.epochs = e
	}
	if d := os.Getenv("NOMAD_ALLOC_DIR"); d != "" {
		r.file = filepath.Join(d, "rondo-trainer.json")
	}
	return r
}

// learn takes a lease answer's sizes; a change is printed and written to
// the alloc dir's rondo-trainer.json.
func (r *twoRole) learn(l lease.LeaseResponse, steps float64) {
	if !l.TwoRole() {
		return
	}
	r.mu.Lock()
	changed := !r.seen || l.Workers != r.workers || l.PS != r.ps || l.Batch != r.batch || l.TotalBatch != r.tot
	r.seen, r.workers, r.ps, r.batch, r.tot = true, l.Workers, l.PS, l.Batch, l.TotalBatch
	r.mu.Unlock()
	if !changed {
		return
	}
	if l.Role == lease.RolePS {
		fmt.Printf("rondo-trainer: parameter server %d: %d workers, %d ps\n", r.index, l.Workers, l.PS)
	} else {
		fmt.Printf("rondo-trainer: batch %d of %d, worker %d of %d, %d ps\n", l.Batch, l.TotalBatch, r.index, l.Workers, l.PS)
	}
	if r.file == "" {
		return
	}
	b, _ := json.Marshal(map[string]any{"role": l.Role, "index": r.index, "workers": l.Workers, "ps": l.PS,
		"batch": l.Batch, "total_batch": l.TotalBatch, "steps": steps, "at": time.Now().UTC()})
	tmp := r.file + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err == nil {
		os.Rename(tmp, r.file)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// meta reads job meta rondo.<key> from the task env: Nomad exports it as
// NOMAD_META_rondo.<key> (dots kept), and some versions also with dots
// replaced by underscores.
func meta(key string) string {
	for _, k := range []string{"NOMAD_META_rondo." + key, "NOMAD_META_rondo_" + key, "NOMAD_META_RONDO." + strings.ToUpper(key)} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return ""
}

func visible() []string {
	v := os.Getenv("CUDA_VISIBLE_DEVICES")
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func gpuType() string {
	if t := os.Getenv("RONDO_GPU_TYPE"); t != "" {
		return t
	}
	if ids := visible(); len(ids) > 0 {
		low := strings.ToLower(ids[0])
		for _, t := range []string{"v100", "p100", "k80"} {
			if strings.Contains(low, t) {
				return t
			}
		}
	}
	return "v100"
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	procStart := time.Now()
	fs := flag.NewFlagSet("rondo-trainer", flag.ContinueOnError)
	model := fs.String("model", meta("model"), "model name in the throughput table")
	stepsS := fs.String("steps", meta("steps"), "total steps")
	sfDefault := len(visible())
	if v, err := strconv.Atoi(meta("gpus")); err == nil && v > 0 {
		sfDefault = v
	}
	sf := fs.Int("scale-factor", max(sfDefault, 1), "GPUs of the whole job")
	typ := fs.String("type", gpuType(), "GPU type (v100, p100, k80)")
	dir := fs.String("checkpoint-dir", envOr("RONDO_CHECKPOINT_DIR", filepath.Join(os.Getenv("NOMAD_ALLOC_DIR"), "checkpoint")), "checkpoint directory")
	speedS := fs.String("speedup", envOr("RONDO_SPEEDUP", "1"), "throughput multiplier")
	partner := fs.String("partner-model", os.Getenv("RONDO_PARTNER_MODEL"), "model of the job sharing its GPUs (space sharing)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	total, err := strconv.ParseFloat(*stepsS, 64)
	if err != nil || total <= 0 {
		fmt.Fprintf(os.Stderr, "rondo-trainer: -steps must be positive (got %q)\n", *stepsS)
		return 2
	}
	speed, err := strconv.ParseFloat(*speedS, 64)
	if err != nil || speed <= 0 {
		fmt.Fprintf(os.Stderr, "rondo-trainer: -speedup must be positive (got %q)\n", *speedS)
		return 2
	}
	every, err := envDuration("RONDO_CHECKPOINT_INTERVAL", 500*time.Millisecond)
	if err == nil && every == 0 {
		every = 1<<63 - 1 // never on its own
	}
	var ckCost, restoreCost time.Duration
	if err == nil {
		ckCost, err = envDuration("RONDO_CHECKPOINT_COST", 0)
	}
	if err == nil {
		restoreCost, err = envDuration("RONDO_RESTORE_COST", 0)
	}
	var progressEvery time.Duration
	if err == nil {
		progressEvery, err = envDuration("RONDO_PROGRESS_INTERVAL", 30*time.Second)
	}
	onStop := true
	if v := os.Getenv("RONDO_CHECKPOINT_ON_STOP"); v != "" && err == nil {
		if onStop, err = strconv.ParseBool(v); err != nil {
			err = fmt.Errorf("RONDO_CHECKPOINT_ON_STOP=%q: want true or false", v)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rondo-trainer:", err)
		return 2
	}
	tr := roleOf()
	if tr != nil && tr.role == lease.RolePS {
		return runPS(tr, *dir, total)
	}
	tb := throughputs.Default()
	rate, ok := tb.Lookup(*model, *sf, *typ)
	if !ok {
		fmt.Fprintf(os.Stderr, "rondo-trainer: no throughput for %q x%d on %s; using 1 step/s\n", *model, *sf, *typ)
		rate = 1
	}
	if *partner != "" {
		// Colocated: its share of the pair's throughput in Gavel's table.
		pr, ok := tb.Pair(throughputs.Key{Model: *model, ScaleFactor: *sf}, throughputs.Key{Model: *partner, ScaleFactor: *sf}, *typ)
		if ok && pr[0] > 0 {
			rate = pr[0]
		} else {
			fmt.Fprintf(os.Stderr, "rondo-trainer: no pair throughput for %q next to %q x%d on %s; using half its own\n",
				*model, *partner, *sf, *typ)
			rate /= 2
		}
	}
	rate *= speed
	writer := envOr("NOMAD_ALLOC_INDEX", "0") == "0"
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "rondo-trainer:", err)
		return 1
	}
	if writer {
		lock, err := holdRunLock(*dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rondo-trainer:", err)
			return 1
		}
		defer lock.Close()
	}
	path := filepath.Join(*dir, "checkpoint.json")
	ck := checkpoint{Total: total}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &ck); err != nil {
			fmt.Fprintln(os.Stderr, "rondo-trainer: bad checkpoint:", err)
			return 1
		}
		ck.Total = total
	}
	wk := &work{steps: ck.Steps, ckAt: ck.At}
	saved := ck.Steps // the steps of the last checkpoint (a restart resumes there)
	save := func() {
		if !writer {
			return
		}
		began := time.Now()
		if tr != nil && tr.epochs > 0 {
			e := ck.Steps / total * tr.epochs
			ck.Epochs = &e
		}
		time.Sleep(ckCost) // what writing a checkpoint of this size takes
		ck.At = time.Now().UTC()
		b, _ := json.Marshal(ck)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err == nil {
			os.Rename(tmp, path) // atomic: readers never see half a file
		}
		saved = ck.Steps
		wk.mu.Lock()
		wk.ckAt, wk.ckS, wk.wrote = ck.At, time.Since(began).Seconds(), true
		wk.mu.Unlock()
	}
	with := ""
	if *partner != "" {
		with = " next to " + *partner
	}
	fmt.Printf("rondo-trainer: %s x%d on %s (%s)%s: %.3f steps/s, resuming at %.0f/%.0f\n",
		*model, *sf, *typ, os.Getenv("CUDA_VISIBLE_DEVICES"), with, rate, ck.Steps, total)
	time.Sleep(restoreCost) // loading the checkpoint
	leaseEnded := make(chan struct{}, 1)
	notice := make(chan time.Time, 1)
	if (writer || tr != nil) && os.Getenv("RONDO_LEASE_ADDR") != "" {
		// Index 0 reports and asks for its lease; a two-role job's other
		// workers ask for their batch.
		if lc, err := client.FromEnv(); err != nil {
			fmt.Fprintln(os.Stderr, "rondo-trainer: lease API off:", err)
		} else {
			rep := &reporter{lc: lc, every: reportEvery(), typ: *typ, partner: os.Getenv("RONDO_PARTNER"), rate: rate, report: writer,
				two: tr, total: total, work: wk, ended: leaseEnded, notice: notice}
			go rep.loop()
		}
	}
	// A two-role job's other workers end with worker 0 (its checkpoint
	// says done), whatever their own count.
	var doneCk <-chan time.Time
	if tr != nil && !writer {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		doneCk = t.C
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastSave, lastProgress := time.Now(), time.Now(), time.Now()
	// checkpoint writes one; training pauses while it does.
	checkpoint := func() {
		save()
		last, lastSave = time.Now(), time.Now()
	}
	for {
		select {
		case s := <-sig:
			if !onStop {
				fmt.Printf("rondo-trainer: %v: stopped at %.0f/%.0f, not checkpointed (RONDO_CHECKPOINT_ON_STOP=false): its last checkpoint holds %.0f\n",
					s, ck.Steps, total, saved)
				return 0
			}
			save()
			fmt.Printf("rondo-trainer: %v: checkpointed at %.0f/%.0f\n", s, ck.Steps, total)
			return 0
		case <-doneCk:
			if c, err := readCheckpoint(path); err == nil && c.Steps >= total {
				fmt.Printf("rondo-trainer: done (worker 0 checkpointed %.0f steps)\n", c.Steps)
				return 0
			}
		case <-leaseEnded:
			if !onStop {
				fmt.Printf("rondo-trainer: lease ends at %.0f/%.0f, not checkpointed (RONDO_CHECKPOINT_ON_STOP=false): its last checkpoint holds %.0f\n",
					ck.Steps, total, saved)
				continue
			}
			checkpoint()
			fmt.Printf("rondo-trainer: lease ends: checkpointed at %.0f/%.0f\n", ck.Steps, total)
		case stop := <-notice:
			checkpoint()
			fmt.Printf("rondo-trainer: checkpoint now: checkpointed at %.0f/%.0f, stop at %s\n", ck.Steps, total, stop.Format(time.RFC3339))
		case now := <-tick.C:
			ck.Steps = min(ck.Steps+rate*now.Sub(last).Seconds(), total)
			last = now
			wk.mu.Lock()
			wk.steps = ck.Steps
			if !wk.trained {
				// The first step since the process started, its
				// checkpoint loaded: what this (re)start cost.
				wk.restoreS, wk.trained = now.Sub(procStart).Seconds(), true
			}
			wk.mu.Unlock()
			if ck.Steps >= total {
				save()
				fmt.Printf("rondo-trainer: done, %.0f steps\n", total)
				return 0
			}
			if progressEvery > 0 && now.Sub(lastProgress) >= progressEvery {
				lastProgress = now
				fmt.Println(progressLine(ck.Steps, total, rate))
			}
			if now.Sub(lastSave) >= every {
				checkpoint()
			}
		}
	}
}

func reportEvery() time.Duration {
	every, err := time.ParseDuration(envOr("RONDO_REPORT_INTERVAL", "1s"))
	if err != nil || every <= 0 {
		every = time.Second
	}
	return every
}

func readCheckpoint(path string) (checkpoint, error) {
	var c checkpoint
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	return c, err
}

// reporter talks to the lease API every interval: it reports progress
// (report: allocation index 0) and asks for the lease; a two-role job's
// task learns its sizes from the answer. It signals ended (once per lease
// end) when the lease does not continue.
type reporter struct {
	lc           *client.Client
	every        time.Duration
	typ, partner string
	rate, total  float64
	report       bool
	two          *twoRole
	work         *work
	ended        chan<- struct{}
	// notice is told the stop time of each new notice (checkpoint_now).
	notice chan<- time.Time
}

func (r *reporter) loop() {
	ctx := context.Background()
	t := time.NewTicker(r.every)
	defer t.Stop()
	continuing, failing := true, false
	var noticed time.Time // the stop time of the notice acted on
	for range t.C {
		var err error
		r.work.mu.Lock()
		steps, ckAt, ckS, wrote, restoreS, trained := r.work.steps, r.work.ckAt, r.work.ckS, r.work.wrote, r.work.restoreS, r.work.trained
		r.work.mu.Unlock()
		if r.report {
			p := client.Progress{StepsDone: int64(steps), StepsPerSec: r.rate, GPUType: r.typ, Partner: r.partner,
				CheckpointAt: ckAt}
			if wrote {
				p.CheckpointS = &ckS
			}
			if trained {
				p.RestoreS = &restoreS
			}
			if r.two != nil && r.two.epochs > 0 {
				e := steps / r.total * r.two.epochs
				p.EpochsDone = &e
			}
			err = r.lc.Send(ctx, p)
		}
		var l lease.LeaseResponse
		if err == nil {
			l, err = r.lc.Lease(ctx)
		}
		if err != nil {
			if !failing {
				fmt.Fprintln(os.Stderr, "rondo-trainer: lease API:", err)
			}
			failing = true
			continue
		}
		if failing {
			fmt.Fprintln(os.Stderr, "rondo-trainer: lease API reachable again")
		}
		failing = false
		if r.two != nil {
			r.two.learn(l, steps)
		}
		if !r.report {
			continue // only index 0 checkpoints
		}
		if !l.Continue && continuing {
			select {
			case r.ended <- struct{}{}:
			default:
			}
		}
		if l.Continue && l.CheckpointNow && !l.StopAt.Equal(noticed) {
			noticed = l.StopAt
			select {
			case r.notice <- l.StopAt:
			default:
			}
		}
		if l.Continue != continuing {
			fmt.Printf("rondo-trainer: lease continue=%v (round %d, until %s)\n", l.Continue, l.Round, l.LeaseExpiresAt.Format(time.RFC3339))
		}
		continuing = l.Continue
	}
}

// runPS is a two-role job's parameter server: it asks for its lease every
// interval (its sizes, printed and written like a worker's) and exits 0
// once the workers' checkpoint says the job is done, or on SIGTERM.
func runPS(tr *twoRole, dir string, total float64) int {
	path := filepath.Join(dir, "checkpoint.json")
	fmt.Printf("rondo-trainer: parameter server %d (checkpoints in %s)\n", tr.index, dir)
	if os.Getenv("RONDO_LEASE_ADDR") != "" {
		if lc, err := client.FromEnv(); err != nil {
			fmt.Fprintln(os.Stderr, "rondo-trainer: lease API off:", err)
		} else {
			rep := &reporter{lc: lc, every: reportEvery(), two: tr, total: total, work: &work{}}
			go rep.loop()
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case s := <-sig:
			fmt.Printf("rondo-trainer: parameter server %d: %v\n", tr.index, s)
			return 0
		case <-tick.C:
			if c, err := readCheckpoint(path); err == nil && c.Steps >= total {
				fmt.Printf("rondo-trainer: parameter server %d: the job is done\n", tr.index)
				return 0
			}
		}
	}
}
