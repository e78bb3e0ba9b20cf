#!/usr/bin/env bash
# Synergy's continuous experiment (OSDI '22; issue #14) in Rondo's simulator:
# 128 V100s in 16 servers of 8 with 24 cores and 500 GB each, 300 s rounds,
# Synergy's synthetic workload (image/language/speech 20/70/10, Gavel-like
# durations, Poisson arrivals, single-GPU jobs as the paper's, seed 42 as the
# reference's), jobs 4000-4999 measured; average JCT of proportional, TUNE
# and GREEDY placement under FIFO, LAS (max_min_fairness), SRTF and FTF over
# a range of rates, in Rondo's own model and with --synergy-compat (the
# reference's). One `rondo simulate sweep` per policy and model, each in
# OUTDIR/<policy>-<model>/ (runs.csv, summary.csv, results.json, runs.jsonl,
# jct_vs_rate.svg, jct_cdf.svg; docs/ keeps the CSVs and SVGs only), then
# OUTDIR/avg_jct.csv and avg_jct.md (the
# table of docs/synergy/continuous.md). Then (EXTRAS=1, the default) three
# smaller sweeps, for each of MODELS: FIFO at 9 jobs/h over seeds 42 and 1-4 (seeds-fifo-<model>),
# FIFO with the reference generator's multi-GPU jobs at 1-5 jobs/h
# (multigpu-fifo-<model>), and OPT (Rondo's model): FIFO, LAS, SRTF, FTF on the
# paper's 128 GPUs at 2, 4, 6, 8, 9 jobs/h (opt-128gpu-rondo) and on 32 GPUs
# (4 servers), jobs 300-399, 1.5 and 2 jobs/h (opt-32gpu-rondo).
#
#   scripts/synergy-continuous.sh [OUTDIR]     (default docs/synergy/continuous)
#
# Environment: RATES (default 2,3,4,5,6,7,8,9,10), POLICIES (default "fifo
# max_min_fairness srtf ftf"), MODELS (default "rondo compat"), SPLITS
# (default 20/70/10: image/language/speech class splits, --class-split; the
# paper also runs 33/33/33 and 50/0/50. A split other than 20/70/10 goes to
# OUTDIR/<policy>-<model>-<I>-<L>-<S>/ and its table to avg_jct-<I>-<L>-<S>.csv
# and .md; only the splits in SPLITS get a table, so e.g.
#   SPLITS="33/33/33 50/0/50" POLICIES=fifo MODELS=compat EXTRAS=0 PARALLEL=1 \
#     scripts/synergy-continuous.sh
# leaves avg_jct.csv and .md as they are), PLACEMENTS
# (default "proportional tune greedy"; opt solves an integer program per
# server and round, minutes per point at this size: the extras run it for
# FIFO and LAS; docs/synergy/continuous.md), SEEDS (42),
# PARALLEL (2), MAX_ACTIVE (1000: a run with more jobs waiting is not
# sustained and is drawn as a blow-up), MULTI_GPU=1 (the reference
# generator's 1/2/4/8-GPU jobs), RONDO (default bin/rondo, built if missing).
# A sweep whose runs.jsonl exists is resumed (--resume): delete it to rerun.
# About 75 minutes on 2 busy cores (OPT's four runs: 13 of them).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/docs/synergy/continuous}
rates=${RATES:-2,3,4,5,6,7,8,9,10}
policies=${POLICIES:-fifo max_min_fairness srtf ftf}
models=${MODELS:-rondo compat}
placements=${PLACEMENTS:-proportional tune greedy}
splits=${SPLITS:-20/70/10}
seeds=${SEEDS:-42}
parallel=${PARALLEL:-2}
maxActive=${MAX_ACTIVE:-1000}
rondo=${RONDO:-$here/bin/rondo}
if [ ! -x "$rondo" ]; then
  (cd "$here" && go build -o bin/rondo ./cmd/rondo)
  rondo=$here/bin/rondo
fi
multi=()
gpus=single-GPU
if [ "${MULTI_GPU:-}" = 1 ]; then multi=(--multi-gpu); gpus=multi-GPU; fi
mkdir -p "$out"
# sweep DIR TITLE [rondo simulate sweep flags]: one sweep of the paper's
# cluster and workload, resumed when DIR has a journal.
sweep() {
  local dir=$1 title=$2
  shift 2
  local resume=()
  [ -s "$dir/runs.jsonl" ] && resume=(--resume)
  echo "synergy-continuous: $dir" >&2
  "$rondo" simulate sweep --trace-format synergy --cluster v100=128 --gpus-per-server 8 \
    --cpus-per-server 24 --mem-per-server 500 --round 300 --parallel "$parallel" --out "$dir" \
    --title "$title" "${resume[@]}" "$@"
}
# splitSuffix SPLIT: "" for the default split, else -I-L-S (33/33/33 → -33-33-33).
splitSuffix() {
  if [ "$1" = 20/70/10 ]; then echo; else echo "-${1//\//-}"; fi
}
for split in $splits; do
  suffix=$(splitSuffix "$split")
  splitArgs=()
  splitName=
  if [ -n "$suffix" ]; then splitArgs=(--class-split "$split"); splitName=", split $split"; fi
  for policy in $policies; do
    for model in $models; do
      specs=$(for p in $placements; do printf '%s+%s,' "$policy" "$p"; done)
      specs=${specs%,}
      extra=()
      [ "$model" = compat ] && extra=(--synergy-compat)
      name=$policy
      [ "$policy" = max_min_fairness ] && name="LAS (max_min_fairness)"
      sweep "$out/$policy-$model$suffix" "$name, $gpus$splitName: average JCT vs input rate ($model model)" \
        --seeds "$seeds" --rates "$rates" --max-active "$maxActive" --policies "$specs" \
        "${splitArgs[@]}" "${multi[@]}" "${extra[@]}"
    done
  done
