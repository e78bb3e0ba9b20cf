#!/usr/bin/env bash
# Writes stand-ins for the modules Synergy's reference simulator imports
# only for deployment (grpc and its generated rpc stubs, cvxpy, numa, psutil,
# google.protobuf, matplotlib) to DIR (default $SYNERGY_STUBS, else
# /tmp/synergy-stubs), so that the simulator runs with PYTHONPATH=DIR on a
# python3 with numpy and pandas. Every attribute of such a module is a
# do-nothing class, enough for the imports and class definitions that
# simulation never executes.
#
#   scripts/synergy-stubs.sh [DIR]
set -euo pipefail
stubs=${1:-${SYNERGY_STUBS:-/tmp/synergy-stubs}}
rm -rf "$stubs"
mkdir -p "$stubs/matplotlib" "$stubs/google/protobuf"
cat > "$stubs/_synref_stub.py" <<'PY'
class _Stub:
    def __init__(self, *a, **k): pass
    def __call__(self, *a, **k): return _Stub()
    def __getattr__(self, name):
        if name.startswith('__'): raise AttributeError(name)
        return _Stub()
    def __iter__(self): return iter(())
PY
for m in grpc numa psutil cvxpy common_pb2 \
         job_to_scheduler_pb2 job_to_scheduler_pb2_grpc \
         worker_to_scheduler_pb2 worker_to_scheduler_pb2_grpc \
         scheduler_to_worker_pb2 scheduler_to_worker_pb2_grpc \
         matplotlib/__init__ matplotlib/pyplot matplotlib/dates google/protobuf/struct_pb2; do
  printf 'from _synref_stub import _Stub\ndef __getattr__(name):\n    if name.startswith("__"): raise AttributeError(name)\n    return _Stub\n' > "$stubs/$m.py"
done
: > "$stubs/google/__init__.py"; : > "$stubs/google/protobuf/__init__.py"
# So that the stock runner.py also runs on Python >= 3.10 with these stubs.
printf 'import collections, collections.abc\nif not hasattr(collections, "Mapping"):\n    collections.Mapping = collections.abc.Mapping\n' > "$stubs/sitecustomize.py"
