package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/rondo-sched/rondo/allocator/throughputs"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// throughputTable is the table the agent decides with: the config's
// throughputs file laid over Gavel's (throughputs.Default(): the file's
// entries win, the rest stays Gavel's), or Gavel's alone. A file that
// cannot be read or parsed is an error at the attribute
// (file:line:col: Invalid throughputs; ...). key identifies the file's
// content (the agent's deciderKey: an edited file rebuilds the decider).
func throughputTable(cfg *rhcl.Config) (tb *throughputs.Table, key string, err error) {
	if cfg.Throughputs == "" {
		return throughputs.Default(), "", nil
	}
	fail := func(err error) error {
		return errors.New(rhcl.FormatDiagnostic(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid throughputs",
			Detail: "throughputs: " + err.Error(), Subject: cfg.ThroughputsRange.Ptr()}))
	}
	data, err := os.ReadFile(cfg.Throughputs)
	if err != nil {
		return nil, "", fail(err)
	}
	op, err := throughputs.ParseFile(cfg.Throughputs, data)
	if err != nil {
		return nil, "", fail(err) // file:line:col: ...
	}
	return op.Over(throughputs.Default()), fmt.Sprintf("%q %x", cfg.Throughputs, sha256.Sum256(data)), nil
}

// typesKey is the config's GPU type mapping and throughput table as the
// agent's deciderKey reads them: a change renames types or changes the
// values decided on, so the decider is rebuilt.
func typesKey(cfg *rhcl.Config, tputKey string) string {
	names := cfg.TypeNames()
	s := fmt.Sprintf("throughputs %s gpu_types", tputKey)
	for _, m := range slices.Sorted(maps.Keys(names)) {
		s += fmt.Sprintf(" %q=%q", m, names[m])
	}
	return s + "\n"
}
