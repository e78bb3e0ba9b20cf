package fair

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// Departures unbalance the servers: load balancing moves at most
// MaxMigrations jobs per round, a moved job starts on the other server's
// GPUs, and the loads end balanced.
func TestMigrationAfterDepartures(t *testing.T) {
	h := newHarness(t, Config{MaxMigrations: 1}, cluster("v100", 2, 4))
	for i := 0; i < 16; i++ {
		h.add(job(fmt.Sprintf("j%02d", i), "A", 1, nil))
	}
	h.steps(3)
	var gone []string
	for id, js := range h.s.st.Jobs {
		if js.Servers[0] == "v100-s01" && len(gone) < 6 {
			gone = append(gone, id)
		}
	}
	h.remove(gone...)
	before := map[string]string{}
	for id, js := range h.s.st.Jobs {
		before[id] = js.Servers[0]
	}
	moves := 0
	for r := 0; r < 6; r++ {
		m0 := h.s.Status().Migrations
		p := h.step()
		n := h.s.Status().Migrations - m0
		if n > 1 {
			t.Fatalf("round %d: %d migrations, max 1", r, n)
		}
		moves += n
		for id, js := range h.s.st.Jobs {
			if js.Servers[0] == before[id] {
				continue
			}
			before[id] = js.Servers[0]
			for _, a := range p.Assignments {
				if a.Jobs[0] == id && (a.Action != engine.Start || !strings.HasPrefix(a.GPUs[0], js.Servers[0])) {
					t.Errorf("moved %s: %+v", id, a)
				}
			}
		}
	}
	if moves != 3 {
		t.Errorf("%d migrations, want 3 (8/2 -> 5/5)", moves)
	}
	lay := h.s.lay
	imb, _, _ := imbalance(h.s.loads(lay), lay.byType["v100"])
	if imb > 0.25 {
		t.Errorf("imbalance %.3f after balancing", imb)
	}
}

// Trading: a user whose jobs speed up 5x on v100 buys v100 share from one
// whose jobs speed up 1.2x.
func TestTrading(t *testing.T) {
	gpus := append(cluster("v100", 1, 4), cluster("k80", 1, 4)...)
	run := func(trading bool) (*harness, Status) {
		h := newHarness(t, Config{Trading: trading}, gpus)
		// More work than GPUs: a seller takes more slow GPUs than it gives.
		for i := 0; i < 8; i++ {
			h.add(job(fmt.Sprintf("s%d", i), "slow", 1, map[string]float64{"v100": 1.2, "k80": 1}),
				job(fmt.Sprintf("f%d", i), "fast", 1, map[string]float64{"v100": 5, "k80": 1}))
		}
		h.steps(5)
		return h, h.s.Status()
	}
	_, without := run(false)
	_, with := run(true)
	if len(with.Trades) == 0 {
		t.Fatal("no trade")
	}
	share := func(st Status, u, typ string) float64 {
		for _, us := range st.Users {
			if us.User == u {
				return us.Share[typ]
			}
		}
		return 0
	}
	if share(with, "fast", "v100") <= share(without, "fast", "v100") {
		t.Errorf("fast user's v100 share %.3f with trading, %.3f without", share(with, "fast", "v100"), share(without, "fast", "v100"))
	}
	for _, typ := range []string{"v100", "k80"} {
		a := share(with, "fast", typ) + share(with, "slow", typ)
		b := share(without, "fast", typ) + share(without, "slow", typ)
		if math.Abs(a-b) > 1e-6 {
			t.Errorf("%s: %.3f GPUs with trading, %.3f without", typ, a, b)
		}
	}
	if tr := with.Trades[0]; tr.Buyer != "fast" || tr.Seller != "slow" || tr.Fast != "v100" {
		t.Errorf("trade %+v", tr)
	}
	// The GPU time the jobs receive on each generation follows the traded
	// shares: each user's jobs are bound (and moved after the trade) so
	// that its bound demand covers its share there.
	h, st := run(true)
	recv := func(u, typ string) float64 {
		for _, us := range h.s.Status().Users {
			if us.User == u {
				return us.ReceivedGPUS[typ]
			}
		}
		return 0
	}
	before := map[[2]string]float64{}
	for _, u := range []string{"fast", "slow"} {
		for _, typ := range []string{"v100", "k80"} {
			before[[2]string{u, typ}] = recv(u, typ)
		}
	}
	h.steps(30)
	for _, u := range []string{"fast", "slow"} {
		for _, typ := range []string{"v100", "k80"} {
			got := (recv(u, typ) - before[[2]string{u, typ}]) / h.roundS / 30
			if want := share(st, u, typ); math.Abs(got-want) > 0.1*want {
				t.Errorf("%s on %s: %.3f GPUs over 30 quanta, traded share %.3f", u, typ, got, want)
			}
		}
	}
}

// Value (fairshare.Valuations): the slowest type has value 1; a speedup
// is the mean over the user's jobs that run on both types (c, v100 only,
// has no speedup to measure).
func TestValue(t *testing.T) {
	gpus := append(cluster("v100", 1, 4), cluster("k80", 1, 4)...)
	h := newHarness(t, Config{}, gpus)
	h.add(job("a", "A", 1, map[string]float64{"v100": 5, "k80": 1}), job("b", "B", 1, map[string]float64{"v100": 1.2, "k80": 1}),
		job("c", "B", 1, map[string]float64{"v100": 2}))
	h.step()
	v := h.s.value(h.s.lay, h.s.sorted())
	if v["A"]["k80"] != 1 || v["A"]["v100"] != 5 || v["B"]["k80"] != 1 || math.Abs(v["B"]["v100"]-1.2) > 1e-9 {
		t.Errorf("value %v", v)
	}
}

