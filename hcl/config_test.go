package hcl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestExample(t *testing.T) {
	cfg, diags := LoadPath("testdata/example.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if got := len(cfg.CellTypes); got != 4 {
		t.Fatalf("cell types = %d, want 4", got)
	}
	if cfg.RoundSeconds != DefaultRoundSeconds {
		t.Errorf("round_seconds = %d, want default %d", cfg.RoundSeconds, DefaultRoundSeconds)
	}
	node := cfg.CellTypes[3]
	if node.Name != "v100-node" || node.Child != "v100-quad" || node.Count != 2 || !node.Node {
		t.Errorf("v100-node = %+v", node)
	}
	if cfg.CellTypes[0].GPUType != "v100" || cfg.CellTypes[0].Count != 1 {
		t.Errorf("leaf = %+v", cfg.CellTypes[0])
	}
	if len(cfg.Cells) != 2 || cfg.Cells[1].Name != "n1" || cfg.Cells[1].NomadNode != "gpu-node-1" {
		t.Errorf("cells = %+v", cfg.Cells)
	}
	if len(cfg.VCs) != 2 || cfg.VCs[1].Name != "product" || cfg.VCs[1].Policy != DefaultVCPolicy {
		t.Fatalf("vcs = %+v", cfg.VCs)
	}
	if q := cfg.VCs[1].Quota; len(q) != 1 || q[0].CellType != "v100" || q[0].Count != 8 {
		t.Errorf("product quota = %+v", q)
	}
	tree := NewTypeTree(cfg.CellTypes)
	if tree.Level("v100-node") != 4 || tree.Count("v100-node", 1) != 8 || tree.NodeLevel("v100-node") != 4 {
		t.Errorf("levels: node level %d, gpus %d", tree.Level("v100-node"), tree.Count("v100-node", 1))
	}
}

func TestDirectory(t *testing.T) {
	cfg, diags := LoadPath("testdata/dir")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if cfg.RoundSeconds != 120 || cfg.Nomad.Address != "http://127.0.0.1:4646" || cfg.Nomad.Namespace != "ml" {
		t.Errorf("nomad/round = %+v %d", cfg.Nomad, cfg.RoundSeconds)
	}
	r0 := cfg.Cells[0]
	if len(r0.NomadNodes) != 2 || r0.NomadNodes[1] != "k1" || len(r0.Bad) != 1 || r0.Bad[0] != "1/3" {
		t.Errorf("r0 = %+v", r0)
	}
	if cfg.Cells[1].Pinned != "vision" || cfg.Cells[1].NodePool != "gpu" {
		t.Errorf("k2 = %+v", cfg.Cells[1])
	}
	v := cfg.VCs[0]
	if v.Policy != "las" || v.Weight != 2 || len(v.Entities) != 2 || v.Entities[0].Weight != 3 ||
		v.Entities[0].Policy != "fifo" || v.Entities[1].Policy != "las" {
		t.Errorf("vision = %+v", v)
	}
}

