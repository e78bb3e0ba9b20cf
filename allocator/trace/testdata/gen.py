#!/usr/bin/env python3
"""Writes gavel_traces.json: synthetic traces made with CPython's random
following Gavel's recipe (draw order as in the reference's generate_job and
its simulator's arrival process), for trace_test.go to compare against.
Run from this directory:
  python3 gen.py ../../throughputs/data/simulation_throughputs.json > gavel_traces.json"""
import ast
import json
import math
import random
import sys

MODELS = []
for fmt, dist, batches in [("ResNet-18 (batch size %d)", True, [16, 32, 64, 128, 256]),
                           ("ResNet-50 (batch size %d)", True, [16, 32, 64, 128]),
                           ("Transformer (batch size %d)", True, [16, 32, 64, 128, 256]),
                           ("LM (batch size %d)", True, [5, 10, 20, 40, 80]),
                           ("Recommendation (batch size %d)", False, [512, 1024, 2048, 4096, 8192])]:
    MODELS += [(fmt % b, dist) for b in batches]
MODELS += [("A3C", False), ("CycleGAN", False)]

tput = json.load(open(sys.argv[1]))
v100 = {ast.literal_eval(k): v["null"] for k, v in tput["v100"].items()}


def trace(seed, rate, n, multi_gpu, multi_priority):
    rng = random.Random(seed + 2)
    arr = random.Random(seed + 3)
    t = 0.0
    jobs = []
    for i in range(n):
        r = rng.uniform(0, 1)
        sf = 1
        if 0.7 <= r <= 0.8:
            sf = 2
        elif 0.8 <= r <= 0.95:
            sf = 4
        elif 0.95 <= r:
            sf = 8
        if rng.random() >= 0.8:
            run_time = 60 * (10 ** rng.uniform(3, 4))
        else:
            run_time = 60 * (10 ** rng.uniform(1.5, 3))
        if not multi_gpu:
            sf = 1
        while True:
            model, dist = rng.choice(MODELS)
            if sf == 1 or dist:
                break
        prio = 1.0
        if multi_priority:
            r = rng.uniform(0, 1)
            if 0.0 <= r <= 0.2:
                prio = 5.0
        jobs.append({"id": i, "model": model, "scale_factor": sf,
                     "duration_s": repr(run_time),
                     "total_steps": repr(run_time * v100[(model, sf)]),
                     "priority": prio, "arrival_s": repr(t)})
        if rate > 0:
            lam = 3600.0 / rate
            t = -math.log(1.0 - arr.random()) / (1.0 / lam) + t
    return jobs


cases = []
for seed, rate, n, mg, mp in [(0, 4.0, 400, False, False), (1, 2.4, 400, True, False),
                              (2, 1.5, 400, True, True), (0, 0.0, 50, True, False)]:
    cases.append({"seed": seed, "rate": rate, "multi_gpu": mg, "multi_priority": mp,
                  "jobs": trace(seed, rate, n, mg, mp)})
json.dump({"python": sys.version.split()[0], "cases": cases}, sys.stdout)
sys.stdout.write("\n")
