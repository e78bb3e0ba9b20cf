package nomad

import (
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/jobspec2"
	"github.com/rondo-sched/rondo/hcl"
)

// parseJob parses a job file as `nomad job run` does (HCL2) and
// canonicalizes it as Nomad's API does on register.
func parseJob(t *testing.T, path string) *api.Job {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	job, err := jobspec2.ParseWithConfig(&jobspec2.ParseConfig{Path: path, Body: src, AllowFS: true, Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	job.Canonicalize()
	return job
}

// boundsOf reads a parsed job's policy and GPU group as the backend does.
func boundsOf(t *testing.T, job *api.Job) (hcl.JobPolicy, []string) {
	t.Helper()
	pol, err := hcl.PolicyFromMeta(job.Meta)
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := gpuGroup(job)
	return ScalingBounds(*job.ID, pol, tg)
}

// TestScalingBounds: a scaling block without rondo.elastic gives the elastic
// range; with it, the meta wins and a disagreement is a warning naming job
// and group; an autoscaler policy is warned about; a min of 0 reads as 1.
func TestScalingBounds(t *testing.T) {
	pol, warns := boundsOf(t, parseJob(t, "../../cmd/rondo/testdata/scaling.nomad.hcl"))
	if pol.ElasticMin != 2 || pol.ElasticMax != 6 || len(warns) != 0 {
		t.Fatalf("scaling.nomad.hcl: elastic %d:%d, warnings %q", pol.ElasticMin, pol.ElasticMax, warns)
	}
	pol, warns = boundsOf(t, parseJob(t, "../../cmd/rondo/testdata/autoscaled.nomad.hcl"))
	if pol.ElasticMin != 1 || pol.ElasticMax != 4 {
		t.Fatalf("autoscaled.nomad.hcl: meta must win, got %d:%d", pol.ElasticMin, pol.ElasticMax)
	}
	if len(warns) != 2 || !strings.Contains(warns[0], `job "autoscaled" group "train": the Nomad Autoscaler also targets this group`) ||
		!strings.Contains(warns[1], `meta rondo.elastic = "1:4" and scaling { min = 1 max = 8 } disagree; rondo.elastic wins`) {
		t.Fatalf("warnings %q", warns)
	}
	// No scaling block: nothing changes; min 0 reads as 1; a min equal
	// to 0 agrees with any meta min (Rondo lowered it at admission).
	job := gpuJob(1, 1)
	job.Meta = map[string]string{hcl.MetaVC: "a"}
	if pol, warns = boundsOf(t, job); pol.Elastic() || len(warns) != 0 {
		t.Fatalf("no block: %+v %q", pol, warns)
	}
	zero, four := int64(0), int64(4)
	job.TaskGroups[0].Scaling = &api.ScalingPolicy{Min: &zero, Max: &four}
	if pol, warns = boundsOf(t, job); pol.ElasticMin != 1 || pol.ElasticMax != 4 || len(warns) != 0 {
		t.Fatalf("min 0: %+v %q", pol, warns)
	}
	job.Meta[hcl.MetaElastic] = "2:4"
	if pol, warns = boundsOf(t, job); pol.ElasticMin != 2 || len(warns) != 0 {
		t.Fatalf("lowered min: %+v %q", pol, warns)
	}
}

// TestLowerScalingMin: an admission lowers the block's min to 0 (Nomad
// refuses a scale below it, and Rondo suspends by scaling to 0) and keeps
// the bounds in meta rondo.elastic, so the next look reads the same range.
func TestLowerScalingMin(t *testing.T) {
	job := parseJob(t, "../../cmd/rondo/testdata/scaling.nomad.hcl")
	pol, _ := boundsOf(t, job)
	if !LowerScalingMin(job, "train", pol) {
		t.Fatal("not lowered")
	}
	if *job.TaskGroups[0].Scaling.Min != 0 || *job.TaskGroups[0].Scaling.Max != 6 || job.Meta[hcl.MetaElastic] != "2:6" {
		t.Fatalf("scaling %+v, meta %v", job.TaskGroups[0].Scaling, job.Meta)
	}
	if again, warns := boundsOf(t, job); again.ElasticMin != 2 || again.ElasticMax != 6 || len(warns) != 0 {
		t.Fatalf("after lowering: %+v %q", again, warns)
	}
	if LowerScalingMin(job, "train", pol) {
		t.Fatal("lowered twice")
	}
}
