# Sourced by the reference scripts (gavel-reference.sh, synergy-env.sh).
#   find_python NAME "MODULE..." "DEBIAN_PACKAGE..."
# sets py to $PYTHON when set, else to the first of /usr/bin/python3 and
# python3 that imports every MODULE; else tells which packages to install
# (errors prefixed with NAME) and exits 1.
find_python() {
  local name=$1 mods=$2 pkgs=$3 c
  py=${PYTHON:-}
  if [ -z "$py" ]; then
    for c in /usr/bin/python3 python3; do
      if "$c" -c "import ${mods// /, }" 2>/dev/null; then py=$c; break; fi
    done
  fi
  [ -n "$py" ] || { echo "$name: no python3 with ${mods// / and } (apt-get install -y $pkgs)" >&2; exit 1; }
}
