#!/usr/bin/env bash
# GPU check for Rondo's device plugin: builds nomad-device-rondo, runs one
# fingerprint and prints what it found as JSON; fails (exit 1, one line on
# stderr saying why) when NVML cannot be loaded or reports no GPU.
#
#   scripts/gpu-check.sh                 # real NVML (run on the GPU host)
#   scripts/gpu-check.sh -config f.hcl   # real NVML with a plugin config body
#   scripts/gpu-check.sh -fake f.hcl     # the fake backend described by f.hcl
#
# Set GPU_CHECK_OUT=file to also save the JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-$PWD/bin}
mkdir -p "$BIN"
# The cgo build of go-nvml is chatty: keep its output unless it fails, so a
# failed check says why in one line.
if ! "$GO" build -o "$BIN/nomad-device-rondo" ./cmd/nomad-device-rondo 2>"$BIN/gpu-check-build.log"; then
  cat "$BIN/gpu-check-build.log" >&2
  echo "gpu check failed: the plugin does not build (above)" >&2
  exit 1
fi
rc=0
out=$("$BIN/nomad-device-rondo" fingerprint -require-gpu "$@") || rc=$?
printf '%s\n' "$out"
if [ -n "${GPU_CHECK_OUT:-}" ]; then printf '%s\n' "$out" > "$GPU_CHECK_OUT"; fi
exit "$rc"
