package cells

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"testing"
)

// randomSpec builds a random physical cluster of one to three chains (each
// with its own GPU type, depth, fan-out, node level and top level) and
// random VC quotas that pass sharing safety, some with pinned cells.
func randomSpec(rng *rand.Rand) Spec {
	var s Spec
	nChains := 1 + rng.Intn(3)
	for c := 0; c < nChains; c++ {
		leaf := fmt.Sprintf("g%d", c)
		s.Types = append(s.Types, CellType{Name: leaf, GPUType: leaf})
		prev := leaf
		depth := 1 + rng.Intn(3) // levels above the leaf up to the node
		for l := 2; l <= depth+1; l++ {
			name := fmt.Sprintf("c%d-l%d", c, l)
			s.Types = append(s.Types, CellType{Name: name, Child: prev, Count: 2 + rng.Intn(2), Node: l == depth+1})
			prev = name
		}
		if rng.Intn(2) == 0 { // a rack above the node
			name := fmt.Sprintf("c%d-rack", c)
			s.Types = append(s.Types, CellType{Name: name, Child: prev, Count: 2})
			prev = name
		}
		for i, n := 0, 1+rng.Intn(3); i < n; i++ {
			s.Cells = append(s.Cells, TopCell{Name: fmt.Sprintf("t%d-%d", c, i), Type: prev})
		}
	}
	nVC := 1 + rng.Intn(3)
	for v := 0; v < nVC; v++ {
		s.VCs = append(s.VCs, VC{Name: fmt.Sprintf("vc%d", v)})
	}
	if len(s.Cells) > 1 && rng.Intn(3) == 0 {
		s.Cells[0].Pinned = s.VCs[rng.Intn(nVC)].Name
	}
	// Add random quotas while sharing safety holds.
	tt, _ := newTypeTable(s.Types)
	for tries := 0; tries < 30; tries++ {
		top := s.Cells[rng.Intn(len(s.Cells))].Type
		var chainTypes []string
		for n := top; n != ""; n = tt.byName[n].Child {
			chainTypes = append(chainTypes, n)
		}
		q := Quota{Chain: top, Type: chainTypes[rng.Intn(len(chainTypes))], Count: 1 + rng.Intn(2)}
		v := rng.Intn(nVC)
		s.VCs[v].Quota = append(s.VCs[v].Quota, q)
		if _, err := New(s); err != nil {
			s.VCs[v].Quota = s.VCs[v].Quota[:len(s.VCs[v].Quota)-1]
		}
	}
	return s
}

// privateSpec is VC v's quota as a dedicated cluster: one physical top cell
// per virtual top cell, in the same order, owned by one VC.
func privateSpec(s Spec, v int) Spec {
	p := Spec{Types: s.Types}
	vc := VC{Name: "p"}
	for _, q := range s.VCs[v].Quota {
		for i := 0; i < q.Count; i++ {
			p.Cells = append(p.Cells, TopCell{Name: fmt.Sprintf("q%d", len(p.Cells)), Type: q.Type})
		}
		vc.Quota = append(vc.Quota, Quota{Chain: q.Type, Type: q.Type, Count: q.Count})
	}
	for _, c := range s.Cells {
		if c.Pinned == s.VCs[v].Name {
			p.Cells = append(p.Cells, TopCell{Name: fmt.Sprintf("q%d", len(p.Cells)), Type: c.Type, Pinned: "p"})
		}
	}
	p.VCs = []VC{vc}
	return p
}

// stateKey is the state without its arrival counter, for comparisons.
func stateKey(s *state) state {
	c := *s.clone()
	c.seq = 0
	return c
}

func TestPropertyRandomClusters(t *testing.T) {
	iters := 300
	if testing.Short() {
		iters = 50
	}
	for seed := int64(1); seed <= int64(iters); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkRandomRun(t, seed) })
	}
}

