// Package lease is the allocator's HTTP lease and progress API: Gavel's
// iterator protocol adapted to Nomad. A training task reports progress
// (steps done, throughput on its GPU type) and asks, at each checkpoint
// boundary, whether its lease continues; when it does not, it checkpoints and
// exits so the allocator can place other work.
//
// Callers authenticate with their Nomad workload identity (a JWT signed by
// the cluster's keyring), verified against Nomad's JWKS; a task may only act
// for its own job and allocation.
//
// The API takes its decisions from two small interfaces, LeaseDecider and
// ProgressSink, implemented by the agent.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"
)

// Caller is an authenticated request's subject: identity claims checked
// against the request body.
type Caller struct {
	Namespace string
	// Job is the job named in the request. It equals the token's job, or is a
	// dispatched/periodic child of it (Nomad puts the parent's id in child
	// identities); IdentityJob is the token's.
	Job         string
	IdentityJob string
	// Alloc is the token's allocation id; the request's, if given, matched it.
	Alloc string
	Task  string
}

// Grant is a lease decision.
type Grant struct {
	Continue      bool
	ExpiresAt     time.Time
	Round         int64
	CheckpointDir string
	// CheckpointNow: the decision in force gives the job notice (a keep
	// with engine.JobIntent.Checkpoint): it checkpoints now, goes on
	// training, and stops at StopAt (the next round's start). StopAt is
	// zero without notice.
	CheckpointNow bool
	StopAt        time.Time
	// Roles is set for a task of a two-role elastic job (DL2's workers and
	// parameter servers): the counts in force and this task's share of the
	// batch. nil for any other job.
	Roles *Roles
}

// Roles is what a task of a two-role elastic job learns from its lease:
// a live-rescaled job reads its size here, never from its env (changing
// the env would restart it).
type Roles struct {
	// Role is RoleWorker or RolePS.
	Role string
	// Workers and PS are the worker and parameter-server counts in force.
	Workers, PS int
	// Batch is this worker's share of TotalBatch (BatchShare by its
	// allocation index); 0 for a parameter server, for a worker whose
	// index is not below Workers (a shrink is removing it) and when the
	// job declares no batch size (TotalBatch 0).
	Batch, TotalBatch int
}

// The roles of a two-role elastic job's tasks (Roles.Role).
const (
	RoleWorker = "worker"
	RolePS     = "ps"
)

// BatchShare is worker index's share of a total batch split as evenly as
// possible over workers: total/workers each, the first total%workers
// workers one more (256 over 3: 86, 85, 85). 0 when index is out of
// [0, workers) or total is not positive.
func BatchShare(total, workers, index int) int {
	if total <= 0 || workers <= 0 || index < 0 || index >= workers {
		return 0
	}
	b := total / workers
	if index < total%workers {
		b++
	}
	return b
}

// Progress is one progress report.
type Progress struct {
	GPUType string
	// Partner is the job the reporter shares its GPUs with (space
	// sharing): the throughput is then its pair throughput. "" alone.
	Partner             string
	StepsDone           int64
	ThroughputStepsPerS float64
	// EpochsDone is the epochs done since the job's first start (a
	// two-role elastic job's progress, rondo.epochs); HasEpochs false
	// when the report does not say.
	EpochsDone float64
	HasEpochs  bool
	// CheckpointAt is when the job last wrote a checkpoint (zero: the
	// report does not say). CheckpointS is how long writing it took,
	// RestoreS how long the job's last (re)start took until it trained
	// again; HasCheckpointS and HasRestoreS false when the report does
	// not say.
	CheckpointAt                time.Time
	CheckpointS, RestoreS       float64
	HasCheckpointS, HasRestoreS bool
	At                          time.Time // when the allocator received it
}

// LeaseDecider answers lease requests. For a child job (Caller.Job !=
// Caller.IdentityJob) it must check that Caller.Alloc belongs to Caller.Job
// (Nomad names the parent in a child's identity, so the token alone lets a
// child speak for any sibling) and answer ErrNotOwner when it does not.
type LeaseDecider interface {
	Lease(ctx context.Context, c Caller) (Grant, error)
}

