#!/usr/bin/env bash
# The fixed list of simulator runs whose results a refactoring must keep
# (issue "One round, one loop, two backends"). Usage:
#   scripts/parity.sh RONDO_BINARY OUTDIR [PARALLEL]
# writes OUTDIR/NAME.out per run (stdout; timing fields removed from JSON) and
# OUTDIR/NAME.cpu (user+sys seconds). Compare two OUTDIRs with
#   diff -r OLD NEW --exclude='*.cpu'
set -euo pipefail
bin=$1 out=$2 par=${3:-2}
mkdir -p "$out"
vc=docs/vc-demo/cluster.hcl
runs=(
  "f8-las-perf-5.6|--policy max_min_fairness_perf --rate 5.6 --seed 0 --json"
  "f8-las-perf-5.6-compat|--policy max_min_fairness_perf --rate 5.6 --seed 0 --json --gavel-compat"
  "f8-las-4.0|--policy max_min_fairness --rate 4.0 --seed 0 --json"
  "f8-las-4.0-compat|--policy max_min_fairness --rate 4.0 --seed 0 --json --gavel-compat"
  "f8-fifo-4.0|--policy fifo --rate 4.0 --seed 0 --json"
  "f8-fifo-4.0-compat|--policy fifo --rate 4.0 --seed 0 --json --gavel-compat"
  "f8-packed-2.4|--policy max_min_fairness_packed --rate 2.4 --seed 0 --json"
  "f8-packed-2.4-compat|--policy max_min_fairness_packed --rate 2.4 --seed 0 --json --gavel-compat"
  "f8-gandiva-2.4|--policy gandiva --rate 2.4 --seed 0 --json"
  "f8-gandiva-2.4-compat|--policy gandiva --rate 2.4 --seed 0 --json --gavel-compat"
  "multi-las-perf-2.6|--policy max_min_fairness_perf --multi-gpu --rate 2.6 --seed 0 --json"
  "multi-ftf-perf-2.0-compat|--policy finish_time_fairness_perf --multi-gpu --rate 2.0 --seed 1 --json --gavel-compat"
  "ideal-las-perf-3.0|--policy max_min_fairness_perf --ideal --rate 3.0 --seed 0 --json"
  "vc1|--vc-config $vc --trace philly --jobs 3000 --seeds 0,1 --load 0.8 --opportunistic 0.2"
  "vc2|--vc-config $vc --trace philly --jobs 3000 --seeds 0,1 --load 0.8 --opportunistic 0.2 --max-duration 172800"
  "vc3|--vc-config $vc --trace philly --jobs 3000 --seeds 0,1 --load 0.8 --opportunistic 0.2 --max-duration 172800 --vc-gpus prod=1|2,research=8,intern=8"
  "vc4|--vc-config $vc --trace philly --jobs 1000 --seeds 0 --load 0.8 --opportunistic 0.2 --max-duration 172800 --time-sharing"
)
one() {
  local name=${1%%|*} args=${1#*|}
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  /usr/bin/time -f '%U %S' -o "$out/$name.time" "$bin" simulate $args >"$out/$name.raw" 2>"$out/$name.err" || echo "exit $?" >>"$out/$name.raw"
  sed -E 's/"(wall_s|solve_ms_p50|solve_ms_max)":[^,}]*,?//g' "$out/$name.raw" >"$out/$name.out"
  awk '{print $1+$2}' "$out/$name.time" >"$out/$name.cpu"
  rm -f "$out/$name.raw" "$out/$name.time"
  [ -s "$out/$name.err" ] || rm -f "$out/$name.err"
  echo "$name $(cat "$out/$name.cpu")s"
}
export -f one; export bin out
printf '%s\n' "${runs[@]}" | xargs -P "$par" -I{} bash -c 'one "$@"' _ {}
