package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/cli"
	"github.com/rondo-sched/rondo/allocator/cells"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	"github.com/rondo-sched/rondo/allocator/topocells"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

func init() {
	register("cells", func() (cli.Command, error) { return &cellsCmd{}, nil })
	register("cells plan", func() (cli.Command, error) { return newCellsPlan(), nil })
}

type cellsCmd struct{}

func (*cellsCmd) Synopsis() string { return "Plan virtual-cluster cell allocations" }
func (*cellsCmd) Help() string {
	return "Usage: rondo cells <subcommand>\n\n  Replay requests through HiveD's cell allocator.\n"
}
func (*cellsCmd) Run([]string) int { return cli.RunResultHelp }

type cellsPlan struct {
	base
	config, requests string
	topology         string
}

func newCellsPlan() *cellsPlan {
	c := &cellsPlan{base: newBase("cells plan",
		"Replay allocate/release requests on a cluster config and print one JSON line per event",
		"--config CLUSTER.hcl --requests REQ.json")}
	c.flags.StringVar(&c.config, "config", "", "cluster config file or directory")
	c.flags.StringVar(&c.requests, "requests", "", "requests JSON file, or - for standard input (optional with --topology)")
	c.flags.StringVar(&c.topology, "topology", "", "comma-separated [NODE=]FILE `nomad-device-rondo fingerprint` JSON reports, one per node "+
		"(node name: NODE, else the file name without .json): cells derived as cells_from_topology does, printed as # lines first")
	return c
}

// planRequest is one entry of the requests file.
type planRequest struct {
	ID string `json:"id"`
	VC string `json:"vc"`
	// Class is guaranteed or opportunistic; the JSON key stays "priority"
	// (the requests file's contract, like the rondo.priority job meta).
	Class   string       `json:"priority"`
	Members []planMember `json:"members"`
	Op      string       `json:"op"`
}

type planMember struct {
	GPUs int `json:"gpus"`
}

// readRequests decodes and checks the requests; errors name the index and field.
func readRequests(data []byte) ([]planRequest, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("requests must be a JSON array: %v", err)
	}
	out := make([]planRequest, len(raw))
	for i, r := range raw {
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		var q planRequest
		if err := dec.Decode(&q); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return nil, fmt.Errorf("request %d: field %q: want %s, got %s", i, te.Field, te.Type, te.Value)
			}
			return nil, fmt.Errorf("request %d: %v", i, strings.TrimPrefix(err.Error(), "json: "))
		}
		if q.Op == "" {
			q.Op = "allocate"
		}
		switch {
		case q.ID == "":
			return nil, fmt.Errorf("request %d: field \"id\": missing", i)
		case q.Op != "allocate" && q.Op != "release":
			return nil, fmt.Errorf("request %d: field \"op\": %q is not allocate or release", i, q.Op)
		}
		if q.Op == "release" {
			out[i] = q
			continue
		}
		if q.Class == "" {
			q.Class = "guaranteed"
		}
		switch {
		case q.Class != "guaranteed" && q.Class != "opportunistic":
			return nil, fmt.Errorf("request %d: field \"priority\": %q is not guaranteed or opportunistic", i, q.Class)
		case q.VC == "" && q.Class == "guaranteed":
			return nil, fmt.Errorf("request %d: field \"vc\": missing for a guaranteed request", i)
		case len(q.Members) == 0:
			return nil, fmt.Errorf("request %d: field \"members\": missing or empty", i)
		}
		for m, mem := range q.Members {
			if mem.GPUs <= 0 {
				return nil, fmt.Errorf("request %d: field \"members[%d].gpus\": %d must be positive", i, m, mem.GPUs)
			}
		}
		out[i] = q
	}
	return out, nil
}

// derive reads the --topology reports, derives their nodes' cells (nodes a
// written cell names are left out: written cells win), prints the tree as
// "# " lines and returns the spec with the derived cells added.
func (c *cellsPlan) derive(cfg *rhcl.Config, spec cells.Spec) (cells.Spec, error) {
	written := map[string]bool{}
	for _, cl := range cfg.Cells {
		written[cl.NomadNode] = true
		for _, n := range cl.NomadNodes {
			written[n] = true
		}
	}
	var nodes []topocells.Node
	for _, item := range strings.Split(c.topology, ",") {
		name, file, ok := strings.Cut(item, "=")
		if !ok {
			file, name = item, strings.TrimSuffix(filepath.Base(item), ".json")
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return spec, err
		}
		groups, err := topocells.ParseReport(b)
		if err != nil {
			return spec, fmt.Errorf("%s: %w", file, err)
		}
		if written[name] {
			fmt.Fprintf(c.stdout, "# node %s: covered by a written cell; not derived\n", name)
			continue
		}
		nodes = append(nodes, topocells.Node{Name: name, GPUs: topocells.GPUs(groups, rnomad.GPUType)})
	}
	r := topocells.Derive(nodes)
	out, notes := topocells.Apply(spec, r)
	r.Notes = append(r.Notes, notes...)
	for _, l := range strings.Split(strings.TrimSpace(topocells.Tree(r)), "\n") {
		fmt.Fprintln(c.stdout, "# "+l)
	}
	return out, nil
}

