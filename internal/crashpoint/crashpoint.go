// Package crashpoint kills the process with SIGKILL at a named point of its
// work when the environment asks for it: RONDO_CRASH_AT="point:n" kills it
// the n-th time the point is reached. The chaos soak (e2e/chaos_test.go,
// docs/chaos.md) uses it to land each kill -9 in the phase of the round it
// means to test (observe, decide, record, enforce) rather than wherever a
// timer falls: rounds are short and mostly idle, so random timing alone
// would rarely hit a Nomad write mid-enforcement. Unset, a point costs an
// atomic add.
package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Env names the point and the count: "enforce:3".
const Env = "RONDO_CRASH_AT"

// The points Rondo's round passes, in order.
const (
	Observe  = "observe"  // the cluster observed, nothing of the round recorded
	Decide   = "decide"   // the plan decided, not recorded
	Record   = "record"   // the decision recorded (durable), nothing enforced
	Enforce  = "enforce"  // after one write to Nomad of the enforcement (a register or scale)
	Enforced = "enforced" // enforcement done, the decision not yet closed
)

// Points lists the points for a chooser (the chaos soak).
var Points = []string{Observe, Decide, Record, Enforce, Enforced}

var (
	once   sync.Once
	target string
	at     int64
	hits   sync.Map // point -> *atomic.Int64
)

// Parse reads a RONDO_CRASH_AT value.
func Parse(v string) (point string, n int64, err error) {
	p, c, ok := strings.Cut(v, ":")
	if !ok {
		c = "1"
	}
	n, err = strconv.ParseInt(c, 10, 64)
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("%s=%q: want point:n with n >= 1", Env, v)
	}
	for _, q := range Points {
		if p == q {
			return p, n, nil
		}
	}
	return "", 0, fmt.Errorf("%s=%q: unknown point %q (points: %s)", Env, v, p, strings.Join(Points, ", "))
}

func setup() {
	v := os.Getenv(Env)
	if v == "" {
		return
	}
	p, n, err := Parse(v)
	if err != nil {
		fmt.Fprintln(os.Stderr, "crashpoint:", err) // a test's typo: say so, crash nowhere
		return
	}
	target, at = p, n
}

// Hit passes the point: the process dies here with SIGKILL when this is the
// n-th time and RONDO_CRASH_AT names it. The line it writes first is the
// kill's record in the process's log.
func Hit(point string) {
	once.Do(setup)
	if target != point {
		return
	}
	c, _ := hits.LoadOrStore(point, new(atomic.Int64))
	if c.(*atomic.Int64).Add(1) != at {
		return
	}
	fmt.Fprintf(os.Stderr, "crashpoint: SIGKILL at %s:%d (pid %d)\n", point, at, os.Getpid())
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
