#!/usr/bin/env bash
# Times Gavel's own simulator (github stanford-futuredata/gavel, scheduler/)
# on one Figure 8 point, for Rondo's speed to be measured against (issue #20):
# aware LAS (max_min_fairness_perf), 36 V100 + 36 P100 + 36 K80 one GPU per
# server, Gavel's generated single-GPU continuous trace at 5.6 jobs/h (Gavel's
# lam = 3600/5.6 s between arrivals), seed 0, 360 s rounds, jobs 4000-4999
# measured, Gavel's defaults otherwise: its driver
# scripts/drivers/simulate_scheduler_with_generated_jobs.py, as
# scripts/sweeps/run_sweep_continuous.py runs each point. Same point as
# `rondo simulate --policy max_min_fairness_perf --rate 5.6 --seed 0`.
#
#   scripts/gavel-reference.sh GAVEL_CHECKOUT [OUTDIR]
#   RONDO=1 scripts/gavel-reference.sh GAVEL_CHECKOUT [OUTDIR]   # side by side
#
# GAVEL_CHECKOUT: a checkout of stanford-futuredata/gavel (the repository root
# or its scheduler/ folder). Gavel's LP is solved by scipy's HiGHS in place of
# cvxpy/ECOS, and the modules the simulation never uses (grpc, rpc stubs,
# matrix_completion) are empty stand-ins: scripts/gavel-reference/run.py.
# Needs a python3 with numpy and scipy (Debian: apt-get install -y
# python3-numpy python3-scipy); PYTHON=... picks one (default /usr/bin/python3
# if it has them). numpy/scipy run single-threaded (OMP_NUM_THREADS=1 etc.).
#
# Measures the run's wall/user/sys seconds (/usr/bin/time -f "%e %U %S") and
# records Gavel's average JCT over jobs 4000-4999, its LP count and LP time,
# the load average before and after, and `git rev-parse HEAD` of the checkout
# (else $GAVEL_COMMIT): OUTDIR/gavel.json (default OUTDIR /tmp/gavel-ref).
# With RONDO=1, then the same point with Rondo's default mechanism
# ($RONDO_BIN, default bin/rondo, built with `go build` when missing) 3 times
# (RONDO_REPEATS), the median wall taken, and once with --gavel-compat for its
# average JCT: OUTDIR/rondo.json, and the ratio Gavel wall / Rondo median wall.
# Takes 1.5-3 minutes (Gavel) plus ~40 s (Rondo) on one core.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
src=${1:?usage: scripts/gavel-reference.sh GAVEL_CHECKOUT [OUTDIR]}
out=${2:-/tmp/gavel-ref}
src=$(cd "$src" && pwd)
if [ -d "$src/scheduler" ]; then sched=$src/scheduler; else sched=$src; fi
[ -e "$sched/scripts/drivers/simulate_scheduler_with_generated_jobs.py" ] ||
  { echo "gavel-reference: $sched/scripts/drivers/simulate_scheduler_with_generated_jobs.py missing (not a gavel checkout?)" >&2; exit 1; }
commit=$(git -C "$sched" rev-parse HEAD 2>/dev/null || echo "${GAVEL_COMMIT:-unknown}")
. "$here/scripts/find-python.sh"
find_python gavel-reference "numpy scipy.optimize" "python3-numpy python3-scipy"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMEXPR_NUM_THREADS=1
mkdir -p "$out"
load() { cut -d' ' -f1-3 /proc/loadavg; }

rate=5.6
lam=$("$py" -c "print(repr(3600.0 / $rate))")
gargs=(--cluster_spec 36:36:36 --policy max_min_fairness_perf --lam "$lam" --seed 0
       --window-start 4000 --window-end 5000 --interval 360)
cmd="$py scripts/gavel-reference/run.py $sched $out/gavel-result.json ${gargs[*]}"
echo "gavel-reference: $cmd" >&2
load0=$(load)
/usr/bin/time -f "%e %U %S" -o "$out/gavel-time.txt" \
  "$py" "$here/scripts/gavel-reference/run.py" "$sched" "$out/gavel-result.json" "${gargs[@]}"
load1=$(load)
"$py" - "$out/gavel-result.json" "$out/gavel-time.txt" "$cmd" "$commit" "$load0" "$load1" > "$out/gavel.json" <<'EOF'
import json, sys
res, tim, cmd, commit, load0, load1 = sys.argv[1:]
r = json.load(open(res))
wall, user, sys_ = map(float, open(tim).read().split()[-3:])
print(json.dumps({
    "point": "max_min_fairness_perf, 36:36:36, 5.6 jobs/h, seed 0, jobs 4000-4999",
    "wall_s": wall, "user_s": user, "sys_s": sys_,
    "avg_jct_h": round(r["avg_jct_h"], 4), "jobs": r["jobs"],
    "lp_solves": r["lp_solves"], "lp_s": r["lp_s"],
    "loadavg_before": load0, "loadavg_after": load1,
    "command": cmd, "gavel_commit": commit, "solver": "scipy linprog highs"}))
EOF
echo "gavel-reference: gavel: $(cat "$out/gavel.json")"

[ "${RONDO:-0}" = 1 ] || exit 0
rondo=${RONDO_BIN:-$here/bin/rondo}
if [ ! -x "$rondo" ]; then (cd "$here" && go build -o "$rondo" ./cmd/rondo); fi
rargs=(simulate --policy max_min_fairness_perf --rate "$rate" --seed 0 --json)
: > "$out/rondo-runs.txt"
load0=$(load)
for i in $(seq "${RONDO_REPEATS:-3}"); do
  /usr/bin/time -f "%e %U %S" -o "$out/rondo-time.txt" "$rondo" "${rargs[@]}" > "$out/rondo-default.json"
  echo "$(tail -1 "$out/rondo-time.txt")" >> "$out/rondo-runs.txt"
done
load1=$(load)
"$rondo" "${rargs[@]}" --gavel-compat > "$out/rondo-compat.json"
"$py" - "$out" "$rondo ${rargs[*]}" "$(git -C "$here" rev-parse HEAD)" "$load0" "$load1" > "$out/rondo.json" <<'EOF'
import json, statistics, sys
out, cmd, commit, load0, load1 = sys.argv[1:]
runs = [list(map(float, l.split())) for l in open(out + "/rondo-runs.txt") if l.strip()]
g = json.load(open(out + "/gavel.json"))
d = json.load(open(out + "/rondo-default.json"))
c = json.load(open(out + "/rondo-compat.json"))
med = statistics.median(r[0] for r in runs)
print(json.dumps({
    "runs_wall_user_sys_s": runs, "median_wall_s": med,
    "avg_jct_h": round(d["avg_jct_s"] / 3600, 4),
    "compat_avg_jct_h": round(c["avg_jct_s"] / 3600, 4),
    "gavel_wall_s": g["wall_s"], "gavel_avg_jct_h": g["avg_jct_h"],
    "ratio_gavel_over_rondo": round(g["wall_s"] / med, 2),
    "loadavg_before": load0, "loadavg_after": load1,
    "command": cmd, "rondo_commit": commit}))
EOF
echo "gavel-reference: rondo: $(cat "$out/rondo.json")"
