package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	deviceplugin "github.com/rondo-sched/rondo/device-plugin"
)

func TestFingerprintFake(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"fingerprint", "-fake", "../../device-plugin/testdata/mixed.hcl"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r deviceplugin.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if r.Backend != "fake" || len(r.GPUs) != 4 || len(r.Groups) != 3 {
		t.Fatalf("report: backend=%s gpus=%d groups=%d", r.Backend, len(r.GPUs), len(r.Groups))
	}
	if r.Affinity["GPU-v100-0 GPU-v100-1"] != "board" || r.Affinity["GPU-k80-0 GPU-k80-1"] != "pcie-switch" {
		t.Errorf("affinity %v", r.Affinity)
	}
	if len(r.Stats) != 4 {
		t.Errorf("stats for %d GPUs, want 4", len(r.Stats))
	}
}

func TestFingerprintErrors(t *testing.T) {
	dir := t.TempDir()
	noFake := filepath.Join(dir, "nofake.hcl")
	bad := filepath.Join(dir, "bad.hcl")
	os.WriteFile(noFake, []byte(`fingerprint_period = "5s"`), 0o644)
	os.WriteFile(bad, []byte(`fingerprint_period = "often"`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"fingerprint", "-fake", noFake}, "needs a fake"},
		{[]string{"fingerprint", "-config", bad}, "fingerprint_period"},
		{[]string{"fingerprint", "-config", filepath.Join(dir, "missing.hcl")}, "no such file"},
	} {
		var out, errb bytes.Buffer
		if code := cli(c.args, &out, &errb); code == 0 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want failure naming %q", c.args, code, errb.String(), c.want)
		}
	}
}

// Real NVML: on a machine without the driver the report is empty with the
// init error; it must not fail.
func TestFingerprintRealNVML(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"fingerprint"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r deviceplugin.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Backend != "nvml" || (r.InitError == "" && len(r.GPUs) == 0) {
		t.Errorf("report %+v", r)
	}
}

// TestGPUCheckScript runs `scripts/gpu-check.sh -fake ...` as `make gpu-check`
// does: it builds the plugin and prints the fingerprint JSON.
func TestGPUCheckScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin; skipped with -short")
	}
	bin := t.TempDir()
	saved := filepath.Join(bin, "report.json")
	cmd := exec.Command("bash", "scripts/gpu-check.sh", "-fake", "device-plugin/testdata/mixed.hcl")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "BIN="+bin, "GPU_CHECK_OUT="+saved)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gpu-check.sh: %v\n%s", err, out)
	}
	var r deviceplugin.Report
	if err := json.Unmarshal([]byte(readOrFail(t, saved)), &r); err != nil {
		t.Fatal(err)
	}
	if r.Backend != "fake" || len(r.GPUs) != 4 {
		t.Errorf("report backend=%s gpus=%d", r.Backend, len(r.GPUs))
	}
}

// Without NVML (this CI machine) the check fails with one line saying why;
// the fake with GPUs passes, and so does nothing else.
func TestGPUCheckFailsWithoutGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin; skipped with -short")
	}
	bin := t.TempDir()
	run := func(args ...string) (int, string) {
		cmd := exec.Command("bash", append([]string{"scripts/gpu-check.sh"}, args...)...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "BIN="+bin)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, strings.TrimSpace(stderr.String())
	}
	var r deviceplugin.Report
	var out bytes.Buffer
	cli([]string{"fingerprint"}, &out, io.Discard)
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.InitError == "" {
		t.Skip("this host has NVML: the failing path cannot be shown here")
	}
	code, msg := run()
	if code != 1 || !strings.Contains(msg, "gpu check failed: NVML cannot be loaded") || strings.Count(msg, "\n") != 0 {
		t.Errorf("no NVML: exit %d, stderr %q", code, msg)
	}
	// Every GPU ignored: NVML "reports no GPU" is also a failure (checked on
	// the fake, the only backend with GPUs here).
	cfg := filepath.Join(t.TempDir(), "ignored.hcl")
	body := "ignored_gpu_ids = [\"GPU-v100-0\", \"GPU-v100-1\", \"GPU-k80-0\", \"GPU-k80-1\"]\n" + readOrFail(t, "../../device-plugin/testdata/mixed.hcl")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, msg := run("-fake", cfg); code != 1 || !strings.Contains(msg, "reports no GPU") {
		t.Errorf("all GPUs ignored: exit %d, stderr %q", code, msg)
	}
	if code, msg := run("-fake", "device-plugin/testdata/mixed.hcl"); code != 0 {
		t.Errorf("fake GPUs: exit %d, stderr %q", code, msg)
	}
}

func readOrFail(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
