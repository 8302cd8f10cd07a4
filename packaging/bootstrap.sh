#!/usr/bin/env bash
# Installs what `make run` / `make dist` / `make test` need on a Debian/Ubuntu machine, and
# nothing that is already there. Usage: packaging/bootstrap.sh run|dist|test
# PYTHON (default python3) picks the interpreter and VENV (default .venv) the environment,
# so each supported Python can have one side by side: make test PYTHON=python3.12 VENV=.venv-3.12
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-run}
python=${PYTHON:-python3}
venv=${VENV:-.venv}
runtime_pkgs=(libportaudio2 libgl1 libegl1 libgl1-mesa-dri libglx-mesa0 libegl-mesa0
  libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0
  libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xkb1 libfontconfig1 libdbus-1-3
  x11-utils)  # xwininfo: where "Add to OBS" crops a screen capture to the avatar window
# OBS (with its JACK input and a window manager for window capture) and Chromium: the
# real OBS and browser the output tests drive (shared/recipes/testing.md).
# PyInstaller reads the libraries it bundles with binutils' objdump; the AppImage's runtime
# is built from packaging/appimage/runtime.c against static squashfuse, libfuse3 and the
# compressors squashfuse reads, and its image made by mksquashfs (`make dist`).
dist_pkgs=(binutils gcc libc6-dev libsquashfuse-dev libfuse3-dev zlib1g-dev liblzma-dev
  liblzo2-dev liblz4-dev libzstd-dev squashfs-tools)
test_pkgs=(xvfb xauth jackd2 xdotool imagemagick sox obs-studio obs-plugins openbox chromium
  g++  # builds the CUDA photo kernel for the CPU (tests/test_kernels_on_cpu.py)
  "${dist_pkgs[@]}" desktop-file-utils  # tests/test_dist.py builds the app, checks its .desktop
  fuse3)  # and mounts its AppImage (fusermount3, for a user other than root)
# The API's JavaScript example is run by the tests (docs/api.md): Node.js where none is.
command -v node >/dev/null || test_pkgs+=(nodejs)

wanted=("${runtime_pkgs[@]}")
[ "$target" = dist ] && wanted+=("${dist_pkgs[@]}")
[ "$target" = test ] && wanted+=("${test_pkgs[@]}")
"$python" -c 'import ensurepip' 2>/dev/null || wanted+=(python3-venv)

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "Installing system packages: ${missing[*]}"
  # jackd2 asks whether to enable realtime limits; the test server runs as the current user either way.
  echo "jackd2 jackd/tweak_rt_limits boolean false" | $sudo debconf-set-selections
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The supported versions are those with a lock file (packaging/lock.sh writes one each).
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') ||
  { echo "No Python found at '$python' (set PYTHON=...)"; exit 1; }
lock=packaging/locks/$target-py$version.txt
test_lock=packaging/locks/test-py$version.txt
# A machine whose NVIDIA driver answers gets the GPU path (docs/gpu.md): the run lock plus
# onnxruntime's CUDA build and cuda-python. The tests keep the CPU build CI runs.
gpu=""
if [ "$target" = run ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu=packaging/locks/gpu-py$version.txt
  echo "NVIDIA GPU found ($(nvidia-smi -L | head -1)): installing the GPU path"
  lock=$gpu
fi
if [ ! -f "$lock" ]; then
  supported=$(ls packaging/locks | sed -n 's/^run-py\(.*\)\.txt$/\1/p' | tr '\n' ' ')
  echo "Lipsync Studio supports Python ${supported% } (found $version at '$python'; set PYTHON=...)"
  exit 1
fi

# The stamp holds the hash of the lock the environment was built from. Each lock of the
# chain is the next one less some tools, at the same versions: the run lock is the dist
# lock less PyInstaller, which is the test lock less the test tools. So an environment
# built from a later one serves the earlier targets, and one built from an earlier one
# only needs the rest added. (The GPU lock is apart: only itself or the test lock serve it.)
chain=(run dist test)
stamp=$venv/.installed-lock
lock_hash() { sha256sum "$1" | cut -d' ' -f1; }
have=$(cat "$stamp" 2>/dev/null || true)
have_at=-1
want_at=-1
for i in "${!chain[@]}"; do
  [ "$have" = "$(lock_hash "packaging/locks/${chain[$i]}-py$version.txt")" ] && have_at=$i
  [ "$target" = "${chain[$i]}" ] && want_at=$i
done
if [ "$have" = "$(lock_hash "$lock")" ] || [ "$have" = "$(lock_hash "$test_lock")" ] ||
   { [ -z "$gpu" ] && [ "$have_at" -ge "$want_at" ]; }; then
  exit 0
fi
if [ -z "$gpu" ] && [ "$have_at" -ge 0 ]; then
  echo "Adding the $target tools to $venv"
else
  # Anything else (an older lock, another Python, a half-finished install) is rebuilt from
  # nothing, so the environment holds exactly the lock and no leftover of an earlier one.
  [ -d "$venv" ] && echo "Rebuilding $venv from $lock"
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi
# Hash-checking mode also refuses any dependency the lock does not pin. (No `pip check`
# after it: mediapipe 0.10.30's wheel file names py3-none but its metadata says cp39, so
# pip check calls it unsupported on 3.12+, where it imports and runs.)
# entry NAME LOCK: NAME's pin and hashes; all_but NAME LOCK: every other entry.
entry() { awk -v pin="$1==" 'index($0, pin) == 1 {p = 1; print; next} p && /^ / {print; next} {p = 0}' "$2"; }
all_but() { awk -v pin="$1==" 'index($0, pin) == 1 {p = 1; next} p && /^ / {next} {p = 0; print}' "$2"; }
# pynput's metadata asks for evdev on Linux, which the locks leave out (pyproject.toml's
# [tool.uv] says why): pynput goes in on its own, without its dependencies, which the rest
# of the lock holds (python-xlib, six).
"$venv/bin/python" -m pip install -q --require-hashes -r <(all_but pynput "$lock")
"$venv/bin/python" -m pip install -q --require-hashes --no-deps -r <(entry pynput "$lock")
if [ -n "$gpu" ]; then
  # piper-tts needs onnxruntime, and onnxruntime and onnxruntime-gpu install the same
  # package folder: the GPU build's files must be the ones left, whole.
  "$venv/bin/python" -m pip uninstall -q -y onnxruntime onnxruntime-gpu
  "$venv/bin/python" -m pip install -q --require-hashes --no-deps -r <(entry onnxruntime-gpu "$gpu")
fi
# The build backend comes from the lock too, so nothing unpinned is fetched to build us.
"$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
lock_hash "$lock" > "$stamp"
