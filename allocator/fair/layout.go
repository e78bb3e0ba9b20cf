package fair

import (
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/rondo-sched/rondo/allocator/engine"
)

// server is one server's healthy GPUs of one type.
type server struct {
	id, typ string
	gpus    []string // healthy, sorted (lowest ids first)
	idx     int      // in layout.servers
}

func (v *server) cap() int { return len(v.gpus) }

// layout is the healthy GPUs by generation and server, cached while the
// healthy GPUs stay the same (a failed GPU shrinks its server).
type layout struct {
	sig     uint64
	n       int
	types   []string // sorted
	total   map[string]int
	largest map[string]int // largest server per type
	servers []*server      // by type, then id
	byType  map[string][]*server
	byKey   map[string]*server // type + "\x00" + server id
	gpuSrv  map[string]*server // healthy GPU id → its server
}

func srvKey(typ, id string) string { return typ + "\x00" + id }

// gpuSig is an order-independent signature of the healthy GPUs: the sum
// of their hashes (id, type, server), and their count.
func gpuSig(gpus []engine.GPU) (uint64, int) {
	var sig uint64
	n := 0
	h := fnv.New64a()
	for i := range gpus {
		g := &gpus[i]
		if g.Failed {
			continue
		}
		h.Reset()
		h.Write([]byte(g.ID))
		h.Write([]byte{0})
		h.Write([]byte(g.Type))
		h.Write([]byte{0})
		h.Write([]byte(g.Server))
		sig += h.Sum64()
		n++
	}
	return sig, n
}

func (s *Scheduler) layoutOf(gpus []engine.GPU) *layout {
	sig, n := gpuSig(gpus)
	if s.lay != nil && s.lay.sig == sig && s.lay.n == n {
		return s.lay
	}
	l := &layout{sig: sig, n: n, total: map[string]int{}, largest: map[string]int{},
		byType: map[string][]*server{}, byKey: map[string]*server{}, gpuSrv: map[string]*server{}}
	for i := range gpus {
		g := &gpus[i]
		if g.Failed {
			continue
		}
		k := srvKey(g.Type, g.Server)
		v := l.byKey[k]
		if v == nil {
			v = &server{id: g.Server, typ: g.Type}
			l.byKey[k] = v
			l.servers = append(l.servers, v)
		}
		v.gpus = append(v.gpus, g.ID)
		l.gpuSrv[g.ID] = v
		l.total[g.Type]++
	}
	sort.Slice(l.servers, func(a, b int) bool {
		if l.servers[a].typ != l.servers[b].typ {
			return l.servers[a].typ < l.servers[b].typ
		}
		return l.servers[a].id < l.servers[b].id
	})
	for i, v := range l.servers {
		v.idx = i
		sort.Strings(v.gpus)
		l.byType[v.typ] = append(l.byType[v.typ], v)
		if v.cap() > l.largest[v.typ] {
			l.largest[v.typ] = v.cap()
		}
	}
	for t := range l.total {
		l.types = append(l.types, t)
	}
	sort.Strings(l.types)
	s.lay = l
	return l
}

// runs reports whether j can run on type t of this layout: a throughput
// there and a gang no larger than the generation.
func (l *layout) runs(j *engine.Job, t string) bool {
	return j.Throughput[t] > 0 && j.ScaleFactor <= l.total[t]
}

// refuse is why j can never be scheduled on these GPUs ("" if it can).
func (l *layout) refuse(j *engine.Job) string {
	if j.ScaleFactor <= 0 {
		return fmt.Sprintf("scale factor %d", j.ScaleFactor)
	}
	best, bestN, any := "", 0, false
	for _, t := range l.types {
		if j.Throughput[t] <= 0 {
			continue
		}
		any = true
		if j.ScaleFactor <= l.total[t] {
			return ""
		}
		if l.total[t] > bestN {
			best, bestN = t, l.total[t]
		}
	}
	if !any {
		return "cannot run on any GPU type present"
	}
	return fmt.Sprintf("gang of %d GPUs larger than any generation (largest: %s, %d GPUs)", j.ScaleFactor, best, bestN)
}

// resolve maps js's binding onto the layout: false when it no longer
// holds (unbound, server gone or too small, no throughput there).
func (l *layout) resolve(js *jobState) bool {
	if js.Type == "" || len(js.Servers) == 0 || js.job.Throughput[js.Type] <= 0 {
		return false
	}
	js.srv, js.need = js.srv[:0], js.need[:0]
	left := js.GPUs
	for k, id := range js.Servers {
		v := l.byKey[srvKey(js.Type, id)]
		if v == nil || left <= 0 {
			return false
		}
		n := min(left, v.cap())
		if len(js.Servers) == 1 && n < left || len(js.Servers) > 1 && k < len(js.Servers)-1 && n <= 0 {
			return false
		}
		js.srv = append(js.srv, v)
		js.need = append(js.need, n)
		left -= n
	}
	return left == 0
}
