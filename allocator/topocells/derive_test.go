package topocells

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/plugins/base"
	"github.com/rondo-sched/rondo/allocator/cells"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	deviceplugin "github.com/rondo-sched/rondo/device-plugin"
)

// fakeNode runs the device plugin's fake NVML backend on a fake block and
// reads the node's GPUs back from the JSON fingerprint report, the way
// `rondo cells plan --topology` does (the agent reads the same attributes
// from Nomad's node API).
func fakeNode(t *testing.T, name, fake string) Node {
	t.Helper()
	mp, err := deviceplugin.EncodeHCL([]byte(fake))
	if err != nil {
		t.Fatal(err)
	}
	p := deviceplugin.New(nil)
	if err := p.SetConfig(&base.Config{PluginConfig: mp}); err != nil {
		t.Fatal(err)
	}
	rep, err := p.FingerprintReport()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ParseReport(b)
	if err != nil {
		t.Fatal(err)
	}
	return Node{Name: name, GPUs: GPUs(groups, rnomad.GPUType)}
}

// dgx: 8 SXM V100s on one NVLink board, four per NUMA node, two per PCIe
// switch (the board joins them all at the closest level).
func dgx() string {
	var b strings.Builder
	b.WriteString("fake {\n")
	for i := 0; i < 8; i++ {
		fmt.Fprintf(&b, "gpu {\n uuid = \"GPU-d%d\"\n model = \"Tesla V100-SXM2-32GB\"\n memory_mib = 32768\n numa_node = %d\n pcie_switch = \"sw%d\"\n board = \"nvlink0\"\n}\n", i, i/4, i/2)
	}
	b.WriteString("}\n")
	return b.String()
}

// pcieBox: 8 PCIe V100s, two per PCIe switch, two switches per socket
// (NUMA node). NVML indices interleave the switches (GPU i on switch i%4),
// as BIOS enumeration often does: the leaf order must follow topology,
// not the index.
func pcieBox() string {
	var b strings.Builder
	b.WriteString("fake {\n")
	for i := 0; i < 8; i++ {
		sw := i % 4
		fmt.Fprintf(&b, "gpu {\n uuid = \"GPU-p%d\"\n model = \"Tesla V100-PCIE-16GB\"\n memory_mib = 16384\n numa_node = %d\n pcie_switch = \"sw%d\"\n}\n", i, sw/2, sw)
	}
	b.WriteString("}\n")
	return b.String()
}

func TestDeriveDGX(t *testing.T) {
	r := Derive([]Node{fakeNode(t, "dgx-0", dgx())})
	want := []cells.CellType{
		{Name: "v100", GPUType: "v100"},
		{Name: "v100-node", Child: "v100", Count: 8, Node: true},
	}
	if !reflect.DeepEqual(r.Types, want) {
		t.Fatalf("types = %+v, want %+v", r.Types, want)
	}
	if len(r.Cells) != 1 || r.Cells[0].Name != "dgx-0" || r.Cells[0].Type != "v100-node" || r.Cells[0].Node != "dgx-0" {
		t.Fatalf("cells = %+v", r.Cells)
	}
	if got := strings.Join(r.Cells[0].GPUs, ","); got != "GPU-d0,GPU-d1,GPU-d2,GPU-d3,GPU-d4,GPU-d5,GPU-d6,GPU-d7" {
		t.Errorf("leaf order %s", got)
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes %q", r.Notes)
	}
}

