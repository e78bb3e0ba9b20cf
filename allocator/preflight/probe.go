package preflight

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
	rnomad "github.com/rondo-sched/rondo/allocator/nomad"
)

// ProbeNamespace tries, with harmless requests, each capability the
// agent's policy grants in a namespace (PolicyFile): list-jobs, read-job
// (a job that does not exist: not found means allowed), submit-job (a
// registration with a modify index the job cannot have: Nomad checks the
// token first and then refuses to write), scale-job and read-job-scaling
// (the missing job again).
func ProbeNamespace(ctx context.Context, c *api.Client, ns string) []Probe {
	q := (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
	w := (&api.WriteOptions{Namespace: ns}).WithContext(ctx)
	id := "rondo-preflight-" + nonce()
	scope := fmt.Sprintf("namespace %q", ns)
	var out []Probe
	add := func(capability, why string, err error) {
		out = append(out, Probe{Capability: capability, Scope: scope, Why: why, Err: allowed(err)})
	}
	_, _, err := c.Jobs().List(q)
	add("list-jobs", "observing the opted-in jobs", err)
	_, _, err = c.Jobs().Info(id, q)
	add("read-job", "reading jobs and their allocations", err)
	job := probeJob(id, ns)
	_, _, err = c.Jobs().EnforceRegister(job, 1<<40, w)
	add("submit-job", "admitting jobs by re-registering them pinned", err)
	one := 1
	_, _, err = c.Jobs().Scale(id, "probe", &one, "rondo config validate: probe", false, nil, w)
	add("scale-job", "suspending jobs by scaling them to 0", err)
	_, _, err = c.Jobs().ScaleStatus(id, q)
	add("read-job-scaling", "reading groups' scaling", err)
	return out
}

// ProbeVariables tries the variable capabilities the agent's state and
// leader lock need under the state path's parent (PolicyFile: rondo/*):
// it creates a variable next to the state (<statePath>-preflight), lists,
// reads and deletes it. Nomad filters lists silently, so list is checked
// by finding the probe in it.
func ProbeVariables(ctx context.Context, c *api.Client, ns, statePath string) []Probe {
	q := (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
	w := (&api.WriteOptions{Namespace: ns}).WithContext(ctx)
	path := strings.Trim(statePath, "/") + "-preflight"
	scope := fmt.Sprintf("variables %q of namespace %q", path, ns)
	var out []Probe
	add := func(capability, why string, err error) {
		out = append(out, Probe{Capability: "variables " + capability, Scope: scope, Why: why, Err: err})
	}
	v, _, werr := c.Variables().CheckedCreate(&api.Variable{Namespace: ns, Path: path,
		Items: api.VariableItems{"probe": "rondo config validate -nomad"}}, w)
	var conflict api.ErrCASConflict
	if errors.As(werr, &conflict) && conflict.Conflict != nil {
		v, werr = conflict.Conflict, nil // a probe left behind
	}
	add("write", "saving the state and holding the leader lock", werr)
	_, _, err := c.Variables().Peek(path, q)
	add("read", "loading the state", err)
	if werr == nil {
		list, _, err := c.Variables().PrefixList(path, q)
		if err == nil {
			// Forbidden's words: the token may not list it.
			err = fmt.Errorf("403 (Permission denied): the probe variable %s is missing from the list (Nomad filters lists by the token)", path)
			for _, m := range list {
				if m.Path == path {
					err = nil
				}
			}
		}
		add("list", "loading a chunked state", err)
		_, err = c.Variables().CheckedDelete(path, v.ModifyIndex, w)
		if err != nil && !rnomad.Forbidden(err) {
			err = fmt.Errorf("deleting the probe variable %s (delete it by hand): %w", path, err)
		}
		add("destroy", "removing the state's old chunks", err)
	} else {
		// Nomad checks the token before the index: a wrong index on a
		// missing variable deletes nothing.
		_, err = c.Variables().CheckedDelete(path, 1<<40, w)
		if errors.As(err, &conflict) {
			err = nil
		}
		add("destroy", "removing the state's old chunks", allowed(err))
	}
	return out
}

// probeJob is a valid job that never runs: registered with a modify index
// it cannot have, Nomad refuses it after checking the token.
func probeJob(id, ns string) *api.Job {
	job := api.NewBatchJob(id, id, "", 1)
	job.Namespace = &ns
	tg := api.NewTaskGroup("probe", 1)
	tg.AddTask(api.NewTask("probe", "raw_exec").SetConfig("command", "/bin/true"))
	job.AddTaskGroup(tg)
	return job
}

// allowed turns an answer given after the token was checked (not found, a
// refused modify index, a check-and-set conflict) into nil.
func allowed(err error) error {
	if err == nil || rnomad.Forbidden(err) {
		return err
	}
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && (ue.StatusCode() == 404 || ue.StatusCode() == 409) {
		return nil
	}
	var conflict api.ErrCASConflict
	if errors.As(err, &conflict) {
		return nil
	}
	s := strings.ToLower(err.Error())
	for _, past := range []string{"not found", "does not exist", "enforcing job modify index"} {
		if strings.Contains(s, past) {
			return nil
		}
	}
	return err
}

func nonce() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
