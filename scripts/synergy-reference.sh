#!/usr/bin/env bash
# Reference numbers from Synergy's own simulator (github msr-fiddle/synergy,
# simulator/), for Rondo's Synergy implementation to match: the two 100-job
# deployment traces x policies FIFO, LAS, SRTF, FTF x placements proportional
# ('+fair'), Synergy-Tune ('+tune'), Synergy-Greedy (no suffix) = 24 runs.
#
#   scripts/synergy-reference.sh SYNERGY_CHECKOUT [OUTDIR]
#
# SYNERGY_CHECKOUT: a checkout of msr-fiddle/synergy (the repository root or
# its simulator/ folder). Writes OUTDIR/reference.json (default docs/synergy)
# and OUTDIR/reference-jobs.csv (every job's arrival, finish and JCT per run).
# Needs a python3 with numpy and pandas (Debian: apt-get install -y
# python3-numpy python3-pandas); PYTHON=... picks one. The modules the
# simulator imports only for deployment (grpc and its generated rpc stubs,
# cvxpy, numa, psutil, google.protobuf, matplotlib) are replaced by empty
# stand-ins written to $SYNERGY_STUBS (default /tmp/synergy-stubs).
# The commit recorded is `git rev-parse HEAD` of the checkout, else
# $SYNERGY_COMMIT. Semantics of the runs: docs/synergy/reference-notes.md.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:?usage: scripts/synergy-reference.sh SYNERGY_CHECKOUT [OUTDIR]}
out=${2:-$here/docs/synergy}
name=synergy-reference
. "$here/scripts/synergy-env.sh"
for f in deploy_trace/static_100job_6_3_1100.0 deploy_trace/dynamic/srtf.log; do
  [ -e "$sim/$f" ] || { echo "synergy-reference: $sim/$f missing (not a synergy checkout?)" >&2; exit 1; }
done

mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: > "$tmp/runs.jsonl"
echo "trace,policy,placement,job_id,arrival_s,finish_s,jct_s" > "$tmp/jobs.csv"
cd "$here"
for trace in static dynamic; do
  if [ "$trace" = static ]; then
    targs="--trace deploy_trace/static_100job_6_3_1100.0 --static --config configs/static_trace.ini"
  else
    targs="--trace deploy_trace/dynamic/srtf.log --config configs/deployment.ini"
  fi
  for policy in FIFO LAS SRTF FTF; do
    for placement in proportional tune greedy; do
      case $placement in proportional) s=$policy+fair ;; tune) s=$policy+tune ;; greedy) s=$policy ;; esac
      cmd="PYTHONPATH=$stubs $py scripts/synergy-reference.py $sim $targs --scheduler $s"
      t0=$(date +%s.%N)
      res=$(env PYTHONPATH="$stubs" "$py" scripts/synergy-reference.py "$sim" $targs --scheduler "$s" --jobs-csv "$tmp/one.csv")
      t1=$(date +%s.%N)
      sed "s/^/$trace,${policy,,},$placement,/" "$tmp/one.csv" >> "$tmp/jobs.csv"; rm -f "$tmp/one.csv"
      "$py" - "$trace" "${policy,,}" "$placement" "$s" "$cmd" "$t0" "$t1" "$commit" "$res" >> "$tmp/runs.jsonl" <<'EOF'
import json, sys
trace, policy, placement, sched, cmd, t0, t1, commit, res = sys.argv[1:]
r = json.loads(res)
print(json.dumps({
    "trace": trace, "policy": policy, "placement": placement,
    "avg_jct_s": r["avg_jct_s"], "makespan_s": r["makespan_s"], "jobs": r["jobs"],
    "command": cmd, "wall_s": round(float(t1) - float(t0), 3),
    "reference_scheduler": sched, "unfinished": r["unfinished"],
    "synergy_commit": commit}))
EOF
      echo "synergy-reference: $trace $s: $res" >&2
    done
  done
done
"$py" - "$tmp/runs.jsonl" > "$out/reference.json" <<'EOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("[\n" + ",\n".join("  " + json.dumps(r) for r in runs) + "\n]")
EOF
cp "$tmp/jobs.csv" "$out/reference-jobs.csv"
echo "synergy-reference: wrote $out/reference.json and $out/reference-jobs.csv (synergy $commit)" >&2