// TestMalformed checks each broken file's first error: its position and
// the field it names.
func TestMalformed(t *testing.T) {
	cases := []struct {
		file, pos, summary, field string
	}{
		{"bad_quota.hcl", "16:13", "Quota exceeds cluster", `quota "g" = 4`},
		{"unknown_type.hcl", "5:11", "Unknown cell type", `child = "gpu"`},
		{"unknown_quota_type.hcl", "14:5", "Unknown cell type", `quota names "nod"`},
		{"cycle.hcl", "2:11", "Cycle in child chain", `cell_type "a"`},
		{"duplicate.hcl", "12:1", "Duplicate name", `cell "n0"`},
		{"zero_count.hcl", "6:11", "Invalid count", "count = 0"},
		{"leaf_without_gpu.hcl", "1:1", "Leaf without gpu_type", "gpu_type"},
		{"top_below_node.hcl", "13:1", "Top cell below node level", `type "pair"`},
		{"bad_policy.hcl", "10:12", "Unknown VC policy", `"max_min_fairnes"`},
		{"wrong_type.hcl", "6:11", "Invalid value for count", "count must be a number"},
		{"tasks_bad_root.hcl", "2:21", "Invalid checkpoint_root", `"ckpt" must be an absolute directory`},
		{"tasks_bad_lease.hcl", "3:21", "Invalid lease_address", "tasks cannot dial 0.0.0.0"},
		{"tasks_no_port.hcl", "2:19", "Invalid lease_address", "must be http://host:port"},
		{"tasks_duplicate.hcl", "5:1", "Duplicate tasks block", "already declared at testdata/tasks_duplicate.hcl:1"},
		{"gpus_negative.hcl", "2:19", "Invalid gpus", `vc "a": gpus "v100" = -2`},
		{"gpus_zero.hcl", "2:28", "Invalid gpus", `vc "a": gpus "k80" = 0`},
		{"gpus_fraction.hcl", "2:19", "Invalid gpus", `vc "a": gpus "v100" = 1.5`},
		{"gpus_string.hcl", "2:19", "Invalid gpus", `vc "a": gpus "v100" = "8", a string`},
		{"gpus_duplicate.hcl", "4:5", "Duplicate name", `vc "a": gpus names "v100" twice (first at testdata/gpus_duplicate.hcl:3:5)`},
		{"gpus_bad_type.hcl", "2:12", "Invalid gpus", `vc "a": gpus key "V100" is not a GPU type`},
		{"gpus_not_map.hcl", "2:10", "Invalid gpus", `vc "a": gpus must be a map`},
		{"gpus_and_quota.hcl", "3:3", "Conflicting fields", `vc "a": set quota (cells) or gpus`},
		{"gpus_with_cells.hcl", "9:3", "Quota-only share with cells", `vc "a": gpus is a quota-only share for a config without cells, but cell "n0"`},
		{"gpus_missing.hcl", "4:1", "Missing gpus", `vc "b" has no gpus but vc "a"`},
		{"vcs_no_shares.hcl", "4:1", "Missing gpus", `vc "b": with several VCs and no cells, every VC declares its share`},
		{"space_sharing_string.hcl", "3:19", "Invalid value for space_sharing", "space_sharing must be a bool"},
		{"topology_no_pool.hcl", "1:1", "Missing node_pool", "cells_from_topology: node_pool is required"},
		{"topology_empty_pool.hcl", "2:15", "Invalid node_pool", "node_pool must not be empty"},
		{"topology_duplicate.hcl", "4:1", "Duplicate cells_from_topology", `node_pool "gpu" node_class "" is already derived at testdata/topology_duplicate.hcl:1:1`},
		{"topology_with_gpus.hcl", "5:3", "Quota-only share with cells", "cells_from_topology at testdata/topology_with_gpus.hcl:1:1 derives cells"},
		{"placement_bad.hcl", "3:15", "Unknown placement", `vc "a": placement "tuned": want one of proportional, tune, greedy, opt`},
		{"placement_number.hcl", "1:13", "Unknown placement", `placement "3": want one of`},
		{"telemetry_bad_statsd.hcl", "2:20", "Invalid statsd_address", `statsd_address = "localhost" must be host:port`},
		{"telemetry_bad_port.hcl", "2:20", "Invalid statsd_address", `port "http" is not a port number`},
		{"telemetry_bad_interval.hcl", "2:25", "Invalid collection_interval", `collection_interval = "0s" must be a positive duration`},
		{"telemetry_interval_word.hcl", "2:25", "Invalid collection_interval", `"soon" must be a positive duration`},
		{"telemetry_bool_string.hcl", "2:24", "Invalid value for prometheus_metrics", "prometheus_metrics must be a bool"},
		{"telemetry_duplicate.hcl", "5:1", "Duplicate telemetry block", "already declared at testdata/telemetry_duplicate.hcl:1"},
		{"telemetry_unknown.hcl", "2:3", "Unsupported argument", `"statsd" is not expected here`},
		{"syntax.hcl", "2:", "", ""},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", c.file)
			cfg, diags := LoadPath(path)
			if !diags.HasErrors() || cfg != nil {
				t.Fatalf("no error for %s", c.file)
			}
			msg := FormatDiagnostic(diags[0])
			if !strings.HasPrefix(msg, path+":"+c.pos) {
				t.Errorf("error %q does not start with %s:%s", msg, path, c.pos)
			}
			if !strings.Contains(msg, c.summary) || !strings.Contains(msg, c.field) {
				t.Errorf("error %q lacks %q or %q", msg, c.summary, c.field)
			}
		})
	}
}

