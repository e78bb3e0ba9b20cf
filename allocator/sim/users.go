package sim

import "sort"

// UserResult is one user's share of the run: the GPU time its jobs
// received alone (GPU-seconds per type: a job's credited time times its
// GPUs) and their completion times.
type UserResult struct {
	User     string             `json:"user"`
	Jobs     int                `json:"jobs"`
	JobsDone int                `json:"jobs_done"`
	AvgJCTS  float64            `json:"avg_jct_s"`
	GPUS     map[string]float64 `json:"gpu_s"`
	// GPUShare is the user's part of all GPU time the users received.
	GPUShare float64 `json:"gpu_share"`
}

// userResults groups the jobs by user, by name; nil when no job names one.
func userResults(all []*jobState) []UserResult {
	by := map[string]*UserResult{}
	total := 0.0
	named := false
	for _, js := range all {
		u := js.tj.User
		named = named || u != ""
		r := by[u]
		if r == nil {
			r = &UserResult{User: u, GPUS: map[string]float64{}}
			by[u] = r
		}
		r.Jobs++
		if js.done {
			r.JobsDone++
			r.AvgJCTS += js.finish - js.tj.ArrivalS
		}
		for t, sec := range js.received {
			g := sec * float64(max(js.tj.ScaleFactor, 1))
			r.GPUS[t] += g
			total += g
		}
	}
	if !named {
		return nil
	}
	out := make([]UserResult, 0, len(by))
	for _, r := range by {
		if r.JobsDone > 0 {
			r.AvgJCTS /= float64(r.JobsDone)
		}
		if total > 0 {
			for _, g := range r.GPUS {
				r.GPUShare += g / total
			}
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].User < out[b].User })
	return out
}
