package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/e2e/cluster"
)

// topoConfig has no cell blocks: the cells come from the device plugin's
// topology (docs/allocator.md, "Cells from the plugin's topology").
const topoConfig = `round_seconds = 4
cells_from_topology {
  node_pool = "` + cluster.GPUPool + `"
}
vc "pairs" {
  quota  = { "v100-pcie-switch" = 2 }
  policy = "max_min_fairness_perf"
}
vc "socket" {
  quota  = { "v100-numa" = 1 }
  policy = "max_min_fairness_perf"
}
`

// pcieBox is a 2-socket PCIe client: 8 V100s, two per PCIe switch, two
// switches per NUMA node, NVML index i on switch i%4 (so index order is not
// topology order).
func pcieBox(name string) cluster.ClientSpec {
	cs := cluster.UniformClient(name, "v100", 8)
	for i := range cs.GPUs {
		sw := i % 4
		numa := sw / 2
		cs.GPUs[i].PCIeSwitch = fmt.Sprintf("sw%d", sw)
		cs.GPUs[i].NUMANode = &numa
	}
	return cs
}

// TestCellsFromTopologyOnNomad: a real Nomad, the plugin publishing a
// 2-socket PCIe box's topology, and a config that writes no cells. A 4-GPU
// job of the VC whose quota is one derived NUMA cell runs on the four GPUs
// of one socket, and each 2-GPU job of the VC holding two derived PCIe
// switch cells runs on the two GPUs of one switch, all at once.
func TestCellsFromTopologyOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	s := startStackWith(t, []cluster.ClientSpec{pcieBox("pcie-a")}, topoConfig)
	c := s.c.API
	job := func(id, vc string, gpus int) {
		spec := s.jobHCL(id, "ResNet-18 (batch size 64)", 1000000000, 1)
		spec = strings.Replace(spec, `"rondo.vc"    = "research"`, fmt.Sprintf(`"rondo.vc"    = %q`, vc), 1)
		spec = strings.Replace(spec, "count = 1", fmt.Sprintf("count = %d", gpus), 1)
		s.submitSpec(id, spec)
	}
	job("sock", "socket", 4)
	job("pair0", "pairs", 2)
	job("pair1", "pairs", 2)
	s.startAgent("4s")
	held := map[string][]string{}
	s.waitFor(120*time.Second, "the three jobs running", func() (bool, error) {
		for _, id := range []string{"sock", "pair0", "pair1"} {
			live := liveAllocs(c, id)
			if len(live) != 1 || live[0].ClientStatus != "running" {
				return false, nil
			}
			held[id] = allocGPUs(live[0])
		}
		return true, nil
	})
	idx := func(ids []string) []int {
		var out []int
		for _, id := range ids {
			var i int
			if _, err := fmt.Sscanf(id, "GPU-pcie-a-%d", &i); err != nil {
				t.Fatalf("GPU id %q", id)
			}
			out = append(out, i)
		}
		slices.Sort(out)
		return out
	}
	t.Logf("GPUs held: %v", held)
	if got := idx(held["sock"]); !slices.Equal(got, []int{0, 1, 4, 5}) && !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Errorf("the 4-GPU job of the NUMA-cell VC runs on GPUs %v, not one socket's", got)
	}
	for _, id := range []string{"pair0", "pair1"} {
		if got := idx(held[id]); len(got) != 2 || got[1] != got[0]+4 {
			t.Errorf("the 2-GPU job %s runs on GPUs %v, not one PCIe switch's", id, got)
		}
	}
}

// TestMIGJobsOnNomad: a client whose only GPU is an A100 in MIG mode with
// two 3g.20gb instances, three one-GPU jobs asking for nvidia/gpu under the
// default LAS policy. The allocator sees the instances as GPUs of type
// a100-mig-3g.20gb (never the whole A100): two jobs run at once, each on
// one MIG instance Nomad gives it by its MIG uuid, never the parent GPU;
// LAS rotates the third in within a few rounds.
func TestMIGJobsOnNomad(t *testing.T) {
	t.Parallel() // no timing bound: runs beside another (e2e/README.md)
	cs := cluster.ClientSpec{Name: "mig-a", GPUType: "a100", GPUs: []cluster.FakeGPU{{
		UUID: "GPU-mig-a-0", Model: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960,
		MIG: []cluster.FakeMIG{{UUID: "MIG-mig-a-0-0", Profile: "3g.20gb", MemoryMiB: 20096}, {UUID: "MIG-mig-a-0-1", Profile: "3g.20gb", MemoryMiB: 20096}},
	}}}
	s := startStackWith(t, []cluster.ClientSpec{cs}, "round_seconds = 4\n")
	c := s.c.API
	ids := []string{"m0", "m1", "m2"}
	for _, id := range ids {
		s.submit(id, "ResNet-18 (batch size 64)", 1000000000, 1)
	}
	a := s.startAgent("4s")
	ran := map[string]bool{}
	s.waitFor(90*time.Second, "all three jobs run on MIG instances", func() (bool, error) {
		running := 0
		held := map[string]string{}
		for _, id := range ids {
			for _, al := range liveAllocs(c, id) {
				if al.ClientStatus != "running" {
					continue
				}
				running++
				ran[id] = true
				for _, g := range allocGPUs(al) {
					if g != "MIG-mig-a-0-0" && g != "MIG-mig-a-0-1" {
						t.Fatalf("job %s holds %q, not a MIG instance", id, g)
					}
					if other, ok := held[g]; ok {
						t.Fatalf("jobs %s and %s both hold %s", other, id, g)
					}
					held[g] = id
				}
			}
		}
		if running > 2 {
			t.Fatalf("%d jobs running on two MIG instances", running)
		}
		return len(ran) == 3, nil
	})
	for _, j := range s.status(a).Jobs {
		if j.State == "running" && j.Type != "a100-mig-3g.20gb" {
			t.Errorf("status: job %s runs on type %q, want a100-mig-3g.20gb", j.ID, j.Type)
		}
	}
}