func TestSharingSafetyAtStart(t *testing.T) {
	base := `
cell_type "g" { gpu_type = "x" }
cell_type "pair" {
  child = "g"
  count = 2
}
cell_type "node" {
  child = "pair"
  count = 2
  node = true
}
cell "node" "a" { nomad_node = "a" }
cell "node" "b" { nomad_node = "b" }
`
	cases := []struct {
		vcs string
		ok  bool
	}{
		{`vc "x" { quota = { "node" = 2 } }`, true},
		{`vc "x" { quota = { "node" = 1, "pair" = 2 } }`, true},
		{`vc "x" { quota = { "node" = 1, "pair" = 1, "g" = 2 } }`, true},
		{`vc "x" { quota = { "node" = 1, "pair" = 1, "g" = 3 } }`, false},
		{`vc "x" { quota = { "node" = 3 } }`, false},
		{`vc "x" { quota = { "node" = 1 } }
		  vc "y" { quota = { "g" = 4 } }`, true},
		{`vc "x" { quota = { "node" = 1 } }
		  vc "y" { quota = { "pair" = 3 } }`, false},
	}
	for i, c := range cases {
		_, diags := Parse(Source{Name: "t.hcl", Src: []byte(base + c.vcs)})
		if diags.HasErrors() == c.ok {
			t.Errorf("case %d (%s): ok=%v, diags=%s", i, c.vcs, !diags.HasErrors(), FormatDiagnostics(diags))
		}
	}
}

func TestPinnedReducesSupply(t *testing.T) {
	src := `
cell_type "g" { gpu_type = "x" }
cell_type "node" {
  child = "g"
  count = 4
  node = true
}
cell "node" "a" {
  nomad_node = "a"
  pinned = "x"
}
cell "node" "b" { nomad_node = "b" }
vc "x" { quota = { "node" = 2 } }
`
	if _, diags := Parse(Source{Name: "p.hcl", Src: []byte(src)}); !diags.HasErrors() {
		t.Fatal("a pinned cell must not count towards shared supply")
	}
}

func TestJobPolicy(t *testing.T) {
	src, err := os.ReadFile("testdata/job.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p, diags := ParseJobPolicy("testdata/job.hcl", src)
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	want := JobPolicy{VC: "research", User: "alice", Class: Opportunistic, Weight: 2, Steps: 200000, Model: "resnet50", Profile: "res50", SLO: 12 * time.Hour}
	if p != want {
		t.Fatalf("policy = %+v, want %+v", p, want)
	}
	m := p.ToMeta()
	if m[MetaSLO] != "12h0m0s" || m[MetaSteps] != "200000" || m[MetaPriority] != "opportunistic" || m[MetaProfile] != "res50" {
		t.Errorf("meta = %v", m)
	}
	back, err := PolicyFromMeta(m)
	if err != nil || back != p {
		t.Errorf("round trip = %+v, %v", back, err)
	}
}

func TestJobPolicyErrors(t *testing.T) {
	src, _ := os.ReadFile("testdata/job_bad.hcl")
	_, diags := ParseJobPolicy("testdata/job_bad.hcl", src)
	if !diags.HasErrors() {
		t.Fatal("want error")
	}
	if msg := FormatDiagnostic(diags[0]); !strings.HasPrefix(msg, "testdata/job_bad.hcl:3:14: Invalid priority") {
		t.Errorf("error = %q", msg)
	}
	cases := []struct {
		meta map[string]string
		key  string
	}{
		{map[string]string{"rondo.user": "x"}, MetaVC},
		{map[string]string{MetaVC: "a", MetaWeight: "-1"}, MetaWeight},
		{map[string]string{MetaVC: "a", MetaSteps: "1.5"}, MetaSteps},
		{map[string]string{MetaVC: "a", MetaSLO: "soon"}, MetaSLO},
		{map[string]string{MetaVC: "a", MetaPriority: "high"}, MetaPriority},
	}
	for _, c := range cases {
		_, err := PolicyFromMeta(c.meta)
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("meta %v: error %v does not name %s", c.meta, err, c.key)
		}
	}
	p, err := PolicyFromMeta(map[string]string{MetaVC: "a", "other": "x"})
	if err != nil || p.Class != Guaranteed || p.Weight != 1 {
		t.Errorf("defaults = %+v, %v", p, err)
	}
}

