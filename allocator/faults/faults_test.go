package faults

import (
	"reflect"
	"strings"
	"testing"
)

// layout is v100=2,k80=2 with 2 GPUs per server, as the simulator lays out
// --cluster v100=2,k80=2 --gpus-per-server 2 (types sorted, servers per type).
var layout = []GPU{
	{"k80-0", "k80", "k80-s0"}, {"k80-1", "k80", "k80-s0"},
	{"v100-0", "v100", "v100-s0"}, {"v100-1", "v100", "v100-s0"},
}

func TestFaultsParseGood(t *testing.T) {
	s, err := ReadFile("testdata/good.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{100, GPUFail, Target{"gpu", "v100", 1}, 4},
		{100, NodeFail, Target{"node", "k80", 0}, 5},
		{250.5, GPURecover, Target{"gpu", "v100", 1}, 7},
		{1000, NodeRecover, Target{"node", "k80", 0}, 8},
	}
	if !reflect.DeepEqual(s.Events, want) {
		t.Fatalf("events %+v\nwant %+v", s.Events, want)
	}
	r, err := s.Resolve(ByType(layout))
	if err != nil {
		t.Fatal(err)
	}
	wantR := []Resolved{
		{100, true, []string{"v100-1"}, 4},
		{100, true, []string{"k80-0", "k80-1"}, 5},
		{250.5, false, []string{"v100-1"}, 7},
		{1000, false, []string{"k80-0", "k80-1"}, 8},
	}
	if !reflect.DeepEqual(r, wantR) {
		t.Fatalf("resolved %+v\nwant %+v", r, wantR)
	}
	e, err := ReadFile("testdata/empty.csv")
	if err != nil || len(e.Events) != 0 {
		t.Fatalf("header-only file: %v, %+v", err, e)
	}
}

// TestFaultsParseErrors: every malformed line is one error naming the file,
// the line and the field.
func TestFaultsParseErrors(t *testing.T) {
	for file, want := range map[string]string{
		"bad_time.csv":            `testdata/bad_time.csv:3: time_s: "abc" is not a number`,
		"bad_negative.csv":        `testdata/bad_negative.csv:2: time_s: "-5" is negative`,
		"bad_nan.csv":             `testdata/bad_nan.csv:2: time_s: "NaN" is not finite`,
		"bad_inf.csv":             `testdata/bad_inf.csv:2: time_s: "+Inf" is not finite`,
		"bad_order.csv":           `testdata/bad_order.csv:3: time_s: 100 is before line 1's 200 (events must be in time order)`,
		"bad_kind.csv":            `testdata/bad_kind.csv:2: kind: "gpu-explode" is not gpu-fail, gpu-recover, node-fail or node-recover`,
		"bad_target_prefix.csv":   `testdata/bad_target_prefix.csv:1: target: "v100:0": want gpu:<group>:<index> or node:<group>[:<index>]`,
		"bad_target_index.csv":    `testdata/bad_target_index.csv:1: target: "gpu:v100:x": index "x" is not a non-negative integer`,
		"bad_target_noindex.csv":  `testdata/bad_target_noindex.csv:1: target: "gpu:v100": want gpu:<group>:<index>`,
		"bad_target_level.csv":    `testdata/bad_target_level.csv:1: target: node-fail needs a node: target, not "gpu:v100:0"`,
		"bad_target_empty.csv":    `testdata/bad_target_empty.csv:1: target: "node::1": empty group name`,
		"bad_fields.csv":          `testdata/bad_fields.csv:2: want 3 fields time_s,kind,target, got 2`,
		"bad_fields4.csv":         `testdata/bad_fields4.csv:1: want 3 fields time_s,kind,target, got 4`,
		"bad_header_late.csv":     `testdata/bad_header_late.csv:2: time_s: "time_s" is not a number`,
		"no_such_file.csv":        `open testdata/no_such_file.csv: no such file or directory`,
		"unknown_type.csv":        `testdata/unknown_type.csv:2: target: "gpu:a100:0": unknown GPU type "a100" (the cluster has k80, v100)`,
		"gpu_out_of_range.csv":    `testdata/gpu_out_of_range.csv:2: target: "gpu:v100:2": index 2 out of range: v100 has 2 GPUs`,
		"node_out_of_range.csv":   `testdata/node_out_of_range.csv:2: target: "node:k80:1": index 1 out of range: k80 has 1 server`,
		"node_no_index.csv":       `testdata/node_no_index.csv:1: target: "node:v100": want node:<type>:<index>`,
		"vc_node_index.csv":       `testdata/vc_node_index.csv:1: target: "node:v100-a:0": want node:<nomad_node>`,
		"vc_unknown_node_gpu.csv": `testdata/vc_unknown_node_gpu.csv:1: target: "gpu:p100-a:0": unknown node "p100-a" (the cluster has k80-a, v100-a)`,
		"vc_gpu_out_of_range.csv": `testdata/vc_gpu_out_of_range.csv:1: target: "gpu:k80-a:4": index 4 out of range: k80-a has 4 GPUs`,
	} {
		var r Resolver = ByType(layout)
		if strings.HasPrefix(file, "vc_") {
			r = ByNode(vcNodes)
		}
		s, err := ReadFile("testdata/" + file)
		if err == nil {
			_, err = s.Resolve(r)
		}
		if err == nil || err.Error() != want {
			t.Errorf("%s: got error %v\nwant %s", file, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", file, err)
		}
	}
}

var vcNodes = map[string][]string{
	"v100-a": {"v100-a/0", "v100-a/1"},
	"k80-a":  {"k80-a/0", "k80-a/1", "k80-a/2", "k80-a/3"},
}

// TestFaultsResolveVC: under --vc-config a node is its cell's nomad_node and
// a GPU <nomad_node>:<index>; the parser keeps both symbolic.
func TestFaultsResolveVC(t *testing.T) {
	s, err := ReadFile("testdata/vc.csv")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Events[0].Target; got != (Target{"node", "v100-a", -1}) || got.String() != "node:v100-a" {
		t.Fatalf("target %+v", got)
	}
	r, err := s.Resolve(ByNode(vcNodes))
	if err != nil {
		t.Fatal(err)
	}
	want := []Resolved{
		{0, true, []string{"v100-a/0", "v100-a/1"}, 2},
		{10, true, []string{"k80-a/1"}, 3},
		{20, false, []string{"v100-a/0", "v100-a/1"}, 4},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("resolved %+v\nwant %+v", r, want)
	}
	// A plain-cluster resolver rejects the VC names, naming the line.
	if _, err := s.Resolve(ByType(layout)); err == nil || !strings.HasPrefix(err.Error(), "testdata/vc.csv:2: target: ") {
		t.Fatalf("ByType on VC names: %v", err)
	}
	// ResolverFunc adapts a function (the VC simulator's own mapping).
	calls := 0
	if _, err := s.Resolve(ResolverFunc(func(Target) ([]string, error) { calls++; return []string{"x"}, nil })); err != nil || calls != 3 {
		t.Fatalf("ResolverFunc: %v, %d calls", err, calls)
	}
}
