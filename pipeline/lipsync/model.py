"""Live lip shapes from audio: the trained model, a smoother, and whole-file cues.

`LipShapeModel.push` takes audio blocks as they arrive and returns one `LipFrame` per
10 ms: probabilities over the 15 OVR visemes and a jaw openness for an instant
`lookahead_ms` before the end of the audio seen so far. The model is causal; its
lookahead is what a head of the network may hear after the instant it describes. One
network carries three heads (ultra 10 ms, balanced 30 ms, premium 60 ms), so switching
modes mid-stream costs nothing and the three never disagree about the past.

Inference runs on the caller's thread through onnxruntime with one thread and no
spinning: it is ~0.1 ms per hop, cheaper than a thread hand-off. Inputs and outputs are
bound to buffers made once (IOBinding), so a hop allocates no arrays but its frame's
copy of the probabilities.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime

from pipeline.core.frames import MouthPose, VisemeCue
from pipeline.core.modes import DEFAULT_MODE, MODES_MS, OFFLINE_MODE
from pipeline.core.resources import ASSETS_DIR
from pipeline.core.visemes import MUST_SHOW_INDICES, OPENNESS, OVR_VISEMES, VISEME_INDEX
from pipeline.infer.sessions import build_session
from pipeline.lipsync.features import (
    HOP,
    N_MELS,
    POWER_FLOOR,
    SAMPLE_RATE,
    StreamingLogMel,
    frame_end_s,
)

DEFAULT_MODEL = ASSETS_DIR / "models" / "lipsync.onnx"
FRAME_S = HOP / SAMPLE_RATE
_SIL = VISEME_INDEX["sil"]
_OPENNESS = np.array([OPENNESS[v] for v in OVR_VISEMES], np.float32)
# Coarse groups: the mouth shapes a viewer tells apart at a glance (narrow/spread: teeth
# close, lips unrounded). The evaluation scores them; the smoother asks more evidence
# for a change inside a group than for one a viewer sees.
COARSE_GROUPS = ("sil", "PP", "FF", "narrow/spread", "aa", "round")
_COARSE_OF = {"sil": "sil", "PP": "PP", "FF": "FF", "aa": "aa", "oh": "round", "ou": "round",
              **dict.fromkeys(["TH", "DD", "kk", "CH", "SS", "nn", "RR", "E", "ih"],
                              "narrow/spread")}
COARSE = np.array([COARSE_GROUPS.index(_COARSE_OF[v]) for v in OVR_VISEMES])
_COARSE_LIST = COARSE.tolist()


@dataclass(frozen=True, slots=True)
class LipFrame:
    """The model's view of one instant, `time_s` on the pushed audio's own timeline."""

    time_s: float
    probs: np.ndarray  # [15] over OVR_VISEMES, sums to 1
    openness: float


class LipShapeModel:
    """Streaming audio → LipFrame every 10 ms, with lookahead at most `lookahead_ms`.

    The head used is the one with the largest lookahead not above `lookahead_ms`
    (10, 30 or 60 ms). The first push fixes the sample rate; pushing another rate
    starts a new stream (time restarts at 0).

    It runs on the CPU, whatever the machine has: on the H200 test machine a step took
    0.09–0.14 ms P50 there against 0.15–0.19 ms as a CUDA graph through
    pipeline/infer/engine.py (bench/gpu.py's lip_shape_model, bench/results/gpu_h200.json),
    and 0.46 ms on onnxruntime's CUDA provider with these host-bound I/O bindings, whose
    outputs were also up to 0.80 away from the CPU's, for a reason not found
    (bench/results/gpu_h200_before_resolve.json).
    """

    def __init__(self, path: Path | str = DEFAULT_MODEL, lookahead_ms: float = MODES_MS[DEFAULT_MODE]):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"lip-shape model not found: {path}")
        self._session, _ = build_session(str(path), "cpu")
        meta = self._session.get_modelmeta().custom_metadata_map
        self.head_lookaheads = tuple(int(v) for v in meta["lookahead_frames"].split(","))
        self._context = int(meta["context_frames"])
        # How far the trained mouth leads the sound (train_lipsync --lead-ms): a frame
        # for instant t shows the viseme whose sound starts at t + lead.
        self.lead_ms = int(meta.get("lead_ms", "0"))
        self._state_shape = tuple(int(v) for v in meta["state_shape"].split(","))
        self.set_lookahead(lookahead_ms)
        self._window = np.empty((1, 2 * self._context, N_MELS), np.float32)
        # The GRU state ping-pongs between two buffers (a run's input and output must
        # not alias); with the window's `context` start offsets that makes 2 * context
        # fixed bindings, so a hop only picks one.
        self._states = np.zeros((2, *self._state_shape), np.float32)
        heads = len(self.head_lookaheads)
        self._probs = np.empty((heads, len(OVR_VISEMES)), np.float32)
        self._openness = np.empty(heads, np.float32)
        self._bindings = [[self._binding(parity, slot) for slot in range(self._context)]
                          for parity in (0, 1)]
        self._features: StreamingLogMel | None = None
        self.reset()

    def _binding(self, parity: int, slot: int) -> onnxruntime.IOBinding:
        binding = self._session.io_binding()
        buffers = (("feats", self._window[:, slot:slot + self._context], binding.bind_input),
                   ("state", self._states[parity], binding.bind_input),
                   ("next_state", self._states[1 - parity], binding.bind_output),
                   ("probs", self._probs, binding.bind_output),
                   ("openness", self._openness, binding.bind_output))
        for name, array, bind in buffers:
            bind(name, "cpu", 0, np.float32, list(array.shape), array.ctypes.data)
        return binding

    def set_lookahead(self, lookahead_ms: float) -> None:
        """Pick the head for a latency mode; takes effect from the next frame."""
        fitting = [i for i, d in enumerate(self.head_lookaheads) if d * 10 <= lookahead_ms + 1e-9]
        if not fitting:
            raise ValueError(
                f"lookahead {lookahead_ms} ms is below the smallest the model offers "
                f"({self.head_lookaheads[0] * 10} ms)")
        self._head = max(fitting, key=lambda i: self.head_lookaheads[i])
        self.lookahead_ms = self.head_lookaheads[self._head] * 10

    def reset(self) -> None:
        """Forget the stream: the next push starts at time 0 from silence."""
        self._window.fill(np.log(POWER_FLOOR))
        self._slot = 0
        self._states.fill(0.0)
        self._parity = 0
        self._features = None

    def push(self, audio_block: np.ndarray, sample_rate: int) -> list[LipFrame]:
        """Frames completed by this block (possibly none). Raises ValueError for NaN/inf,
        unscaled float data, or a non-positive sample rate."""
        if sample_rate <= 0:
            raise ValueError(f"sample rate must be positive, got {sample_rate}")
        if self._features is None or self._features.sample_rate != sample_rate:
            self.reset()
            self._features = StreamingLogMel(sample_rate)
        first = self._features.frames_emitted
        frames = self._features.push(audio_block)
        out = []
        for i, feats in enumerate(frames):
            probs, openness = self._step(feats)
            time_s = frame_end_s(first + i) - self.lookahead_ms / 1000
            out.append(LipFrame(time_s, probs, openness))
        return out

    def step_all_heads(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Feed one log-mel frame (16 kHz features made elsewhere, e.g. a training
        corpus); every head's (probs [heads, 15], openness [heads]) for it."""
        self._advance(feats)
        return self._probs.copy(), self._openness.copy()

    def _step(self, feats: np.ndarray) -> tuple[np.ndarray, float]:
        self._advance(feats)
        return self._probs[self._head].copy(), float(self._openness[self._head])

    def _advance(self, feats: np.ndarray) -> None:
        # The window is stored twice over so the newest `context` frames are always one
        # contiguous slice: no shifting, no copy per hop.
        c = self._context
        self._window[0, self._slot] = feats
        self._window[0, self._slot + c] = feats
        self._slot = (self._slot + 1) % c
        self._session.run_with_iobinding(self._bindings[self._parity][self._slot])
        self._parity ^= 1


class VisemeSmoother:
    """LipFrames → MouthPoses without chatter and without lag where it shows.

    Probabilities are tracked with an attack and a release time constant (0: the model's
    own); the shown viseme changes only when a rival's tracked probability beats it by a
    margin, and then blends in over `blend_frames`. The margin is `hysteresis` between
    look-alike visemes of one coarse group (E/ih, DD/nn/kk…: a change a viewer barely
    sees, and most of the model's flicker) and the much smaller `group_hysteresis` for a
    change into another group (a shape a viewer does see, which should not wait). Lip
    closures and lip-teeth contacts (PP, FF) bypass both: as soon as the model favours
    one (its probability at least `closure_share` of the top one), it is shown, fully,
    for at least `closure_hold_frames` — however short, it is what viewers check first.
    Openness follows the model with its own attack and release, and shuts at once for a
    closure.

    The defaults were chosen on synthetic held-out speech, not on the real-speech dev
    set: packaging/tune_smoother.py (espeak-ng variants the training corpus never uses,
    seed 77; bench/results/smoother_tuning.json) searched attack/release/margins/closure
    share on the balanced head for the smallest onset error of coarse-group changes with
    no more viseme changes per second and no lower accuracy than the previous defaults
    (attack 5 ms, release 20 ms, one margin of 0.05; those had been picked on the dev
    set). There, balanced head: onset mean 14.1 -> 11.6 ms, median signed lag 10 -> 0 ms,
    13.1 changes/s either way; the tracks came out instant (the margins do the work).
    Openness keeps the previous time constants (not tuned). The dev set, scored once
    afterwards (bench/results/lipsync_eval.json), balanced mode: onset median 30 -> 20 ms,
    changes/s 12.0 -> 11.2, balanced coarse 0.666 -> 0.664, but 15-way 0.586 -> 0.567
    (look-alikes inside a group are held longer than on synthetic speech).
    """

    def __init__(self, attack_ms: float = 0.0, release_ms: float = 0.0,
                 hysteresis: float = 0.6, blend_frames: int = 2, closure_hold_frames: int = 2,
                 closure_share: float = 1.0, group_hysteresis: float = 0.1,
                 openness_attack_ms: float = 5.0, openness_release_ms: float = 20.0):
        self._attack, self._release = _rate(attack_ms), _rate(release_ms)
        self._open_attack = _rate(openness_attack_ms)
        self._open_release = _rate(openness_release_ms)
        self.hysteresis = hysteresis
        self.blend_frames = max(1, blend_frames)
        self.closure_hold_frames = closure_hold_frames
        self.closure_share = closure_share
        self.group_hysteresis = group_hysteresis
        self._smoothed = np.zeros(len(OVR_VISEMES), np.float32)
        self._rate = np.empty(len(OVR_VISEMES), np.float32)
        self.reset()

    def reset(self) -> None:
        self._smoothed.fill(0.0)
        self._smoothed[_SIL] = 1.0
        self._current = self._previous = _SIL
        self._mix = 1.0
        self._hold = 0
        self._openness = 0.0

    def update(self, frame: LipFrame) -> MouthPose:
        probs = frame.probs
        if self._attack == self._release == 1.0:
            np.copyto(self._smoothed, probs)  # the default: no arithmetic on the audio path
        else:
            np.copyto(self._rate, self._release)
            self._rate[probs > self._smoothed] = self._attack
            self._smoothed += self._rate * (probs - self._smoothed)

        closure = self._closure(probs)
        if closure >= 0 and closure != self._current:
            self._switch(closure, instant=True)
            self._hold = self.closure_hold_frames
        elif self._hold > 0:
            self._hold -= 1
        else:
            best = int(np.argmax(self._smoothed))
            margin = (self.hysteresis if _COARSE_LIST[best] == _COARSE_LIST[self._current]
                      else self.group_hysteresis)
            if best != self._current and (
                    self._smoothed[best] > self._smoothed[self._current] + margin):
                self._switch(best, instant=False)
        if self._mix < 1.0:
            self._mix = min(1.0, self._mix + 1.0 / self.blend_frames)

        target = 0.0 if self._current in MUST_SHOW_INDICES else frame.openness
        rate = self._open_attack if target > self._openness else self._open_release
        if self._current in MUST_SHOW_INDICES:
            rate = 1.0  # a closure closes now, not over the release time
        self._openness += rate * (target - self._openness)
        return MouthPose(self._previous, self._current, self._mix, float(self._openness))

    def _closure(self, probs: np.ndarray) -> int:
        """The lip closure or contact to show now, -1 for none."""
        top = int(np.argmax(probs))
        if top in MUST_SHOW_INDICES:
            return top
        contact = max(MUST_SHOW_INDICES, key=probs.__getitem__)
        return contact if probs[contact] >= self.closure_share * probs[top] else -1

    def _switch(self, viseme: int, instant: bool) -> None:
        self._previous, self._current = self._current, viseme
        self._mix = 1.0 if instant else 0.0


def _rate(time_constant_ms: float) -> float:
    """Per-frame step of a one-pole follower; a time constant of 0 follows at once."""
    return 1.0 - float(np.exp(-FRAME_S * 1000 / time_constant_ms)) if time_constant_ms > 0 else 1.0


def infer_file(path: Path | str, lookahead_ms: float = MODES_MS[OFFLINE_MODE],
               model_path: Path | str = DEFAULT_MODEL) -> list[VisemeCue]:
    """Mouth cues for a recording (anything pipeline.audio.audio_file reads), from the
    same model and smoother as the live path; AudioFileError for a file it cannot read.

    Offline there is no latency to save, so the default is the premium head."""
    from pipeline.audio.audio_file import read_blocks  # PyAV: not needed to train or step

    rate, blocks = read_blocks(path)
    model = LipShapeModel(model_path, lookahead_ms)
    smoother = VisemeSmoother()
    cues: list[VisemeCue] = []
    duration = 0.0

    def with_tail():
        nonlocal duration
        for block in blocks:
            duration += len(block) / rate
            yield block
        # Silence after the end lets the model finish the last `lookahead` of speech.
        yield np.zeros(int(rate * (model.lookahead_ms / 1000 + 2 * FRAME_S)), np.float32)

    for block in with_tail():
        for frame in model.push(block, rate):
            if frame.time_s >= duration:
                break
            value = OVR_VISEMES[smoother.update(frame).dominant]
            start = max(0.0, frame.time_s - FRAME_S / 2)
            end = min(duration, frame.time_s + FRAME_S / 2)
            if end <= start:
                continue
            if cues and cues[-1].value == value:
                cues[-1] = VisemeCue(cues[-1].start, end, value)
            else:
                cues.append(VisemeCue(cues[-1].end if cues else start, end, value))
    return cues
