#!/usr/bin/env bash
# Packs what the app itself (`lipsync-studio --headless`, for bench/gpu.py's api section:
# 50 /stream clients on the real server) and those clients need on the lent GPU machine beyond what
# ../shared/recipes/gpu/carry.sh brings for the engines and the GPU tests: Qt (PySide6)
# and the app's other packages at the GPU lock's versions, and the Debian libraries Qt's
# offscreen platform links against, in pieces that fit the device tool's 64 MiB a call.
# Run from the checkout, after carry.sh:
#
#   bash packaging/carry_app.sh
#
# It writes .carry/app/parts/a.0 ... and .carry/app/last/on-device.sh (ignored through
# .git/info/exclude) and prints the calls to make while the machine that holds /tmp/site
# is warm: each but the last copies its piece to /tmp/ac; the last unpacks /tmp/appsite,
# brings each library whose soname the machine lacks (dpkg -x into /), and runs the
# command through carry.sh's on-device.sh with /tmp/appsite on PYTHONPATH after /tmp/site.
# PortAudio is left out: the machine has no sound card, and the app says so and runs on.
# Seen on a lent H100 (stop 35): the machine lacked fontconfig, dbus, freetype, glib and
# xkbcommon of these; the api section ran through it.
set -euo pipefail
source "$(dirname "$0")/carry_pieces.sh"
grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
[ -f .carry/last/on-device.sh ] || { echo "run ../shared/recipes/gpu/carry.sh first"; exit 1; }
work=.carry/app
# appsite and appdebs are named as they are unpacked into /tmp on the device.
rm -rf "$work/appsite" "$work/parts" "$work/pack.txz"
mkdir -p "$work/wheels" "$work/appsite" "$work/appdebs" "$work/parts" "$work/last"
# What `python -X importtime -m app --headless` loads beyond carry.sh's site and the
# machine's own numpy, onnx, pillow and scipy (read on the development VM).
packages=(pyside6-essentials shiboken6 aiohttp aiohappyeyeballs aiosignal attrs frozenlist
          multidict propcache yarl idna av sounddevice cffi pycparser keyring jaraco-classes
          jaraco-context jaraco-functools more-itertools secretstorage jeepney cryptography
          obsws-python websocket-client websockets python-osc typing-extensions ml-dtypes
          pynput python-xlib six)
# bench/api.py's clients check the server's messages against docs' schemas (jsonschema):
# test packages, from the test lock.
checks=(jsonschema jsonschema-specifications referencing rpds-py)
pins() { local lock=$1; shift; local p; p=$(printf '%s|' "$@"); grep -E "^(${p%|})==" "$lock" | cut -d' ' -f1; }
{ pins packaging/locks/gpu-py3.12.txt "${packages[@]}"; pins packaging/locks/test-py3.12.txt "${checks[@]}"; } > "$work/pins.txt"
[ "$(wc -l < "$work/pins.txt")" -eq $(( ${#packages[@]} + ${#checks[@]} )) ] || { echo "a package is not in its lock"; exit 1; }
python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 \
    --platform manylinux_2_34_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$work/wheels" -r "$work/pins.txt"
for wheel in "$work"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$work/appsite/"; done
# Qt's tools, QML and translations: the headless app loads Core, Gui, OpenGL and the
# offscreen platform only.
qt="$work/appsite/PySide6"
rm -rf "$qt"/Qt/qml "$qt"/Qt/translations "$qt"/Qt/libexec "$qt"/{designer,linguist,assistant,lupdate,lrelease,qmllint,qmlformat,qmlls,balsam,balsamui} \
    "$qt"/Qt/lib/libQt6{Designer,Quick,Qml,Pdf,Quick3D,ShaderTools,3D,Charts,DataVisualization,Graphs,Multimedia,WebEngine}* \
    "$work"/appsite/*.data
# Qt Gui's and its platform's libraries outside the wheel (ldd on the VM), as bookworm's
# packages: each goes in only where the machine lacks its soname (on-device script).
debs=(libxkbcommon0 libfontconfig1 fontconfig-config fonts-dejavu-core libfreetype6
      libglib2.0-0 libdbus-1-3 libx11-6 libx11-data libxcb1 libxau6 libxdmcp6 libbsd0 libmd0
      libpng16-16 libbrotli1 libexpat1 libpcre2-8-0 libsystemd0 libcap2 libgcrypt20
      libgpg-error0 liblz4-1 libzstd1)
(cd "$work/appdebs" && apt-get download "${debs[@]}" >/dev/null)
cat > "$work/last/on-device.sh" <<'EOF'
#!/usr/bin/env bash
# Made by packaging/carry_app.sh. On the device: /tmp/appsite from the pieces in /tmp/ac,
# the libraries the machine lacks, then "$1" through carry.sh's on-device.sh.
set -o pipefail
if [ ! -d /tmp/appsite ]; then
  (cd /tmp/ac && cat a.* | xz -dc -T0 | tar x -C /tmp) || { echo "carry_app: pieces missing in /tmp/ac"; exit 97; }
  for deb in /tmp/appdebs/*.deb; do
    libs=$(dpkg-deb -c "$deb" | grep -oE '/[^/ ]+\.so\.[0-9]+( |$)' | tr -d '/ ' | sort -u)
    missing=0
    for lib in $libs; do ldconfig -p | grep -qE "[[:space:]]$lib " || missing=1; done
    [ -z "$libs" ] && ! ls /etc/fonts/fonts.conf >/dev/null 2>&1 && missing=1
    [ $missing = 1 ] && dpkg -x "$deb" / && echo "carry_app: unpacked $(basename "$deb")"
  done
  ldconfig
fi
export PYTHONPATH=/tmp/appsite${PYTHONPATH:+:$PYTHONPATH}
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../../last/on-device.sh" "$1"
EOF
tar cf - -C "$work" appsite appdebs | xz -6 -T0 > "$work/pack.txz"
pieces=$(split_for_device "$work/pack.txz" "$work/parts/a.")
rm -f "$work/pack.txz"
echo "# $(du -sh "$work/parts" | cut -f1) in $pieces pieces; make the calls while carry.sh's machine is warm"
for i in $(seq 0 $((pieces - 1))); do
  echo "run carry=[\".carry/app/parts/a.$i\"] timeout_s=120 command: mkdir -p /tmp/ac && cp .carry/app/parts/a.$i /tmp/ac/"
done
echo "then: run carry=[\".carry/app/last\", \".carry/last\"] command: bash .carry/app/last/on-device.sh 'CMD'"
