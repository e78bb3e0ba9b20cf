// Package faults reads fault-injection schedules: CSV files of
// `time_s,kind,target` lines that fail and recover GPUs or whole nodes at
// given times. Targets stay symbolic when parsed (a group name and an
// index); a Resolver maps them to GPU ids once the cluster is known, so
// one file format serves the plain simulator (groups are GPU types, as
// `--cluster` and `--gpus-per-server` lay them out) and virtual-cluster
// configs (groups are cells' `nomad_node` names).
package faults

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Kind is what an event does.
type Kind string

const (
	GPUFail     Kind = "gpu-fail"
	GPURecover  Kind = "gpu-recover"
	NodeFail    Kind = "node-fail"
	NodeRecover Kind = "node-recover"
)

// Fails reports whether the event takes GPUs out of service.
func (k Kind) Fails() bool { return k == GPUFail || k == NodeFail }

// level is the target level an event kind needs ("gpu" or "node").
func (k Kind) level() string {
	if k == GPUFail || k == GPURecover {
		return "gpu"
	}
	return "node"
}

func parseKind(s string) (Kind, bool) {
	switch k := Kind(s); k {
	case GPUFail, GPURecover, NodeFail, NodeRecover:
		return k, true
	}
	return "", false
}

// Target is a symbolic target: `gpu:<group>:<index>`, `node:<group>:<index>`
// or `node:<group>` (a group that is itself one node, e.g. a nomad_node).
type Target struct {
	Level string // "gpu" or "node"
	Group string // a GPU type, or a Nomad node name
	Index int    // -1 when the target has none (node:<group>)
}

func (t Target) String() string {
	if t.Index < 0 {
		return t.Level + ":" + t.Group
	}
	return fmt.Sprintf("%s:%s:%d", t.Level, t.Group, t.Index)
}

// ParseTarget reads a target. Group names cannot contain ':'.
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || (parts[0] != "gpu" && parts[0] != "node") {
		return Target{}, fmt.Errorf("%q: want gpu:<group>:<index> or node:<group>[:<index>]", s)
	}
	t := Target{Level: parts[0], Group: parts[1], Index: -1}
	if t.Group == "" {
		return Target{}, fmt.Errorf("%q: empty group name", s)
	}
	switch {
	case len(parts) == 3:
		n, err := parseIndex(parts[2])
		if err != nil {
			return Target{}, fmt.Errorf("%q: index %q is not a non-negative integer", s, parts[2])
		}
		t.Index = n
	case len(parts) > 3, t.Level == "gpu":
		return Target{}, fmt.Errorf("%q: want %s:<group>:<index>", s, t.Level)
	}
	return t, nil
}

func parseIndex(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not an index")
	}
	return strconv.Atoi(s)
}

// Event is one line of a schedule.
type Event struct {
	TimeS  float64
	Kind   Kind
	Target Target
	Line   int
}

// Schedule is a parsed file: its events in time order.
type Schedule struct {
	File   string
	Events []Event
}

// header is the optional first record.
var header = [3]string{"time_s", "kind", "target"}

// ReadFile parses a schedule file.
func ReadFile(path string) (*Schedule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// Parse reads `time_s,kind,target` records, one per line. Blank lines and
// lines starting with '#' are skipped; the first record may be the header
// `time_s,kind,target`. Times must be finite, >= 0 and non-decreasing
// (events at equal times apply in file order): a schedule reads as a
// timeline, and an out-of-order time is more likely a typo than intent.
// Errors are one line: "name:line: field: what".
func Parse(name string, r io.Reader) (*Schedule, error) {
	s := &Schedule{File: name}
	sc := bufio.NewScanner(r)
	line, records := 0, 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		records++
		f := strings.Split(text, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want 3 fields time_s,kind,target, got %d", name, line, len(f))
		}
		if records == 1 && [3]string(f) == header {
			continue
		}
		ev := Event{Line: line}
		t, err := strconv.ParseFloat(f[0], 64)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s:%d: time_s: %q is not a number", name, line, f[0])
		case math.IsNaN(t) || math.IsInf(t, 0):
			return nil, fmt.Errorf("%s:%d: time_s: %q is not finite", name, line, f[0])
		case t < 0:
			return nil, fmt.Errorf("%s:%d: time_s: %q is negative", name, line, f[0])
		case len(s.Events) > 0 && t < s.Events[len(s.Events)-1].TimeS:
			prev := s.Events[len(s.Events)-1]
			return nil, fmt.Errorf("%s:%d: time_s: %s is before line %d's %s (events must be in time order)",
				name, line, f[0], prev.Line, strconv.FormatFloat(prev.TimeS, 'g', -1, 64))
		}
		ev.TimeS = t
		k, ok := parseKind(f[1])
		if !ok {
			return nil, fmt.Errorf("%s:%d: kind: %q is not gpu-fail, gpu-recover, node-fail or node-recover", name, line, f[1])
		}
		ev.Kind = k
		if ev.Target, err = ParseTarget(f[2]); err != nil {
			return nil, fmt.Errorf("%s:%d: target: %v", name, line, err)
		}
		if ev.Target.Level != k.level() {
			return nil, fmt.Errorf("%s:%d: target: %s needs a %s: target, not %q", name, line, k, k.level(), f[2])
		}
		s.Events = append(s.Events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, line+1, err)
	}
	return s, nil
}

// Resolver maps a symbolic target to the ids of the GPUs it names.
type Resolver interface {
	Resolve(Target) ([]string, error)
}

// ResolverFunc adapts a function to a Resolver.
type ResolverFunc func(Target) ([]string, error)

func (f ResolverFunc) Resolve(t Target) ([]string, error) { return f(t) }

// Resolved is an event with its target mapped to GPU ids.
type Resolved struct {
	TimeS float64
	Fail  bool
	GPUs  []string
	Line  int
}

// Resolve maps every event's target; an error names the file, line and
// target.
func (s *Schedule) Resolve(r Resolver) ([]Resolved, error) {
	out := make([]Resolved, 0, len(s.Events))
	for _, ev := range s.Events {
		ids, err := r.Resolve(ev.Target)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: target: %q: %v", s.File, ev.Line, ev.Target.String(), err)
		}
		out = append(out, Resolved{TimeS: ev.TimeS, Fail: ev.Kind.Fails(), GPUs: ids, Line: ev.Line})
	}
	return out, nil
}
