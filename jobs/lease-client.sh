#!/bin/sh
# Rondo lease API from a shell: what a training loop does at each checkpoint
# boundary, with curl.
#
#   lease-client.sh progress STEPS_DONE STEPS_PER_S GPU_TYPE [KEY=VALUE...]   # -> 204
#   lease-client.sh lease                                      # -> {"continue":..., "lease_expires_at":..., "round":..., "checkpoint_dir":...}
#   lease-client.sh health
#
# progress's optional KEY=VALUE fields (allocator/lease/README.md):
#   checkpoint_at=2026-01-02T03:04:05Z   when the job last wrote a checkpoint (RFC 3339)
#   checkpoint_s=12.5                    seconds writing it took
#   restore_s=40                         seconds its last (re)start took until it trained again
#   epochs_done=2.5                      epochs done (a two-role elastic job)
#   partner=JOB                          the job it shares its GPUs with
#
# Environment: RONDO_LEASE_ADDR (host:port or URL) or RONDO_LEASE_ADDR_FILE (a
# file naming it, a line RONDO_LEASE_ADDR=URL or the bare URL: the env file a
# template over the agents' rondo-lease service renders, which Nomad re-renders
# when the agents are replaced; it wins when it names one); NOMAD_JOB_ID,
# NOMAD_ALLOC_ID, NOMAD_NAMESPACE (set by Nomad; RONDO_JOB overrides the job).
# For an https:// address with a private CA: RONDO_CACERT (curl --cacert), and
# RONDO_CLIENT_CERT, RONDO_CLIENT_KEY when the agent verifies clients.
# Token, first found: $RONDO_IDENTITY_FILE, $NOMAD_TOKEN_rondo,
# $NOMAD_SECRETS_DIR/nomad_rondo.jwt, $NOMAD_TOKEN, $NOMAD_SECRETS_DIR/nomad_token.
# The task needs an identity block, preferably a dedicated one:
#   identity { name = "rondo"  aud = ["rondo-lease"]  file = true  ttl = "1h" }
#
# Prints the answer's body on stdout and "http_status=N" on stderr; exits 0 on
# 2xx, 1 otherwise. For "lease", exits 3 when the lease does not continue:
# checkpoint and exit. A notice (the answer has "checkpoint_now":true) exits
# 0 like any continuing lease and also prints "checkpoint_now stop_at=T" on
# stderr: checkpoint now and go on training; the job stops at T.
set -eu

addr=${RONDO_LEASE_ADDR:-}
if [ -n "${RONDO_LEASE_ADDR_FILE:-}" ] && [ -r "$RONDO_LEASE_ADDR_FILE" ]; then
  from_file=$(sed -n -e 's/^[[:space:]]*RONDO_LEASE_ADDR=//p' -e '/^[[:space:]]*[^#[:space:]][^=]*$/p' \
    "$RONDO_LEASE_ADDR_FILE" | tr -d "\"' \t\r" | tail -n 1)
  if [ -n "$from_file" ]; then addr=$from_file; fi
fi
: "${addr:?RONDO_LEASE_ADDR is not set (nor named by RONDO_LEASE_ADDR_FILE)}"
case $addr in *://*) ;; *) addr="http://$addr" ;; esac
addr=${addr%/}

# curl with the TLS options of an https lease API (a private CA, client
# certificates); set -- in a function touches only its own arguments.
tcurl() {
  if [ -n "${RONDO_CLIENT_CERT:-}" ]; then set -- --cert "$RONDO_CLIENT_CERT" --key "${RONDO_CLIENT_KEY:-}" "$@"; fi
  if [ -n "${RONDO_CACERT:-}" ]; then set -- --cacert "$RONDO_CACERT" "$@"; fi
  curl "$@"
}

token() {
  secrets=${NOMAD_SECRETS_DIR:-}
  if [ -n "${RONDO_IDENTITY_FILE:-}" ] && [ -s "$RONDO_IDENTITY_FILE" ]; then cat "$RONDO_IDENTITY_FILE"; return; fi
  if [ -n "${NOMAD_TOKEN_rondo:-}" ]; then printf %s "$NOMAD_TOKEN_rondo"; return; fi
  if [ -n "$secrets" ] && [ -s "$secrets/nomad_rondo.jwt" ]; then cat "$secrets/nomad_rondo.jwt"; return; fi
  if [ -n "${NOMAD_TOKEN:-}" ]; then printf %s "$NOMAD_TOKEN"; return; fi
  if [ -n "$secrets" ] && [ -s "$secrets/nomad_token" ]; then cat "$secrets/nomad_token"; return; fi
  echo "lease-client: no workload identity (add an identity block to the task)" >&2
  exit 1
}

# JSON string escaping for ids (backslash and double quote).
q() { printf '"%s"' "$(printf %s "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

job=${RONDO_JOB:-${NOMAD_JOB_ID:?NOMAD_JOB_ID is not set}}
ids="\"job\":$(q "$job")"
[ -n "${NOMAD_ALLOC_ID:-}" ] && ids="$ids,\"alloc\":$(q "$NOMAD_ALLOC_ID")"
[ -n "${NOMAD_NAMESPACE:-}" ] && ids="$ids,\"namespace\":$(q "$NOMAD_NAMESPACE")"

post() { # path body
  out=$(mktemp)
  code=$(tcurl -sS -o "$out" -w '%{http_code}' -X POST \
    -H "Authorization: Bearer $(token)" -H 'Content-Type: application/json' \
    --data "$2" "$addr$1") || { rm -f "$out"; exit 1; }
  cat "$out"; rm -f "$out"
  echo "http_status=$code" >&2
  case $code in 2*) return 0 ;; *) exit 1 ;; esac
}

case ${1:-} in
progress)
  [ $# -ge 4 ] || { echo "usage: $0 progress STEPS_DONE STEPS_PER_S GPU_TYPE [KEY=VALUE...]" >&2; exit 2; }
  body="$ids,\"steps_done\":$2,\"throughput_steps_per_s\":$3,\"gpu_type\":$(q "$4")"
  shift 4
  for kv in "$@"; do
    k=${kv%%=*} v=${kv#*=}
    [ "$k" != "$kv" ] || { echo "lease-client: $kv: want KEY=VALUE" >&2; exit 2; }
    case $k in
    checkpoint_at|partner) body="$body,\"$k\":$(q "$v")" ;;
    checkpoint_s|restore_s|epochs_done)
      case $v in ''|*[!0-9.eE+-]*) echo "lease-client: $k=$v: want a number" >&2; exit 2 ;; esac
      body="$body,\"$k\":$v" ;;
    *) echo "lease-client: unknown field $k (checkpoint_at, checkpoint_s, restore_s, epochs_done, partner)" >&2; exit 2 ;;
    esac
  done
  post /v1/progress "{$body}"
  ;;
lease)
  body=$(post /v1/lease "{$ids}")
  echo "$body"
  case $body in *'"continue":false'*) exit 3 ;; esac
  case $body in *'"checkpoint_now":true'*)
    stop=$(printf %s "$body" | sed -n 's/.*"stop_at":"\([^"]*\)".*/\1/p')
    echo "checkpoint_now stop_at=$stop" >&2 ;;
  esac
  ;;
health)
  tcurl -sS "$addr/v1/health"
  ;;
*)
  echo "usage: $0 progress STEPS_DONE STEPS_PER_S GPU_TYPE [KEY=VALUE...] | lease | health" >&2
  exit 2
  ;;
esac
