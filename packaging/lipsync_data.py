"""Training data for the lip-shape model: synthetic speech whose phoneme timing is exact.

Two sources, both reproducible from a seed and needing no download:
- the bundled piper voice (en_US-joe-medium): per-phoneme durations from its duration
  predictor (pipeline.voice.streaming_tts, premium mode), at random speaking rates and noise;
- espeak-ng (inside piper's espeakbridge.so, through ctypes): PHONEME events carry the
  sample position of every phoneme; many voices, variants, rates and pitches.

Text comes from Python's own documentation (`pydoc_data.topics`, shipped with every
Python), as sentences, random word strings, and nonsense syllables that cover rare
consonant-vowel pairs. Each utterance is augmented (speed/pitch, room reverb, mic
colouring, noise, band limits, codecs, compressor and noise gate, gain, clipping) and
turned into log-mel frames with the same code the app runs (pipeline.lipsync.features),
plus a viseme label and an openness target on the 10 ms grid.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# One BLAS thread per worker process: with a pool on every core, BLAS's own spinning
# threads oversubscribe the machine many times over and generation crawls.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from scipy.signal import butter, fftconvolve, lfilter, sosfilt  # noqa: E402

# Run as a script from a checkout (the folder name shadows PyPI's `packaging`).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pipeline.lipsync.features import HOP, SAMPLE_RATE, log_mel  # noqa: E402
from pipeline.audio.resample import resample  # noqa: E402
from pipeline.core.modes import PREMIUM  # noqa: E402
from pipeline.core.visemes import OPENNESS, OVR_VISEMES, PAUSES, STRESS_MARKS, VISEME_INDEX, viseme_for_phoneme  # noqa: E402,E501

SIL = VISEME_INDEX["sil"]
_OPENNESS = np.array([OPENNESS[v] for v in OVR_VISEMES], np.float32)
# Pauses inside an utterance shorter than this are coarticulation, not a closed mouth:
# their time goes to the neighbouring sounds (the app's viseme_track does the same).
SHORT_PAUSE_S = 0.08

ESPEAK_VOICES = ("en-us", "en", "en-gb-x-rp", "en-029", "en-gb-scotland", "en-us-nyc",
                 "en-gb-x-gbclan", "en-gb-x-gbcwmd")
ESPEAK_VARIANTS = ("", "+m1", "+m2", "+m3", "+m4", "+m5", "+m6", "+m7", "+f1", "+f2", "+f3",
                   "+f4", "+f5", "+adam", "+Andy",
                   "+annie", "+benjamin", "+caleb", "+david", "+ed", "+edward", "+grandpa",
                   "+john", "+linda", "+max", "+michel", "+norbert", "+steph", "+travis",
                   "+victor", "+Alex", "+Alicia", "+Hugo", "+Lee", "+Mike", "+Reed",
                   # More timbres, breathy and whispered ones too (piper's espeak-ng has
                   # no Klatt synthesiser, so the klatt variants are left out).
                   "+whisper", "+whisperf", "+Gene", "+Gene2", "+Denis", "+Mario", "+Storm",
                   "+iven", "+iven2", "+iven3", "+quincy", "+aunty", "+belinda", "+boris",
                   "+rob", "+robert", "+paul", "+ian", "+Michael", "+zac", "+shelby",
                   "+grandma", "+pablo", "+sandro", "+Diogo", "+steph2", "+steph3", "+Jacky")
_SYLLABLE_ONSETS = ("p", "b", "m", "f", "v", "th", "t", "d", "k", "g", "ch", "j", "sh", "s",
                    "z", "n", "l", "r", "w", "y", "h", "")
_SYLLABLE_VOWELS = ("a", "ah", "ee", "eh", "i", "oh", "oo", "ow", "ay", "oy", "aw", "er")


@dataclass
class Utterance:
    audio: np.ndarray          # float32 mono at `sample_rate`
    sample_rate: int
    spans: list[tuple[int, float, float]]  # (viseme index, start s, end s), contiguous


# ---------------------------------------------------------------- text

def text_pool(seed: int, n: int) -> list[str]:
    """`n` texts: sentences from Python's docs, random word strings, nonsense syllables."""
    from pydoc_data.topics import topics

    prose = " ".join(topics.values())
    sentences = []
    for raw in re.split(r"(?<=[.!?])\s+", prose):
        s = " ".join(raw.split())
        words = s.split()
        if 3 <= len(words) <= 24 and re.fullmatch(r"[A-Za-z ,;'.!?-]+", s):
            sentences.append(s)
    vocabulary = sorted({w.lower() for w in re.findall(r"[A-Za-z]{2,14}", prose)})
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.55:
            texts.append(sentences[rng.integers(len(sentences))])
        elif kind < 0.85:
            words = rng.choice(vocabulary, size=rng.integers(2, 14))
            texts.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ","]))
        else:
            syllables = [
                rng.choice(_SYLLABLE_ONSETS) + rng.choice(_SYLLABLE_VOWELS)
                for _ in range(rng.integers(2, 9))
            ]
            joiner = rng.choice([" ", "", "-"])
            texts.append(joiner.join(syllables).capitalize() + ".")
    return texts