done
if [ "${EXTRAS:-1}" = 1 ]; then
  for model in $models; do
    extra=()
    [ "$model" = compat ] && extra=(--synergy-compat)
    sweep "$out/seeds-fifo-$model" "FIFO at 9 jobs/h, seeds 42 and 1-4 ($model model)" --seeds 42,1,2,3,4 --rates 9 \
      --max-active 2500 --policies fifo+proportional,fifo+tune "${extra[@]}"
    sweep "$out/multigpu-fifo-$model" "FIFO, multi-GPU jobs: average JCT vs input rate ($model model)" --multi-gpu \
      --seeds 42 --rates 1,2,3,4,5 --max-active "$maxActive" --policies fifo+proportional,fifo+tune,fifo+greedy "${extra[@]}"
  done
  if [[ " $models " = *" rondo "* ]]; then
    sweep "$out/opt-128gpu-rondo" "OPT on the paper's cluster (128 GPUs), four policies (Rondo's model)" \
      --seeds 42 --rates 2,4,6,8,9 --max-active "$maxActive" \
      --policies fifo+proportional,fifo+tune,fifo+opt,max_min_fairness+proportional,max_min_fairness+tune,max_min_fairness+opt,srtf+proportional,srtf+tune,srtf+opt,ftf+proportional,ftf+tune,ftf+opt
    sweep "$out/opt-32gpu-rondo" "OPT where it runs: 32 GPUs (4 servers), jobs 300-399 (Rondo's model)" --cluster v100=32 \
      --seeds 42 --rates 1.5,2 --window 300:400 --max-active "$maxActive" \
      --policies fifo+proportional,fifo+tune,fifo+greedy,fifo+opt,max_min_fairness+proportional,max_min_fairness+tune,max_min_fairness+greedy,max_min_fairness+opt
  fi
fi

# The tables: average JCT (hours) per model, policy, rate and placement, one
# per split (avg_jct.csv and .md for 20/70/10, avg_jct-I-L-S.* for others).
# Both models' rows, from the summaries there are (MODELS=rondo reruns only
# Rondo's sweeps and keeps compat's rows).
for split in $splits; do
suffix=$(splitSuffix "$split")
python3 - "$out" "$policies" "rondo compat" "$placements" "$suffix" "$split" <<'EOF'
import csv, os, sys
out, policies, models, placements = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
suffix, split = sys.argv[5], sys.argv[6]
rows = []
for model in models:
    for policy in policies:
        f = os.path.join(out, f"{policy}-{model}{suffix}", "summary.csv")
        if not os.path.exists(f):
            continue
        for r in csv.DictReader(open(f)):
            pol, _, place = r["policy"].partition("+")
            rows.append({"model": model, "policy": pol, "placement": place, "rate": float(r["rate"]),
                         "finished": int(r["finished"]) == int(r["runs"]),
                         "avg_jct_h": float(r["avg_jct_h"]) if int(r["finished"]) else None})
with open(os.path.join(out, f"avg_jct{suffix}.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["model", "policy", "placement", "rate", "avg_jct_h", "finished"])
    for r in rows:
        w.writerow([r["model"], r["policy"], r["placement"], f'{r["rate"]:g}',
                    "" if r["avg_jct_h"] is None else f'{r["avg_jct_h"]:.2f}', str(r["finished"]).lower()])
rates = sorted({r["rate"] for r in rows})
with open(os.path.join(out, f"avg_jct{suffix}.md"), "w") as f:
    for model in models:
        f.write(f"Average JCT (hours), {model} model{', class split ' + split if suffix else ''}; TUNE gain = proportional / TUNE; "
                "- : not sustained (more jobs waiting than MAX_ACTIVE, or past the time limit)\n\n")
        f.write("| policy | rate (jobs/h) | " + " | ".join(placements) + " | TUNE gain |\n")
        f.write("|---|---:|" + "---:|" * (len(placements) + 1) + "\n")
        for policy in policies:
            for rate in rates:
                got = {r["placement"]: r["avg_jct_h"] for r in rows
                       if r["model"] == model and r["policy"] == policy and r["rate"] == rate}
                if not got:
                    continue
                cells = ["-" if got.get(p) is None else f"{got[p]:.2f}" for p in placements]
                p, t = got.get("proportional"), got.get("tune")
                gain = f"{p / t:.2f}x" if p and t else "-"
                f.write(f"| {policy} | {rate:g} | " + " | ".join(cells) + f" | {gain} |\n")
        f.write("\n")
print(f"synergy-continuous: wrote {out}/avg_jct{suffix}.csv and avg_jct{suffix}.md", file=sys.stderr)
EOF
done
