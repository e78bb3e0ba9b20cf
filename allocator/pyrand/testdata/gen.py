#!/usr/bin/env python3
"""Writes cpython.json: outputs of CPython's random.Random that pyrand must
reproduce. Run from this directory: python3 gen.py > cpython.json"""
import json
import random
import sys

cases = []
for seed in [0, 1, 2, 3, 5, 42, 12345, 2**32 - 1, 2**32, 2**40 + 7, -9]:
    r = random.Random(seed)
    c = {"seed": seed}
    c["uint32"] = [r.getrandbits(32) for _ in range(5)]
    c["random"] = [repr(r.random()) for _ in range(20)]
    c["getrandbits"] = [[k, r.getrandbits(k)] for k in (1, 5, 13, 31, 33, 53, 64)]
    c["randbelow"] = [[n, r.randrange(n)] for n in (1, 2, 3, 7, 26, 100, 1000003, 2**33 + 1)]
    c["choice26"] = [r.choice(range(26)) for _ in range(50)]
    seq = list(range(10))
    r.shuffle(seq)
    c["shuffle10"] = seq
    c["uniform"] = [repr(r.uniform(1.5, 3)) for _ in range(5)]
    # Far into the stream (several state refills).
    for _ in range(5000):
        r.random()
    c["after5000"] = repr(r.random())
    cases.append(c)
json.dump({"python": sys.version.split()[0], "cases": cases}, sys.stdout, indent=1)
sys.stdout.write("\n")
