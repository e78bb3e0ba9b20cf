package nomad

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/state"
)

// A wait that saw Nomad fail, then timed out although Nomad answered again,
// still reports the failure: the agent marks the next round to recompute.
func TestWaitTimeoutKeepsOutage(t *testing.T) {
	b := &Backend{cfg: Config{AckTimeout: 600 * time.Millisecond}}
	polls := 0
	err := b.waitUntil("starts", func() (bool, error) {
		polls++
		if polls == 1 {
			return false, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		}
		return false, nil
	})
	if err == nil || !strings.Contains(err.Error(), "timed out") || !state.Transient(err) {
		t.Fatalf("err = %v, want a timeout that state.Transient recognises", err)
	}
	// A plain timeout (Nomad answered throughout) is not transient.
	err = b.waitUntil("starts", func() (bool, error) { return false, nil })
	if err == nil || state.Transient(err) {
		t.Fatalf("err = %v, want a timeout that is not transient", err)
	}
}
