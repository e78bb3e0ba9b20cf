// Package client is the training task's side of Rondo's lease API: report
// progress, ask whether the lease continues.
//
//	c, err := client.FromEnv()
//	...
//	c.Report(ctx, steps, stepsPerSec, "a100")
//	l, err := c.Lease(ctx)
//	if !l.Continue { checkpoint to l.CheckpointDir; exit 0 }
//	if l.CheckpointNow { checkpoint to l.CheckpointDir now, go on training; you stop at l.StopAt }
//
// A task reports the checkpoint it last wrote and what checkpoints and
// restarts cost it with Send(ctx, client.Progress{..., CheckpointAt: t,
// CheckpointS: &s, RestoreS: &r}) (the allocator's checkpoint_aware
// preemption weighs them).
//
// A task of a two-role elastic job (DL2's workers and parameter servers)
// reads its size from the lease answer, never from its env (an env change
// restarts the task): l.TwoRole(), l.Role ("worker" or "ps"), l.Workers,
// l.PS, l.Batch (this worker's share of l.TotalBatch), and reports its
// epochs with Send(ctx, client.Progress{..., EpochsDone: &epochs}).
//
// The token is the task's Nomad workload identity, re-read on every call
// because Nomad renews it (at half its TTL) in the file and, with
// change_mode = "restart", the environment.
//
// The address may come from a file (RONDO_LEASE_ADDR_FILE, Client.AddrFile),
// also re-read on every call: a Nomad template over the agents'
// rondo-lease service re-renders it when the agent instances are replaced
// (an upgrade, a rollback), which the environment of a running task does
// not follow.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rondo-sched/rondo/allocator/lease"
	"github.com/rondo-sched/rondo/internal/rondotls"
)

// IdentityName is the name of the identity block the lease API expects
// (`identity { name = "rondo" aud = ["rondo-lease"] file = true ttl = "1h" }`);
// Nomad exposes it as NOMAD_TOKEN_rondo and secrets/nomad_rondo.jwt.
const IdentityName = "rondo"

// Audience is the audience that identity carries and the agent's verifier
// requires.
const Audience = "rondo-lease"

// Client talks to the allocator's lease API.
type Client struct {
	// Addr is the API's base URL, e.g. "http://10.0.0.5:4680".
	Addr string
	// AddrFile, when set, names a file read before every call for the
	// address: a line RONDO_LEASE_ADDR=<URL> (the env file a template over
	// the rondo-lease service renders, jobs/deploy/team-train.nomad.hcl) or
	// the bare URL. Addr is used while the file is missing or names none.
	AddrFile string
	// Namespace, Job and Alloc identify the caller; FromEnv fills them from
	// NOMAD_NAMESPACE, NOMAD_JOB_ID and NOMAD_ALLOC_ID.
	Namespace, Job, Alloc string
	// Token returns the bearer token for each call.
	Token func() (string, error)
	// HTTP is the client used; default one with a 30s timeout.
	HTTP *http.Client
}

// TokenFromEnv returns a token source trying, in order: the file named by
// RONDO_IDENTITY_FILE; the "rondo" identity (NOMAD_TOKEN_rondo,
// $NOMAD_SECRETS_DIR/nomad_rondo.jwt); the default identity (NOMAD_TOKEN,
// $NOMAD_SECRETS_DIR/nomad_token).
func TokenFromEnv() func() (string, error) {
	return func() (string, error) {
		secrets := os.Getenv("NOMAD_SECRETS_DIR")
		type src struct{ env, file string }
		srcs := []src{
			{file: os.Getenv("RONDO_IDENTITY_FILE")},
			{env: "NOMAD_TOKEN_" + IdentityName},
			{file: join(secrets, "nomad_"+IdentityName+".jwt")},
			{env: "NOMAD_TOKEN"},
			{file: join(secrets, "nomad_token")},
		}
		for _, s := range srcs {
			if s.env != "" {
				if v := strings.TrimSpace(os.Getenv(s.env)); v != "" {
					return v, nil
				}
				continue
			}
			if s.file == "" {
				continue
			}
			b, err := os.ReadFile(s.file)
			if err == nil && len(bytes.TrimSpace(b)) > 0 {
				return string(bytes.TrimSpace(b)), nil
			}
		}
		return "", errors.New("lease client: no workload identity: add an identity block with env or file to the task, or set RONDO_IDENTITY_FILE")
	}
}

