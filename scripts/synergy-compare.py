#!/usr/bin/env python3
"""Runs `rondo simulate --synergy-compat` on Synergy's two deployment traces
(4 policies x proportional/tune/greedy, the reference's cluster) and compares
with the reference simulator's numbers (docs/synergy/reference.json, written
by scripts/synergy-reference.sh). Writes docs/synergy/compat.json and prints
a markdown table. Usage: scripts/synergy-compare.py [RONDO_BINARY]"""
import json, subprocess, sys

rondo = sys.argv[1] if len(sys.argv) > 1 else "bin/rondo"
ref = {(r["trace"], r["policy"], r["placement"]): r for r in json.load(open("docs/synergy/reference.json"))}
# Rondo's policy for each reference policy: LAS is Gavel's max_min_fairness
# (GPU-agnostic: one GPU type), SRTF shortest_job_first_perf, FTF Gavel's
# finish_time_fairness_perf.
policy = {"fifo": "fifo", "las": "max_min_fairness", "srtf": "srtf", "ftf": "ftf"}
rows = []
print("| trace | policy | placement | avg JCT (s) | reference | diff | makespan (s) | reference | diff |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for tr in ["static", "dynamic"]:
    for p in ["fifo", "las", "srtf", "ftf"]:
        for pl in ["proportional", "tune", "greedy"]:
            cmd = [rondo, "simulate", "--trace", f"allocator/synergy/data/traces/{tr}-100.csv", "--trace-format", "synergy",
                   "--cluster", "v100=32", "--gpus-per-server", "8", "--cpus-per-server", "24", "--mem-per-server", "500",
                   "--round", "300", "--policy", policy[p], "--placement", pl, "--synergy-compat", "--json"]
            d = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            r = ref[(tr, p, pl)]
            dj = 100 * (d["avg_jct_s"] / r["avg_jct_s"] - 1)
            dm = 100 * (d["makespan_s"] / r["makespan_s"] - 1)
            rows.append({"trace": tr, "policy": p, "placement": pl, "avg_jct_s": d["avg_jct_s"], "makespan_s": d["makespan_s"],
                         "ref_avg_jct_s": r["avg_jct_s"], "ref_makespan_s": r["makespan_s"], "jct_diff_pct": round(dj, 2),
                         "makespan_diff_pct": round(dm, 2), "command": " ".join(cmd[1:])})
            print(f"| {tr} | {p} | {pl} | {d['avg_jct_s']:.0f} | {r['avg_jct_s']:.0f} | {dj:+.2f}% | {d['makespan_s']:.0f} | {r['makespan_s']:.0f} | {dm:+.2f}% |")
json.dump(rows, open("docs/synergy/compat.json", "w"), indent=1)
