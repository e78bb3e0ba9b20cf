#!/usr/bin/env bash
# Times one `rondo simulate` point with several binaries side by side: N
# rounds, each running every binary once in turn (so a drift in the machine's
# speed falls on all of them alike), under /usr/bin/time; prints each run and,
# per binary, the median and minimum wall and user seconds. Outputs are
# compared with the first binary's, timing fields aside (SAME or DIFFERS).
#
#   scripts/alternate.sh N BIN... [-- SIMULATE_ARGS...]
#
# SIMULATE_ARGS default to the Figure 8 point of issue #20: --policy
# max_min_fairness_perf --rate 5.6 --seed 0. --json is always added.
set -euo pipefail
n=${1:?usage: scripts/alternate.sh N BIN... [-- SIMULATE_ARGS...]}
shift
bins=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do bins+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--policy max_min_fairness_perf --rate 5.6 --seed 0)
[ ${#bins[@]} -gt 0 ] || { echo "alternate: no binary" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strip='import json,sys
d=json.load(sys.stdin)
for k in ("wall_s","solve_ms_p50","solve_ms_max"): d.pop(k,None)
print(json.dumps(d,sort_keys=True))'
for i in $(seq "$n"); do
  for b in "${bins[@]}"; do
    /usr/bin/time -f "%e %U" -o "$tmp/t" "$b" simulate "${args[@]}" --json > "$tmp/out"
    read -r wall user < "$tmp/t"
    echo "$b $wall $user" | tee -a "$tmp/times"
    python3 -c "$strip" < "$tmp/out" > "$tmp/out.$(echo "$b" | md5sum | cut -c1-8)"
  done
done
first=$(echo "${bins[0]}" | md5sum | cut -c1-8)
python3 - "$tmp" "$first" "${bins[@]}" <<'P'
import sys, statistics, hashlib
tmp, first, bins = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [l.split() for l in open(tmp + "/times")]
ref = open(f"{tmp}/out.{first}").read()
for b in bins:
    w = [float(r[1]) for r in rows if r[0] == b]
    u = [float(r[2]) for r in rows if r[0] == b]
    h = hashlib.md5((b + "\n").encode()).hexdigest()[:8]
    same = "SAME" if open(f"{tmp}/out.{h}").read() == ref else "DIFFERS"
    print(f"{b}: n={len(w)} wall median {statistics.median(w):.2f} min {min(w):.2f}, "
          f"user median {statistics.median(u):.2f} min {min(u):.2f}, output {same}")
P
