package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/rondo-sched/rondo/allocator/synergy"
)

// SynergyType is the GPU type Synergy's profiles were measured on: a
// Synergy trace's jobs run on it only.
const SynergyType = "v100"

// ReadSynergy reads a trace in the format of Synergy's reference simulator
// (its deploy_trace/ files, --replay_trace): one job a line, no header,
// "job_id,model,arrival_s,iterations,gpus". A job's length comes from its
// model's profile (the 1-GPU profile's iter_time_s in tb's `models` set, as
// the reference does): it runs 1/iter_time_s iterations per second at the
// proportional share on SynergyType, whatever its GPU count. Errors name
// the line and field. IDs are the file's job_id; jobs stay in file order
// (arrivals must not decrease).
func ReadSynergy(r io.Reader, tb *synergy.Table) ([]Job, error) {
	var out []Job
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	seen := map[int]int{}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimRight(sc.Text(), "\r"))
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != 5 {
			return nil, fmt.Errorf("line %d: %d comma-separated fields, want 5 (job_id,model,arrival_s,iterations,gpus)", line, len(f))
		}
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		id, err := strconv.Atoi(f[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("line %d: job_id %q: want a non-negative integer", line, f[0])
		}
		if l, dup := seen[id]; dup {
			return nil, fmt.Errorf("line %d: job_id %d: already on line %d", line, id, l)
		}
		seen[id] = line
		arr, err := strconv.ParseFloat(f[2], 64)
		if err != nil || math.IsNaN(arr) || math.IsInf(arr, 0) || arr < 0 {
			return nil, fmt.Errorf("line %d: arrival_s %q: want a non-negative number of seconds", line, f[2])
		}
		if n := len(out); n > 0 && arr < out[n-1].ArrivalS {
			return nil, fmt.Errorf("line %d: arrival_s %v: before the previous line's %v (want arrival order)", line, arr, out[n-1].ArrivalS)
		}
		iters, err := strconv.ParseFloat(f[3], 64)
		if err != nil || !(iters >= 1) || math.IsInf(iters, 0) || iters != math.Trunc(iters) {
			return nil, fmt.Errorf("line %d: iterations %q: want a positive integer", line, f[3])
		}
		gpus, err := strconv.Atoi(f[4])
		if err != nil || gpus < 1 {
			return nil, fmt.Errorf("line %d: gpus %q: want a positive integer", line, f[4])
		}
		set := tb.Sets["models"]
		if set == nil {
			set = tb.SetFor(synergy.BaseCoresPerGPU)
		}
		p, err := set.Lookup(f[1], 1)
		if err != nil {
			return nil, fmt.Errorf("line %d: model %q: %v", line, f[1], err)
		}
		if !(p.IterTimeS > 0) {
			return nil, fmt.Errorf("line %d: model %q: its profile has no iter_time_s", line, f[1])
		}
		out = append(out, Job{ID: id, Model: f[1], Profile: f[1], ScaleFactor: gpus, TotalSteps: iters,
			DurationS: iters * p.IterTimeS, Priority: 1, ArrivalS: arr,
			StepsPerS: map[string]float64{SynergyType: 1 / p.IterTimeS}})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ReadSynergyFile is ReadSynergy on a file, errors prefixed with its name.
func ReadSynergyFile(path string, tb *synergy.Table) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	jobs, err := ReadSynergy(f, tb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, nil
}
