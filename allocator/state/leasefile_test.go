package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeaseFile: the record round-trips for its own lock only; a second
// open of the same file is refused while the first holds it, allowed once
// it is closed (a dead agent's flock is gone with it); a torn record reads
// as none.
func TestLeaseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "leader-lease")
	l, err := OpenLeaseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if id := l.id("default", "rondo/allocator-leader"); id != "" {
		t.Errorf("new file: id %q", id)
	}
	if err := l.save("default", "rondo/allocator-leader", "0123-abcd-long-id-0123456789"); err != nil {
		t.Fatal(err)
	}
	if err := l.save("default", "rondo/allocator-leader", "short"); err != nil { // shorter: truncated, not mixed
		t.Fatal(err)
	}
	if id := l.id("default", "rondo/allocator-leader"); id != "short" {
		t.Errorf("id = %q, want short", id)
	}
	if id := l.id("default", "rondo/other-leader"); id != "" {
		t.Errorf("another lock's id: %q", id)
	}
	if _, err := OpenLeaseFile(path); err == nil || !strings.Contains(err.Error(), "locked by another running agent") {
		t.Errorf("second open: %v", err)
	}
	l.Close()
	l2, err := OpenLeaseFile(path)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	defer l2.Close()
	if id := l2.id("default", "rondo/allocator-leader"); id != "short" {
		t.Errorf("after reopen: id %q", id)
	}
	if err := os.WriteFile(path, []byte(`{"namespace":"default","pa`), 0o600); err != nil {
		t.Fatal(err)
	}
	if id := l2.id("default", "rondo/allocator-leader"); id != "" {
		t.Errorf("torn record: id %q", id)
	}
	if err := l2.clear(); err != nil || l2.id("default", "rondo/allocator-leader") != "" {
		t.Errorf("clear: %v", err)
	}
}
