package nomad

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rondo-sched/rondo/allocator/agent"
)

// DefaultAuthTTL is how long an Authorizer keeps Nomad's answer about a
// token.
const DefaultAuthTTL = 30 * time.Second

// Authorizer checks status API tokens against Nomad (agent.Config.Authorizer):
// a token is accepted when Nomad resolves it (ACLTokens().Self() with that
// token: any valid, unexpired token, management or client); when Nomad's
// ACLs are disabled every request is. Answers are cached for TTL per token
// (by its hash); an answer Nomad could not give (unreachable) is not.
type Authorizer struct {
	Client *api.Client // its own token is used to ask whether ACLs are on
	TTL    time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]authAnswer
}

type authAnswer struct {
	err error // nil: accepted
	at  time.Time
}

// Authorize is the agent.Config.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, token string) error {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = DefaultAuthTTL
	}
	key := sha256.Sum256([]byte(token))
	a.mu.Lock()
	if ans, ok := a.cache[key]; ok && now().Sub(ans.at) < ttl {
		a.mu.Unlock()
		return ans.err
	}
	a.mu.Unlock()
	final, err := a.ask(ctx, token)
	if final {
		a.mu.Lock()
		if a.cache == nil {
			a.cache = map[[32]byte]authAnswer{}
		}
		for k, v := range a.cache { // forget the expired answers
			if now().Sub(v.at) >= ttl {
				delete(a.cache, k)
			}
		}
		a.cache[key] = authAnswer{err: err, at: now()}
		a.mu.Unlock()
	}
	return err
}

// ask asks Nomad about token; final is false when Nomad gave no answer.
func (a *Authorizer) ask(ctx context.Context, token string) (final bool, err error) {
	q := (&api.QueryOptions{}).WithContext(ctx)
	if token == "" {
		// Is there anything to check? Ask with the agent's own token.
		tok, _, err := a.Client.ACLTokens().Self(q)
		if ACLsDisabled(tok, err) {
			return true, nil
		}
		if err != nil && !answered(err) {
			return false, err
		}
		return true, &agent.AuthError{Code: http.StatusUnauthorized,
			Msg: "a Nomad ACL token is required (X-Nomad-Token, Authorization: Bearer, or ?token=)"}
	}
	q.AuthToken = token
	tok, _, err := a.Client.ACLTokens().Self(q)
	switch {
	case err == nil && tok != nil && (tok.ExpirationTime == nil || tok.ExpirationTime.After(time.Now())):
		return true, nil
	case err == nil || aclDisabled(err):
		if err != nil {
			return true, nil
		}
		return true, &agent.AuthError{Code: http.StatusForbidden, Msg: "the Nomad ACL token has expired"}
	case answered(err):
		return true, &agent.AuthError{Code: http.StatusForbidden, Msg: "Nomad does not accept the token: " + err.Error()}
	}
	return false, err
}

// ACLsDisabled tells from Nomad's answer to token/self (ACLTokens().Self)
// that the cluster runs without ACLs: its "ACLs disabled" token, or older
// versions' "ACL support disabled" error.
func ACLsDisabled(tok *api.ACLToken, err error) bool {
	return aclDisabled(err) || (err == nil && disabledToken(tok))
}

// disabledToken: Nomad answers token/self with its "ACLs disabled" token
// (structs.ACLsDisabledToken, 200) when ACLs are off; older versions
// answer an error (aclDisabled).
func disabledToken(tok *api.ACLToken) bool { return tok != nil && tok.AccessorID == "acls-disabled" }

func aclDisabled(err error) bool {
	return err != nil && strings.Contains(err.Error(), "ACL support disabled")
}

// answered: Nomad answered with a 4xx (the token is not found, expired,
// not allowed), not a transport failure or a 5xx.
func answered(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.HasStatusCode() {
		return ue.StatusCode() >= 400 && ue.StatusCode() < 500
	}
	return false
}
