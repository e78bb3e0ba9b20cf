package sweep

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Report is what results.json holds.
type Report struct {
	// Command is the command line that produced the sweep, if known.
	Command string  `json:"command,omitempty"`
	Runs    []Run   `json:"runs"`
	Points  []Point `json:"points"`
	// SimHours is the simulated time of all runs; RunWallS the sum of their
	// wall times; ElapsedS the sweep's wall time (runs overlap).
	SimHours         float64 `json:"sim_hours"`
	RunWallS         float64 `json:"run_wall_s"`
	ElapsedS         float64 `json:"elapsed_s"`
	SimHoursPerWallS float64 `json:"sim_hours_per_wall_s"`
	Parallel         int     `json:"parallel"`
}

func g(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }

// WriteFiles writes runs.csv, summary.csv and results.json into dir.
func WriteFiles(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	runRows := [][]string{{"policy", "rate", "seed", "finished", "avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h",
		"utilization", "jobs_in_window", "jobs_done", "rounds", "recomputes", "preemptions", "solve_ms_p50", "solve_ms_max",
		"ftf_rho_avg", "ftf_rho_max", "end_h", "wall_s", "sim_hours_per_wall_s", "error"}}
	for _, r := range rep.Runs {
		row := []string{r.Policy, g(r.Rate), strconv.FormatInt(r.Seed, 10), strconv.FormatBool(r.Finished())}
		if res := r.Result; res != nil {
			row = append(row, g(res.AvgJCTS/3600), g(res.P50JCTS/3600), g(res.P99JCTS/3600), g(res.MakespanS/3600),
				g(res.Utilization), strconv.Itoa(res.JobsInWindow), strconv.Itoa(res.JobsDone), strconv.Itoa(res.Rounds),
				strconv.Itoa(res.Recomputes), strconv.Itoa(res.Preemptions), g(res.SolveMSP50), g(res.SolveMSMax),
				g(res.FTFRhoAvg), g(res.FTFRhoMax), g(res.EndS/3600), g(res.WallS), g(r.SimHoursPerWallS))
		} else {
			for range 17 {
				row = append(row, "")
			}
		}
		runRows = append(runRows, append(row, r.Error))
	}
	if err := writeCSV(filepath.Join(dir, "runs.csv"), runRows); err != nil {
		return err
	}
	sumRows := [][]string{{"policy", "rate", "runs", "finished", "avg_jct_h", "avg_jct_h_sd", "makespan_h", "makespan_h_sd",
		"ftf_rho_avg", "ftf_rho_max", "utilization"}}
	for _, p := range rep.Points {
		sumRows = append(sumRows, []string{p.Policy, g(p.Rate), strconv.Itoa(p.Runs), strconv.Itoa(p.Finished), g(p.AvgJCTH),
			g(p.AvgJCTHSD), g(p.MakespanH), g(p.MakespanHSD), g(p.RhoAvg), g(p.RhoMax), g(p.Utilization)})
	}
	if err := writeCSV(filepath.Join(dir, "summary.csv"), sumRows); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.WriteAll(rows)
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// journalLine is one finished run in runs.jsonl, with its JCTs so that a
// resumed sweep can still draw the CDF.
type journalLine struct {
	Run
	JCTs []float64 `json:"jcts"`
}

// AppendJournal appends one run to the JSON-lines journal w.
func AppendJournal(w io.Writer, r *Run) error {
	b, err := json.Marshal(journalLine{Run: *r, JCTs: r.JCTs})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadJournal reads the runs of a journal written by AppendJournal; a
// missing file is no runs, and a torn last line (a killed sweep) is
// ignored.
func ReadJournal(path string) ([]Run, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Run
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	for sc.Scan() {
		var l journalLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			continue
		}
		l.Run.JCTs = l.JCTs
		out = append(out, l.Run)
	}
	return out, sc.Err()
}