func checkRandomRun(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	spec := randomSpec(rng)
	a := mustNew(t, spec)
	fresh := stateKey(a.s)
	priv := make([]*Allocator, len(spec.VCs))
	for v := range spec.VCs {
		p, err := New(privateSpec(spec, v))
		if err != nil {
			t.Fatalf("private cluster of %s: %v", spec.VCs[v].Name, err)
		}
		p.SetChecking(true)
		priv[v] = p
	}
	maxNode := 1
	for _, c := range a.phys.cells {
		if c.level == c.nodeLevel && c.hi-c.lo > maxNode {
			maxNode = c.hi - c.lo
		}
	}
	var live []string
	vcOf := map[string]int{}
	for step := 0; step < 120; step++ {
		if len(live) > 0 && rng.Intn(3) == 0 {
			i := rng.Intn(len(live))
			id := live[i]
			live = append(live[:i], live[i+1:]...)
			if err := a.Release(id); err != nil {
				t.Fatalf("step %d release %s: %v", step, id, err)
			}
			if v, ok := vcOf[id]; ok {
				if err := priv[v].Release(id); err != nil {
					t.Fatalf("step %d private release %s: %v", step, id, err)
				}
			}
			continue
		}
		members := make([]int, 1+rng.Intn(3))
		for i := range members {
			members[i] = 1 + rng.Intn(maxNode)
		}
		id := fmt.Sprintf("s%d", step)
		if rng.Intn(3) == 0 {
			p, err := a.Allocate(Request{ID: id, Class: Opportunistic, Members: members})
			if err == nil {
				live = append(live, id)
				checkNodes(t, a, p)
			} else if !errors.Is(err, ErrWait) {
				t.Fatal(err)
			}
			continue
		}
		v := rng.Intn(len(spec.VCs))
		req := Request{ID: id, VC: spec.VCs[v].Name, Class: Guaranteed, Members: members}
		before := stateKey(a.s)
		ownerBefore := append([]string(nil), a.s.leafGang...)
		pp, perr := priv[v].Allocate(Request{ID: id, VC: "p", Class: Guaranteed, Members: members})
		p, err := a.Allocate(req)
		// (a) fits the private cluster => placed on the shared one.
		if perr == nil && err != nil {
			t.Fatalf("step %d: %v fits %s's private cluster (%v) but shared says %v", step, members, req.VC, pp.Members, err)
		}
		if err != nil {
			if !errors.Is(err, ErrWait) {
				t.Fatal(err)
			}
			continue
		}
		if perr != nil {
			t.Fatalf("step %d: shared placed %v beyond %s's private cluster", step, p.Members, req.VC)
		}
		// (b) affinity: members in one node; the gang's lowest common cell
		// has the level it has in the private view.
		checkNodes(t, a, p)
		if pl, sl := lcaLevel(priv[v], pp), lcaLevel(a, p); pl > 0 && pl != sl {
			t.Fatalf("step %d: gang LCA level %d on shared, %d on private", step, sl, pl)
		}
		// (e) free before preemptible: a GPU taken from a victim had no
		// free healthy sibling left behind in its lowest cell.
		checkFreeFirst(t, a, a.s.gangs[id], ownerBefore)
		for _, victim := range p.Preempted {
			if a.s.gangs[victim] != nil {
				t.Fatalf("victim %s still placed", victim)
			}
			for i, id := range live {
				if id == victim {
					live = append(live[:i], live[i+1:]...)
					break
				}
			}
		}
		// (d) releasing at once restores the state exactly (buddies merge),
		// and placing again gives the same placement (determinism).
		if len(p.Preempted) == 0 && rng.Intn(4) == 0 {
			if err := a.Release(id); err != nil {
				t.Fatal(err)
			}
			if got := stateKey(a.s); !reflect.DeepEqual(got, before) {
				t.Fatalf("step %d: allocate+release of %s did not restore the state", step, id)
			}
			again, err := a.Allocate(req)
			if err != nil || !reflect.DeepEqual(again.Members, p.Members) {
				t.Fatalf("step %d: placing %s again gave %v, %v; first %v", step, id, again.Members, err, p.Members)
			}
		}
		live = append(live, id)
		vcOf[id] = v
		// (c) invariants hold after every step (SetChecking also checks).
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range live {
		if err := a.Release(id); err != nil {
			t.Fatal(err)
		}
	}
	if got := stateKey(a.s); !reflect.DeepEqual(got, fresh) {
		t.Fatalf("releasing everything did not restore the initial state")
	}
}

// checkFreeFirst checks free before preemptible: when guaranteed gang g
// preempts a gang X, the first GPU of X it takes (in placement order, where
// X is evicted) left no free healthy GPU of the same lowest physical cell
// behind. (Later GPUs of X were already free when taken.) Only GPUs whose
// virtual leaf lies below a virtual top are checked: a top leaf is bound by
// buddy allocation, which ranks cells by opportunistic GPUs too.
func checkFreeFirst(t *testing.T, a *Allocator, g *gang, ownerBefore []string) {
	t.Helper()
	f := &a.virt[g.vc]
	seen := map[string]bool{}
	for m, leaves := range g.phys {
		for i, pl := range leaves {
			x := ownerBefore[pl]
			if x == "" || seen[x] {
				continue
			}
			seen[x] = true
			if f.cells[f.leaves[g.virt[m][i]]].parent < 0 {
				continue
			}
			par := a.phys.cells[a.phys.cells[a.phys.leaves[pl]].parent]
			for l := par.lo; l < par.hi; l++ {
				if ownerBefore[l] == "" && !a.s.bad[l] && a.s.leafGang[l] != g.id {
					t.Fatalf("gang %s preempted %s on %s while %s in the same cell stayed free", g.id, x,
						a.phys.cells[a.phys.leaves[pl]].addr, a.phys.cells[a.phys.leaves[l]].addr)
				}
			}
		}
	}
}

func checkNodes(t *testing.T, a *Allocator, p Placement) {
	t.Helper()
	for m, addrs := range p.Members {
		node := -1
		for _, addr := range addrs {
			c, ok := a.phys.lookup(addr)
			if !ok {
				t.Fatalf("unknown address %s", addr)
			}
			if n := a.phys.nodeOf(c); node >= 0 && n != node {
				t.Fatalf("member %d spans nodes: %v", m, addrs)
			} else {
				node = n
			}
		}
	}
}

func lcaLevel(a *Allocator, p Placement) int {
	var leaves []int
	for _, addrs := range p.Members {
		for _, addr := range addrs {
			c, _ := a.phys.lookup(addr)
			leaves = append(leaves, a.phys.cells[c].lo)
		}
	}
	c := a.phys.lca(leaves)
	if c < 0 {
		return -1
	}
	return a.phys.cells[c].level
}

// TestPropertyHealth flips random GPUs bad and good between random requests:
// invariants hold, running gangs keep their GPUs, and no new gang is placed
// on a bad GPU.
func TestPropertyHealth(t *testing.T) {
	for seed := int64(1); seed <= 100; seed++ {
		rng := rand.New(rand.NewSource(seed))
		spec := randomSpec(rng)
		a := mustNew(t, spec)
		var live []string
		for step := 0; step < 80; step++ {
			switch r := rng.Intn(4); {
			case r == 0:
				l := rng.Intn(len(a.phys.leaves))
				if err := a.SetHealth(a.phys.cells[a.phys.leaves[l]].addr, rng.Intn(2) == 0); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			case r == 1 && len(live) > 0:
				i := rng.Intn(len(live))
				if a.s.gangs[live[i]] != nil {
					if err := a.Release(live[i]); err != nil {
						t.Fatalf("seed %d: %v", seed, err)
					}
				}
				live = append(live[:i], live[i+1:]...)
			default:
				class := Guaranteed
				if rng.Intn(3) == 0 {
					class = Opportunistic
				}
				id := fmt.Sprintf("s%d", step)
				p, err := a.Allocate(Request{ID: id, VC: spec.VCs[rng.Intn(len(spec.VCs))].Name, Class: class, Members: []int{1 + rng.Intn(2)}})
				if err != nil {
					if !errors.Is(err, ErrWait) {
						t.Fatalf("seed %d: %v", seed, err)
					}
					continue
				}
				live = append(live, id)
				for _, addrs := range p.Members {
					for _, addr := range addrs {
						c, _ := a.phys.lookup(addr)
						if a.s.bad[a.phys.cells[c].lo] {
							t.Fatalf("seed %d: %s placed on bad GPU %s", seed, id, addr)
						}
					}
				}
			}
		}
	}
}