func join(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// FromEnv builds a Client from the task's environment: RONDO_LEASE_ADDR
// or RONDO_LEASE_ADDR_FILE (AddrFile; one of them required), NOMAD_NAMESPACE, NOMAD_JOB_ID, NOMAD_ALLOC_ID, the token
// sources of TokenFromEnv, and for an https:// address with a private CA
// RONDO_CACERT (and RONDO_CLIENT_CERT, RONDO_CLIENT_KEY).
func FromEnv() (*Client, error) {
	file := os.Getenv("RONDO_LEASE_ADDR_FILE")
	addr := normAddr(os.Getenv("RONDO_LEASE_ADDR"))
	if addr == "" {
		addr = addrFromFile(file)
	}
	if addr == "" {
		if file != "" {
			return nil, fmt.Errorf("lease client: RONDO_LEASE_ADDR is not set and RONDO_LEASE_ADDR_FILE (%s) names no address", file)
		}
		return nil, errors.New("lease client: RONDO_LEASE_ADDR is not set")
	}
	job := os.Getenv("NOMAD_JOB_ID")
	if job == "" {
		return nil, errors.New("lease client: NOMAD_JOB_ID is not set (not running under Nomad?)")
	}
	// An https lease API with a private CA (the agent's tls {} block):
	// RONDO_CACERT, and RONDO_CLIENT_CERT/KEY when it verifies clients.
	hc, err := rondotls.Files{}.FromEnv().HTTPClient(30 * time.Second)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return &Client{
		Addr:      addr,
		AddrFile:  file,
		Namespace: os.Getenv("NOMAD_NAMESPACE"),
		Job:       job,
		Alloc:     os.Getenv("NOMAD_ALLOC_ID"),
		Token:     TokenFromEnv(),
		HTTP:      hc,
	}, nil
}

// Error is a refusal by the API.
type Error struct {
	Status int
	Msg    string
	Field  string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("lease api: %d: %s (field %s)", e.Status, e.Msg, e.Field)
	}
	return fmt.Sprintf("lease api: %d: %s", e.Status, e.Msg)
}

// Temporary reports whether retrying later may succeed (5xx).
func (e *Error) Temporary() bool { return e.Status >= 500 }

// Report sends a progress report.
func (c *Client) Report(ctx context.Context, stepsDone int64, stepsPerSec float64, gpuType string) error {
	return c.ReportWith(ctx, stepsDone, stepsPerSec, gpuType, "")
}

// ReportWith sends a progress report measured next to partner (space
// sharing: a pair throughput; "" alone).
func (c *Client) ReportWith(ctx context.Context, stepsDone int64, stepsPerSec float64, gpuType, partner string) error {
	return c.Send(ctx, Progress{StepsDone: stepsDone, StepsPerSec: stepsPerSec, GPUType: gpuType, Partner: partner})
}

// Progress is one progress report (Send): the fields of POST
// /v1/progress.
type Progress struct {
	StepsDone   int64
	StepsPerSec float64
	GPUType     string
	// Partner is the job sharing its GPUs (space sharing); "" alone.
	Partner string
	// EpochsDone, when set, is the epochs done since the job's first start
	// (a two-role elastic job's progress, meta rondo.epochs).
	EpochsDone *float64
	// CheckpointAt is when the job last wrote a checkpoint (zero: not
	// sent); CheckpointS, when set, how long writing it took; RestoreS,
	// when set, how long the job's last (re)start took until it trained
	// again (process start to the first step after loading its
	// checkpoint), in seconds. The allocator weighs them when it must stop
	// a job (checkpoint_aware).
	CheckpointAt          time.Time
	CheckpointS, RestoreS *float64
}

// Send sends a progress report.
func (c *Client) Send(ctx context.Context, p Progress) error {
	req := lease.ProgressRequest{Namespace: c.Namespace, Job: c.Job, Alloc: c.Alloc,
		StepsDone: &p.StepsDone, ThroughputStepsPerS: &p.StepsPerSec, GPUType: p.GPUType, Partner: p.Partner,
		EpochsDone: p.EpochsDone, CheckpointS: p.CheckpointS, RestoreS: p.RestoreS}
	if !p.CheckpointAt.IsZero() {
		at := p.CheckpointAt.UTC().Format(time.RFC3339Nano)
		req.CheckpointAt = &at
	}
	return c.do(ctx, "/v1/progress", req, nil)
}

// Lease asks whether the lease continues; a two-role elastic job's task
// also learns its role, the counts in force and its batch
// (LeaseResponse.TwoRole).
func (c *Client) Lease(ctx context.Context) (lease.LeaseResponse, error) {
	var out lease.LeaseResponse
	err := c.do(ctx, "/v1/lease", lease.LeaseRequest{Namespace: c.Namespace, Job: c.Job, Alloc: c.Alloc}, &out)
	return out, err
}

// addrFromFile reads an address file (Client.AddrFile): the value of its
// last RONDO_LEASE_ADDR= line, or its last bare line; "" when it cannot be
// read or names none.
func addrFromFile(name string) string {
	if name == "" {
		return ""
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	addr := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if v, ok := strings.CutPrefix(line, "RONDO_LEASE_ADDR="); ok {
			addr = strings.Trim(v, `"'`)
		} else if !strings.Contains(line, "=") {
			addr = line
		}
	}
	return normAddr(addr)
}

// normAddr adds the default scheme and drops a trailing slash.
func normAddr(addr string) string {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return ""
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

func (c *Client) base() string {
	if a := addrFromFile(c.AddrFile); a != "" {
		return a
	}
	return c.Addr
}

func (c *Client) do(ctx context.Context, path string, in, out any) error {
	tok, err := c.Token()
	if err != nil {
		return err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e lease.ErrorResponse
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &Error{Status: resp.StatusCode, Msg: e.Error, Field: e.Field}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("lease api: %s: decode answer: %w", path, err)
		}
	}
	return nil
}
