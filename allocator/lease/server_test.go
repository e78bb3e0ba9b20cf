package lease

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwks is a JWKS endpoint whose key set tests can change.
type jwks struct {
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetches atomic.Int32
	down    atomic.Bool
	srv     *httptest.Server
}

func newJWKS(t *testing.T) *jwks {
	j := &jwks{}
	j.srv = httptest.NewServer(j.handler())
	t.Cleanup(j.srv.Close)
	return j
}

// handler serves the key set (tests serve it over TLS or a socket too).
func (j *jwks) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.fetches.Add(1)
		if j.down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		// An unknown key type must not hide the others.
		raw := []any{map[string]string{"kty": "EXOTIC", "kid": "x"}}
		for _, k := range j.keys {
			raw = append(raw, k)
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": raw})
	})
}

func (j *jwks) add(kid string, pub crypto.PublicKey, alg jose.SignatureAlgorithm) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.keys = append(j.keys, jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"})
}

type signer struct {
	kid string
	alg jose.SignatureAlgorithm
	key crypto.Signer
}

var rsaKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

type cl struct {
	std jwt.Claims
	nc  nomadClaims
}

func (s signer) token(t *testing.T, c cl) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: s.alg, Key: s.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", s.kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(c.std).Claims(c.nc).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

type recorder struct {
	mu      sync.Mutex
	leases  []Caller
	reports []Progress
	callers []Caller
	err     error
	roles   *Roles
	// notice, when set, is the grant's CheckpointNow and StopAt.
	notice *time.Time
}

func (r *recorder) Lease(ctx context.Context, c Caller) (Grant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return Grant{}, r.err
	}
	r.leases = append(r.leases, c)
	g := Grant{Continue: true, ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Round: 9, CheckpointDir: "/ckpt/" + c.Job,
		Roles: r.roles}
	if r.notice != nil {
		g.CheckpointNow, g.StopAt = true, *r.notice
	}
	return g, nil
}

func (r *recorder) Report(ctx context.Context, c Caller, p Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.callers = append(r.callers, c)
	r.reports = append(r.reports, p)
	return nil
}

type fixture struct {
	jwks *jwks
	rec  *recorder
	api  *httptest.Server
	v    *JWKSVerifier
	rs   signer // kid "k1", RS256, in the JWKS
}

func newFixture(t *testing.T, audiences ...string) *fixture {
	f := &fixture{jwks: newJWKS(t), rec: &recorder{}}
	f.rs = signer{kid: "k1", alg: jose.RS256, key: rsaKeys()[0]}
	f.jwks.add("k1", rsaKeys()[0].Public(), jose.RS256)
	f.v = &JWKSVerifier{URL: f.jwks.srv.URL, Audiences: audiences, MinRefetch: time.Hour}
	s := &Server{Verifier: f.v, Decider: f.rec, Sink: f.rec, Logf: t.Logf}
	f.api = httptest.NewServer(s.Handler())
	t.Cleanup(f.api.Close)
	return f
}

func claims(job, alloc string) cl {
	now := time.Now()
	return cl{jwt.Claims{IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(time.Hour)),
		Audience: jwt.Audience{"rondo-lease"}},
		nomadClaims{Namespace: "default", JobID: job, AllocID: alloc, Task: "train"}}
}

func (f *fixture) post(t *testing.T, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.api.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: non-JSON body %q", path, b)
		}
	}
	return resp.StatusCode, m
}

