#!/usr/bin/env bash
# Installs what `make run` / `make test` need on a Debian/Ubuntu machine, and nothing
# that is already there. Usage: packaging/bootstrap.sh run|test
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-run}
runtime_pkgs=(libportaudio2 libgl1 libegl1 libgl1-mesa-dri libglx-mesa0 libegl-mesa0
  libxkbcommon-x11-0 libxcb-icccm4 libxcb-keysyms1 libxcb-cursor0 libxcb-image0
  libxcb-render-util0 libxcb-shape0 libxcb-randr0 libxcb-xkb1 libfontconfig1 libdbus-1-3)
test_pkgs=(xvfb xauth jackd2 xdotool imagemagick sox)

wanted=("${runtime_pkgs[@]}")
[ "$target" = test ] && wanted+=("${test_pkgs[@]}")
python3 -c 'import ensurepip' 2>/dev/null || wanted+=(python3-venv)

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

python3 - <<'PY' || { echo "Lipsync Studio needs Python >= 3.11 (found $(python3 --version))"; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

stamp=.venv/.installed-$target
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  extra=""
  [ "$target" = test ] && extra="[dev]"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".$extra"
  touch "$stamp"
fi
