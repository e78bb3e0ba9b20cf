#!/usr/bin/env python3
"""Compares a Figure 8 grid sweep's runs with the recorded grid, run by run.

    python3 scripts/grid-compare.py OUT/fig8grid/runs.jsonl [CSV]

CSV defaults to docs/figures/data/fig8grid_runs.csv. Checks avg_jct_h,
makespan_h and utilization (relative 1e-6: the CSV's printed digits) and
rounds, recomputes, preemptions, jobs_done and finished exactly; prints each
difference, the count, and the run-seconds (wall_s) per policy.
"""
import collections, csv, json, os, sys

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
runs = sys.argv[1]
table = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "docs/figures/data/fig8grid_runs.csv")
old = {(r["policy"], float(r["rate"]), int(r["seed"])): r for r in csv.DictReader(open(table))}
diffs, n = 0, 0
walls = collections.defaultdict(float)
for line in open(runs):
    d = json.loads(line)
    res = d["result"]
    key = (d["policy"], float(d["rate"]), int(d["seed"]))
    walls[d["policy"]] += res["wall_s"]
    o = old.get(key)
    if o is None:
        print("missing", key)
        diffs += 1
        continue
    n += 1
    for f, v in (("avg_jct_h", res["avg_jct_s"] / 3600), ("makespan_h", res["makespan_s"] / 3600),
                 ("utilization", res["utilization"])):
        if abs(v - float(o[f])) > 1e-6 * max(1, abs(float(o[f]))):
            print("differs", key, f, o[f], v)
            diffs += 1
    for f in ("rounds", "recomputes", "preemptions", "jobs_done"):
        if int(o[f]) != int(res[f]):
            print("differs", key, f, o[f], res[f])
            diffs += 1
    if (o["finished"] == "true") != res["finished"]:
        print("differs", key, "finished", o["finished"], res["finished"])
        diffs += 1
print(f"compared {n} runs, {diffs} differences")
print("run-seconds:", {p: round(w) for p, w in sorted(walls.items())}, "total", round(sum(walls.values())))
