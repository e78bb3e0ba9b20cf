#!/usr/bin/env python3
"""Heterogeneous GPUs and CPU sensitivity together (issue #14): Gavel's
continuous traces on Gavel's 3-type cluster (36 V100 + 36 P100 + 36 K80,
360 s rounds, jobs 4000-4999 measured) in servers of 4 (or 8) GPUs with
Synergy's 3 cores and 62.5 GB per GPU; heterogeneity-aware LAS
(`las` = max_min_fairness_perf) with `--placement proportional` against
`--placement tune`, every Gavel job taking its model's Synergy profile
(allocator/synergy ForGavelModel), the profiles scaled to each GPU type's
speed (`--profiles-on-gpu scaled`, the default) or the same on every type
(`same`). Proportional does not depend on the reading (its grant is the
share: speed 1.0), so it runs once.

Writes docs/synergy/heterogeneous.csv (one row per run, with the average
JCT per model family from the run's jobs.csv) and
docs/synergy/heterogeneous.json (means over seeds), and prints markdown
tables. A run stops as not sustained, as in `rondo simulate sweep`, when
more than 2,500 jobs are active or at 4x the window's last arrival +
2,000 h (means are over the seeds every configuration finished). Each
run's row is cached in $SYNHET_CACHE (default /tmp/synergy-hetero-cache),
keyed by its command and the binary's hash, so an interrupted grid resumes.
Build first (go build -o bin/rondo ./cmd/rondo). Usage:
scripts/synergy-hetero.py [--parallel N] [--quick] [RONDO]
(--quick: one seed, two rates, to try it)."""
import csv, hashlib, json, os, subprocess, sys, tempfile
from concurrent.futures import ThreadPoolExecutor

args = sys.argv[1:]
parallel, quick = 1, False
if "--parallel" in args:
    i = args.index("--parallel"); parallel = int(args[i + 1]); del args[i:i + 2]
if "--quick" in args:
    args.remove("--quick"); quick = True
rondo = args[0] if args else "bin/rondo"

# (name, trace flags, GPUs per server, rates)
SETUPS = [
    ("single-4", [], 4, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    ("single-8", [], 8, [2.0, 4.0, 6.0]),
    ("multi-4", ["--multi-gpu"], 4, [1.0, 2.0, 2.6]),
]
SEEDS = [0, 1, 2]
CONFIGS = [("proportional", ""), ("tune", "scaled"), ("tune", "same")]
if quick:
    SETUPS, SEEDS = [("single-4", [], 4, [2.0, 5.0])], [0]
# Gavel model families, by the profile each maps to (allocator/synergy/gavel.go).
FAMILY = {"ResNet-18": "res18", "A3C": "res18", "ResNet-50": "res50", "CycleGAN": "res50",
          "Transformer": "flat", "LM": "flat", "Recommendation": "flat"}


def command(setup, flags, per, rate, seed, placement, on):
    cmd = [rondo, "simulate", "--policy", "las", "--trace", "continuous", *flags, "--rate", str(rate), "--seed", str(seed),
           "--cluster", "v100=36,p100=36,k80=36", "--gpus-per-server", str(per), "--placement", placement,
           "--max-active", "2500", "--max-time", str(4 * 5000 / rate * 3600 + 2000 * 3600), "--json"]
    if on:
        cmd += ["--profiles-on-gpu", on]
    return cmd


CACHE = os.environ.get("SYNHET_CACHE", "/tmp/synergy-hetero-cache")
BINARY = hashlib.sha256(open(rondo, "rb").read()).hexdigest()


def run(job):
    cmd = command(*job)
    key = os.path.join(CACHE, hashlib.sha256((BINARY + " ".join(cmd[1:])).encode()).hexdigest()[:20] + ".json")
    if os.path.exists(key):
        return json.load(open(key))
    row = run1(job, cmd)
    os.makedirs(CACHE, exist_ok=True)
    json.dump(row, open(key, "w"))
    return row


def run1(job, cmd):
    setup, flags, per, rate, seed, placement, on = job
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(cmd + ["--out", d], capture_output=True, text=True)
        if p.returncode not in (0, 2):
            raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr}")
        r = json.loads(p.stdout)
        fam = {}
        with open(os.path.join(d, "jobs.csv")) as f:
            for j in csv.DictReader(f):
                if j["in_window"] == "true" and j["done"] == "true":
                    fam.setdefault(FAMILY[j["model"].split(" (")[0]], []).append(float(j["jct_s"]))
    row = {"setup": setup, "gpus_per_server": per, "rate": rate, "seed": seed, "placement": placement,
           "profiles_on_gpu": on or "-", "finished": r["finished"], "jobs_done": r["jobs_done"],
           "avg_jct_s": r["avg_jct_s"], "p50_jct_s": r["p50_jct_s"], "p99_jct_s": r["p99_jct_s"],
           "makespan_s": r["makespan_s"], "utilization": r["utilization"], "preemptions": r["preemptions"],
           "retunes": r.get("retunes", 0)}
    for k in ["res18", "res50", "flat"]:
        v = fam.get(k, [])
        row[f"jobs_{k}"] = len(v)
        row[f"avg_jct_{k}_s"] = sum(v) / len(v) if v else ""
    row["command"] = " ".join(cmd[1:])
    print(f"{setup} rate {rate} seed {seed} {placement} {on or '-'}: {r['avg_jct_s'] / 3600:.2f} h"
          f"{'' if r['finished'] else ' (not sustained)'}", file=sys.stderr, flush=True)
    return row