func TestAmbiguousQuota(t *testing.T) {
	src := `
cell_type "g" { gpu_type = "x" }
cell_type "node" {
  child = "g"
  count = 4
  node = true
}
cell_type "rack" {
  child = "node"
  count = 2
}
cell "rack" "r" { nomad_nodes = ["a", "b"] }
cell "node" "c" { nomad_node = "c" }
vc "x" { quota = { "g" = 1 } }
`
	_, diags := Parse(Source{Name: "a.hcl", Src: []byte(src)})
	if !diags.HasErrors() || !strings.Contains(FormatDiagnostic(diags[0]), `write "rack/g"`) {
		t.Fatalf("diags = %s", FormatDiagnostics(diags))
	}
	cfg, diags := Parse(Source{Name: "a.hcl", Src: []byte(strings.Replace(src, `"g" = 1`, `"node/g" = 4`, 1))})
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if q := cfg.VCs[0].Quota[0]; q.Chain != "node" || q.Type != "g" {
		t.Errorf("quota = %+v", q)
	}
}

// TestQuotaProblems: every quota problem the cells package reports (one
// check, shared with the allocator) comes back at its quota entry, in VC
// and quota order: ambiguous, unknown, in no chain, oversubscribed (with a
// pinned cell, from a cell or from a VC, taken out of the supply).
func TestQuotaProblems(t *testing.T) {
	_, diags := LoadPath("testdata/quota_problems.hcl")
	want := []string{
		`testdata/quota_problems.hcl:23:49: Quota exceeds cluster; vc "u": quota "big/node" = 1 but no physical cell holds a "node"`,
		`testdata/quota_problems.hcl:23:25: Quota exceeds cluster; vc "u": quota "node/g" = 9; all VCs together claim 9 cells of level 1 in chain "node" but the cluster has 4 (sharing safety)`,
		`testdata/quota_problems.hcl:23:13: Ambiguous quota; vc "u": cell type "pair" is in chains node, big; write "node/pair"`,
		`testdata/quota_problems.hcl:23:39: Unknown cell type; vc "u": quota names "zz", not a declared cell_type`,
		`testdata/quota_problems.hcl:26:25: Quota exceeds cluster; vc "v": quota "big/pair" = 1; all VCs together claim 1 cells of level 2 in chain "big" but the cluster has 0 (sharing safety)`,
		`testdata/quota_problems.hcl:26:13: Quota exceeds cluster; vc "v": quota "node" = 1; all VCs together claim 13 cells of level 1 in chain "node" but the cluster has 4 (sharing safety)`,
		`testdata/quota_problems.hcl:29:13: Quota exceeds cluster; vc "w": quota "node/pair" = 3; all VCs together claim 5 cells of level 2 in chain "node" but the cluster has 2 (sharing safety)`,
	}
	if got := strings.Split(FormatDiagnostics(diags), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestQuotaOnly: VCs with gpus and no cells parse to per-type shares with
// each entry's range; a config with cells, or one VC with no quota at all
// (one engine for the cluster), is not quota-only.
func TestQuotaOnly(t *testing.T) {
	cfg, diags := LoadPath("testdata/quota_only.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if !cfg.QuotaOnly() {
		t.Error("quota_only.hcl is not QuotaOnly")
	}
	r, p := cfg.VCs[0], cfg.VCs[1]
	if len(r.GPUs) != 2 || r.GPUs["v100"] != 8 || r.GPUs["k80"] != 4 || r.Policy != "max_min_fairness_perf" {
		t.Errorf("research = %+v", r)
	}
	if !r.SpaceSharing || p.SpaceSharing {
		t.Errorf("space_sharing: research %v (default true), prod %v (false)", r.SpaceSharing, p.SpaceSharing)
	}
	if len(p.GPUs) != 1 || p.GPUs["v100"] != 2 || p.Policy != "fifo" || p.Weight != 2 || len(p.Quota) != 0 {
		t.Errorf("prod = %+v", p)
	}
	if got := pos(r.GPURanges["k80"]); got != "testdata/quota_only.hcl:4:24" {
		t.Errorf("k80 entry at %s", got)
	}
	if got := pos(r.GPUsRange); got != "testdata/quota_only.hcl:4:3" {
		t.Errorf("gpus attribute at %s", got)
	}
	ex, diags := LoadPath("testdata/example.hcl")
	if diags.HasErrors() || ex.QuotaOnly() {
		t.Errorf("example.hcl: QuotaOnly with cells, or %s", FormatDiagnostics(diags))
	}
	one, diags := Parse(Source{Name: "one.hcl", Src: []byte(`vc "all" { policy = "las" }`)})
	if diags.HasErrors() || one.QuotaOnly() || len(one.VCs) != 1 || one.VCs[0].GPUs != nil {
		t.Errorf("one VC without quota: %v %+v", FormatDiagnostics(diags), one)
	}
}

// cells_from_topology: blocks in order; quotas may name types only a
// derived node provides (checked at run time), while written quotas are
// still checked: k80 quotas beyond the written node fail.
func TestCellsFromTopology(t *testing.T) {
	cfg, diags := LoadPath("testdata/topology.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if len(cfg.FromTopology) != 2 || cfg.FromTopology[0].NodePool != "gpu" || cfg.FromTopology[1].NodeClass != "dgx" ||
		cfg.FromTopology[1].Range.Start.Line != 18 {
		t.Fatalf("FromTopology = %+v", cfg.FromTopology)
	}
	src, err := os.ReadFile("testdata/topology.hcl")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), `"k80-node" = 1`, `"k80-node" = 1, "k80" = 1`, 1)
	_, diags = Parse(Source{Name: "t.hcl", Src: []byte(bad)})
	if !diags.HasErrors() || !strings.Contains(FormatDiagnostics(diags), "t.hcl:26:13: Quota exceeds cluster; vc \"prod\": quota \"k80-node\" = 1") {
		t.Errorf("want the written k80 chain oversubscribed, got %s", FormatDiagnostics(diags))
	}
	// Without the blocks, the derived types are unknown.
	noTopo := strings.ReplaceAll(string(src), "cells_from_topology", "# cells_from_topology")
	noTopo = strings.NewReplacer("{\n  node_pool = \"gpu\"\n}", "", "{\n  node_pool  = \"gpu\"\n  node_class = \"dgx\"\n}", "").Replace(noTopo)
	if _, diags = Parse(Source{Name: "t.hcl", Src: []byte(noTopo)}); !strings.Contains(FormatDiagnostics(diags), `quota names "v100-node", not a declared cell_type`) {
		t.Errorf("without cells_from_topology: %s", FormatDiagnostics(diags))
	}
}

func TestPlacement(t *testing.T) {
	cfg, diags := LoadPath("testdata/placement.hcl")
	if diags.HasErrors() {
		t.Fatal(FormatDiagnostics(diags))
	}
	if !cfg.Placing() || cfg.PlacementOf("research") != "opt" || cfg.PlacementOf("prod") != "tune" || cfg.PlacementOf("") != "tune" {
		t.Errorf("placement: research %q prod %q none %q", cfg.PlacementOf("research"), cfg.PlacementOf("prod"), cfg.PlacementOf(""))
	}
	if !cfg.LearnProfiles {
		t.Error("learn_profiles = true not read")
	}
	if cfg.Profiles != filepath.Join("testdata", "profiles.json") {
		t.Errorf("profiles = %q, want relative to the config file", cfg.Profiles)
	}
	plain, diags := Parse(Source{Name: "one.hcl", Src: []byte(`vc "all" { policy = "las" }`)})
	if diags.HasErrors() || plain.Placing() || plain.PlacementOf("all") != "" {
		t.Errorf("no placement set: Placing %v", plain.Placing())
	}
}
