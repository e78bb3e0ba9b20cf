# Sourced by the Synergy reference scripts (synergy-reference.sh,
# synergy-continuous-reference.sh): from the checkout $src (its simulator/
# directory, or itself), sets sim (the simulator directory), commit (the
# checkout's HEAD, else $SYNERGY_COMMIT), py (a python3 with numpy and
# pandas, else $PYTHON) and stubs (the deployment-only modules' stand-ins,
# written by synergy-stubs.sh to $SYNERGY_STUBS, default
# /tmp/synergy-stubs). $name prefixes the errors; $here is the repository.
src=$(cd "$src" && pwd)
if [ -d "$src/simulator" ]; then sim=$src/simulator; else sim=$src; fi
[ -e "$sim/runner.py" ] || { echo "$name: $sim/runner.py missing (not a synergy checkout?)" >&2; exit 1; }
commit=$(git -C "$sim" rev-parse HEAD 2>/dev/null || echo "${SYNERGY_COMMIT:-unknown}")
. "$here/scripts/find-python.sh"
find_python "$name" "numpy pandas" "python3-numpy python3-pandas"
stubs=${SYNERGY_STUBS:-/tmp/synergy-stubs}
"$here/scripts/synergy-stubs.sh" "$stubs"
