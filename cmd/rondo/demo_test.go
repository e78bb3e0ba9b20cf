package main

import (
	"bytes"
	"strings"
	"testing"
)

// The demo's -addr was renamed -bind-addr; the old name still parses, sets
// the same address and warns (scripts and docs written before the rename).
func TestDemoDeprecatedAddr(t *testing.T) {
	parse := func(args ...string) (*demoCmd, string) {
		t.Helper()
		c := newDemoCmd()
		var errOut bytes.Buffer
		c.stderr = &errOut
		if code := c.parse(args); code >= 0 {
			t.Fatalf("parse %v: exit %d", args, code)
		}
		c.deprecated()
		return c, errOut.String()
	}
	c, warn := parse("-addr", "127.0.0.1:4790", "-lease-addr", "127.0.0.1:4791")
	if c.addr != "127.0.0.1:4790" {
		t.Fatalf("-addr: addr = %q", c.addr)
	}
	if want := "warning: -addr is deprecated; use -bind-addr\n"; warn != want {
		t.Fatalf("-addr: stderr %q, want %q", warn, want)
	}
	c, warn = parse("-bind-addr", "127.0.0.1:4792")
	if c.addr != "127.0.0.1:4792" || warn != "" {
		t.Fatalf("-bind-addr: addr %q, stderr %q", c.addr, warn)
	}
	if c, _ = parse(); c.addr != "127.0.0.1:4700" {
		t.Fatalf("default: addr %q", c.addr)
	}
	if h := newDemoCmd().Help(); !strings.Contains(h, "deprecated: use -bind-addr") {
		t.Fatalf("help does not mark -addr deprecated:\n%s", h)
	}
}
