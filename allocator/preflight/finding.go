// Package preflight checks a live Nomad cluster against a Rondo config
// before the agent runs on it (`rondo config validate -nomad`): the nodes,
// node pools and classes the cells name, the GPU clients' devices and
// their types, the token's capabilities and the scheduler's preemption.
//
// The checks are pure functions over what was read from Nomad (node
// stubs, probe results, the scheduler configuration), so they are tested
// on recorded inputs; Run reads the cluster and calls them.
package preflight

import (
	"fmt"
	"strings"
)

// Level is how bad a finding is.
type Level int

const (
	OK Level = iota
	Warning
	Error
)

func (l Level) String() string {
	switch l {
	case OK:
		return "ok"
	case Warning:
		return "warning"
	}
	return "error"
}

// Finding is one line of the report: what was checked (Check: nodes,
// gpus, acl, preemption) and what was found, with what to fix when it is
// not ok.
type Finding struct {
	Level Level
	Check string
	Msg   string
}

func (f Finding) String() string {
	return fmt.Sprintf("%-7s %-10s %s", f.Level, f.Check, f.Msg)
}

func ok(check, format string, args ...any) Finding {
	return Finding{OK, check, fmt.Sprintf(format, args...)}
}

func warn(check, format string, args ...any) Finding {
	return Finding{Warning, check, fmt.Sprintf(format, args...)}
}

func fail(check, format string, args ...any) Finding {
	return Finding{Error, check, fmt.Sprintf(format, args...)}
}

// Count counts the findings of each level.
func Count(fs []Finding) (oks, warnings, errors int) {
	for _, f := range fs {
		switch f.Level {
		case OK:
			oks++
		case Warning:
			warnings++
		default:
			errors++
		}
	}
	return
}

// quoteList is names quoted and comma-separated, or "none".
func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
