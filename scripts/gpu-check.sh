#!/usr/bin/env bash
# GPU check for Rondo's device plugin: builds nomad-device-rondo and runs one
# fingerprint, printing what it found as JSON.
#
#   scripts/gpu-check.sh                 # real NVML (run on the GPU host)
#   scripts/gpu-check.sh -config f.hcl   # real NVML with a plugin config body
#   scripts/gpu-check.sh -fake f.hcl     # the fake backend described by f.hcl
#
# Without libnvidia-ml the real run prints an empty report with init_error
# and exits 0. Set GPU_CHECK_OUT=file to also save the JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
BIN=${BIN:-$PWD/bin}
mkdir -p "$BIN"
"$GO" build -o "$BIN/nomad-device-rondo" ./cmd/nomad-device-rondo
out=$("$BIN/nomad-device-rondo" fingerprint "$@")
printf '%s\n' "$out"
if [ -n "${GPU_CHECK_OUT:-}" ]; then printf '%s\n' "$out" > "$GPU_CHECK_OUT"; fi
# A real-NVML run on a GPU host must find GPUs; say so loudly if it did not.
if [ "$#" -eq 0 ] || [ "${1:-}" = "-config" ]; then
  if printf '%s' "$out" | grep -q '"init_error"'; then
    echo "gpu-check: NVML not available on this host (see init_error); no GPUs reported" >&2
  fi
fi
