#!/usr/bin/env bash
# A side-by-side sample of the Figure 8 grid (docs/performance.md): each of
# its five policies at the given rates, seed 0, --gavel-compat, run once by
# each of two binaries in turn (before, after) under /usr/bin/time, and
# their outputs compared field by field (timing fields aside).
#
#   scripts/grid-sample.sh BEFORE_BIN AFTER_BIN [OUTDIR] [RATES]
#
# RATES defaults to "4.0 5.6". Prints "policy rate before|after wall user
# sys" per run and, per point, the fields that differ (none: "differs: []").
set -euo pipefail
before=${1:?usage: scripts/grid-sample.sh BEFORE_BIN AFTER_BIN [OUTDIR] [RATES]}
after=${2:?usage: scripts/grid-sample.sh BEFORE_BIN AFTER_BIN [OUTDIR] [RATES]}
out=${3:-/tmp/grid-sample}
rates=${4:-4.0 5.6}
mkdir -p "$out"
for r in $rates; do
  for p in max_min_fairness_perf max_min_fairness fifo max_min_fairness_packed gandiva; do
    for side in before after; do
      bin=$before
      [ "$side" = after ] && bin=$after
      /usr/bin/time -f "$p $r $side %e %U %S" "$bin" simulate --policy "$p" --rate "$r" --seed 0 \
        --gavel-compat --json > "$out/$p-$r-$side.json"
    done
    python3 - "$out/$p-$r-before.json" "$out/$p-$r-after.json" "$p $r" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
skip = {"wall_s", "solve_ms_p50", "solve_ms_max"}
print(sys.argv[3], "differs:", sorted(k for k in set(a) | set(b) if k not in skip and a.get(k) != b.get(k)))
PY
  done
done
