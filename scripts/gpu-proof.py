#!/usr/bin/env python3
"""The device plugin's proof on a real GPU (docs/device-plugin.md, "On a real
GPU"). Run on a GPU host as root from the repository root, with stripped
binaries built elsewhere (the GPU host has no Go):

  scripts/gpu-proof.py BINDIR OUTDIR [FAKE.hcl]

BINDIR holds nomad-device-rondo and nomad (either may be xz-compressed as
<name>.xz). Steps, each recorded under OUTDIR (proof.json sums them up):

 1. nvidia-smi facts; `nomad-device-rondo fingerprint` without and with an
    mps-50 profile (fingerprint.json, fingerprint-mps.json);
 2. a real Nomad agent (server + client) loading the plugin; the node's
    device groups and attributes as Nomad stores them (node.json);
 3. a job asking for `nvidia/gpu` running scripts/gpu_probe.py (PyTorch) on
    the GPU Nomad gave it: the allocation's device id against the uuid CUDA
    reports;
 4. one MPS control daemon on the GPU, the plugin marking `<uuid>.mps`, then
    one `nvidia/gpu-share` (mps-50) job alone and two at once, each checking
    its SM count, pinned-memory limit and matmul throughput;
 5. the Xid event path: the fingerprint's xid_events and the plugin's log line.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ADDR = "http://127.0.0.1:4646"
PIPE, LOGD = "/tmp/nvidia-mps", "/tmp/nvidia-mps-log"
PLUGIN_CFG = f'''fingerprint_period = "2s"
mps_pipe_dir = "{PIPE}"
mps_log_dir = "{LOGD}"
mps_profile {{
  name   = "mps-50"
  shares = 2
}}
'''
summary = {}
TORCH_PATH = ""  # where this python finds torch: raw_exec tasks get a bare env


def note(key, val):
    summary[key] = val
    print(f"== {key}: {json.dumps(val)[:600]}", flush=True)


def sh(cmd, **kw):
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)
    return p.returncode, p.stdout + p.stderr


def unpack(bindir, name, dest):
    src = os.path.join(bindir, name)
    if os.path.exists(src + ".xz"):
        sh(f"xz -dc {src}.xz > {dest}")
    else:
        shutil.copy(src, dest)
    os.chmod(dest, 0o755)


def api(path, data=None):
    req = urllib.request.Request(ADDR + path, data=json.dumps(data).encode() if data is not None else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        return json.loads(body) if body[:1] in (b"{", b"[") else body.decode()


def wait(pred, timeout, step=1.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = pred()
            if v:
                return v
        except Exception:
            pass
        time.sleep(step)
    return None


def job_hcl(jid, device, args):
    return f'''job "{jid}" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts  = 0
      unlimited = false
    }}
    task "probe" {{
      driver = "raw_exec"
      config {{
        command = "{sys.executable}"
        args    = {json.dumps([os.path.join(ROOT, "scripts/gpu_probe.py")] + args)}
      }}
      env {{
        PYTHONPATH = "{TORCH_PATH}"
      }}
      resources {{
        cpu    = 500
        memory = 4096
        device "{device}" {{
          count = 1
        }}
      }}
    }}
  }}
}}
'''


def run_jobs(nomad, out, specs, timeout=240):
    """Registers every (id, device, args) at once and waits for all."""
    for jid, device, args in specs:
        path = os.path.join(out, jid + ".nomad.hcl")
        with open(path, "w") as f:
            f.write(job_hcl(jid, device, args))
        rc, txt = sh(f"{nomad} job run -detach {path}", env=dict(os.environ, NOMAD_ADDR=ADDR))
        print(txt, flush=True)
    results = {}
    for jid, device, _ in specs:
        def done():
            allocs = api(f"/v1/job/{jid}/allocations")
            for a in allocs:
                if a["ClientStatus"] in ("complete", "failed", "lost"):
                    return a
            return None
        a = wait(done, timeout)
        if a is None:
            _, st = sh(f"{nomad} job status {jid}", env=dict(os.environ, NOMAD_ADDR=ADDR))
            results[jid] = {"error": "did not finish", "status": st[-2000:]}
            continue
        full = api(f"/v1/allocation/{a['ID']}")
        devs = []
        for t in (full.get("AllocatedResources") or {}).get("Tasks", {}).values():
            for d in t.get("Devices") or []:
                devs.append({"device": f"{d['Vendor']}/{d['Type']}/{d['Name']}", "ids": d["DeviceIDs"]})
        r = {"status": a["ClientStatus"], "nomad_devices": devs}
        for stream in ("stdout", "stderr"):
            try:
                r[stream] = api(f"/v1/client/fs/cat/{a['ID']}?path=alloc/logs/probe.{stream}.0")
            except Exception as e:
                r[stream] = f"<{e}>"
        if isinstance(r["stdout"], dict):  # api() already decoded the one JSON line
            r["probe"] = r["stdout"]
        else:
            try:
                r["probe"] = json.loads(r["stdout"].strip().splitlines()[-1])
            except Exception:
                pass
        results[jid] = r
        with open(os.path.join(out, jid + ".json"), "w") as f:
            json.dump(r, f, indent=1)
    return results


def node_devices():
    nodes = api("/v1/nodes")
    if not nodes:
        return None
    n = api(f"/v1/node/{nodes[0]['ID']}")
    devs = (n.get("NodeResources") or {}).get("Devices") or []
    return n if devs else None


def main():
    global PLUGIN_CFG, TORCH_PATH
    bindir, final = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    out = os.path.join(final, "files")  # archived at the end: the runner returns few files
    if len(sys.argv) > 3:  # a dry run of the plumbing: the plugin's fake backend
        PLUGIN_CFG += open(sys.argv[3]).read()
    os.makedirs(out, exist_ok=True)
    work = "/tmp/rondo-gpu-proof"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work + "/plugins")
    plugin = work + "/plugins/nomad-device-rondo"
    nomad = work + "/nomad"
    unpack(bindir, "nomad-device-rondo", plugin)
    unpack(bindir, "nomad", nomad)

    rc, txt = sh(f"{sys.executable} -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))'")
    TORCH_PATH = txt.strip().splitlines()[-1] if rc == 0 else ""
    note("python", {"exe": sys.executable, "torch_path": TORCH_PATH})

    # 1. Facts and the plugin's own fingerprint.
    for name, cmd in (("nvidia-smi-L", "nvidia-smi -L"), ("nvidia-smi-topo", "nvidia-smi topo -m"),
                      ("nvidia-smi-q", "nvidia-smi -q"), ("nvidia-smi", "nvidia-smi")):
        _, txt = sh(cmd)
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write(txt)
    note("nvidia-smi -L", sh("nvidia-smi -L")[1].strip())
    with open(work + "/mps.hcl", "w") as f:
        f.write(PLUGIN_CFG)
    for name, args in (("fingerprint", f"-config {work}/mps.hcl" if len(sys.argv) > 3 else ""),
                       ("fingerprint-mps", f"-config {work}/mps.hcl")):
        rc, txt = sh(f"{plugin} fingerprint {args}")
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(txt)
        note(name + " rc", rc)
    rc, txt = sh(f"{plugin} fingerprint -require-gpu > /dev/null")
    note("gpu-check (fingerprint -require-gpu)", {"rc": rc, "stderr": txt.strip()})
    fp = json.load(open(os.path.join(out, "fingerprint.json")))
    uuid = fp["gpus"][0]["uuid"]
    with open(work + "/ignore.hcl", "w") as f:
        f.write(f'ignored_gpu_ids = ["{uuid}"]\n')
    rc, txt = sh(f"{plugin} fingerprint -require-gpu -config {work}/ignore.hcl > /dev/null")
    note("gpu-check, the GPU ignored", {"rc": rc, "stderr": txt.strip()})
    note("xid_events", fp.get("xid_events"))

    # 2. A real Nomad agent loading the plugin.
    with open(work + "/agent.hcl", "w") as f:
        f.write(f'''data_dir = "{work}/data"
bind_addr = "127.0.0.1"
log_level = "DEBUG"
plugin_dir = "{work}/plugins"
disable_update_check = true
advertise {{
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}}
server {{
  enabled = true
  bootstrap_expect = 1
}}
client {{
  enabled = true
  # GPU hosts in containers may lack /sbin/ip, which the default-route
  # lookup runs; loopback is all this single-node proof needs.
  network_interface = "lo"
  options {{
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }}
}}
plugin "raw_exec" {{
  config {{
    enabled = true
  }}
}}
plugin "nomad-device-rondo" {{
  config {{
{PLUGIN_CFG}
  }}
}}
''')
    log = open(os.path.join(out, "nomad-agent.log"), "w")
    agent = subprocess.Popen([nomad, "agent", "-config", work + "/agent.hcl"], stdout=log, stderr=subprocess.STDOUT)
    mps_started = False
    try:
        n = wait(node_devices, 90)
        if n is None:
            note("node", "no node with devices after 90s")
            return 1
        with open(os.path.join(out, "node.json"), "w") as f:
            json.dump(n["NodeResources"]["Devices"], f, indent=1)
        note("node devices", [f"{d['Vendor']}/{d['Type']}/{d['Name']}: {[i['ID'] for i in d['Instances']]}"
                              for d in n["NodeResources"]["Devices"]])

        # 3. An exclusive GPU running PyTorch.
        r = run_jobs(nomad, out, [("gpu-exclusive", "nvidia/gpu", ["10"])])["gpu-exclusive"]
        note("exclusive", {k: r.get(k) for k in ("status", "nomad_devices", "probe")})
        if r.get("status") != "complete":
            note("exclusive stderr", r.get("stderr", "")[-1500:])

        # Device stats as the Nomad client reports them (official names beside Rondo's).
        try:
            st = api("/v1/client/stats")
            ds = st.get("DeviceStats") or []
            with open(os.path.join(out, "client-device-stats.json"), "w") as f:
                json.dump(ds, f, indent=1)
            names = sorted({k for g in ds for i in (g.get("InstanceStats") or {}).values()
                            for k in ((i.get("Stats") or {}).get("Attributes") or {})})
            note("client device stat names", names)
        except Exception as e:
            note("client device stats", f"<{e}>")

        # 4. MPS: one control daemon for the GPU, then shares.
        os.makedirs(f"{PIPE}/{uuid}", exist_ok=True)
        os.makedirs(f"{LOGD}/{uuid}", exist_ok=True)
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=uuid, CUDA_MPS_PIPE_DIRECTORY=f"{PIPE}/{uuid}",
                   CUDA_MPS_LOG_DIRECTORY=f"{LOGD}/{uuid}")
        rc, txt = sh("nvidia-cuda-mps-control -d", env=env)
        mps_started = rc == 0
        note("mps daemon", {"rc": rc, "out": txt.strip()})

        def mps_attr():
            n = node_devices()
            for d in n["NodeResources"]["Devices"]:
                a = (d.get("Attributes") or {}).get(uuid + ".mps")
                if a and a.get("Bool"):
                    return True
            return None
        note("plugin sees mps", bool(wait(mps_attr, 30)))
        r = run_jobs(nomad, out, [("share-solo", "nvidia/gpu-share", ["10", "--mem-test"])])["share-solo"]
        note("share solo", {k: r.get(k) for k in ("status", "nomad_devices", "probe")})
        if r.get("status") != "complete":
            note("share solo stderr", r.get("stderr", "")[-1500:])

        snap = {}

        def snapshot():
            time.sleep(20)
            snap["nvidia-smi"] = sh("nvidia-smi")[1]
        th = threading.Thread(target=snapshot)
        th.start()
        rs = run_jobs(nomad, out, [("share-a", "nvidia/gpu-share", ["20"]), ("share-b", "nvidia/gpu-share", ["20"])])
        th.join()
        with open(os.path.join(out, "nvidia-smi-during-pair.txt"), "w") as f:
            f.write(snap.get("nvidia-smi", ""))
        for jid, r in rs.items():
            note(jid, {k: r.get(k) for k in ("status", "nomad_devices", "probe")})
        pa, pb = rs["share-a"].get("probe"), rs["share-b"].get("probe")
        if pa and pb:
            note("pair overlap s", round(min(pa["end"], pb["end"]) - max(pa["start"], pb["start"]), 1))
    finally:
        if mps_started:
            env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=f"{PIPE}/{uuid}")
            subprocess.run("echo quit | nvidia-cuda-mps-control", shell=True, env=env)
        agent.terminate()
        try:
            agent.wait(20)
        except subprocess.TimeoutExpired:
            agent.kill()
        log.close()
        # 5. The plugin's log line for the Xid path.
        lines = [l.strip() for l in open(os.path.join(out, "nomad-agent.log"), errors="replace")
                 if "nomad-device-rondo" in l and ("Xid" in l or "NVML" in l or "events" in l)]
        note("plugin xid log", lines[:5])
        with open(os.path.join(final, "proof.json"), "w") as f:
            json.dump(summary, f, indent=1)
        sh(f"tar czf {final}/files.tgz -C {final} files && rm -rf {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
