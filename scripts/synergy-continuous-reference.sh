#!/usr/bin/env bash
# Synergy's reference simulator (github msr-fiddle/synergy, simulator/) on
# its own synthetic continuous workload, single-GPU jobs, seed 42 (its
# benchmark()'s), for Rondo's --synergy-compat runs of the same trace to
# match (docs/synergy/continuous.md):
#   - 32 GPUs (configs/deployment.ini: 4 servers of 8 GPUs, 24 cores, 500 GB),
#     2 jobs/h, jobs 300-399: FIFO, LAS, SRTF, FTF x proportional ('+fair'),
#     Tune ('+tune'), Greedy (no suffix) = 12 runs, about a minute each;
#   - 128 GPUs (configs/default_cluster.ini: the paper's 16 servers), jobs
#     4000-4999, FIFO proportional and Tune at 5, 7 and 9 jobs/h = 6 runs,
#     5 to 10 minutes each here.
#
#   scripts/synergy-continuous-reference.sh SYNERGY_CHECKOUT [OUT.json]
#
# OUT defaults to docs/synergy/continuous-reference.json. Each run's JSON
# line is kept in $SYNERGY_RUNS (default /tmp/synergy-continuous-runs) and
# not run again when there: delete it to rerun. POINTS=small or large runs
# one group only; POINTS=splits runs, instead, FIFO proportional and Tune at
# 9 jobs/h on the 128 GPUs for each class split in SPLITS (default
# "33/33/33 50/0/50", the paper's other splits; use its own OUT and
# SYNERGY_RUNS, as the output lists every run in SYNERGY_RUNS). Needs what
# scripts/synergy-reference.sh needs (a python3 with numpy and pandas;
# stand-ins from scripts/synergy-stubs.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:?usage: scripts/synergy-continuous-reference.sh SYNERGY_CHECKOUT [OUT.json]}
out=${2:-$here/docs/synergy/continuous-reference.json}
name=synergy-continuous-reference
. "$here/scripts/synergy-env.sh"
runs=${SYNERGY_RUNS:-/tmp/synergy-continuous-runs}
mkdir -p "$runs"
points=${POINTS:-all}

# one GPUS RATE WINDOW POLICY PLACEMENT CONFIG [SPLIT (default 20/70/10)]
one() {
  local gpus=$1 rate=$2 window=$3 policy=$4 placement=$5 config=$6 split=${7:-20/70/10} s
  case $placement in proportional) s=$policy+fair ;; tune) s=$policy+tune ;; greedy) s=$policy ;; esac
  local tag=
  [ "$split" != 20/70/10 ] && tag="_s${split//\//-}"
  local f="$runs/g${gpus}_r${rate}_w${window/:/-}_${policy}_${placement}${tag}.json"
  [ -s "$f" ] && return 0
  local args=(--rate "$rate" --single-gpu --window "$window" --config "$config" --scheduler "$s")
  [ -n "$tag" ] && args+=(--split "${split//\//,}")
  local t0 t1 res
  t0=$(date +%s.%N)
  res=$(cd "$here" && env PYTHONPATH="$stubs" "$py" scripts/synergy-reference.py "$sim" "${args[@]}")
  t1=$(date +%s.%N)
  "$py" - "$gpus" "$rate" "$window" "${policy,,}" "$placement" "$s" "PYTHONPATH=$stubs $py scripts/synergy-reference.py $sim ${args[*]}" \
    "$t0" "$t1" "$commit" "$res" "$split" > "$f.tmp" <<'EOF'
import json, sys
gpus, rate, window, policy, placement, sched, cmd, t0, t1, commit, res, split = sys.argv[1:]
r = json.loads(res)
print(json.dumps({
    "gpus": int(gpus), "rate": float(rate), "window": window, "single_gpu": True, "seed": 42,
    "split": split, "policy": policy, "placement": placement,
    "avg_jct_s": r["avg_jct_s"], "jobs": r["jobs"],
    "command": cmd, "wall_s": round(float(t1) - float(t0), 1),
    "reference_scheduler": sched, "synergy_commit": commit}))
EOF
  mv "$f.tmp" "$f"
  echo "synergy-continuous-reference: $gpus GPUs rate $rate $s: $(cat "$f")" >&2
}

if [ "$points" = all ] || [ "$points" = small ]; then
  for policy in FIFO LAS SRTF FTF; do
    for placement in proportional tune greedy; do
      one 32 2 300:400 "$policy" "$placement" configs/deployment.ini
    done
  done
fi
if [ "$points" = all ] || [ "$points" = large ]; then
  for rate in 9 7 5; do
    for placement in proportional tune; do
      one 128 "$rate" 4000:5000 FIFO "$placement" configs/default_cluster.ini
    done
  done
fi
if [ "$points" = splits ]; then
  for split in ${SPLITS:-33/33/33 50/0/50}; do
    for placement in proportional tune; do
      one 128 9 4000:5000 FIFO "$placement" configs/default_cluster.ini "$split"
    done
  done
fi
"$py" - "$runs" > "$out" <<'EOF'
import glob, json, sys
runs = [json.load(open(f)) for f in glob.glob(sys.argv[1] + "/*.json")]
order = {"fifo": 0, "las": 1, "srtf": 2, "ftf": 3}
place = {"proportional": 0, "tune": 1, "greedy": 2}
runs.sort(key=lambda r: (r["split"], r["gpus"], r["rate"], order[r["policy"]], place[r["placement"]]))
print("[")
print(",\n".join("  " + json.dumps(r) for r in runs))
print("]")
EOF
echo "synergy-continuous-reference: wrote $out" >&2
