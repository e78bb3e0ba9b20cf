package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Identity is what a verified Nomad workload identity says about its caller.
type Identity struct {
	Namespace string // nomad_namespace
	Job       string // nomad_job_id (the parent's id for dispatched and periodic children)
	Alloc     string // nomad_allocation_id
	Task      string // nomad_task
	Expiry    time.Time
}

// TokenVerifier turns a bearer token into an Identity. JWKSVerifier is the
// implementation; tests of callers may substitute another.
type TokenVerifier interface {
	Verify(ctx context.Context, token string) (*Identity, error)
}

// ErrInvalidToken wraps every verification failure (answered with 401).
var ErrInvalidToken = errors.New("invalid workload identity")

// Nomad signs workload identities with RS256 (default since 1.7) or EdDSA
// (older keyrings). Anything else, "none" in particular, is refused at parse.
var allowedAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.EdDSA}

// JWKSVerifier verifies Nomad workload identity JWTs against the cluster's
// JWKS (GET <nomad>/.well-known/jwks.json, public, no token needed). Keys are
// cached by kid; a token with an unknown kid triggers a refetch (key
// rotation), at most once per MinRefetch so that tokens with made-up kids
// cannot turn the API into a load generator against Nomad.
type JWKSVerifier struct {
	// URL of the JWKS, e.g. "http://127.0.0.1:4646/.well-known/jwks.json".
	URL string
	// Audiences, if set, requires the token's aud to contain one of them.
	// Use a dedicated identity (`identity { name = "rondo" aud = ["rondo-lease"] }`)
	// rather than the default one: a token sent to Rondo should not also be
	// a Nomad API credential.
	Audiences []string
	// Leeway for exp/nbf/iat (clock skew); default 30s.
	Leeway time.Duration
	// MinRefetch bounds refetches on unknown kids; default 5s.
	MinRefetch time.Duration
	// HTTPClient for the JWKS; default one with a 10s timeout.
	HTTPClient *http.Client
	// Now, for tests; default time.Now.
	Now func() time.Time

	fetchMu   sync.Mutex // serialises fetches
	mu        sync.Mutex // guards keys and lastFetch
	keys      map[string]jose.JSONWebKey
	lastFetch time.Time
}

// NewJWKSVerifier returns a verifier for the Nomad agent at nomadAddr (e.g.
// "http://127.0.0.1:4646").
func NewJWKSVerifier(nomadAddr string, audiences ...string) *JWKSVerifier {
	return &JWKSVerifier{URL: strings.TrimRight(nomadAddr, "/") + "/.well-known/jwks.json", Audiences: audiences}
}

type nomadClaims struct {
	Namespace string `json:"nomad_namespace"`
	JobID     string `json:"nomad_job_id"`
	AllocID   string `json:"nomad_allocation_id"`
	Task      string `json:"nomad_task"`
}

// Verify checks the token's signature, exp/nbf/iat and audience, and returns
// its Nomad claims. Errors wrap ErrInvalidToken, except a failure to fetch
// the JWKS, which is the server's problem.
func (v *JWKSVerifier) Verify(ctx context.Context, token string) (*Identity, error) {
	tok, err := jwt.ParseSigned(token, allowedAlgs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: want one signature", ErrInvalidToken)
	}
	kid := tok.Headers[0].KeyID
	key, err := v.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	var nc nomadClaims
	if err := tok.Claims(key.Key, &std, &nc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	now := v.now()
	leeway := v.Leeway
	if leeway == 0 {
		leeway = 30 * time.Second
	}
	if err := std.ValidateWithLeeway(jwt.Expected{AnyAudience: v.Audiences, Time: now}, leeway); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	id := &Identity{Namespace: nc.Namespace, Job: nc.JobID, Alloc: nc.AllocID, Task: nc.Task}
	if std.Expiry != nil {
		id.Expiry = std.Expiry.Time()
	}
	return id, nil
}

func (v *JWKSVerifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// errKeyUnavailable is a JWKS fetch failure: not the caller's fault.
var errKeyUnavailable = errors.New("workload identity keys unavailable")

func (v *JWKSVerifier) cached(kid string) (jose.JSONWebKey, bool, bool, time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	k, ok := v.keys[kid]
	return k, ok, v.keys != nil, v.lastFetch
}

func (v *JWKSVerifier) key(ctx context.Context, kid string) (jose.JSONWebKey, error) {
	if k, ok, _, _ := v.cached(kid); ok {
		return k, nil
	}
	// One fetch at a time: concurrent misses wait for it and find the key,
	// while hits on known kids never wait behind a slow JWKS.
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	k, ok, have, last := v.cached(kid)
	if ok {
		return k, nil
	}
	minRefetch := v.MinRefetch
	if minRefetch == 0 {
		minRefetch = 5 * time.Second
	}
	if have && v.now().Sub(last) < minRefetch {
		return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key id %q", ErrInvalidToken, kid)
	}
	keys, err := v.fetch(ctx)
	if err != nil {
		return jose.JSONWebKey{}, fmt.Errorf("%w: %v", errKeyUnavailable, err)
	}
	v.mu.Lock()
	v.keys, v.lastFetch = keys, v.now()
	v.mu.Unlock()
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return jose.JSONWebKey{}, fmt.Errorf("%w: unknown key id %q", ErrInvalidToken, kid)
}

func (v *JWKSVerifier) fetch(ctx context.Context) (map[string]jose.JSONWebKey, error) {
	hc := v.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", v.URL, resp.Status)
	}
	// Decode key by key: go-jose rejects a whole set for one key type it does
	// not know, and a future Nomad may publish one.
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return nil, fmt.Errorf("GET %s: %w", v.URL, err)
	}
	keys := map[string]jose.JSONWebKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(raw); err != nil || !k.Valid() || !k.IsPublic() || k.KeyID == "" {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		keys[k.KeyID] = k
	}
	return keys, nil
}
