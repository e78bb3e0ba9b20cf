package engine

import "slices"

// layout is the healthy GPUs of one type, by server in the order servers
// first appear in the snapshot. It is cached until the GPUs change.
type layout struct {
	servers []string
	ids     []string // GPU ids, grouped by server, snapshot order within one
	srvGPUs [][]int  // server -> indices into ids
	srvOf   []int    // GPU index -> server index
	index   map[string]int
}

func newLayout(gpus []GPU, typ string) *layout {
	l := &layout{index: map[string]int{}}
	srv := map[string]int{}
	for _, g := range gpus {
		if g.Type != typ || g.Failed {
			continue
		}
		s, ok := srv[g.Server]
		if !ok {
			s = len(l.servers)
			srv[g.Server] = s
			l.servers = append(l.servers, g.Server)
			l.srvGPUs = append(l.srvGPUs, nil)
		}
		i := len(l.ids)
		l.ids = append(l.ids, g.ID)
		l.srvOf = append(l.srvOf, s)
		l.srvGPUs[s] = append(l.srvGPUs[s], i)
		l.index[g.ID] = i
	}
	return l
}

// cluster is the free GPUs of one type during placement.
type cluster struct {
	*layout
	free  []bool
	nfree []int // per server
}

func newCluster(l *layout) *cluster {
	c := &cluster{layout: l, free: make([]bool, len(l.ids)), nfree: make([]int, len(l.servers))}
	for i := range c.free {
		c.free[i] = true
	}
	for s, g := range l.srvGPUs {
		c.nfree[s] = len(g)
	}
	return c
}

// clusterFor returns a fresh free-GPU view of one type, reusing the
// type's layout while the healthy GPUs are unchanged.
func (e *Engine) clusterFor(gpus []GPU, typ string) *cluster {
	if e.layouts == nil {
		e.layouts = map[string]*layout{}
	}
	l := e.layouts[typ]
	if l == nil {
		l = newLayout(gpus, typ)
		e.layouts[typ] = l
	}
	return newCluster(l)
}

func (c *cluster) allFree(ids []string) bool {
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		i, ok := c.index[id]
		if !ok || !c.free[i] {
			return false
		}
	}
	return true
}

func (c *cluster) take(ids []string) {
	for _, id := range ids {
		if i, ok := c.index[id]; ok && c.free[i] {
			c.free[i] = false
			c.nfree[c.srvOf[i]]--
		}
	}
}

func (c *cluster) freeOn(s int) []string {
	var out []string
	for _, i := range c.srvGPUs[s] {
		if c.free[i] {
			out = append(out, c.ids[i])
		}
	}
	return out
}

// pick takes n free GPUs on as few servers as possible: the fullest-fitting
// single server (fewest free GPUs that still hold n), else servers in
// decreasing order of free GPUs. It returns nil when fewer than n are free.
func (c *cluster) pick(n int) []string {
	best, bestFree := -1, 0
	total := 0
	for s := range c.servers {
		f := c.nfree[s]
		total += f
		if f >= n && (best < 0 || f < bestFree) {
			best, bestFree = s, f
		}
	}
	if total < n {
		return nil
	}
	if best >= 0 {
		ids := c.freeOn(best)[:n]
		c.take(ids)
		return ids
	}
	order := make([]int, len(c.servers))
	for i := range order {
		order[i] = i
	}
	// Selection sort by free count, descending (servers are few).
	for i := range order {
		k := i
		for j := i + 1; j < len(order); j++ {
			if c.nfree[order[j]] > c.nfree[order[k]] {
				k = j
			}
		}
		order[i], order[k] = order[k], order[i]
	}
	var ids []string
	for _, s := range order {
		for _, id := range c.freeOn(s) {
			if len(ids) == n {
				break
			}
			ids = append(ids, id)
		}
	}
	c.take(ids)
	return ids
}

func (c *cluster) assignment(cd *candidate, typ string, ids []string, act Action) Assignment {
	// One allocation for the jobs, GPUs and servers (a round makes
	// hundreds of assignments), each capped so that an append by a
	// backend copies rather than writes into its neighbour.
	nj, ng := len(cd.u.jobs), len(ids)
	slab := make([]string, nj+2*ng)
	copy(slab, cd.u.jobs)
	copy(slab[nj:], ids)
	a := Assignment{Jobs: slab[:nj:nj], Type: typ, GPUs: slab[nj : nj+ng : nj+ng], Action: act, Priority: cd.priority}
	servers := slab[nj+ng : nj+ng]
	var seenBuf [8]int
	seen := seenBuf[:0]
	for _, id := range ids {
		s := c.srvOf[c.index[id]]
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
			servers = append(servers, c.servers[s])
		}
	}
	if len(servers) > 0 {
		a.Servers = servers
	}
	return a
}