func TestDerivePCIeBox(t *testing.T) {
	r := Derive([]Node{fakeNode(t, "pcie-0", pcieBox()), fakeNode(t, "pcie-1", pcieBox())})
	want := []cells.CellType{
		{Name: "v100", GPUType: "v100"},
		{Name: "v100-pcie-switch", Child: "v100", Count: 2},
		{Name: "v100-numa", Child: "v100-pcie-switch", Count: 2},
		{Name: "v100-node", Child: "v100-numa", Count: 2, Node: true},
	}
	if !reflect.DeepEqual(r.Types, want) {
		t.Fatalf("types = %+v, want %+v", r.Types, want)
	}
	if len(r.Cells) != 2 || r.Cells[0].Name != "pcie-0" || r.Cells[1].Name != "pcie-1" {
		t.Fatalf("cells = %+v", r.Cells)
	}
	// Leaves depth first: switch 0 = GPUs 0 and 4, switch 1 = 1 and 5 (numa
	// 0), then numa 1.
	if got := strings.Join(r.Cells[0].GPUs, ","); got != "GPU-p0,GPU-p4,GPU-p1,GPU-p5,GPU-p2,GPU-p6,GPU-p3,GPU-p7" {
		t.Errorf("leaf order %s", got)
	}
	got := fmt.Sprint(Groups(r, "v100-pcie-switch"))
	if want := "[[GPU-p0 GPU-p4] [GPU-p1 GPU-p5] [GPU-p2 GPU-p6] [GPU-p3 GPU-p7] [GPU-p0 GPU-p4] [GPU-p1 GPU-p5] [GPU-p2 GPU-p6] [GPU-p3 GPU-p7]]"; got != want {
		t.Errorf("pcie-switch cells %s, want %s", got, want)
	}
	got = fmt.Sprint(Groups(r, "v100-numa"))
	if want := "[[GPU-p0 GPU-p1 GPU-p4 GPU-p5] [GPU-p2 GPU-p3 GPU-p6 GPU-p7] [GPU-p0 GPU-p1 GPU-p4 GPU-p5] [GPU-p2 GPU-p3 GPU-p6 GPU-p7]]"; got != want {
		t.Errorf("numa cells %s, want %s", got, want)
	}
	// The derived spec is one the cells allocator takes, and a 2-GPU gang
	// lands inside one PCIe switch cell, a 4-GPU gang inside one NUMA cell.
	spec, notes := Apply(cells.Spec{VCs: []cells.VC{{Name: "a", Quota: []cells.Quota{{Type: "v100-numa", Count: 2}}}}}, r)
	if len(notes) != 0 {
		t.Fatal(notes)
	}
	a, err := cells.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	leafOf := map[string]string{} // cell address -> uuid
	for _, c := range r.Cells {
		i := 0
		for _, pg := range a.PhysicalGPUs() {
			if strings.HasPrefix(pg.Addr, c.Name+"/") {
				leafOf[pg.Addr] = c.GPUs[i]
				i++
			}
		}
	}
	inGroup := func(got []string, typ string) bool {
		sort.Strings(got)
		for _, g := range Groups(r, typ) {
			if slices.Equal(g, got) {
				return true
			}
		}
		return false
	}
	for i, tc := range []struct {
		n   int
		typ string
	}{{2, "v100-pcie-switch"}, {4, "v100-numa"}, {2, "v100-pcie-switch"}} {
		pl, err := a.Allocate(cells.Request{ID: fmt.Sprint("g", i), VC: "a", Class: cells.Guaranteed, Members: []int{tc.n}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, addr := range pl.Members[0] {
			got = append(got, leafOf[addr])
		}
		if len(got) != tc.n || !inGroup(got, tc.typ) {
			t.Errorf("gang of %d got %v, not one derived %s cell", tc.n, got, tc.typ)
		}
	}
}

// A node whose GPUs are not a regular tree (3 GPUs on one switch, 1 on
// another) keeps its regular levels; nodes of one type in two shapes get
// GPU-count suffixes; a node with two GPU types gets one cell per type.
func TestDeriveIrregularAndShapes(t *testing.T) {
	gpu := func(u, typ, cell string, i int) GPU { return GPU{UUID: u, Type: typ, Cell: cell, Index: i} }
	odd := Node{Name: "odd", GPUs: []GPU{
		gpu("a0", "k80", "system0/numa0/pcie-switch0", 0), gpu("a1", "k80", "system0/numa0/pcie-switch0", 1),
		gpu("a2", "k80", "system0/numa0/pcie-switch0", 2), gpu("a3", "k80", "system0/numa0/pcie-switch1", 3),
	}}
	pair := Node{Name: "pair", GPUs: []GPU{
		gpu("b0", "k80", "system0/numa0/pcie-switch0", 0), gpu("b1", "k80", "system0/numa0/pcie-switch0", 1),
		gpu("v0", "v100", "system0/numa1/pcie-switch1", 2),
	}}
	r := Derive([]Node{pair, odd})
	want := []cells.CellType{
		{Name: "k80", GPUType: "k80"},
		{Name: "k80-node-4", Child: "k80", Count: 4, Node: true},
		{Name: "k80-node-2", Child: "k80", Count: 2, Node: true},
		{Name: "v100", GPUType: "v100"},
		{Name: "v100-node", Child: "v100", Count: 1, Node: true},
	}
	if !reflect.DeepEqual(r.Types, want) {
		t.Fatalf("types = %+v\nwant %+v", r.Types, want)
	}
	got := fmt.Sprint(r.Cells)
	if want := "[{odd k80-node-4 odd [a0 a1 a2 a3]} {pair-k80 k80-node-2 pair [b0 b1]} {pair-v100 v100-node pair [v0]}]"; got != want {
		t.Errorf("cells %s, want %s", got, want)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "node odd: pcie-switch level of its k80 GPUs is irregular") {
		t.Errorf("notes %q", r.Notes)
	}
	// Same GPU count, another shape: skipped and named.
	flat := Node{Name: "flat", GPUs: []GPU{gpu("c0", "k80", "system0/numa0/pcie-switch0", 0), gpu("c1", "k80", "system0/numa1/pcie-switch1", 1),
		gpu("c2", "k80", "system0/numa0/pcie-switch0", 2), gpu("c3", "k80", "system0/numa1/pcie-switch1", 3)}}
	r = Derive([]Node{odd, flat})
	if len(r.Cells) != 1 || r.Cells[0].Name != "flat" || len(r.Notes) != 2 || !strings.Contains(r.Notes[1], "nodes odd: 4 k80 GPUs in another shape than nodes flat") {
		t.Errorf("cells %v notes %q", r.Cells, r.Notes)
	}
	if got := strings.Join(r.Cells[0].GPUs, ","); got != "c0,c2,c1,c3" {
		t.Errorf("leaf order %s", got)
	}
}

// Written types win: a derived chain that clashes with a written type of
// the same name is not added; an identical one is shared.
func TestApplyWrittenWins(t *testing.T) {
	r := Derive([]Node{{Name: "n1", GPUs: []GPU{{UUID: "g0", Type: "v100"}, {UUID: "g1", Type: "v100"}}}})
	same := cells.Spec{Types: []cells.CellType{{Name: "v100", GPUType: "v100"}}}
	spec, notes := Apply(same, r)
	if len(notes) != 0 || len(spec.Types) != 2 || len(spec.Cells) != 1 {
		t.Errorf("identical leaf: %+v %q", spec, notes)
	}
	clash := cells.Spec{Types: []cells.CellType{{Name: "v100", GPUType: "v100"}, {Name: "v100-node", Child: "v100", Count: 8, Node: true}},
		Cells: []cells.TopCell{{Name: "n0", Type: "v100-node"}}}
	spec, notes = Apply(clash, r)
	if len(spec.Cells) != 1 || len(spec.Types) != 2 || len(notes) != 1 || !strings.Contains(notes[0], `"v100-node" differs`) {
		t.Errorf("clash: %+v %q", spec, notes)
	}
}