func TestLeaseAndProgressValid(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	tok := f.rs.token(t, claims("train", "alloc-1"))

	code, m := f.post(t, "/v1/lease", tok, `{"job":"train","alloc":"alloc-1"}`)
	if code != 200 || m["continue"] != true || m["round"] != float64(9) || m["checkpoint_dir"] != "/ckpt/train" || m["lease_expires_at"] != "2030-01-02T03:04:05Z" {
		t.Fatalf("lease: %d %v", code, m)
	}
	code, m = f.post(t, "/v1/progress", tok, `{"job":"train","alloc":"alloc-1","steps_done":1200,"throughput_steps_per_s":3.5,"gpu_type":"a100"}`)
	if code != 204 {
		t.Fatalf("progress: %d %v", code, m)
	}
	// alloc may be left out: it is the token's.
	if code, m := f.post(t, "/v1/lease", tok, `{"job":"train"}`); code != 200 {
		t.Fatalf("lease without alloc: %d %v", code, m)
	}
	want := Caller{Namespace: "default", Job: "train", IdentityJob: "train", Alloc: "alloc-1", Task: "train"}
	if len(f.rec.leases) != 2 || f.rec.leases[0] != want || f.rec.callers[0] != want {
		t.Fatalf("decider saw %+v, sink saw %+v", f.rec.leases, f.rec.callers)
	}
	if p := f.rec.reports[0]; p.GPUType != "a100" || p.StepsDone != 1200 || p.ThroughputStepsPerS != 3.5 || p.At.IsZero() || p.Partner != "" {
		t.Fatalf("report %+v", p)
	}
	// A paired job names its partner (optional field).
	if code, m := f.post(t, "/v1/progress", tok, `{"job":"train","steps_done":1300,"throughput_steps_per_s":2,"gpu_type":"a100","partner":"other"}`); code != 204 {
		t.Fatalf("progress with partner: %d %v", code, m)
	}
	if p := f.rec.reports[len(f.rec.reports)-1]; p.Partner != "other" || p.StepsDone != 1300 {
		t.Fatalf("paired report %+v", p)
	}
	if f.jwks.fetches.Load() != 1 {
		t.Fatalf("JWKS fetched %d times, want 1 (cached by kid)", f.jwks.fetches.Load())
	}

	// A dispatched child carries its parent's id in the token.
	if code, m := f.post(t, "/v1/lease", tok, `{"job":"train/dispatch-1700000000-abcd"}`); code != 200 {
		t.Fatalf("dispatched child: %d %v", code, m)
	}

	resp, err := http.Get(f.api.URL + "/v1/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A two-role job's task learns its role, the counts in force and its
// batch; other jobs' answers carry none of the fields. A report may carry
// epochs_done.
func TestLeaseTwoRole(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	tok := f.rs.token(t, claims("train", "alloc-1"))
	code, m := f.post(t, "/v1/lease", tok, `{"job":"train"}`)
	for _, k := range []string{"role", "workers", "ps", "batch", "total_batch"} {
		if _, ok := m[k]; ok || code != 200 {
			t.Fatalf("one-role answer has %q: %d %v", k, code, m)
		}
	}
	f.rec.roles = &Roles{Role: RoleWorker, Workers: 3, PS: 2, Batch: 86, TotalBatch: 256}
	code, m = f.post(t, "/v1/lease", tok, `{"job":"train"}`)
	if code != 200 || m["role"] != "worker" || m["workers"] != float64(3) || m["ps"] != float64(2) || m["batch"] != float64(86) ||
		m["total_batch"] != float64(256) || m["continue"] != true {
		t.Fatalf("two-role answer: %d %v", code, m)
	}
	f.rec.roles = &Roles{Role: RolePS, Workers: 3, PS: 2, TotalBatch: 256}
	if code, m = f.post(t, "/v1/lease", tok, `{"job":"train"}`); m["role"] != "ps" || m["batch"] != nil {
		t.Fatalf("ps answer: %d %v", code, m)
	}
	if code, m := f.post(t, "/v1/progress", tok, `{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100","epochs_done":1.25}`); code != 204 {
		t.Fatalf("progress with epochs: %d %v", code, m)
	}
	if p := f.rec.reports[len(f.rec.reports)-1]; !p.HasEpochs || p.EpochsDone != 1.25 || p.StepsDone != 10 {
		t.Fatalf("report %+v", p)
	}
	if f.post(t, "/v1/progress", tok, `{"job":"train","steps_done":10,"throughput_steps_per_s":1,"gpu_type":"v100"}`); f.rec.reports[len(f.rec.reports)-1].HasEpochs {
		t.Fatal("a report without epochs_done has epochs")
	}
}

func TestBatchShare(t *testing.T) {
	for _, tc := range []struct {
		total, workers int
		want           []int
	}{
		{256, 3, []int{86, 85, 85}},
		{256, 2, []int{128, 128}},
		{10, 4, []int{3, 3, 2, 2}},
		{3, 3, []int{1, 1, 1}},
		{256, 1, []int{256}},
	} {
		sum := 0
		for i, w := range tc.want {
			if got := BatchShare(tc.total, tc.workers, i); got != w {
				t.Errorf("BatchShare(%d, %d, %d) = %d, want %d", tc.total, tc.workers, i, got, w)
			}
			sum += BatchShare(tc.total, tc.workers, i)
		}
		if sum != tc.total {
			t.Errorf("%d over %d sums to %d", tc.total, tc.workers, sum)
		}
	}
	for _, tc := range [][3]int{{256, 3, 3}, {256, 3, -1}, {0, 3, 0}, {256, 0, 0}} {
		if got := BatchShare(tc[0], tc[1], tc[2]); got != 0 {
			t.Errorf("BatchShare%v = %d, want 0", tc, got)
		}
	}
}

func TestAuthFailures(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	good := `{"job":"train","alloc":"alloc-1"}`
	other := signer{kid: "k1", alg: jose.RS256, key: rsaKeys()[1]} // same kid, wrong key

	expired := func() string {
		c := claims("train", "alloc-1")
		c.std.Expiry = jwt.NewNumericDate(time.Now().Add(-2 * time.Minute))
		c.std.IssuedAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
		c.std.NotBefore = c.std.IssuedAt
		return f.rs.token(t, c)
	}()
	notYet := func() string {
		c := claims("train", "alloc-1")
		c.std.NotBefore = jwt.NewNumericDate(time.Now().Add(10 * time.Minute))
		return f.rs.token(t, c)
	}()
	wrongAud := func() string {
		c := claims("train", "alloc-1")
		c.std.Audience = jwt.Audience{"nomadproject.io"}
		return f.rs.token(t, c)
	}()
	noJob := func() string {
		c := claims("", "alloc-1")
		return f.rs.token(t, c)
	}()
	valid := f.rs.token(t, claims("train", "alloc-1"))
	parts := strings.Split(valid, ".")
	// Header {"alg":"none"} with the valid payload and no signature.
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."
	// The payload of another job under the valid signature.
	otherPayload := strings.Split(f.rs.token(t, claims("evil", "alloc-1")), ".")[1]
	spliced := parts[0] + "." + otherPayload + "." + parts[2]

	for _, tc := range []struct {
		name, path, token, body string
		code                    int
		field                   string
	}{
		{"missing token", "/v1/lease", "", good, 401, ""},
		{"garbage token", "/v1/lease", "not-a-jwt", good, 401, ""},
		{"expired", "/v1/lease", expired, good, 401, ""},
		{"not yet valid", "/v1/lease", notYet, good, 401, ""},
		{"wrong audience", "/v1/lease", wrongAud, good, 401, ""},
		{"wrong signature", "/v1/progress", other.token(t, claims("train", "alloc-1")), good, 401, ""},
		{"alg none", "/v1/lease", none, good, 401, ""},
		{"spliced payload", "/v1/lease", spliced, good, 401, ""},
		{"not a task identity", "/v1/lease", noJob, good, 403, ""},
		{"other job", "/v1/lease", valid, `{"job":"someone-else","alloc":"alloc-1"}`, 403, "job"},
		{"other job progress", "/v1/progress", valid, `{"job":"someone-else","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100"}`, 403, "job"},
		{"prefix is not a child", "/v1/lease", valid, `{"job":"train-2"}`, 403, "job"},
		{"other alloc", "/v1/lease", valid, `{"job":"train","alloc":"alloc-2"}`, 403, "alloc"},
		{"other namespace", "/v1/lease", valid, `{"namespace":"prod","job":"train"}`, 403, "namespace"},
	} {
		code, m := f.post(t, tc.path, tc.token, tc.body)
		if code != tc.code || m["error"] == nil || (tc.field != "" && m["field"] != tc.field) {
			t.Errorf("%s: got %d %v, want %d (field %q)", tc.name, code, m, tc.code, tc.field)
		}
	}
	if len(f.rec.leases)+len(f.rec.reports) != 0 {
		t.Fatalf("refused requests reached the decider: %+v %+v", f.rec.leases, f.rec.reports)
	}
}

func TestUnknownKidRefetch(t *testing.T) {
	f := newFixture(t)
	// A fake clock: the rate limit must not depend on how fast this
	// machine runs the requests.
	start := time.Now()
	var elapsed atomic.Int64
	f.v.Now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	f.v.MinRefetch = 5 * time.Second
	if code, m := f.post(t, "/v1/lease", f.rs.token(t, claims("train", "a")), `{"job":"train"}`); code != 200 {
		t.Fatalf("first: %d %v", code, m)
	}
	// Nomad rotates its keyring: a new Ed25519 key appears in the JWKS.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.jwks.add("k2", pub, jose.EdDSA)
	ed := signer{kid: "k2", alg: jose.EdDSA, key: priv}
	elapsed.Add(int64(6 * time.Second))
	if code, m := f.post(t, "/v1/lease", ed.token(t, claims("train", "a")), `{"job":"train"}`); code != 200 {
		t.Fatalf("after rotation: %d %v", code, m)
	}
	if n := f.jwks.fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// Made-up kids right after a fetch do not hit the JWKS again.
	bogus := signer{kid: "nope", alg: jose.EdDSA, key: priv}
	for range 5 {
		if code, _ := f.post(t, "/v1/lease", bogus.token(t, claims("train", "a")), `{"job":"train"}`); code != 401 {
			t.Fatalf("unknown kid: %d", code)
		}
	}
	if n := f.jwks.fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times after bogus kids, want 2 (rate limited)", n)
	}
}

func TestJWKSUnavailable(t *testing.T) {
	f := newFixture(t)
	f.jwks.down.Store(true)
	if code, m := f.post(t, "/v1/lease", f.rs.token(t, claims("train", "a")), `{"job":"train"}`); code != 503 {
		t.Fatalf("JWKS down: %d %v, want 503", code, m)
	}
	f.jwks.down.Store(false)
	if code, m := f.post(t, "/v1/lease", f.rs.token(t, claims("train", "a")), `{"job":"train"}`); code != 200 {
		t.Fatalf("JWKS back: %d %v", code, m)
	}
}

func TestBadRequests(t *testing.T) {
	f := newFixture(t)
	tok := f.rs.token(t, claims("train", "alloc-1"))
	for _, tc := range []struct {
		name, path, body string
		code             int
		field            string
	}{
		{"empty body", "/v1/lease", ``, 400, ""},
		{"not JSON", "/v1/lease", `{job:`, 400, ""},
		{"missing job", "/v1/lease", `{"alloc":"alloc-1"}`, 400, "job"},
		{"unknown field", "/v1/lease", `{"job":"train","jobb":"x"}`, 400, "jobb"},
		{"trailing data", "/v1/lease", `{"job":"train"} {}`, 400, ""},
		{"job wrong type", "/v1/lease", `{"job":7}`, 400, "job"},
		{"missing steps", "/v1/progress", `{"job":"train","throughput_steps_per_s":1,"gpu_type":"a100"}`, 400, "steps_done"},
		{"steps wrong type", "/v1/progress", `{"job":"train","steps_done":"many","throughput_steps_per_s":1,"gpu_type":"a100"}`, 400, "steps_done"},
		{"negative steps", "/v1/progress", `{"job":"train","steps_done":-1,"throughput_steps_per_s":1,"gpu_type":"a100"}`, 400, "steps_done"},
		{"missing throughput", "/v1/progress", `{"job":"train","steps_done":1,"gpu_type":"a100"}`, 400, "throughput_steps_per_s"},
		{"negative throughput", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":-2,"gpu_type":"a100"}`, 400, "throughput_steps_per_s"},
		{"partner too long", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","partner":"` + strings.Repeat("p", 257) + `"}`, 400, "partner"},
		{"negative epochs", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","epochs_done":-0.5}`, 400, "epochs_done"},
		{"epochs wrong type", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","epochs_done":"3"}`, 400, "epochs_done"},
		{"missing gpu type", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1}`, 400, "gpu_type"},
		{"checkpoint_at not a time", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":"yesterday"}`, 400, "checkpoint_at"},
		{"checkpoint_at without zone", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":"2026-01-02T03:04:05"}`, 400, "checkpoint_at"},
		{"checkpoint_at empty", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":""}`, 400, "checkpoint_at"},
		{"checkpoint_at a number", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":1700000000}`, 400, "checkpoint_at"},
		{"checkpoint_at in the future", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":"` +
			time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + `"}`, 400, "checkpoint_at"},
		{"checkpoint_at before 1970", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_at":"0001-01-01T00:00:00Z"}`, 400, "checkpoint_at"},
		{"negative checkpoint_s", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_s":-1}`, 400, "checkpoint_s"},
		{"huge checkpoint_s", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_s":1e400}`, 400, "checkpoint_s"},
		{"checkpoint_s wrong type", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","checkpoint_s":"2"}`, 400, "checkpoint_s"},
		{"negative restore_s", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","restore_s":-0.1}`, 400, "restore_s"},
		{"restore_s wrong type", "/v1/progress", `{"job":"train","steps_done":1,"throughput_steps_per_s":1,"gpu_type":"a100","restore_s":true}`, 400, "restore_s"},
		{"too large", "/v1/progress", `{"job":"train","gpu_type":"` + strings.Repeat("x", DefaultMaxBody) + `"}`, 413, ""},
	} {
		code, m := f.post(t, tc.path, tok, tc.body)
		if code != tc.code || m["error"] == nil || (tc.field != "" && m["field"] != tc.field) {
			t.Errorf("%s: got %d %v, want %d (field %q)", tc.name, code, m, tc.code, tc.field)
		}
	}
	// Wrong method.
	resp, err := http.Get(f.api.URL + "/v1/lease")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/lease: %d", resp.StatusCode)
	}
	// The decider does not know the job.
	f.rec.err = ErrUnknownJob
	if code, _ := f.post(t, "/v1/lease", tok, `{"job":"train"}`); code != 404 {
		t.Fatalf("unknown job: %d, want 404", code)
	}
}

func TestConcurrentVerifyFetchesOnce(t *testing.T) {
	f := newFixture(t)
	tok := f.rs.token(t, claims("train", "a"))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := f.v.Verify(context.Background(), tok); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := f.jwks.fetches.Load(); n != 1 {
		t.Fatalf("20 concurrent first verifications fetched the JWKS %d times, want 1", n)
	}
}

// TestChildJobs: Nomad 1.11 puts a dispatched or periodic child's parent
// in nomad_job_id (Job.GetIDforWorkloadIdentity); the verifier reports that
// and the child's allocation, the server passes a child of the token's job
// to the decider with both ids, refuses anything else, and answers the
// decider's ErrNotOwner (the allocation is a sibling's) with 403.
func TestChildJobs(t *testing.T) {
	f := newFixture(t, "rondo-lease")
	tok := f.rs.token(t, claims("train", "alloc-child"))
	id, err := f.v.Verify(context.Background(), tok)
	if err != nil || id.Job != "train" || id.Alloc != "alloc-child" || id.Namespace != "default" {
		t.Fatalf("verified identity %+v, %v", id, err)
	}
	for _, job := range []string{"train/dispatch-1700000000-abcd", "train/periodic-1700000000"} {
		if code, m := f.post(t, "/v1/lease", tok, `{"job":"`+job+`"}`); code != 200 {
			t.Fatalf("child %s: %d %v", job, code, m)
		}
		if code, m := f.post(t, "/v1/progress", tok, `{"job":"`+job+`","steps_done":5,"throughput_steps_per_s":1,"gpu_type":"v100"}`); code != 204 {
			t.Fatalf("child %s progress: %d %v", job, code, m)
		}
	}
	want := Caller{Namespace: "default", Job: "train/periodic-1700000000", IdentityJob: "train", Alloc: "alloc-child", Task: "train"}
	if n := len(f.rec.leases); n != 2 || f.rec.leases[1] != want || f.rec.callers[1] != want {
		t.Fatalf("decider saw %+v, sink %+v", f.rec.leases, f.rec.callers)
	}
	// Not children of the token's job: another job's child, a job whose
	// id merely starts with the parent's, a made-up suffix.
	for _, job := range []string{"other/dispatch-1-a", "trainer/dispatch-1-a", "train-x", "train/other-1"} {
		if code, m := f.post(t, "/v1/lease", tok, `{"job":"`+job+`"}`); code != 403 {
			t.Errorf("job %s with a token for train: %d %v", job, code, m)
		}
	}
	// The decider finds the allocation is another child's.
	f.rec.err = fmt.Errorf("%w: allocation alloc-child is job %q's", ErrNotOwner, "train/dispatch-2-b")
	if code, m := f.post(t, "/v1/lease", tok, `{"job":"train/dispatch-1-a"}`); code != 403 || m["field"] != "job" {
		t.Errorf("sibling's lease: %d %v", code, m)
	}
	if code, m := f.post(t, "/v1/progress", tok, `{"job":"train/dispatch-1-a","steps_done":5,"throughput_steps_per_s":1,"gpu_type":"v100"}`); code != 403 {
		t.Errorf("sibling's progress: %d %v", code, m)
	}
}
