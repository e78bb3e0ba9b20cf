package lease

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/rondo-sched/rondo/internal/torchpy"
)

// pyDecider is the decider and sink behind the real Server the Python
// client's tests talk to: each job's grant is what the tests set through
// the control endpoint (a job with none is unknown: 404), and every
// report is kept for them to read back.
type pyDecider struct {
	mu      sync.Mutex
	grants  map[string]pyGrant
	reports map[string][]pyReport
	leases  map[string]int
}

// pyGrant is a grant as the control endpoint takes it.
type pyGrant struct {
	Continue      bool    `json:"continue"`
	CheckpointNow bool    `json:"checkpoint_now"`
	StopInS       float64 `json:"stop_in_s"`
	ExpiresInS    float64 `json:"expires_in_s"`
	Round         int64   `json:"round"`
	CheckpointDir string  `json:"checkpoint_dir"`
	Role          string  `json:"role"`
	Workers       int     `json:"workers"`
	PS            int     `json:"ps"`
	TotalBatch    int     `json:"total_batch"`
	Index         int     `json:"index"`
	// stopAt is fixed when the grant is set (as a round fixes it).
	stopAt time.Time
}

// pyReport is a report as the sink got it (nil: the report did not say).
type pyReport struct {
	Alloc        string   `json:"alloc"`
	StepsDone    int64    `json:"steps_done"`
	Throughput   float64  `json:"throughput_steps_per_s"`
	GPUType      string   `json:"gpu_type"`
	Partner      string   `json:"partner"`
	EpochsDone   *float64 `json:"epochs_done"`
	CheckpointAt *string  `json:"checkpoint_at"`
	CheckpointS  *float64 `json:"checkpoint_s"`
	RestoreS     *float64 `json:"restore_s"`
	At           string   `json:"at"`
}

func (d *pyDecider) Lease(_ context.Context, c Caller) (Grant, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.grants[c.Job]
	if !ok {
		return Grant{}, ErrUnknownJob
	}
	d.leases[c.Job]++
	exp := g.ExpiresInS
	if exp == 0 {
		exp = 60
	}
	now := time.Now()
	out := Grant{Continue: g.Continue, ExpiresAt: now.Add(time.Duration(exp * float64(time.Second))), Round: g.Round,
		CheckpointDir: g.CheckpointDir}
	if g.CheckpointNow {
		out.CheckpointNow, out.StopAt = true, g.stopAt
	}
	if g.Role != "" {
		out.Roles = &Roles{Role: g.Role, Workers: g.Workers, PS: g.PS, TotalBatch: g.TotalBatch}
		if g.Role == RoleWorker {
			out.Roles.Batch = BatchShare(g.TotalBatch, g.Workers, g.Index)
		}
	}
	return out, nil
}

func (d *pyDecider) Report(_ context.Context, c Caller, p Progress) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.grants[c.Job]; !ok {
		return ErrUnknownJob
	}
	r := pyReport{Alloc: c.Alloc, StepsDone: p.StepsDone, Throughput: p.ThroughputStepsPerS, GPUType: p.GPUType,
		Partner: p.Partner, At: p.At.UTC().Format(time.RFC3339Nano)}
	if p.HasEpochs {
		r.EpochsDone = &p.EpochsDone
	}
	if !p.CheckpointAt.IsZero() {
		s := p.CheckpointAt.UTC().Format(time.RFC3339Nano)
		r.CheckpointAt = &s
	}
	if p.HasCheckpointS {
		r.CheckpointS = &p.CheckpointS
	}
	if p.HasRestoreS {
		r.RestoreS = &p.RestoreS
	}
	d.reports[c.Job] = append(d.reports[c.Job], r)
	return nil
}

// control is the Python tests' side door: tokens signed by the key the
// JWKS serves, grants, and what the sink received.
func (d *pyDecider) control(t *testing.T, s signer) http.Handler {
	mux := http.NewServeMux()
	reply := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Job, Alloc, Namespace, Aud string
			ExpiredS                   float64 `json:"expired_s"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		if in.Namespace == "" {
			in.Namespace = "default"
		}
		if in.Aud == "" {
			in.Aud = "rondo-lease"
		}
		now := time.Now().Add(-time.Duration(in.ExpiredS * float64(time.Second)))
		c := cl{jwt.Claims{IssuedAt: jwt.NewNumericDate(now.Add(-time.Hour)), NotBefore: jwt.NewNumericDate(now.Add(-time.Hour)),
			Expiry: jwt.NewNumericDate(now.Add(time.Minute)), Audience: jwt.Audience{in.Aud}},
			nomadClaims{Namespace: in.Namespace, JobID: in.Job, AllocID: in.Alloc, Task: "train"}}
		reply(w, map[string]string{"token": s.token(t, c)})
	})
	mux.HandleFunc("POST /grant", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Job string `json:"job"`
			pyGrant
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		in.stopAt = time.Now().Add(time.Duration(in.StopInS * float64(time.Second))).Truncate(time.Second)
		d.mu.Lock()
		d.grants[in.Job] = in.pyGrant
		d.mu.Unlock()
		reply(w, map[string]bool{"ok": true})
	})
	mux.HandleFunc("GET /reports", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		reply(w, append([]pyReport{}, d.reports[r.URL.Query().Get("job")]...))
	})
	mux.HandleFunc("GET /leases", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		defer d.mu.Unlock()
		reply(w, map[string]int{"count": d.leases[r.URL.Query().Get("job")]})
	})
	return mux
}

// pythonWithTorch is the interpreter with torch (internal/torchpy); without
// one the test fails, naming the package: it must not pass by skipping.
func pythonWithTorch(t *testing.T) string {
	t.Helper()
	py, err := torchpy.Python()
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// TestPythonClient runs the Python job side's unit tests
// (jobs/python/tests, python3 -m unittest) against this package's real
// Server: real workload-identity JWTs (RS256, verified against a JWKS),
// the real request validation and answers. Only the decisions are the
// test's (set per job through the control endpoint, RONDO_TEST_CONTROL).
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("starts python3 with torch: skipped with -short")
	}
	py := pythonWithTorch(t)
	j := newJWKS(t)
	s := signer{kid: "py", alg: jose.RS256, key: rsaKeys()[0]}
	j.add("py", rsaKeys()[0].Public(), jose.RS256)
	d := &pyDecider{grants: map[string]pyGrant{}, reports: map[string][]pyReport{}, leases: map[string]int{}}
	srv := &Server{Verifier: &JWKSVerifier{URL: j.srv.URL, Audiences: []string{"rondo-lease"}, MinRefetch: time.Hour},
		Decider: d, Sink: d, Logf: t.Logf}
	api := httptest.NewServer(srv.Handler())
	defer api.Close()
	ctl := httptest.NewServer(d.control(t, s))
	defer ctl.Close()

	dir, err := filepath.Abs("../../jobs/python")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
	cmd.Dir = dir
	env := []string{}
	for _, kv := range os.Environ() {
		// The tests set the task environment themselves.
		if !strings.HasPrefix(kv, "RONDO_") && !strings.HasPrefix(kv, "NOMAD_") && !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "RONDO_TEST_CONTROL="+ctl.URL, "RONDO_TEST_API="+api.URL, "PYTHONPATH="+dir,
		"PYTHONDONTWRITEBYTECODE=1", "RONDO_TEST_PYTHON="+py)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest (jobs/python/tests):\n%s", out)
	var ee *exec.ExitError
	if errors.As(err, &ee) || err != nil {
		t.Fatalf("python unit tests failed: %v", err)
	}
}