// specFromConfig turns a validated config into the allocator's spec.
func specFromConfig(cfg *rhcl.Config) cells.Spec { return cfg.CellSpec() }

// planLine is one output event; fields print in this order.
type planLine struct {
	Step      int
	Request   string
	VC        string
	Status    string
	Cells     []string
	Preempted []string
}

func (l planLine) String() string {
	s := fmt.Sprintf(`{"step": %d, "request": %s, "vc": %s, "status": %s, "cells": %s`,
		l.Step, jsonString(l.Request), jsonString(l.VC), jsonString(l.Status), jsonList(l.Cells))
	if len(l.Preempted) > 0 {
		s += `, "preempted": ` + jsonList(l.Preempted)
	}
	return s + "}"
}

func (c *cellsPlan) Run(args []string) int {
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.config == "" || c.requests == "" && c.topology == "" {
		return c.fail(errors.New("--config and --requests are required"))
	}
	cfg, diags := rhcl.LoadPath(c.config)
	if diags.HasErrors() {
		return c.fail(errors.New(rhcl.FormatDiagnostics(diags)))
	}
	spec := specFromConfig(cfg)
	if c.topology != "" {
		var err error
		if spec, err = c.derive(cfg, spec); err != nil {
			return c.fail(err)
		}
		if c.requests == "" {
			return 0
		}
	}
	var data []byte
	var err error
	if c.requests == "-" {
		var buf bytes.Buffer
		_, err = buf.ReadFrom(os.Stdin)
		data = buf.Bytes()
	} else {
		data, err = os.ReadFile(c.requests)
	}
	if err != nil {
		return c.fail(err)
	}
	reqs, err := readRequests(data)
	if err != nil {
		return c.fail(fmt.Errorf("%s: %w", inputName(c.requests), err))
	}
	a, err := cells.New(spec)
	if err != nil {
		return c.fail(err)
	}
	lines, err := replay(a, reqs)
	for _, l := range lines {
		fmt.Fprintln(c.stdout, l)
	}
	if err != nil {
		return c.fail(err)
	}
	return 0
}

// replay runs requests in order. Waiting requests (and preempted gangs,
// requeued at the back) are retried in arrival order after each release.
func replay(a *cells.Allocator, reqs []planRequest) ([]planLine, error) {
	var lines []planLine
	byID := map[string]planRequest{}
	placed := map[string][]string{}
	var waiting []string
	try := func(step int, q planRequest) (bool, error) {
		class := cells.Guaranteed
		if q.Class == "opportunistic" {
			class = cells.Opportunistic
		}
		members := make([]int, len(q.Members))
		for i, m := range q.Members {
			members[i] = m.GPUs
		}
		p, err := a.Allocate(cells.Request{ID: q.ID, VC: q.VC, Class: class, Members: members})
		if errors.Is(err, cells.ErrWait) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("request %d (%s): %v", step-1, q.ID, err)
		}
		var flat []string
		for _, m := range p.Members {
			flat = append(flat, m...)
		}
		placed[q.ID] = flat
		lines = append(lines, planLine{Step: step, Request: q.ID, VC: q.VC, Status: "placed", Cells: flat, Preempted: p.Preempted})
		for _, v := range p.Preempted {
			lines = append(lines, planLine{Step: step, Request: v, VC: byID[v].VC, Status: "preempted", Cells: placed[v]})
			delete(placed, v)
			waiting = append(waiting, v)
		}
		return true, nil
	}
	for i, q := range reqs {
		step := i + 1
		if q.Op == "allocate" {
			if _, dup := byID[q.ID]; dup {
				return lines, fmt.Errorf("request %d: field \"id\": %q is already in use", i, q.ID)
			}
			byID[q.ID] = q
			ok, err := try(step, q)
			if err != nil {
				return lines, err
			}
			if !ok {
				waiting = append(waiting, q.ID)
				lines = append(lines, planLine{Step: step, Request: q.ID, VC: q.VC, Status: "waiting"})
			}
			continue
		}
		orig, known := byID[q.ID]
		if !known {
			return lines, fmt.Errorf("request %d: field \"id\": %q was never allocated", i, q.ID)
		}
		delete(byID, q.ID)
		if cellsHeld, ok := placed[q.ID]; ok {
			if err := a.Release(q.ID); err != nil {
				return lines, fmt.Errorf("request %d: %v", i, err)
			}
			delete(placed, q.ID)
			lines = append(lines, planLine{Step: step, Request: q.ID, VC: orig.VC, Status: "released", Cells: cellsHeld})
		} else {
			waiting = removeID(waiting, q.ID)
			lines = append(lines, planLine{Step: step, Request: q.ID, VC: orig.VC, Status: "released"})
		}
		queue := waiting
		waiting = nil
		for _, id := range queue {
			ok, err := try(step, byID[id])
			if err != nil {
				return lines, err
			}
			if !ok {
				waiting = append(waiting, id)
			}
		}
	}
	return lines, nil
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jsonList renders a string list the way the issue prints it: ["a", "b"].
func jsonList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = jsonString(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func removeID(ids []string, id string) []string {
	out := ids[:0]
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}
