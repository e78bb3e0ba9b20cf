package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// TestTransient classifies the errors the Nomad API client really returns:
// no server listening and 5xx/429 answers may pass (a server restarting,
// no leader yet); 403/400, lock conflicts, cancellation and errors that are
// not about reaching Nomad will not.
func TestTransient(t *testing.T) {
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	answer := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, http.StatusText(code), code)
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	call := func(addr string) error {
		c, err := api.NewClient(&api.Config{Address: addr})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = c.Variables().Read("rondo/allocator", nil)
		if err == nil {
			t.Fatalf("%s: no error", addr)
		}
		return err
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", call("http://" + dead), true},
		{"500", call(answer(500)), true},
		{"503", call(answer(503)), true},
		{"429", call(answer(429)), true},
		{"wrapped refused", fmt.Errorf("state: read x: %w", call("http://"+dead)), true},
		{"403", call(answer(403)), false},
		{"400", call(answer(400)), false},
		{"lock conflict", fmt.Errorf("acquire conflict %w", api.ErrLockConflict), false},
		{"cancelled", fmt.Errorf("x: %w", context.Canceled), false},
		{"decode", fmt.Errorf("state: decode: %w", errors.New("invalid character 'x'")), false},
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := Transient(c.err); got != c.want {
			t.Errorf("%s (%v): Transient = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestTransientBareErrno: a bare errno from the transport is a net.Error.
func TestTransientBareErrno(t *testing.T) {
	if !Transient(fmt.Errorf("dial: %w", syscall.ECONNREFUSED)) || !Transient(fmt.Errorf("read: %w", syscall.ECONNRESET)) {
		t.Error("connection refused/reset not transient")
	}
}
