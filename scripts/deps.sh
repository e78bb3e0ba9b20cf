#!/usr/bin/env bash
# Installs the system libraries Rondo links against (COIN-OR Clp/Cbc for the LP layer).
# Runs apt-get only when a library is missing and we are root; otherwise prints the command.
set -euo pipefail
need=()
pkg-config --exists clp 2>/dev/null || need+=(coinor-libclp-dev)
pkg-config --exists cbc 2>/dev/null || need+=(coinor-libcbc-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || need+=(python3-torch)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd) # checks jobs/deploy/rondo-agent.service
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -eq 0 ]; then
  echo "deps: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "deps: missing ${need[*]}; run: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
