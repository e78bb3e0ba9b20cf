package engine

// cluster is the free GPUs of one type during placement, by server in the
// order servers first appear in the snapshot.
type cluster struct {
	servers []string
	gpus    map[string][]string // server -> GPU ids in snapshot order
	server  map[string]string   // GPU -> server
	free    map[string]bool
}

func newCluster(gpus []GPU, typ string) *cluster {
	c := &cluster{gpus: map[string][]string{}, server: map[string]string{}, free: map[string]bool{}}
	for _, g := range gpus {
		if g.Type != typ || g.Failed {
			continue
		}
		if _, ok := c.gpus[g.Server]; !ok {
			c.servers = append(c.servers, g.Server)
		}
		c.gpus[g.Server] = append(c.gpus[g.Server], g.ID)
		c.server[g.ID] = g.Server
		c.free[g.ID] = true
	}
	return c
}

func (c *cluster) allFree(ids []string) bool {
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		if !c.free[id] {
			return false
		}
	}
	return true
}

func (c *cluster) take(ids []string) {
	for _, id := range ids {
		c.free[id] = false
	}
}

func (c *cluster) freeOn(server string) []string {
	var out []string
	for _, id := range c.gpus[server] {
		if c.free[id] {
			out = append(out, id)
		}
	}
	return out
}

// pick takes n free GPUs on as few servers as possible: the fullest-fitting
// single server (fewest free GPUs that still hold n), else servers in
// decreasing order of free GPUs. It returns nil when fewer than n are free.
func (c *cluster) pick(n int) []string {
	best, bestFree := "", 0
	total := 0
	for _, s := range c.servers {
		f := len(c.freeOn(s))
		total += f
		if f >= n && (best == "" || f < bestFree) {
			best, bestFree = s, f
		}
	}
	if total < n {
		return nil
	}
	if best != "" {
		ids := c.freeOn(best)[:n]
		c.take(ids)
		return ids
	}
	order := append([]string(nil), c.servers...)
	// Stable selection sort by free count, descending (servers are few).
	for i := range order {
		k := i
		for j := i + 1; j < len(order); j++ {
			if len(c.freeOn(order[j])) > len(c.freeOn(order[k])) {
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
	a := Assignment{Jobs: append([]string(nil), cd.u.jobs...), Type: typ, GPUs: append([]string(nil), ids...),
		Action: act, Priority: cd.priority}
	seen := map[string]bool{}
	for _, id := range ids {
		if s := c.server[id]; !seen[s] {
			seen[s] = true
			a.Servers = append(a.Servers, s)
		}
	}
	return a
}