// ProgressSink receives progress reports.
type ProgressSink interface {
	Report(ctx context.Context, c Caller, p Progress) error
}

// ErrUnknownJob from a LeaseDecider or ProgressSink is answered with 404:
// the allocator does not (or no longer) schedule the job.
var ErrUnknownJob = errors.New("unknown job")

// ErrNotOwner from a LeaseDecider or ProgressSink is answered with 403: the
// caller's allocation is not the named (child) job's.
var ErrNotOwner = errors.New("the token's allocation does not belong to the job")

// Wire types (JSON). Numeric report fields are pointers so a missing field is
// told apart from zero.

// ProgressRequest is the body of POST /v1/progress.
type ProgressRequest struct {
	Namespace           string   `json:"namespace,omitempty"`
	Job                 string   `json:"job"`
	Alloc               string   `json:"alloc,omitempty"`
	StepsDone           *int64   `json:"steps_done"`
	ThroughputStepsPerS *float64 `json:"throughput_steps_per_s"`
	GPUType             string   `json:"gpu_type"`
	Partner             string   `json:"partner,omitempty"`
	EpochsDone          *float64 `json:"epochs_done,omitempty"`
	// Preemption that respects the work (#21): the checkpoint the job
	// last wrote (RFC 3339), how long writing it took and how long its
	// last (re)start took until it trained again, in seconds.
	CheckpointAt *string  `json:"checkpoint_at,omitempty"`
	CheckpointS  *float64 `json:"checkpoint_s,omitempty"`
	RestoreS     *float64 `json:"restore_s,omitempty"`
}

// LeaseRequest is the body of POST /v1/lease.
type LeaseRequest struct {
	Namespace string `json:"namespace,omitempty"`
	Job       string `json:"job"`
	Alloc     string `json:"alloc,omitempty"`
}

