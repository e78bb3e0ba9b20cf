package policies

import (
	"encoding/json"
	"math"
	"math/rand"
	"strings"
	"testing"
)

// Two users with tickets 2:1 on 4 v100 + 12 k80; alice's jobs speed up 4x
// on v100, bob's 2x. Fair shares follow the tickets with the same mix of
// generations; trading moves bob's v100 to alice at bob's speedup; each
// user's GPUs are spread over its jobs.
func TestGandivaFairTwoUsers(t *testing.T) {
	js := `{"gpu_types":{"v100":{"count":4},"k80":{"count":12}},
	"users":{"alice":{"tickets":200},"bob":{"tickets":100}},
	"jobs":[
	{"id":"a1","user":"alice","throughput":{"v100":4,"k80":1},"scale_factor":4},
	{"id":"a2","user":"alice","throughput":{"v100":8,"k80":2},"scale_factor":8},
	{"id":"b1","user":"bob","throughput":{"v100":2,"k80":1},"scale_factor":4},
	{"id":"b2","user":"bob","throughput":{"v100":2,"k80":1},"scale_factor":4}]}`
	p, err := ReadProblem(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Solve("gandiva_fair", p)
	if err != nil {
		t.Fatal(err)
	}
	checkFeasible(t, "gandiva_fair", p, a)
	for u, want := range map[string]map[string]float64{"alice": {"v100": 8.0 / 3, "k80": 8}, "bob": {"v100": 4.0 / 3, "k80": 4}} {
		for ty, w := range want {
			if math.Abs(a.FairShares[u][ty]-w) > 1e-9 {
				t.Errorf("fair share %s %s: %v, want %v", u, ty, a.FairShares[u][ty], w)
			}
		}
	}
	// bob sells his 4/3 v100 at price 2 (his speedup): 8/3 k80 from alice.
	if len(a.Trades) != 1 || a.Trades[0].Buyer != "alice" || a.Trades[0].Seller != "bob" ||
		math.Abs(a.Trades[0].Price-2) > 1e-9 || math.Abs(a.Trades[0].Amount-4.0/3) > 1e-9 {
		t.Fatalf("trades %+v", a.Trades)
	}
	if math.Abs(a.UserShares["alice"]["v100"]-4) > 1e-9 || math.Abs(a.UserShares["bob"]["k80"]-4-8.0/3) > 1e-9 {
		t.Fatalf("user shares %v", a.UserShares)
	}
	// GPUs per user per type in X match its shares.
	for m, id := range a.JobIDs {
		u := "alice"
		if id[0] == 'b' {
			u = "bob"
		}
		for k, ty := range a.Types {
			a.UserShares[u][ty] -= a.X[m][k] * float64(p.Jobs[m].ScaleFactor)
		}
	}
	for u, m := range a.UserShares {
		for ty, v := range m {
			if math.Abs(v) > 1e-9 {
				t.Errorf("%s: %v %s GPUs not placed", u, v, ty)
			}
		}
	}
	// Trading off: no trades, user shares = fair shares.
	off := false
	p.Trading = &off
	b, err := Solve("gandiva_fair", p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Trades) != 0 || math.Abs(b.UserShares["bob"]["v100"]-4.0/3) > 1e-9 || b.Objective >= a.Objective {
		t.Fatalf("trading off: %+v, objective %v vs %v", b.Trades, b.Objective, a.Objective)
	}
	out, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"fair_shares":{"alice"`, `"user_shares":`, `"trades":[{"buyer":"alice","seller":"bob"`} {
		if !strings.Contains(string(out), key) {
			t.Errorf("JSON lacks %s: %s", key, out)
		}
	}
	// Other policies print none of it.
	c, _ := Solve("las", p)
	if out, _ := json.Marshal(c); strings.Contains(string(out), "fair_shares") || strings.Contains(string(out), "trades") {
		t.Errorf("las prints gandiva_fair's fields: %s", out)
	}
}

// The per-job split places a user's whole share when one job can run on
// both types and another on one only, whatever the order of types: the
// flexible job moves off the type the other needs.
func TestGandivaFairSplitPlacesEverything(t *testing.T) {
	p := &Problem{GPUTypes: map[string]GPUType{"a": {Count: 1}, "b": {Count: 1}}, Jobs: []Job{
		{ID: "flex", Throughput: map[string]float64{"a": 1, "b": 1}, ScaleFactor: 1},
		{ID: "onlyb", Throughput: map[string]float64{"b": 1}, ScaleFactor: 1},
	}}
	a, err := Solve("gandiva_fair", p)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(a.X[0][0]-1) > 1e-9 || math.Abs(a.X[1][1]-1) > 1e-9 {
		t.Fatalf("X = %v, want flex on a, onlyb on b", a.X)
	}
	// Randomized: every user's share is placed in full, within its jobs.
	rng := rand.New(rand.NewSource(9))
	for trial := 0; trial < 30; trial++ {
		n := 2 + rng.Intn(12)
		in := newInstance(randomProblem(rng, n, 2+rng.Intn(2*n)))
		share := map[string]float64{}
		jobs := []int{}
		for m := 0; m < n; m++ {
			jobs = append(jobs, m)
		}
		for k, ty := range in.types {
			share[ty] = in.counts[k]
		}
		x := rows(n, in.k())
		splitUserShare(in, jobs, share, x)
		// The placed total must equal the max flow; check at least that
		// no job with room could take a type with GPUs left.
		left := map[string]float64{}
		for k, ty := range in.types {
			left[ty] = share[ty]
			for m := range x {
				left[ty] -= x[m][k] * in.sf[m]
			}
		}
		for m := range x {
			sum := 0.0
			for k := range x[m] {
				sum += x[m][k]
				if x[m][k] > 0 && in.tput[m][k] == 0 {
					t.Fatalf("trial %d: job %d on a type it cannot run on", trial, m)
				}
			}
			if sum > 1+1e-9 {
				t.Fatalf("trial %d: job %d row %v", trial, m, sum)
			}
			for k, ty := range in.types {
				if sum < 1-1e-9 && in.tput[m][k] > 0 && left[ty] > 1e-9 {
					t.Fatalf("trial %d: job %d has room and %v %s GPUs idle", trial, m, left[ty], ty)
				}
			}
		}
	}
}

func TestGandivaFairValidation(t *testing.T) {
	base := `{"gpu_types":{"v100":{"count":4}},"jobs":[{"id":"a","user":"alice","throughput":{"v100":1}}],"users":`
	for js, want := range map[string]string{
		`{"alice":{"tickets":0}}`:                     "users.alice.tickets: must be a positive integer",
		`{"alice":{"tickets":-3}}`:                    "users.alice.tickets: must be a positive integer",
		`{"alice":{"tickets":1.5}}`:                   "users.alice.tickets: must be a positive integer",
		`{"alice":{}}`:                                "users.alice.tickets: must be a positive integer",
		`{"alice":{"tickets":"many"}}`:                "users.tickets",
		`{"alice":{"tickets":1,"weight":2}}`:          `unknown field "weight"`,
		`{"":{"tickets":1}}`:                          "users: empty user name",
		`{"bob":{"tickets":5},"alice":{"tickets":0}}`: "users.alice.tickets",
	} {
		_, err := ReadProblem(strings.NewReader(base + js + "}"))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want %q", js, err, want)
		}
	}
	p, err := ReadProblem(strings.NewReader(base + `{"alice":{"tickets":100}},"trading":false}`))
	if err != nil || p.Trading == nil || *p.Trading || p.Jobs[0].User != "alice" {
		t.Fatalf("%+v, %v", p, err)
	}
}

// Tickets decide the split between users; a user named only by its jobs
// has the default tickets, and jobs without a user belong to "default".
func TestGandivaFairTickets(t *testing.T) {
	p := &Problem{GPUTypes: map[string]GPUType{"v100": {Count: 6}}, Users: map[string]UserTickets{"a": {Tickets: 400}}}
	for i, u := range []string{"a", "b", ""} {
		for k := 0; k < 3; k++ {
			p.Jobs = append(p.Jobs, Job{ID: string(rune('a'+i)) + string(rune('0'+k)), User: u, Throughput: map[string]float64{"v100": 1}, ScaleFactor: 1})
		}
	}
	a, err := Solve("gandiva_fair", p)
	if err != nil {
		t.Fatal(err)
	}
	// a: 400/(400+100+100) of 6 = 4 wanted, capped at its 3 GPUs; b and
	// default split the rest.
	for u, want := range map[string]float64{"a": 3, "b": 1.5, DefaultUser: 1.5} {
		if got := a.UserShares.Total(u); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v GPUs, want %v", u, got, want)
		}
	}
}
