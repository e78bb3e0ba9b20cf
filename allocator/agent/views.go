package agent

import "time"

// RoundEvent is one round that changed a job: what the plan did and why
// (JobStatus.History).
type RoundEvent struct {
	Round  int       `json:"round"`
	Time   time.Time `json:"time"`
	Intent string    `json:"intent"`
	Type   string    `json:"type,omitempty"`
	GPUs   int       `json:"gpus,omitempty"`
	Reason string    `json:"reason,omitempty"`
}

// NodeStatus is one node with its GPUs (rondo node status).
type NodeStatus struct {
	ID    string      `json:"id"`
	Name  string      `json:"name"`
	Pool  string      `json:"pool,omitempty"`
	Class string      `json:"class,omitempty"`
	Ready bool        `json:"ready"`
	GPUs  []GPUStatus `json:"gpus"`
}

// GPUStatus is one GPU: its type, health, cell, the jobs on it and the
// share of it each gets (1 alone, 1/2 when two jobs share it).
type GPUStatus struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Healthy bool     `json:"healthy"`
	Cell    string   `json:"cell,omitempty"`
	Jobs    []string `json:"jobs,omitempty"`
	Share   float64  `json:"share,omitempty"`
}

// Sample is one round in the agent's timeline (GET /v1/timeline, the web
// page's plots): GPUs per type in use and healthy, GPUs per VC in use, jobs
// running and waiting, the mean JCT of the jobs finished so far and the
// utilisation (used / healthy GPUs).
type Sample struct {
	Round       int            `json:"round"`
	Time        time.Time      `json:"time"`
	Used        map[string]int `json:"used"`
	Healthy     map[string]int `json:"healthy"`
	VCUsed      map[string]int `json:"vc_used,omitempty"`
	Running     int            `json:"running"`
	Waiting     int            `json:"waiting"`
	Finished    int            `json:"finished"`
	AvgJCTS     float64        `json:"avg_jct_s,omitempty"`
	Utilization float64        `json:"utilization"`
}
