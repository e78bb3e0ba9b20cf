package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rondo-sched/rondo/allocator/agent"
	"github.com/rondo-sched/rondo/allocator/state"
	"github.com/rondo-sched/rondo/e2e/cluster"
	"github.com/rondo-sched/rondo/internal/testca"
)

// tlsConfig is the agent's config on a Nomad with TLS: Nomad's address,
// CA, client certificate and server name from the nomad {} block (not the
// environment), its own listeners
// from agent {} under tls {}, tasks told the https lease API.
const tlsConfig = `agent {
  bind_addr  = %q
  lease_addr = %q
  round      = "3s"
  log_level  = "debug"
  log_json   = true
}
high_availability {
  lock_ttl = "10s"
}
nomad {
  address = %q
%s}
tls {
  cert_file = %q
  key_file  = %q
}
tasks {
  lease_address   = "https://%s"
  checkpoint_root = %q
}
vc "research" {
  policy = "max_min_fairness_perf"
}
`

// TestTLSOnNomad: a Nomad cluster with TLS on HTTP and RPC, a private CA
// generated here and verify_https_client = true (every HTTP request needs
// a client certificate from the CA: the harness's API client and nomad
// binary present one); the agent reaches it with nomad { address = https
// ca_file cert_file key_file tls_server_name } (paths relative to the
// config file, nothing in its environment), serves its status and lease
// APIs over HTTPS (tls {}), and a 1-GPU rondo-trainer job reports
// progress through the https lease API (its workload identity verified
// against Nomad's JWKS, fetched over TLS with the client certificate),
// which `rondo job status` shows over HTTPS. Without the CA, without the
// client certificate, or with a server name the certificate does not
// name, the agent stops with a one-line certificate error; a view
// without the CA fails in one line too.
func TestTLSOnNomad(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts a Nomad cluster")
	}
	t.Parallel()
	tlsDir := t.TempDir()
	nt, ca, err := cluster.NewTLS(tlsDir)
	if err != nil {
		t.Fatal(err)
	}
	nt.VerifyHTTPSClient = true
	s := startStackOpts(t, []cluster.ClientSpec{cluster.UniformClient("v100-a", "v100", 1)}, "", func(o *cluster.Options) { o.TLS = nt })
	if !strings.HasPrefix(s.c.Address, "https://") {
		t.Fatalf("cluster address %s, want https", s.c.Address)
	}
	agentCert, agentKey, err := ca.Issue("agent", "localhost", nil, testca.Localhost)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's client certificate for Nomad's HTTP API, next to its
	// config and named relative to it.
	nomadCert, nomadKey, err := ca.Issue("rondo-nomad", "rondo-agent", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	for src, dst := range map[string]string{nomadCert: "nomad-client.pem", nomadKey: "nomad-client-key.pem"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfgDir, dst), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := cluster.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	bind := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	leaseAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	const (
		caLine     = "  ca_file = %q\n"
		certLines  = "  cert_file = \"nomad-client.pem\"\n  key_file  = \"nomad-client-key.pem\"\n"
		serverName = "  tls_server_name = %q\n"
	)
	writeCfg := func(name string, nomadLines ...string) string {
		p := filepath.Join(cfgDir, name)
		cfg := fmt.Sprintf(tlsConfig, bind, leaseAddr, s.c.Address, strings.Join(nomadLines, ""), agentCert, agentKey, leaseAddr, s.ckpt)
		if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The agent's environment names no Nomad address, CA, client
	// certificate or server name: the config does.
	env := os.Environ()
	for _, k := range []string{"NOMAD_ADDR", "NOMAD_CACERT", "NOMAD_CLIENT_CERT", "NOMAD_CLIENT_KEY", "NOMAD_TLS_SERVER_NAME", "NOMAD_SKIP_VERIFY", "NOMAD_TOKEN"} {
		env = cluster.WithoutEnv(env, k)
	}
	env = append(env, "NOMAD_TOKEN="+s.token)
	rondo := filepath.Join(s.bin, "rondo")

	// failsWith runs the agent on cfg and wants it to exit non-zero within
	// 30 s with a last line "rondo agent: ..." containing want.
	failsWith := func(t *testing.T, cfg, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		cmd := exec.CommandContext(ctx, rondo, "agent", "-config", cfg, "-nomad-timeout", "5s")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		var last string
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) > 0 {
			last = lines[len(lines)-1]
		}
		if err == nil || ctx.Err() != nil || !strings.HasPrefix(last, "rondo agent: ") || !strings.Contains(last, want) {
			t.Fatalf("agent: %v, want a non-zero exit with %q in its last line:\n%s", err, want, out)
		}
		t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), last)
	}
	t.Run("no CA: a one-line certificate error", func(t *testing.T) {
		failsWith(t, writeCfg("noca.hcl", certLines), "certificate signed by unknown authority")
	})
	// Nomad (verify_https_client) refuses the handshake without a client
	// certificate: TLS 1.3's certificate_required alert.
	t.Run("no client certificate: a one-line certificate error", func(t *testing.T) {
		failsWith(t, writeCfg("nocert.hcl", fmt.Sprintf(caLine, nt.CAFile)), "tls: certificate required")
	})
	// Nomad's certificate names server.global.nomad, localhost and
	// 127.0.0.1: another tls_server_name fails the verification, so the
	// setting reaches the agent's Nomad client.
	t.Run("wrong tls_server_name: a one-line certificate error", func(t *testing.T) {
		failsWith(t, writeCfg("badname.hcl", fmt.Sprintf(caLine, nt.CAFile), certLines, fmt.Sprintf(serverName, "nomad.invalid")),
			"not nomad.invalid")
	})

	cfg := writeCfg("tls.hcl", fmt.Sprintf(caLine, nt.CAFile), certLines, fmt.Sprintf(serverName, "server.global.nomad"))
	a := &agentProc{log: filepath.Join(t.TempDir(), "agent.log"), done: make(chan struct{}), addr: bind}
	f, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	// Only -ack-timeout from the flags: listeners, log format, round and
	// the leader lock's TTL come from the config's blocks.
	a.cmd = exec.Command(rondo, "agent", "-config", cfg, "-ack-timeout", "15s")
	a.cmd.Env = env
	a.cmd.Stdout, a.cmd.Stderr = f, f
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.cmd.Wait(); f.Close(); close(a.done) }()
	t.Cleanup(func() {
		a.stop()
		if t.Failed() {
			t.Logf("agent log:\n%s", tail(a.logs(), 6000))
		}
	})

	// The job names neither the lease API nor a checkpoint dir (the
	// agent's tasks {} block adds them); it is given the CA in its env.
	spec := fmt.Sprintf(`job "tls-train" {
  type = "batch"
  meta = {
    "rondo.vc"    = "research"
    "rondo.model" = "LM (batch size 20)"
    "rondo.steps" = "400"
  }
  group "train" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "train" {
      driver       = "raw_exec"
      kill_timeout = "10s"
      config {
        command = %q
      }
      env {
        RONDO_GPU_TYPE = "${meta.rondo_gpu_type}"
        RONDO_CACERT   = %q
      }
      resources {
        cpu    = 50
        memory = 32
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
`, filepath.Join(s.bin, "rondo-trainer"), nt.CAFile)
	jobFile := filepath.Join(t.TempDir(), "tls-train.nomad.hcl")
	if err := os.WriteFile(jobFile, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	// The nomad binary over https with NOMAD_CACERT, NOMAD_CLIENT_CERT and
	// NOMAD_CLIENT_KEY.
	run := exec.Command(s.nomad, "job", "run", "-detach", jobFile)
	run.Env = s.c.CLIEnv(os.Environ())
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("nomad job run: %v\n%s", err, out)
	}

	// A report through the https lease API lands in the durable state
	// (only lease reports write Progress).
	store := state.NewStore(s.c.API, state.Options{})
	s.waitFor(60*time.Second, "progress reported through the https lease API", func() (bool, error) {
		select {
		case <-a.done:
			return false, fmt.Errorf("agent exited:\n%s", tail(a.logs(), 3000))
		default:
		}
		st, err := store.Load(context.Background())
		if err != nil {
			return false, nil // not written yet
		}
		return st.Progress["tls-train"] > 0, nil
	})

	view := func(args ...string) (string, error) {
		cmd := exec.Command(rondo, args...)
		cmd.Env = cluster.WithoutEnv(cluster.WithoutEnv(env, "RONDO_ADDR"), "RONDO_CACERT")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Run("job status over https", func(t *testing.T) {
		out, err := view("job", "status", "tls-train", "-rondo-addr", "https://"+bind, "-rondo-ca-cert", ca.CertFile, "-json")
		if err != nil {
			t.Fatalf("rondo job status: %v\n%s", err, out)
		}
		var j agent.JobStatus
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("rondo job status -json: %v\n%s", err, out)
		}
		if j.ID != "tls-train" || j.TotalSteps != 400 || (j.RemainingSteps >= 400 && j.State != "done") {
			t.Fatalf("job status shows no progress: %+v", j)
		}
	})
	t.Run("view without the CA: one line naming the certificate", func(t *testing.T) {
		out, err := view("status", "-rondo-addr", "https://"+bind)
		out = strings.TrimSpace(out)
		if err == nil || strings.Contains(out, "\n") || !strings.Contains(out, "certificate signed by unknown authority") ||
			!strings.Contains(out, "-rondo-ca-cert") {
			t.Fatalf("rondo status without the CA: %v\n%s", err, out)
		}
	})
	t.Run("log_json", func(t *testing.T) {
		first, _, _ := strings.Cut(a.logs(), "\n")
		var line map[string]any
		if err := json.Unmarshal([]byte(first), &line); err != nil || line["@message"] == nil {
			t.Fatalf("agent { log_json = true }: first log line %q is no JSON log line (%v)", first, err)
		}
		if want := `"addr":"https://` + leaseAddr + `"`; !strings.Contains(a.logs(), want) {
			t.Fatalf("no lease API line with %s in the log", want)
		}
	})
}
