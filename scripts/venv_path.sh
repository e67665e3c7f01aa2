# Sourced by scripts/setup.sh and env.sh: where this checkout's venv lives.
# Not inside the repo: CMake refuses exported include dirs (numpy's) under the source tree.
# One venv per checkout path, so a fresh clone gets a fresh venv. Override with VD_VENV.
_vd_venv_default() {
  local root="$1" h
  h="$(printf '%s' "$root" | sha256sum | cut -c1-10)"
  printf '%s/vision_dialogue/venv-%s' "${XDG_CACHE_HOME:-${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}/.cache}" "$h"
}
