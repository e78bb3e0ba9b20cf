package main

import (
	"slices"
	"strings"

	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
	rhcl "github.com/rondo-sched/rondo/hcl"
)

// watchNamespaces is what the agent's Nomad backend watches beside its
// home namespace: every namespace (nomad { namespace = "*" }), else the
// namespaces the VCs list (a reload that changes them changes the watch).
func watchNamespaces(cfg *rhcl.Config, all bool) []string {
	if all {
		return []string{rnomad.AllNamespaces}
	}
	return cfg.Namespaces()
}

// namespacesWatched is the watch as the start log shows it.
func namespacesWatched(home string, cfg *rhcl.Config, all bool) string {
	if all {
		return rnomad.AllNamespaces
	}
	ns := append([]string{home}, cfg.Namespaces()...)
	slices.Sort(ns)
	return strings.Join(slices.Compact(ns), ",")
}