// A scheduler restored mid-run decides the next rounds as the original;
// garbage is refused and changes nothing.
func TestHistoryRoundTrip(t *testing.T) {
	mk := func() *harness {
		h := newHarness(t, Config{QuantumRounds: 3, Tickets: map[string]int{"A": 200}}, cluster("v100", 3, 4))
		for i := 0; i < 14; i++ {
			h.add(job(fmt.Sprintf("j%02d", i), fmt.Sprintf("%c", 'A'+i%3), 1+i%3, nil))
		}
		return h
	}
	h := mk()
	h.steps(7)
	h.remove("j03", "j04")
	h.steps(2)
	b, err := h.s.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := New(h.s.cfg)
	if err := s2.UnmarshalHistory(b); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{[]byte("{"), []byte(`{"rounds":-1}`), []byte(`{"seen":true,"jobs":{"x":{"user":"A","gpus":1,"tickets":0}}}`)} {
		before, _ := s2.MarshalHistory()
		if err := s2.UnmarshalHistory(bad); err == nil {
			t.Errorf("accepted %s", bad)
		}
		after, _ := s2.MarshalHistory()
		if !bytes.Equal(before, after) {
			t.Errorf("bad history %s changed the state", bad)
		}
	}
	// Twin harness on the restored scheduler.
	h2 := *h
	h2.s = s2
	h2.jobs = make([]engine.Job, len(h.jobs))
	for i, j := range h.jobs {
		j.ReceivedS = cloneRecv(j.ReceivedS)
		h2.jobs[i] = j
	}
	h2.gpuQ, h2.userQ = map[string]float64{}, map[string]float64{}
	for r := 0; r < 12; r++ {
		if r == 4 {
			h.add(job("new", "C", 2, nil))
			h2.add(job("new", "C", 2, nil))
		}
		p1, p2 := h.step(), h2.step()
		if !reflect.DeepEqual(p1.Assignments, p2.Assignments) || !reflect.DeepEqual(p1.Suspend, p2.Suspend) {
			t.Fatalf("round %d after restore: plans differ\n%+v\n%+v", r, p1.Assignments, p2.Assignments)
		}
	}
}

// Mid-quantum rounds keep the running set; freed GPUs are filled.
func TestQuantumKeepsAndFills(t *testing.T) {
	h := newHarness(t, Config{QuantumRounds: 4}, cluster("v100", 1, 4))
	for i := 0; i < 6; i++ {
		h.add(job(fmt.Sprintf("j%d", i), "A", 1, nil))
	}
	p := h.step()
	first := map[string]bool{}
	for _, a := range p.Assignments {
		first[a.Jobs[0]] = true
	}
	p = h.step()
	for _, a := range p.Assignments {
		if !first[a.Jobs[0]] || a.Action != engine.Keep {
			t.Fatalf("mid-quantum: %+v", a)
		}
	}
	var done string
	for id := range first {
		done = id
		break
	}
	h.remove(done)
	p = h.step()
	if len(p.Assignments) != 4 {
		t.Fatalf("freed GPU not filled: %+v", p.Assignments)
	}
}

func TestNewValidates(t *testing.T) {
	for _, c := range []Config{{Tickets: map[string]int{"a": 0}}, {QuantumRounds: -1}, {RoundS: -1}, {TradeMargin: 1}, {MaxMigrations: -2}, {Imbalance: -1}} {
		if _, err := New(c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

// The default quantum keeps one switch (SwitchS) under 2% of it.
func TestDefaultQuantumRounds(t *testing.T) {
	for roundS, want := range map[float64]int{360: 1, 100: 1, 99: 2, 50: 2, 49: 3, 4: 25, 0: 1} {
		if got := DefaultQuantumRounds(roundS); got != want {
			t.Errorf("round %gs: %d rounds, want %d", roundS, got, want)
		}
	}
}

// ResetFirst: a scheduler rebuilt with new tickets (a reload) takes them
// at its first round although the restored history records no event.
func TestResetFirstAfterReload(t *testing.T) {
	h := newHarness(t, Config{Tickets: map[string]int{"A": 100, "B": 100}}, cluster("v100", 1, 4))
	h.add(job("a", "A", 1, nil), job("b", "B", 1, nil))
	h.steps(3)
	b, err := h.s.MarshalHistory()
	if err != nil {
		t.Fatal(err)
	}
	for _, reset := range []bool{false, true} {
		s2, err := New(Config{RoundS: 360, Tickets: map[string]int{"A": 300, "B": 100}, ResetFirst: reset})
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.UnmarshalHistory(b); err != nil {
			t.Fatal(err)
		}
		h.s = s2
		h.step()
		ta, tb := s2.st.Jobs["a"].Tickets, s2.st.Jobs["b"].Tickets
		if got := ta / tb; reset && math.Abs(got-3) > 1e-9 || !reset && math.Abs(got-1) > 1e-9 {
			t.Errorf("reset %v: tickets a/b = %.3f", reset, got)
		}
	}
}
