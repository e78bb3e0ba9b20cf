package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ReadPhysical reads one of Gavel's physical-cluster .trace files: one job a
// line, tab-separated: job type, command, working directory, num-steps
// argument, needs-data-dir flag (0/1), total steps, scale factor, priority
// weight, SLO (-1 none), arrival time in seconds. IDs follow line order.
func ReadPhysical(r io.Reader) ([]Job, error) {
	var out []Job
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "\t")
		if len(f) != 10 {
			return nil, fmt.Errorf("line %d: %d tab-separated fields, want 10", line, len(f))
		}
		num := func(i int, name string) (float64, error) {
			v, err := strconv.ParseFloat(strings.TrimSpace(f[i]), 64)
			if err != nil {
				return 0, fmt.Errorf("line %d: %s %q: not a number", line, name, f[i])
			}
			return v, nil
		}
		needs, err := num(4, "needs-data-dir")
		if err != nil {
			return nil, err
		}
		steps, err := num(5, "total steps")
		if err != nil {
			return nil, err
		}
		sf, err := num(6, "scale factor")
		if err != nil {
			return nil, err
		}
		prio, err := num(7, "priority")
		if err != nil {
			return nil, err
		}
		slo, err := num(8, "SLO")
		if err != nil {
			return nil, err
		}
		arr, err := num(9, "arrival time")
		if err != nil {
			return nil, err
		}
		if sf < 1 || sf != float64(int(sf)) {
			return nil, fmt.Errorf("line %d: scale factor %v: want a positive integer", line, sf)
		}
		if steps <= 0 || arr < 0 {
			return nil, fmt.Errorf("line %d: total steps must be positive and arrival non-negative", line)
		}
		j := Job{ID: len(out), Model: f[0], Command: f[1], WorkDir: f[2], NumStepsArg: f[3],
			NeedsDataDir: needs != 0, TotalSteps: steps, ScaleFactor: int(sf), Priority: prio, ArrivalS: arr}
		if slo > 0 {
			j.SLOFactor = slo
		}
		out = append(out, j)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteJSONL writes jobs as JSON lines (Rondo's trace format). Floats are
// written in shortest round-trip form, so ReadJSONL gives back equal jobs.
func WriteJSONL(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, j := range jobs {
		if err := enc.Encode(j); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONL reads Rondo's JSON-lines trace. Unknown fields are errors.
func ReadJSONL(r io.Reader) ([]Job, error) { return readJSONL(r, nil) }

func readJSONL(r io.Reader, check func(Job) error) ([]Job, error) {
	var out []Job
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var j Job
		if err := dec.Decode(&j); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		if j.ScaleFactor < 1 || j.TotalSteps <= 0 || j.ArrivalS < 0 || j.Model == "" {
			return nil, fmt.Errorf("line %d: want a model, scale_factor >= 1, total_steps > 0, arrival_s >= 0", line)
		}
		if j.Priority == 0 {
			j.Priority = 1
		}
		if check != nil {
			if err := check(j); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		out = append(out, j)
	}
	return out, sc.Err()
}

// ReadFile reads a trace file: Gavel's tab-separated format when the first
// line has tabs, else JSON lines. Jobs are sorted by arrival (stable) and
// renumbered 0, 1, ... in that order.
func ReadFile(path string) ([]Job, error) { return ReadFileCheck(path, nil) }

// ReadFileCheck is ReadFile that also passes every job of a JSON-lines
// trace, as read, to check (when set): its error is reported with the file and line, e.g. a job's
// vc that the cluster config does not declare.
func ReadFileCheck(path string, check func(Job) error) ([]Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	var jobs []Job
	if bytes.Contains(first, []byte("\t")) {
		// Gavel's format carries no field check could reject (no vc).
		jobs, err = ReadPhysical(bytes.NewReader(b))
	} else {
		jobs, err = readJSONL(bytes.NewReader(b), check)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	SortByArrival(jobs)
	return jobs, nil
}

// SortByArrival orders jobs by arrival time (stable) and renumbers them.
func SortByArrival(jobs []Job) {
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].ArrivalS < jobs[b].ArrivalS })
	for i := range jobs {
		jobs[i].ID = i
	}
}
