package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/e2e/cluster"
)

// TestCellSelectorsOnNomad: cells mapped by node_pool and node_class on a
// real cluster: a 2-node V100 rack cell selects pool gpu-east (two clients
// in that pool), a K80 node cell selects class "old" (in the default GPU
// pool), and a P100 cell selects a class no node has — a warning, not a
// crash. Four 1-GPU jobs of the VC fill the four GPUs; the V100 ones are
// admitted into pool gpu-east on its nodes.
func TestCellSelectorsOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	east := func(name string) cluster.ClientSpec {
		cs := cluster.UniformClient(name, "v100", 1)
		cs.NodePool = "gpu-east"
		return cs
	}
	old := cluster.UniformClient("k80-c", "k80", 2)
	old.NodeClass = "old"
	s := startStackWith(t, []cluster.ClientSpec{east("east-b"), east("east-a"), old}, `round_seconds = 4
cell_type "v100" {
  gpu_type = "v100"
}
cell_type "v100-node" {
  child = "v100"
  count = 1
  node  = true
}
cell_type "v100-rack" {
  child = "v100-node"
  count = 2
}
cell_type "k80" {
  gpu_type = "k80"
}
cell_type "k80-node" {
  child = "k80"
  count = 2
  node  = true
}
cell_type "p100" {
  gpu_type = "p100"
}
cell_type "p100-node" {
  child = "p100"
  count = 1
  node  = true
}
cell "v100-rack" "east" {
  node_pool = "gpu-east"
}
cell "k80-node" "old" {
  node_class = "old"
}
cell "p100-node" "ghost" {
  node_class = "missing"
}
vc "research" {
  quota  = { "v100-rack" = 1, "k80-node" = 1 }
  policy = "max_min_fairness_perf"
}
`)
	c := s.c.API
	a := s.startAgent("4s")
	ids := []string{"s0", "s1", "s2", "s3"}
	for _, id := range ids {
		s.submit(id, "LM (batch size 20)", 1000000, 1)
	}
	s.waitFor(90*time.Second, "four jobs running on the four GPUs", func() (bool, error) {
		for _, id := range ids {
			live := liveAllocs(c, id)
			if len(live) != 1 || live[0].ClientStatus != "running" {
				return false, nil
			}
		}
		return true, nil
	})
	checkDisjoint(t, c, ids...)
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	nameOf := map[string]string{}
	for _, n := range nodes {
		nameOf[n.ID] = n.Name
	}
	onEast := 0
	for _, id := range ids {
		al := liveAllocs(c, id)[0]
		job, _, err := c.Jobs().Info(id, nil)
		if err != nil {
			t.Fatal(err)
		}
		node := nameOf[al.NodeID]
		switch {
		case strings.HasPrefix(node, "east-"):
			onEast++
			if *job.NodePool != "gpu-east" {
				t.Errorf("%s on %s admitted into pool %q, want gpu-east", id, node, *job.NodePool)
			}
		case node == "k80-c":
			if *job.NodePool != cluster.GPUPool {
				t.Errorf("%s on %s admitted into pool %q, want %s", id, node, *job.NodePool, cluster.GPUPool)
			}
		default:
			t.Errorf("%s on unexpected node %q", id, node)
		}
	}
	if onEast != 2 {
		t.Errorf("%d jobs on the gpu-east rack, want 2", onEast)
	}
	logs := a.logs()
	if !strings.Contains(logs, "node selector matches fewer nodes") || !strings.Contains(logs, "cell=ghost") {
		t.Errorf("no warning for the ghost cell's selector")
	}
	if st := s.status(a); st.Round == 0 {
		t.Errorf("agent not running rounds")
	}
}
