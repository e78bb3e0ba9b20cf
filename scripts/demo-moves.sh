#!/usr/bin/env bash
# Counts what the demo's rounds do to running jobs (docs/preemption.md,
# "The demo"): runs `rondo demo` for a while and tallies the Nomad
# backend's log lines per intent.
#
#   scripts/demo-moves.sh [--gavel] [DURATION]   (default 4m; needs `make build`)
#
# --gavel runs the demo's config without min_runtime, checkpoint_aware and
# reserve_after: Gavel's mechanism, as the demo ran before #21.
set -euo pipefail
cd "$(dirname "$0")/.."
gavel=false
if [ "${1:-}" = --gavel ]; then gavel=true; shift; fi
dur=${1:-4m}
jobs=$(mktemp -d)
trap 'rm -rf "$jobs"' EXIT
cp jobs/*.hcl jobs/lease-client.sh "$jobs"/
if $gavel; then
  sed -i -E '/^(min_runtime|checkpoint_aware|reserve_after) *=/d' "$jobs/cluster.hcl"
fi
log="$jobs/demo.log"
bin/rondo demo -bin bin -jobs "$jobs" -for "$dur" -bind-addr 127.0.0.1:4790 -lease-addr 127.0.0.1:4791 > "$log" 2>&1
printf 'rounds=%s' "$(grep -c 'rondo: round: round=' "$log")"
for k in admit resume migrate suspend preempt; do
  printf ' %s=%s' "$k" "$(grep -c "rondo.nomad: $k:" "$log" || true)"
done
echo