# ---------------------------------------------------------------- espeak-ng via ctypes

class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p), ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int), ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p), ("id", _EventId),
    ]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))
_EVENT_PHONEME = 7
_EVENT_LIST_TERMINATED = 0
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_PHONEME_EVENTS = 0x0001
_INITIALIZE_PHONEME_IPA = 0x0002
_CHARS_UTF8 = 1
_RATE, _PITCH, _RANGE = 1, 3, 4


class Espeak:
    """espeak-ng inside piper's espeakbridge.so. One per process: the library is global.

    Don't use in a process that also phonemizes through piper (same library state)."""

    def __init__(self):
        import piper

        root = Path(piper.__file__).parent
        self._lib = ctypes.CDLL(str(root / "espeakbridge.so"))
        self.sample_rate = self._lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, str(root).encode(),
            _INITIALIZE_PHONEME_EVENTS | _INITIALIZE_PHONEME_IPA)
        if self.sample_rate <= 0:
            raise RuntimeError("espeak_Initialize failed")
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[int, str]] = []
        self._callback = _CALLBACK(self._collect)
        self._lib.espeak_SetSynthCallback(self._callback)
        self._lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint,
            ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]

    def _collect(self, wav, n, events) -> int:
        if n > 0:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
        i = 0
        while events[i].type != _EVENT_LIST_TERMINATED:
            e = events[i]
            if e.type == _EVENT_PHONEME:
                self._events.append((e.sample, e.id.string.decode("utf-8", "replace")))
            i += 1
        return 0

    def speak(self, text: str, voice: str, rate: int, pitch: int, pitch_range: int) -> Utterance:
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ValueError(f"espeak has no voice {voice!r}")
        self._lib.espeak_SetParameter(_RATE, rate, 0)
        self._lib.espeak_SetParameter(_PITCH, pitch, 0)
        self._lib.espeak_SetParameter(_RANGE, pitch_range, 0)
        self._chunks, self._events = [], []
        data = text.encode("utf-8") + b"\0"
        self._lib.espeak_Synth(data, len(data), 0, 1, 0, _CHARS_UTF8, None, None)
        audio = (np.concatenate(self._chunks).astype(np.float32) / 32768.0
                 if self._chunks else np.zeros(0, np.float32))
        total = len(audio)
        spans = []
        for (start, symbol), nxt in zip(self._events, [*self._events[1:], (total, "")]):
            end = min(nxt[0], total)
            if end > start:
                spans.append((espeak_viseme(symbol), start / self.sample_rate,
                              end / self.sample_rate))
        return Utterance(audio, self.sample_rate, spans)


def espeak_viseme(symbol: str) -> int:
    """Viseme of one espeak IPA phoneme event (stress marks and pauses stripped)."""
    core = "".join(c for c in symbol if c not in STRESS_MARKS).strip()
    if not core or core in PAUSES or set(core) <= set("_:"):
        return SIL
    return VISEME_INDEX[viseme_for_phoneme(core)]


# ---------------------------------------------------------------- piper

def piper_utterance(tts, mode, text: str, length_scale: float) -> Utterance | None:
    """One utterance of the bundled voice: its sentences joined, exact phoneme spans."""
    audio_parts, spans, offset = [], [], 0.0
    for segment in tts.synthesize(text, mode, length_scale=length_scale):
        for p in segment.phonemes:
            spans.append((VISEME_INDEX[p.viseme], offset + p.start, offset + p.end))
        audio_parts.append(segment.audio)
        offset += segment.duration
    if not audio_parts:
        return None
    return Utterance(np.concatenate(audio_parts), tts.sample_rate, spans)


# ---------------------------------------------------------------- labels

