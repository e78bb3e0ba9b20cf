package e2e

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestSweepOnNomad (#20): `rondo simulate sweep -on-nomad` on a one-node
// Nomad cluster (raw_exec): 8 points (2 policy specs × 2 rates × 2 seeds,
// a --throughputs file that travels in the jobs) each as its own batch
// job. The first sweep runs through a wrapper binary that fails the two
// points of rate 0.3 and seed 1 (stderr "boom ..."): it exits 1 naming
// 2 of 8 points failed, each with its allocation id and stderr tail, never
// more than -parallel 3 of its jobs in Nomad at once, and leaves no job
// behind. Run again with -resume (and the real binary, the address from
// NOMAD_ADDR) it submits only those 2 points under a new job prefix. Its
// files then equal the local sweep's exactly (runs.csv and results.json's
// runs but their wall and solve times, summary.csv whole, every run's JCTs),
// and no job is left.
func TestSweepOnNomad(t *testing.T) {
	t.Parallel()
	a := StartAgent(t, AgentOptions{Name: "sweep-e2e"})
	c := a.Client()
	dir := t.TempDir()
	rondo := BuildPlugin(t, "./cmd/rondo", filepath.Join(dir, "bin"))
	tputs := filepath.Join(dir, "throughputs.json")
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "allocator/throughputs/data/simulation_throughputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tputs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"simulate", "sweep", "--cluster", "v100=3,p100=3,k80=3",
		"--policies", "max_min_fairness_perf,max_min_fairness+compat", "--rates", "0.15:0.3:0.15", "--seeds", "0,1",
		"--window", "5:25", "--max-active", "200", "--throughputs", tputs}
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(rondo, args...)
		cmd.Env = append(cluster.WithoutEnv(cluster.WithoutEnv(os.Environ(), "NOMAD_ADDR"), "NOMAD_TOKEN"), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	start := time.Now()
	local := filepath.Join(dir, "local")
	if code, _, e := run(nil, append(common, "--out", local)...); code != 0 {
		t.Fatalf("local sweep: exit %d: %s", code, e)
	}
	t.Logf("local sweep: %.1f s", time.Since(start).Seconds())

	// A wrapper that fails two points, else runs the real binary.
	wrapper := filepath.Join(dir, "bin", "rondo-flaky")
	script := "#!/bin/sh\ncase \"$*\" in *-rates=0.3*-seeds=1*) echo \"simulating $*\" >&2; echo \"boom: this point fails\" >&2; exit 3;; esac\nexec " +
		rondo + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Count the sweeps' jobs in Nomad while they run.
	var mu sync.Mutex
	most, prefixes := 0, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			jobs, _, err := c.Jobs().PrefixList("rondo-sweep-")
			if err != nil {
				continue
			}
			n := 0
			mu.Lock()
			for _, j := range jobs {
				if j.Status != "dead" {
					n++
				}
				prefixes[j.ID[:strings.LastIndexByte(j.ID, '-')]] = true
			}
			most = max(most, n)
			mu.Unlock()
		}
	}()
	onNomad := filepath.Join(dir, "nomad")
	start = time.Now()
	code, out, errOut := run(nil, append(common, "--out", onNomad, "-on-nomad", "-address", a.HTTPAddr, "-nomad-binary", wrapper,
		"-parallel", "3", "-nomad-cpu", "100", "-nomad-memory", "256")...)
	t.Logf("sweep on Nomad with 2 failing points: %.1f s", time.Since(start).Seconds())
	if code != 1 || !strings.Contains(errOut, "2 of 8 points failed on Nomad") {
		t.Fatalf("want exit 1 and 2 of 8 failed; exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	failed := regexp.MustCompile(`FAILED (\S+) rate=0.3 seed=1: nomad: allocation [0-9a-f-]{36} \(job rondo-sweep-[0-9a-f]{8}-\d+, node sweep-e2e\) failed`)
	if got := failed.FindAllStringSubmatch(errOut, -1); len(got) != 2 || got[0][1] == got[1][1] {
		t.Errorf("want both policies' rate 0.3 seed 1 points FAILED with their allocations; got %v\n%s", got, errOut)
	}
	if strings.Count(errOut, "\n    boom: this point fails\n") != 2 || !strings.Contains(errOut, "-policies=") {
		t.Errorf("want each failure's stderr tail:\n%s", errOut)
	}
	rows := sweepCSV(t, filepath.Join(onNomad, "runs.csv"))
	errs := 0
	for _, r := range rows[1:] {
		if r[len(r)-1] != "" {
			errs++
			if !strings.Contains(r[len(r)-1], "boom") {
				t.Errorf("runs.csv error %q: want the stderr's last line", r[len(r)-1])
			}
		}
	}
	if len(rows) != 9 || errs != 2 {
		t.Errorf("runs.csv: %d rows, %d errors; want 8 and 2", len(rows)-1, errs)
	}
	noSweepJobsLeft(t, a)

	start = time.Now()
	code, out, errOut = run([]string{"NOMAD_ADDR=" + a.HTTPAddr}, append(common, "--out", onNomad, "-on-nomad", "-resume",
		"-nomad-cpu", "100", "-nomad-memory", "256")...)
	t.Logf("resumed sweep on Nomad (2 points): %.1f s", time.Since(start).Seconds())
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("resumed sweep: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "resuming: 6 runs already done") || !regexp.MustCompile(`sweep rondo-sweep-[0-9a-f]{8}: 2 points`).MatchString(errOut) ||
		strings.Count(errOut, "avg JCT") != 2 {
		t.Errorf("resumed sweep: want 6 done and 2 points run:\n%s", errOut)
	}
	mu.Lock()
	t.Logf("at most %d sweep jobs in Nomad at once; job prefixes %v", most, prefixes)
	if most > 3 || most == 0 {
		t.Errorf("at most %d sweep jobs in Nomad at once; want 1 to 3 (-parallel 3)", most)
	}
	if len(prefixes) != 2 {
		t.Errorf("job prefixes %v: want one per sweep, two", prefixes)
	}
	mu.Unlock()
	noSweepJobsLeft(t, a)
	if _, err := os.Stat(filepath.Join(onNomad, "nomad-sweep-prefix")); !os.IsNotExist(err) {
		t.Errorf("nomad-sweep-prefix left after a finished sweep: %v", err)
	}

	// The same results as the local sweep.
	if l, n := sweepFile(t, filepath.Join(local, "summary.csv")), sweepFile(t, filepath.Join(onNomad, "summary.csv")); l != n {
		t.Errorf("summary.csv differs:\nlocal:\n%s\nnomad:\n%s", l, n)
	}
	lr, nr := sweepCSV(t, filepath.Join(local, "runs.csv")), sweepCSV(t, filepath.Join(onNomad, "runs.csv"))
	varying := map[string]bool{"wall_s": true, "sim_hours_per_wall_s": true, "solve_ms_p50": true, "solve_ms_max": true}
	if len(lr) != len(nr) {
		t.Fatalf("runs.csv: %d rows local, %d on Nomad", len(lr), len(nr))
	}
	for i := range lr {
		for j, h := range lr[0] {
			if !varying[h] && lr[i][j] != nr[i][j] {
				t.Errorf("runs.csv row %d %s: local %q, nomad %q", i, h, lr[i][j], nr[i][j])
			}
		}
	}
	if l, n := sweepRuns(t, local), sweepRuns(t, onNomad); l != n {
		t.Errorf("results.json runs differ:\nlocal: %s\nnomad: %s", l, n)
	}
	if l, n := sweepJournal(t, local), sweepJournal(t, onNomad); l != n || !strings.Contains(l, `"jcts":[`) {
		t.Errorf("runs.jsonl (JCTs) differ:\nlocal: %s\nnomad: %s", l, n)
	}

	// No client can run the jobs (no such datacenter): one line at the
	// first job, nothing left.
	start = time.Now()
	code, _, errOut = run(nil, append(common, "--out", filepath.Join(dir, "nowhere"), "-on-nomad", "-address", a.HTTPAddr,
		"-nomad-datacenters", "nowhere")...)
	if code != 1 || !strings.Contains(errOut, "no Nomad client can run the sweep's jobs") {
		t.Errorf("datacenter nowhere: exit %d, stderr:\n%s", code, errOut)
	}
	t.Logf("unplaceable sweep failed in %.1f s", time.Since(start).Seconds())
	noSweepJobsLeft(t, a)

	// Ctrl-C while points run: every job purged, -resume named.
	sleeper := filepath.Join(dir, "bin", "rondo-sleeper")
	if err := os.WriteFile(sleeper, []byte("#!/bin/sh\nexec sleep 120\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rondo, append(common, "--out", filepath.Join(dir, "interrupted"), "-on-nomad", "-address", a.HTTPAddr,
		"-nomad-binary", sleeper, "-nomad-cpu", "100", "-nomad-memory", "64")...)
	var e bytes.Buffer
	cmd.Stderr = &e
	start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a.WaitFor(60*time.Second, "a sweep point running", func() (bool, error) {
		allocs, _, err := c.Allocations().List(&api.QueryOptions{Filter: `JobID matches "^rondo-sweep-" and ClientStatus == "running"`})
		return err == nil && len(allocs) > 0, nil
	})
	t.Logf("first point running after %.1f s", time.Since(start).Seconds())
	start = time.Now()
	_ = cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	t.Logf("interrupted sweep exited in %.1f s", time.Since(start).Seconds())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(e.String(), "interrupted: 0 of 8 points done; the sweep's jobs are purged") {
		t.Errorf("interrupted sweep: %v, stderr:\n%s", err, e.String())
	}
	noSweepJobsLeft(t, a)
}

func sweepFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sweepCSV(t *testing.T, path string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(sweepFile(t, path))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// sweepDropVarying removes the wall and solve times from a run's JSON.
func sweepDropVarying(m map[string]any) {
	delete(m, "sim_hours_per_wall_s")
	if res, ok := m["result"].(map[string]any); ok {
		for k := range res {
			if strings.Contains(k, "wall") || strings.HasPrefix(k, "solve_ms") {
				delete(res, k)
			}
		}
	}
}

// sweepRuns is results.json's runs, in order, without wall and solve times.
func sweepRuns(t *testing.T, dir string) string {
	t.Helper()
	var rep struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal([]byte(sweepFile(t, filepath.Join(dir, "results.json"))), &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Runs {
		sweepDropVarying(r)
	}
	b, _ := json.Marshal(rep.Runs)
	return string(b)
}

// sweepJournal is runs.jsonl's lines sorted, without wall and solve times.
func sweepJournal(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(sweepFile(t, filepath.Join(dir, "runs.jsonl"))))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		sweepDropVarying(m)
		b, _ := json.Marshal(m)
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// noSweepJobsLeft fails unless Nomad lists no job of a sweep.
func noSweepJobsLeft(t *testing.T, a *Agent) {
	t.Helper()
	jobs, _, err := a.Client().Jobs().PrefixList("rondo-sweep-")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) > 0 {
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID+" ("+j.Status+")")
		}
		t.Errorf("jobs left in Nomad: %v", ids)
	}
}
