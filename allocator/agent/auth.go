package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// AuthError is an Authorizer's refusal: Code is 401 (no token, where one is
// needed) or 403 (a token Nomad does not accept).
type AuthError struct {
	Code int
	Msg  string
}

func (e *AuthError) Error() string { return e.Msg }

// Token is the request's Nomad ACL token: the X-Nomad-Token header, else an
// "Authorization: Bearer" header, else the token query parameter (for the
// browser page); "" when it has none.
func Token(r *http.Request) string {
	if t := r.Header.Get("X-Nomad-Token"); t != "" {
		return t
	}
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return r.URL.Query().Get("token")
}

// open says whether a path is served without a token: Prometheus' scrape
// (/metrics) and the health check (/v1/health).
func open(path string) bool { return path == "/metrics" || path == "/v1/health" }

// guard puts the Authorizer in front of h for every path but the open
// ones. A refusal is a JSON {"error": ...} with 401 or 403; an Authorizer
// that could not decide (Nomad unreachable) answers 503.
func (a *Agent) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		auth := a.cfg.Authorizer
		a.mu.Unlock()
		if auth == nil || open(r.URL.Path) {
			h.ServeHTTP(w, r)
			return
		}
		if err := auth(r.Context(), Token(r)); err != nil {
			code := http.StatusServiceUnavailable
			var ae *AuthError
			if errors.As(err, &ae) {
				code = ae.Code
			}
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="rondo"`)
			}
			writeJSONError(w, code, err.Error())
			return
		}
		h.ServeHTTP(w, r)
	})
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// health is GET /v1/health: open, so a load balancer or a standby's
// watcher can probe it; it says whether this agent is the leader.
// GET /v1/health?leader answers 503 on a standby, so that a health check
// (Nomad's, a load balancer's) passes on the leader only.
func (a *Agent) health(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	leader, addr := a.status.Leader, a.status.LeaderAddr
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	body := map[string]any{"ok": true, "leader": leader, "leader_addr": addr}
	if !leader && r.URL.Query().Has("leader") {
		w.WriteHeader(http.StatusServiceUnavailable)
		body["error"] = "not the leader"
	}
	json.NewEncoder(w).Encode(body)
}