def merge_short_pauses(spans: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """Give pauses shorter than SHORT_PAUSE_S between two sounds to those sounds."""
    out = [list(s) for s in spans]
    for i in range(1, len(out) - 1):
        v, a, b = out[i]
        if v == SIL and b - a < SHORT_PAUSE_S and out[i - 1][0] != SIL and out[i + 1][0] != SIL:
            middle = (a + b) / 2
            out[i - 1][2] = middle
            out[i + 1][1] = middle
            out[i][2] = out[i][1] = middle
    return [(v, a, b) for v, a, b in out if b > a]


def frame_labels(spans, n_frames: int) -> tuple[np.ndarray, np.ndarray]:
    """Viseme at each instant j * 10 ms (sil outside speech) and a smoothed openness.

    The openness target ramps over ±20 ms around changes, as jaws do."""
    labels = np.full(n_frames, SIL, np.uint8)
    times = np.arange(n_frames) * (HOP / SAMPLE_RATE)
    for v, a, b in spans:
        labels[(times >= a) & (times < b)] = v
    kernel = np.array([1, 2, 3, 2, 1], np.float32)
    openness = np.convolve(np.pad(_OPENNESS[labels], 2, mode="edge"), kernel / kernel.sum(),
                           mode="valid")
    return labels, openness.astype(np.float32)


# ---------------------------------------------------------------- augmentation

def _coloured_noise(rng, n: int) -> np.ndarray:
    white = rng.standard_normal(n).astype(np.float32)
    kind = rng.integers(4)
    if kind == 0:
        return white
    if kind == 1:  # pink-ish: Paul Kellet's economy filter
        return lfilter([0.049922035, -0.095993537, 0.050612699, -0.004408786],
                       [1, -2.494956002, 2.017265875, -0.522189400], white).astype(np.float32)
    if kind == 2:  # brown (rumble, wind)
        return lfilter([1.0], [1, -0.98], white).astype(np.float32)
    t = np.arange(n) / SAMPLE_RATE  # mains hum with harmonics
    f0 = rng.choice([50.0, 60.0])
    hum = sum(np.sin(2 * np.pi * f0 * h * t + rng.random() * 6) / h for h in (1, 2, 3, 5))
    return (hum + 0.1 * white).astype(np.float32)


def _room_impulse(rng) -> np.ndarray:
    rt60 = rng.uniform(0.08, 0.7)
    n = int(rt60 * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    tail = rng.standard_normal(n) * np.exp(-6.9 * t / rt60)
    tail[: int(0.003 * SAMPLE_RATE)] = 0.0  # reflections arrive after the direct sound
    rir = tail * rng.uniform(0.05, 0.5)
    rir[0] = 1.0
    return (rir / np.sqrt(np.sum(rir ** 2))).astype(np.float32)


def _mic_colour(rng, audio: np.ndarray) -> np.ndarray:
    nyq = SAMPLE_RATE / 2
    if rng.random() < 0.8:
        audio = sosfilt(butter(2, rng.uniform(40, 300) / nyq, "highpass", output="sos"), audio)
    if rng.random() < 0.6:
        audio = sosfilt(butter(rng.integers(2, 7), rng.uniform(2800, 7600) / nyq, "lowpass",
                               output="sos"), audio)
    for _ in range(rng.integers(0, 3)):  # resonant peaks/dips of cheap capsules
        f = rng.uniform(200, 6000) / nyq
        sos = butter(1, [f * 0.8, min(f * 1.25, 0.99)], "bandpass", output="sos")
        audio = audio + rng.uniform(-0.5, 1.0) * sosfilt(sos, audio)
    return audio.astype(np.float32)


def _band_limit(rng, audio: np.ndarray) -> np.ndarray:
    """Down to a lower rate and back: telephone (8 kHz), old games and voice chat
    (11.025, 12 kHz), as real recordings reach the mic model (issue 24)."""
    rate = int(rng.choice([8000, 11025, 12000]))
    return resample(resample(audio, SAMPLE_RATE, rate), rate, SAMPLE_RATE)[: len(audio)]


def _codec(rng, audio: np.ndarray) -> np.ndarray:
    """A lossy speech codec's marks, without the codec: G.711 mu-law companding, or a
    perceptual coder's (MP3, Opus, streaming chat): each 32 ms STFT frame keeps only the
    bins within a random 12-30 dB of its peak, quantized in coarse steps, so quiet
    partials drop out and holes open in the spectrum as they do at low bit rates."""
    if rng.random() < 0.3:
        mu = 255.0
        y = np.sign(audio) * np.log1p(mu * np.abs(audio)) / np.log1p(mu)
        y = np.round(y * 127) / 127
        return (np.sign(y) * np.expm1(np.abs(y) * np.log1p(mu)) / mu).astype(np.float32)
    from scipy.signal import istft, stft

    _, _, spec = stft(audio, SAMPLE_RATE, nperseg=512, noverlap=384)
    mag = np.abs(spec)
    floor = mag.max(axis=0, keepdims=True) * 10 ** (-rng.uniform(12, 30) / 20)
    step = rng.uniform(1.5, 4.0)  # dB per quantization step
    q = 10 ** (np.round(20 * np.log10(mag + 1e-12) / step) * step / 20)
    spec = np.where(mag >= floor, q * np.exp(1j * np.angle(spec)), 0)
    _, out = istft(spec, SAMPLE_RATE, nperseg=512, noverlap=384)
    return np.pad(out, (0, max(0, len(audio) - len(out))))[: len(audio)].astype(np.float32)


def _dynamics(rng, audio: np.ndarray) -> np.ndarray:
    """A streamer's mic chain: a compressor (ratio 2-8 over a threshold 10-30 dB under the
    peak, 5 ms attack, 100 ms release) and often a noise gate that mutes the quiet
    stretches between words, as OBS's filters do."""
    env = np.abs(audio)
    attack, release = np.exp(-1 / (0.005 * SAMPLE_RATE)), np.exp(-1 / (0.1 * SAMPLE_RATE))
    # One-pole peak follower: the faster of the attack and release branches per sample,
    # approximated by filtering twice (a vectorized stand-in for the sample loop).
    rise = lfilter([1 - attack], [1, -attack], env)
    level = np.maximum(rise, lfilter([1 - release], [1, -release], rise))
    db = 20 * np.log10(level + 1e-9)
    threshold = db.max() - rng.uniform(10, 30)
    ratio = rng.uniform(2, 8)
    gain_db = np.where(db > threshold, (threshold - db) * (1 - 1 / ratio), 0.0)
    if rng.random() < 0.5:
        gate = db < db.max() - rng.uniform(30, 50)
        gain_db = np.where(gate, -60.0, gain_db)
    smooth = lfilter([1 - release], [1, -release], 10 ** (gain_db / 20))
    return (audio * smooth).astype(np.float32)


def augment(audio: np.ndarray, rng, strength: float) -> np.ndarray:
    """Room, microphone, noise, band limit, codec, dynamics, level and clipping;
    `strength` 0..1 scales how harsh."""
    n = len(audio)
    if rng.random() < 0.6 * strength + 0.1:
        audio = fftconvolve(audio, _room_impulse(rng))[:n]
    if rng.random() < 0.9:
        audio = _mic_colour(rng, audio)
    speech_power = float(np.mean(audio ** 2)) + 1e-12
    if rng.random() < 0.85:
        snr_db = rng.uniform(45 - 40 * strength, 50)
        noise = _coloured_noise(rng, n)
        noise *= np.sqrt(speech_power / (np.mean(noise ** 2) + 1e-12) / 10 ** (snr_db / 10))
        audio = audio + noise
    if rng.random() < 0.25 * strength:
        audio = _band_limit(rng, audio)
    if rng.random() < 0.3 * strength:
        audio = _codec(rng, audio)
    if rng.random() < 0.3 * strength:
        audio = _dynamics(rng, audio)
    peak = float(np.max(np.abs(audio))) + 1e-9
    audio = audio / peak * 10 ** (rng.uniform(-40, 0) / 20)
    if rng.random() < 0.1 * strength:
        drive = 10 ** (rng.uniform(0, 14) / 20)
        audio = np.clip(audio * drive, -1, 1)
    if rng.random() < 0.05:  # DC offset of cheap interfaces
        audio = audio + rng.uniform(-0.05, 0.05)
    return np.clip(audio, -1, 1).astype(np.float32)


def render(utt: Utterance, rng, strength: float):
    """(features [T, 40] float16, labels [T] uint8, openness [T] float16) for one variant."""
    # Speed (and with it pitch and formants, a vocal-tract-length change) as a ratio of
    # small integers: resample_poly's cost grows with the factors it is given.
    slow = int(rng.integers(44, 57))
    speed = 50 / slow
    audio = resample(resample(utt.audio, utt.sample_rate, SAMPLE_RATE), 50, slow)
    lead, tail = rng.uniform(0.05, 0.6), rng.uniform(0.05, 0.6)
    audio = np.concatenate([np.zeros(int(lead * SAMPLE_RATE), np.float32), audio,
                            np.zeros(int(tail * SAMPLE_RATE), np.float32)])
    audio = augment(audio, rng, strength)
    feats = log_mel(audio)
    spans = [(v, lead + a / speed, lead + b / speed) for v, a, b in merge_short_pauses(utt.spans)]
    labels, openness = frame_labels(spans, len(feats) + 1)
    return feats.astype(np.float16), labels, openness.astype(np.float16)


# ---------------------------------------------------------------- workers

_STATE: dict = {}


def _piper_job(args):
    index, text, seed, variants = args
    rng = np.random.default_rng(seed)
    if "tts" not in _STATE:
        from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

        # Premium reads each sentence whole, timed as the unsplit voice times it.
        _STATE["tts"] = StreamingTTS(seed=seed), LATENCY_MODES[PREMIUM]
        import onnxruntime

        onnxruntime.set_seed(seed)
    try:
        utt = piper_utterance(*_STATE["tts"], text, float(rng.uniform(0.75, 1.35)))
    except Exception:  # texts the voice cannot speak are skipped, not fatal
        return []
    if utt is None:
        return []
    return [render(utt, rng, s) for s in variants]


def _espeak_job(args):
    index, text, seed, variants = args
    rng = np.random.default_rng(seed)
    if "espeak" not in _STATE:
        _STATE["espeak"] = Espeak()
    espeak = _STATE["espeak"]
    voice = str(rng.choice(ESPEAK_VOICES)) + str(rng.choice(ESPEAK_VARIANTS))
    try:
        utt = espeak.speak(text, voice, int(rng.integers(110, 260)), int(rng.integers(20, 80)),
                           int(rng.integers(10, 90)))
    except ValueError:
        utt = espeak.speak(text, "en-us", 175, 50, 50)
    if len(utt.audio) == 0:
        return []
    return [render(utt, rng, s) for s in variants]


def build(out: Path, seed: int, n_piper: int, n_espeak: int, workers: int,
          deadline_s: float | None = None) -> dict:
    """Generate the corpus into `out` (.npz); returns counts. Deterministic for a seed,
    unless `deadline_s` cuts generation short: then it holds the jobs done in time
    (piper gets the first half of the time, espeak the rest), in job order."""
    import multiprocessing as mp
    import time

    texts = text_pool(seed, n_piper + n_espeak)
    variants = (0.3, 1.0)
    piper_jobs = [(i, t, seed * 1_000_003 + i, variants) for i, t in enumerate(texts[:n_piper])]
    espeak_jobs = [(i, t, seed * 1_000_003 + n_piper + i, variants)
                   for i, t in enumerate(texts[n_piper:])]
    items, sources = [], []
    ctx = mp.get_context("spawn")
    t0 = time.time()
    # Separate pools: piper's phonemizer and our espeak synth share one library state.
    for name, job, jobs, share in (("piper", _piper_job, piper_jobs, 0.5),
                                   ("espeak", _espeak_job, espeak_jobs, 1.0)):
        if not jobs:
            continue
        done: dict[int, list] = {}
        with ctx.Pool(workers) as pool:
            for index, result in pool.imap_unordered(_indexed, [(job, j) for j in jobs], chunksize=2):
                done[index] = result
                if deadline_s is not None and time.time() - t0 > deadline_s * share:
                    break
        for index in sorted(done):
            items.extend(done[index])
            sources.extend([name] * len(done[index]))
    lengths = np.array([len(f) for f, _, _ in items], np.int64)
    # Written under another name and renamed: a trainer polling for `out` (see
    # train_lipsync --more-data) never reads half a file.
    partial = out.with_name(out.stem + ".partial.npz")
    np.savez(
        partial,
        features=np.concatenate([f for f, _, _ in items]),
        labels=np.concatenate([lab[: len(f)] for f, lab, _ in items]),
        openness=np.concatenate([o[: len(f)] for f, _, o in items]),
        lengths=lengths,
        sources=np.array(sources),
    )
    os.replace(partial, out)
    return {"utterances": len(items), "frames": int(lengths.sum()),
            "piper": sources.count("piper"), "espeak": sources.count("espeak"),
            "hours": float(lengths.sum()) * HOP / SAMPLE_RATE / 3600}


def _indexed(args):
    job, job_args = args
    return job_args[0], job(job_args)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--piper", type=int, default=1600)
    parser.add_argument("--espeak", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--deadline-s", type=float, default=None)
    a = parser.parse_args()
    print(build(a.out, a.seed, a.piper, a.espeak, a.workers, a.deadline_s))
