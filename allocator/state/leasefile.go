package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// LeaseFile keeps the leader lock's ID on the agent's host, so that an
// agent restarted there (systemd's Restart=, a crash, kill -9) takes its
// own lease back at once instead of waiting for it to expire: Nomad holds a
// dead holder's lock for twice its TTL plus the lock delay (35 s at the
// defaults), and every round in that time is lost. The file is locked
// (flock) for the life of the process that opened it, which is what makes
// taking the lease back safe: whoever wrote the ID is dead, since its lock
// on the file is gone, and the ID never leaves the file and the agent.
type LeaseFile struct {
	path string
	f    *os.File
}

type leaseRecord struct {
	Namespace string `json:"namespace"`
	Path      string `json:"path"`
	ID        string `json:"id"`
}

// OpenLeaseFile opens (creating it and its directory) and locks the lease
// file. A second agent on the same file is refused: two agents sharing a
// lease would both act.
func OpenLeaseFile(path string) (*LeaseFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("state: lease_file %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: lease_file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state: lease_file %s is locked by another running agent (each agent needs its own)", path)
		}
		return nil, fmt.Errorf("state: lease_file %s: lock: %w", path, err)
	}
	return &LeaseFile{path: path, f: f}, nil
}

// Path is the file's path.
func (l *LeaseFile) Path() string { return l.path }

// id returns the lease ID kept for the lock at namespace/path ("" when
// none, or one for another lock).
func (l *LeaseFile) id(namespace, path string) string {
	b, err := os.ReadFile(l.path)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return ""
	}
	var r leaseRecord
	if json.Unmarshal(b, &r) != nil || r.Namespace != namespace || r.Path != path {
		return "" // not ours to resume: acquire afresh (and overwrite it)
	}
	return r.ID
}

// save records the lease ID. It writes in place: the lock is on this
// inode, so a rename would leave the path unlocked. A kill mid-write leaves
// a record that does not decode, which only means acquiring afresh.
func (l *LeaseFile) save(namespace, path, id string) error {
	b, _ := json.Marshal(leaseRecord{Namespace: namespace, Path: path, ID: id})
	b = append(b, '\n')
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := l.f.Truncate(int64(len(b))); err != nil {
		return err
	}
	return l.f.Sync()
}

// clear forgets the lease (released, or lost).
func (l *LeaseFile) clear() error { return l.save("", "", "") }

// Close unlocks the file.
func (l *LeaseFile) Close() error { return l.f.Close() }