jobs = [(s, fl, per, rate, seed, pl, on) for s, fl, per, rates in SETUPS for rate in rates for seed in SEEDS
        for pl, on in CONFIGS]
with ThreadPoolExecutor(parallel) as ex:
    rows = list(ex.map(run, jobs))

suffix = "-quick" if quick else ""
with open(f"docs/synergy/heterogeneous{suffix}.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
    w.writeheader()
    w.writerows(rows)


def mean(xs):
    return sum(xs) / len(xs) if xs else None


summary = []
for s, fl, per, rates in SETUPS:
    print(f"\n### {s}: {'multi' if fl else 'single'}-GPU trace, {per} GPUs per server\n")
    print("| rate (jobs/h) | proportional (h) | TUNE, scaled (h) | vs prop. | TUNE, same (h) | vs prop. "
          "| res18 family: prop. → scaled (h) | retunes (scaled, whole run) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for rate in rates:
        ok = {}
        for pl, on in CONFIGS:
            rs = [r for r in rows if r["setup"] == s and r["rate"] == rate and r["placement"] == pl
                  and r["profiles_on_gpu"] == (on or "-")]
            ok[(pl, on)] = rs
        # Means over the seeds every configuration finished.
        seeds = [sd for sd in SEEDS if all(any(r["seed"] == sd and r["finished"] for r in rs) for rs in ok.values())]
        m = {}
        for key, rs in ok.items():
            fin = [r for r in rs if r["seed"] in seeds]
            m[key] = {"avg_jct_s": mean([r["avg_jct_s"] for r in fin]),
                      "avg_jct_res18_s": mean([r["avg_jct_res18_s"] for r in fin if r["avg_jct_res18_s"] != ""]),
                      "avg_jct_res50_s": mean([r["avg_jct_res50_s"] for r in fin if r["avg_jct_res50_s"] != ""]),
                      "avg_jct_flat_s": mean([r["avg_jct_flat_s"] for r in fin if r["avg_jct_flat_s"] != ""]),
                      "retunes": mean([r["retunes"] for r in fin]), "preemptions": mean([r["preemptions"] for r in fin])}
        summary.append({"setup": s, "gpus_per_server": per, "rate": rate, "seeds": seeds,
                        **{f"{pl}{'_' + on if on else ''}": v for (pl, on), v in m.items()}})
        if not seeds:
            print(f"| {rate} | not sustained | | | | | | |")
            continue
        p, ts, tm = m[("proportional", "")], m[("tune", "scaled")], m[("tune", "same")]
        note = "" if len(seeds) == len(SEEDS) else f" ({len(seeds)}/{len(SEEDS)} seeds)"
        print(f"| {rate}{note} | {p['avg_jct_s'] / 3600:.2f} | {ts['avg_jct_s'] / 3600:.2f} | "
              f"{100 * (ts['avg_jct_s'] / p['avg_jct_s'] - 1):+.1f}% | {tm['avg_jct_s'] / 3600:.2f} | "
              f"{100 * (tm['avg_jct_s'] / p['avg_jct_s'] - 1):+.1f}% | "
              f"{p['avg_jct_res18_s'] / 3600:.2f} → {ts['avg_jct_res18_s'] / 3600:.2f} | {ts['retunes']:.0f} |")
json.dump(summary, open(f"docs/synergy/heterogeneous{suffix}.json", "w"), indent=1)