// LeaseResponse is the answer to POST /v1/lease.
type LeaseResponse struct {
	Continue       bool      `json:"continue"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Round          int64     `json:"round"`
	CheckpointDir  string    `json:"checkpoint_dir,omitempty"`
	// Two-role elastic jobs only (Roles; absent otherwise, and a count
	// or batch of 0 is absent).
	Role       string `json:"role,omitempty"`
	Workers    int    `json:"workers,omitempty"`
	PS         int    `json:"ps,omitempty"`
	Batch      int    `json:"batch,omitempty"`
	TotalBatch int    `json:"total_batch,omitempty"`
	// CheckpointNow: checkpoint to CheckpointDir now and go on training;
	// the job stops at StopAt (the next round's start; zero, and absent,
	// without CheckpointNow).
	CheckpointNow bool      `json:"checkpoint_now,omitempty"`
	StopAt        time.Time `json:"stop_at,omitzero"`
}

// TwoRole reports whether the answer is for a task of a two-role elastic
// job (it then carries role, workers, ps and the batch).
func (l LeaseResponse) TwoRole() bool { return l.Role != "" }

// ErrorResponse is the body of every 4xx/5xx answer.
type ErrorResponse struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// MaxClockSkew is how far in the future a reported checkpoint_at may lie
// (the task's clock against the allocator's).
const MaxClockSkew = 30 * time.Second

// finite reports whether v is a finite number >= 0.
func finite(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// DefaultMaxBody bounds request bodies.
const DefaultMaxBody = 16 << 10

// Server serves the API. Verifier, Decider and Sink are required.
type Server struct {
	Verifier TokenVerifier
	Decider  LeaseDecider
	Sink     ProgressSink
	// MaxBody bounds request bodies; default DefaultMaxBody.
	MaxBody int64
	// Logf, if set, logs refused requests and internal errors.
	Logf func(format string, args ...any)
	// Now, for tests; default time.Now.
	Now func() time.Time
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("POST /v1/progress", s.progress)
	mux.HandleFunc("POST /v1/lease", s.lease)
	return mux
}

type httpError struct {
	status int
	msg    string
	field  string
}

func (e *httpError) Error() string { return e.msg }

func badField(field, msg string) *httpError {
	return &httpError{http.StatusBadRequest, field + ": " + msg, field}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		switch {
		case errors.Is(err, ErrUnknownJob):
			he = &httpError{status: http.StatusNotFound, msg: err.Error()}
		case errors.Is(err, ErrNotOwner):
			he = &httpError{status: http.StatusForbidden, field: "job", msg: err.Error()}
		default:
			he = &httpError{status: http.StatusInternalServerError, msg: "internal error"}
		}
	}
	if s.Logf != nil {
		s.Logf("lease api: %s %s: %d: %v", r.Method, r.URL.Path, he.status, err)
	}
	if he.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rondo"`)
	}
	writeJSON(w, he.status, ErrorResponse{Error: he.msg, Field: he.field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// authenticate verifies the bearer token.
func (s *Server) authenticate(r *http.Request) (*Identity, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return nil, &httpError{status: http.StatusUnauthorized, msg: "missing bearer token (send the task's Nomad workload identity)"}
	}
	id, err := s.Verifier.Verify(r.Context(), strings.TrimSpace(token))
	if err != nil {
		if errors.Is(err, ErrInvalidToken) {
			return nil, &httpError{status: http.StatusUnauthorized, msg: err.Error()}
		}
		// JWKS unreachable: the caller should retry, not give up.
		return nil, &httpError{status: http.StatusServiceUnavailable, msg: "cannot verify tokens now: " + err.Error()}
	}
	if id.Job == "" || id.Alloc == "" {
		return nil, &httpError{status: http.StatusForbidden, msg: "token is not a task workload identity (no nomad_job_id or nomad_allocation_id)"}
	}
	return id, nil
}

// decode reads a bounded JSON body, refusing unknown fields and trailing
// data.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	max := s.MaxBody
	if max <= 0 {
		max = DefaultMaxBody
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, max))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &mbe):
			return &httpError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body larger than %d bytes", max)}
		case errors.As(err, &te):
			return badField(te.Field, fmt.Sprintf("want a %s, got %s", te.Type, te.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badField(f, "unknown field")
		case errors.Is(err, io.EOF):
			return &httpError{status: http.StatusBadRequest, msg: "empty body"}
		default:
			return &httpError{status: http.StatusBadRequest, msg: "malformed JSON: " + err.Error()}
		}
	}
	if dec.More() {
		return &httpError{status: http.StatusBadRequest, msg: "trailing data after the JSON object"}
	}
	return nil
}

