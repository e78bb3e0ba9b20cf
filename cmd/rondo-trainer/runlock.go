package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Files of the run lock in the checkpoint directory.
const (
	runLockFile  = "run.lock"
	overlapsFile = "overlaps.log"
)

// holdRunLock takes the job's run lock (an flock on dir/run.lock, held
// until the process exits) before the trainer reads its checkpoint: one
// run of a job at a time trains on it. A second run means its scheduler
// started the job again before the last run had exited (the last run would
// overwrite the checkpoint the new one resumed from, and the job lose that
// work): the new run appends a line naming both runs to dir/overlaps.log
// (what the chaos soak checks), then waits for the lock, so that it still
// resumes from the last run's final checkpoint. The lock file holds its
// holder's allocation, pid and start time.
func holdRunLock(dir string) (*os.File, error) {
	path := filepath.Join(dir, runLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	me := fmt.Sprintf("alloc %s pid %d started %s", envOr("NOMAD_ALLOC_ID", "-"), os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		holder, _ := os.ReadFile(path)
		line := fmt.Sprintf("%s %s started while %s still runs\n", time.Now().UTC().Format(time.RFC3339Nano), me,
			strings.TrimSpace(string(holder)))
		if lf, err := os.OpenFile(filepath.Join(dir, overlapsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
			lf.WriteString(line)
			lf.Close()
		}
		fmt.Fprint(os.Stderr, "rondo-trainer: another run of this job holds its checkpoint: ", line)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(me+"\n"), 0)
	return f, nil
}