// authorize checks the body's job, namespace and alloc against the token.
func authorize(id *Identity, ns, job, alloc string) (Caller, error) {
	if job == "" {
		return Caller{}, badField("job", "required")
	}
	if ns != "" && ns != id.Namespace {
		return Caller{}, &httpError{status: http.StatusForbidden, field: "namespace",
			msg: fmt.Sprintf("token is for namespace %q, not %q", id.Namespace, ns)}
	}
	// Nomad gives dispatched and periodic children their parent's id.
	child := strings.HasPrefix(job, id.Job+"/dispatch-") || strings.HasPrefix(job, id.Job+"/periodic-")
	if job != id.Job && !child {
		return Caller{}, &httpError{status: http.StatusForbidden, field: "job",
			msg: fmt.Sprintf("token is for job %q, not %q", id.Job, job)}
	}
	if alloc != "" && alloc != id.Alloc {
		return Caller{}, &httpError{status: http.StatusForbidden, field: "alloc",
			msg: fmt.Sprintf("token is for allocation %q, not %q", id.Alloc, alloc)}
	}
	return Caller{Namespace: id.Namespace, Job: job, IdentityJob: id.Job, Alloc: id.Alloc, Task: id.Task}, nil
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req ProgressRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := authorize(id, req.Namespace, req.Job, req.Alloc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	switch {
	case req.StepsDone == nil:
		err = badField("steps_done", "required")
	case *req.StepsDone < 0:
		err = badField("steps_done", "must be >= 0")
	case req.ThroughputStepsPerS == nil:
		err = badField("throughput_steps_per_s", "required")
	case *req.ThroughputStepsPerS < 0 || math.IsInf(*req.ThroughputStepsPerS, 0) || math.IsNaN(*req.ThroughputStepsPerS):
		err = badField("throughput_steps_per_s", "must be a finite number >= 0")
	case req.GPUType == "":
		err = badField("gpu_type", "required")
	case len(req.GPUType) > 128:
		err = badField("gpu_type", "longer than 128 bytes")
	case len(req.Partner) > 256:
		err = badField("partner", "longer than 256 bytes")
	case req.EpochsDone != nil && (*req.EpochsDone < 0 || math.IsInf(*req.EpochsDone, 0) || math.IsNaN(*req.EpochsDone)):
		err = badField("epochs_done", "must be a finite number >= 0")
	case req.CheckpointS != nil && !finite(*req.CheckpointS):
		err = badField("checkpoint_s", "must be a finite number >= 0")
	case req.RestoreS != nil && !finite(*req.RestoreS):
		err = badField("restore_s", "must be a finite number >= 0")
	}
	now := s.now()
	var ckAt time.Time
	if err == nil && req.CheckpointAt != nil {
		ckAt, err = checkpointAt(*req.CheckpointAt, now)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := Progress{GPUType: req.GPUType, Partner: req.Partner, StepsDone: *req.StepsDone, ThroughputStepsPerS: *req.ThroughputStepsPerS, At: now,
		CheckpointAt: ckAt}
	if req.EpochsDone != nil {
		p.EpochsDone, p.HasEpochs = *req.EpochsDone, true
	}
	if req.CheckpointS != nil {
		p.CheckpointS, p.HasCheckpointS = *req.CheckpointS, true
	}
	if req.RestoreS != nil {
		p.RestoreS, p.HasRestoreS = *req.RestoreS, true
	}
	if err := s.Sink.Report(r.Context(), c, p); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// checkpointAt parses a report's checkpoint_at: an RFC 3339 time, after
// 1970 and not beyond MaxClockSkew in the future of now.
func checkpointAt(v string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	switch {
	case err != nil:
		return time.Time{}, badField("checkpoint_at", fmt.Sprintf("%q is not an RFC 3339 time", v))
	case t.Before(time.Unix(0, 0)):
		return time.Time{}, badField("checkpoint_at", fmt.Sprintf("%s is before 1970", v))
	case t.After(now.Add(MaxClockSkew)):
		return time.Time{}, badField("checkpoint_at", fmt.Sprintf("%s is in the future (more than %s after the allocator's clock)", v, MaxClockSkew))
	}
	return t, nil
}

func (s *Server) lease(w http.ResponseWriter, r *http.Request) {
	id, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req LeaseRequest
	if err := s.decode(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := authorize(id, req.Namespace, req.Job, req.Alloc)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	g, err := s.Decider.Lease(r.Context(), c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := LeaseResponse{Continue: g.Continue, LeaseExpiresAt: g.ExpiresAt.UTC(), Round: g.Round, CheckpointDir: g.CheckpointDir}
	if g.CheckpointNow && g.Continue {
		out.CheckpointNow, out.StopAt = true, g.StopAt.UTC()
		if g.StopAt.IsZero() {
			out.StopAt = out.LeaseExpiresAt
		}
	}
	if r := g.Roles; r != nil {
		out.Role, out.Workers, out.PS, out.Batch, out.TotalBatch = r.Role, r.Workers, r.PS, r.Batch, r.TotalBatch
	}
	writeJSON(w, http.StatusOK, out)
}
