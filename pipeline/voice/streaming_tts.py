"""A piper voice as a stream: first audio after a few phonemes, whatever the sentence
length, each stretch's exact phoneme timeline ahead of its audio. The bundled voice
unless told another (pipeline.voice.voice_files); a multi-speaker voice speaks with the
speaker asked for (its id fed to every engine: each conditions on the speaker).

The voice's graph is split in memory into three engines, each fed fixed shapes:

- acoustic: text encoder + duration predictor. Phoneme ids (padded to a bucket, masked
  by `input_lengths`) → per id: frames, prior mean and log-scale. It runs on phoneme
  windows with context, so the first window's cost does not grow with the sentence.
- flow: prior latents (the means repeated per frame, plus noise) → latents, on frame
  windows. Its receptive field is exactly ±32 frames (4 couplings × 4 convolutions of
  kernel 5) and it masks every convolution input, so windows with 32 context frames,
  or padded and masked past the end, give the whole-sentence latents.
- vocoder: latents → audio, on frame windows with context frames each side, the
  context cropped. A window never starts before frame 0 or runs past the end (it is
  shifted instead), so the edges see the same borders as whole-sentence decoding;
  only a sentence shorter than one window is padded.

Acoustic + flow form the acoustic stage; the vocoder is the other stage. The generator
is pull-based: each `next()` does only the work its chunk needs. The encoder's
attention spans its whole input, so a window's durations differ slightly from the
whole sentence's; only the stream's first window is short (it fills the smallest
bucket and sets time to first audio). Later ones see up to 200 phonemes (the second
at most 256 ids, so that it is read in time), and each is started on the acoustic
stage's own worker once the stream is a few chunks ahead, so it runs while the audio
before it is made and played. Every window boundary costs some duration accuracy, so
windows do not grow step by step (that gave 90-94 % of durations within a frame of the
whole sentence's; these windows give 96 %). Each window's phonemes become one
SentencePlan, sent before any of its audio.

Time to first audio is the sum of one run of each engine. In ultra and balanced the
stream's first two chunks are a *preview*: one flow run over just their frames, and the
vocoder on each, with less right context than exactness needs (their 70 ms are mostly
the sentence's lead-in). The rest of the first window (~350 ms) is previews too, flowed
from frame 0 over that window's own priors, while the next window is read on the
worker; then the flow starts again from frame 0 with full context. So a sentence that
fits the first window is exact after its first two chunks, and a longer one after its
first window.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx.utils import Extractor
from piper import PiperVoice
from piper.const import BOS, EOS

from pipeline.core.frames import PhonemeTiming, SpeechSegment, WordTiming
from pipeline.core.modes import BALANCED, DEFAULT_MODE, PREMIUM, ULTRA
from pipeline.infer.device_memory import DeviceColumns
from pipeline.infer.engine import REWRITES, Engine
from pipeline.infer.sessions import ProviderChoice
from pipeline.infer.static_graph import NOISE_INPUT, noise_as_input
from pipeline.text.input import PreparedText, prepare_text
from pipeline.text.normalizer import TypedText
from pipeline.voice import prior_noise
from pipeline.voice.latent_track import LatentTrack
from pipeline.voice.phonemes import (
    nothing_to_speak,
    phonemize,
    spoken_sentences,
    symbol_ids,
    word_gap_cut,
)
from pipeline.voice.viseme_track import fold_phonemes, word_timings
from pipeline.voice.voice_files import (
    BUNDLED_VOICE,
    SPEAKER_INPUT,
    VoiceError,
    VoiceFiles,
    check_voice,
)

log = logging.getLogger(__name__)

# A stream's first audio is ranked this much earlier than its deadline. A stream that
# plays keeps a lead over its listener (the speaker's start lead, a client's buffer), so
# its next chunk can give way briefly; a new stream has nothing to give, and its wait is
# the latency its listener hears. Measured with 50 API streams opened at once on the
# 2-core VM (every stream then underruns: the load is ~5x real time): first byte P50 /
# P99 1037-1588 / 2349-3406 ms without, 512-581 / 858-956 ms at 0.25 s, 629-662 /
# 1023-1143 ms at 1 s; underruns 592-600 in every case. One stream alone is not changed.
FIRST_AUDIO_PRIORITY_S = 0.25
# What each engine computes in on a GPU (Engine's precision), where not in fp32: none.
# The acoustic engine stays in fp32 whatever: its durations are a Ceil of a sum, which
# any rounding moves. bench/gpu.py's precision section measures the flow and the
# vocoder in tf32 and in fp16 against fp32; on a lent H100 (bench/results/
# gpu_h100_precision.json) neither paid: tf32 first audio 6.4-7.9 ms against 6.9-7.8,
# but 50 streams' P99 1.3-1.6 s against 0.11-0.14 s, and audio 47-54 dB from fp32's
# (the CPU path: 91-105 dB); fp16 first audio 8.0-9.4 ms against 7.0-8.3, audio 43-47
# dB, and cuDNN had no fp16 algorithm for the vocoder's dilated convolutions at some
# batch shapes (5 of 50 streams failed, EXHAUSTIVE search or not).
ENGINE_PRECISION: dict[str, str] = {}
# The graph rewrites the engines make (Engine's `rewrites`), each measured against the
# engine without it:
# - "compact_splines": the duration predictor's three spline couplings in 117 fewer
#   nodes once onnxruntime has optimized the acoustic stage (754 -> 637 at the first
#   window's bucket), the same numbers bit for bit (tests/test_static_graph.py, and
#   test_gpu_voice.py on a device). On the 2-vCPU VM the acoustic run took 11 % less
#   (7.61 against 8.58 ms, acoustic_split_2vcpu_xeon_splines.json), on two lent H100s 7 %
#   (2.67 against 2.86 ms and 2.55 against 2.74, acoustic_split_h100_splines*.json).
#   Loading the voice takes ~50 ms more on the VM (the check of each coupling on random
#   inputs).
# - "fused_layer_norms": the acoustic engine's 36 layer norms, 288 of its 2,343 nodes. Its
#   outputs moved by at most 1e-5 and no duration changed, over 300 random id sequences
#   on the CPU (tests/test_static_graph.py), and the stream stays as close to stock piper
#   as tests/test_streaming_tts.py holds it. On the 2-vCPU VM the acoustic run took 10 %
#   less (7.98 against 8.83 ms at the first window's bucket,
#   bench/results/acoustic_split_2vcpu_xeon.json), on a lent H100 18 % (2.67 against
#   3.25 ms, acoustic_split_h100_fused.json).
# bench/gpu.py's precision section measures first audio and 50 streams with each left out,
# in one run (on a lent H100 the differences were within the run-to-run spread of the
# shipped engines, measured first and last: gpu_h100_39f0661_precision_rewrites.json).
ENGINE_REWRITES: tuple[str, ...] = REWRITES

# The bundled voice, as the API and the command line name it.
VOICE_NAME = BUNDLED_VOICE.name

# Phoneme-id lengths the acoustic engine is ever run with: a handful of fixed shapes,
# so GPU graphs / TensorRT profiles can be built for exactly these later. The encoder
# costs ~0.3 ms per id here, so the first window gets a bucket of its own (32 ids,
# 15 phonemes, 10 committed): 9 ms sooner to first audio than padding it to 64.
BUCKETS: tuple[int, ...] = (32, 64, 128, 256, 512, 1024)

# The flow's exact receptive field in frames, each side.
FLOW_CONTEXT = 32
# Later flow windows: 64 new frames per run keeps the context overhead at 2x on an
# engine that costs a quarter of the vocoder per frame.
FLOW_WINDOW = 128

# After a preview start the second window is read on the acoustic worker while the first
# window's ~350 ms of audio is made and played: so it is capped at 256 ids (~70 ms of
# encoder here; 512 ids take ~190 ms, and twice that in the app on 2 busy cores). It
# starts once three chunks are out, at a lower priority: it has hundreds of milliseconds
# to spare, while the next chunks are due every 35-70 ms and the display every 17 ms
# (at equal priority it made both late in the app on 2 cores).
SECOND_WINDOW_IDS = 256
PREFETCH_AFTER_CHUNKS = 3
PREFETCH_NICE = 5

# Sane speaking rates; outside them piper produces mush or minutes of drawl.
_LENGTH_SCALE_RANGE = (0.25, 4.0)

# A stream cannot normalise each sentence to its peak (stock piper does) before the
# sentence exists. Raw peaks of this voice (96 renders, default noise): median 0.54,
# P95 0.69, max 0.75. 1.3 keeps the loudest measured sentence just below full scale;
# typical speech comes out ~3 dB below stock piper's per-sentence normalisation.
GAIN = 1.3

_IDS, _ID_LENGTHS, _SCALES = "input", "input_lengths", "scales"
_PRIOR_MEAN, _PRIOR_LOG_SCALE = "/enc_p/Split_output_0", "/enc_p/Split_output_1"
_ID_FRAMES = "/Ceil_output_0"
_PRIOR_LATENT, _FRAME_MASK = "/Add_output_0", "/Cast_2_output_0"
_LATENT, _AUDIO = "/Mul_7_output_0", "output"
# The projection to the prior's mean and log-scale: twice the latent channels out.
_PRIOR_PROJECTION = "enc_p.proj.weight"
# The bundled (medium) voice's latent channels.
LATENT_CHANNELS = 192


@dataclass(frozen=True, slots=True)
class LatencyMode:
    """What a stream trades for time to first audio. Read at every chunk and window.

    Chunks grow from `first_chunk_frames`, doubling, up to `chunk_frames` (a frame is
    one latent step = 256 samples, 11.6 ms), so audio builds up a lead while early
    chunks stay cheap. Windows are counted in phonemes (symbols as piper emits them).
    """

    name: str
    first_chunk_frames: int
    chunk_frames: int
    context_frames: int  # vocoder context each side of a chunk
    first_window: int  # phonemes the first acoustic window commits
    first_lookahead: int  # phonemes the first window sees after its committed ones
    window: int  # most phonemes a later acoustic window commits
    lookahead: int  # phonemes a later window sees after its committed ones
    lookbehind: int  # phonemes a later window sees before its committed ones
    # Right context of the flow and vocoder runs that make the stream's first two
    # chunks. At FLOW_CONTEXT and context_frames they are exact; below, those chunks
    # are a preview (module docstring) and the runs are ~30 frames shorter. Measured
    # over 26 short sentences at 12 flow / 6 vocoder frames: max |diff| from the whole
    # sentence's audio median 0.006, P90 0.027, worst 0.057 (-25 dBFS); 20 flow frames
    # would bring the worst to 0.021, for a flow run 1 ms dearer (tests bound the first).
    first_flow_context: int = FLOW_CONTEXT
    first_context_frames: int | None = None  # None: context_frames

    @property
    def first_context(self) -> int:
        return self.context_frames if self.first_context_frames is None else self.first_context_frames

    @property
    def previews(self) -> bool:
        """Whether the stream's first chunks are an approximate preview."""
        return (self.first_flow_context < FLOW_CONTEXT
                or self.first_context < self.context_frames)

    def __post_init__(self) -> None:
        if not 1 <= self.first_chunk_frames <= self.chunk_frames:
            raise ValueError("need 1 <= first_chunk_frames <= chunk_frames")
        if self.context_frames < 0 or self.lookahead < 0 or self.lookbehind < 0:
            raise ValueError("context, lookahead and lookbehind cannot be negative")
        if not 0 <= self.first_flow_context <= FLOW_CONTEXT:
            raise ValueError(f"first_flow_context must be in [0, {FLOW_CONTEXT}]")
        if not 0 <= self.first_context <= self.context_frames:
            raise ValueError("first_context_frames must be in [0, context_frames]")
        if self.first_window < 1 or self.window < 1:
            raise ValueError("windows must commit at least one phoneme")
        if self.first_lookahead < 0:
            raise ValueError("first_lookahead cannot be negative")
        # Two ids per phoneme (its own and a pad) plus BOS/EOS must fit the largest bucket.
        widest = max(self.first_window + self.first_lookahead,
                     self.lookbehind + self.window + self.lookahead)
        if 2 * widest + 3 > BUCKETS[-1]:
            raise ValueError(f"a window of {widest} phonemes does not fit {BUCKETS[-1]} ids")

    def chunk_core(self, index: int) -> int:
        """Frames of new audio in the stream's chunk number `index` (0-based). The
        second chunk is as small as the first: it is due as soon as the first has
        played, however busy the machine is with showing the start of speech."""
        return min(self.chunk_frames, self.first_chunk_frames << min(max(0, index - 1), 30))

    def window_core(self, index: int) -> int:
        """Phonemes committed by the stream's window number `index` (0: its first)."""
        return self.first_window if index == 0 else self.window

    def preview_widths(self) -> tuple[int, int, int]:
        """Frames of the preview runs of the first two chunks: one flow run for both,
        then the vocoder for the first and for the second."""
        first, context = self.first_chunk_frames, self.first_context
        second = 2 * first + context - max(0, first - context)
        return 2 * first + context + self.first_flow_context, first + context, second

    def first_flow_width(self) -> int:
        # The stream's first exact flow run covers the vocoder windows of the first two
        # chunks: the second chunk then only waits for the vocoder.
        first, context = self.first_chunk_frames, self.context_frames
        second_end = max(0, first - context) + self.chunk_core(1) + 2 * context
        return max(first + context, second_end) + FLOW_CONTEXT

    def vocoder_widths(self) -> list[int]:
        widths = (set(self.preview_widths()[1:]) if self.previews
                  else {self.first_chunk_frames + self.context_frames})
        index = 1
        while True:
            core = self.chunk_core(index)
            widths.add(core + 2 * self.context_frames)
            if core == self.chunk_frames:
                return sorted(widths)
            index += 1


LATENCY_MODES: dict[str, LatencyMode] = {
    ULTRA: LatencyMode(
        name=ULTRA,
        first_chunk_frames=3, chunk_frames=16, context_frames=6,
        first_window=10, first_lookahead=5, window=200, lookahead=17, lookbehind=30,
        first_flow_context=12,
    ),
    BALANCED: LatencyMode(
        name=BALANCED,
        first_chunk_frames=3, chunk_frames=32, context_frames=10,
        first_window=10, first_lookahead=5, window=200, lookahead=17, lookbehind=30,
        first_flow_context=12, first_context_frames=6,
    ),
    PREMIUM: LatencyMode(
        name=PREMIUM,
        first_chunk_frames=8, chunk_frames=64, context_frames=12,
        first_window=480, first_lookahead=0, window=200, lookahead=16, lookbehind=30,
    ),
}


@dataclass(frozen=True, slots=True)
class SentencePlan:
    """The exact timeline of the audio chunks that follow it: a sentence, or one window
    of a long one (later windows have text "", as do the later sentences espeak reads a
    piece of text as: pipeline.voice.phonemes.spoken_sentences)."""

    text: str
    phonemes: list[PhonemeTiming]
    total_samples: int
    sample_rate: int
    notices: list[str] = field(default_factory=list)
    words: list[WordTiming] = field(default_factory=list)  # the words spoken, on its timeline
    # Whether the plan ends its sentence (a long sentence's earlier windows do not): its
    # words are then all known, for whoever times written words by them (captions).
    ends_sentence: bool = True
    # The sentence as it was typed ("$5" where `text` says "5 dollars"); "" = as `text`.
    typed: str = ""


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """Audio of the latest plan. Chunks of a plan tile it: offsets run on without gaps
    from 0, and the one with `last` ends at the plan's total_samples."""

    samples: np.ndarray  # float32 mono in [-1, 1]
    offset: int  # sample offset within the plan
    sample_rate: int
    last: bool


ModeSource = LatencyMode | Callable[[], LatencyMode]


@dataclass(slots=True)
class _Span:
    plan: SentencePlan
    start: int  # frames from the sentence's start
    end: int


@dataclass(frozen=True, slots=True)
class _Window:
    """Symbols [start, end) are committed by an acoustic run over [low, high)."""

    start: int
    end: int
    low: int
    high: int


@dataclass(slots=True)
class _Sentence:
    text: str
    symbols: list[str]  # BOS, phonemes, EOS
    # Its latents (the stream's track, cleared for it). Their lookahead part (`ahead`),
    # made from the lookahead's priors, is the vocoder's right context at the end of the
    # committed frames, so the next window waits until its audio is due.
    latent: LatentTrack
    # Latents of the stream's first window made from its own priors (_preview): the
    # stream's second track, its `frames` those the flow saw, zeros after them.
    preview: LatentTrack
    typed: str = ""  # what was typed for `text` (SentencePlan.typed)
    committed: int = 0  # symbols whose frames are fixed
    prior: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    # Priors of the latest window's lookahead: not committed, but close enough to serve
    # as the flow's right context, so the next window can wait until the vocoder needs it.
    lookahead: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    spans: list[_Span] = field(default_factory=list)
    preview_width: int = 0  # frames of the flow run `preview` is from (0: none)
    preview_wide: bool = False  # whether `preview` spans the whole first window
    # The next window's acoustic run, started early: (window, length scale, future).
    prefetched: tuple[_Window, float, Future] | None = None

    @property
    def complete(self) -> bool:
        return self.committed == len(self.symbols)

    @property
    def prior_frames(self) -> int:
        return self.prior.shape[1]

    @property
    def latent_frames(self) -> int:
        return self.latent.frames

    @property
    def usable_latents(self) -> int:
        """Frames the vocoder can see: committed latents, then (once all of those are
        made) the lookahead's."""
        if self.complete or self.latent_frames < self.prior_frames:
            return self.latent_frames
        return self.latent_frames + self.latent.ahead


@dataclass(slots=True)
class _StreamState:
    chunks: int = 0  # chunks made so far: drives the chunk-size ramp
    # Whether the stream is past its first chunks, whose flow runs are narrow: later
    # runs are FLOW_WINDOW wide, fewer runs per second of speech.
    flowed: bool = False
    windows: int = 0  # acoustic windows run so far: only the first is small
    notices: list[str] = field(default_factory=list)


class StreamingTTS:
    """A piper voice (`voice`, the bundled one unless told) as a pull-based stream of
    plans and audio chunks, one stream at a time. VoiceError when the voice's files
    cannot be used; `speaker` picks the speaker of a multi-speaker voice (VoiceError,
    in words, for one it does not have) and is not used by a voice of one.

    `noise_scale`/`noise_w_scale` of 0 make the output deterministic; None keeps the
    voice's own values. `seed` fixes the noise (prior and duration). `provider` is the
    engines' execution provider (one of pipeline.infer.sessions.PROVIDERS); `providers`
    says what each engine got. `batch_sizes` are the batches a GPU may run concurrent
    streams' requests in (pipeline.infer.engine), each a graph of its own.
    """

    def __init__(
        self,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        length_scale: float | None = None,
        intra_op_threads: int = 1,
        seed: int | None = None,
        provider: str = "cpu",
        batch_sizes: Sequence[int] = (1,),
        voice: VoiceFiles = BUNDLED_VOICE,
        speaker: int = 0,
    ):
        config = check_voice(voice)
        self.voice = voice
        self.speakers = config.num_speakers
        if self.speakers > 1 and not 0 <= speaker < self.speakers:
            raise VoiceError(f"The voice {voice.name} has speakers 0 to {self.speakers - 1}: "
                             f"there is no speaker {speaker}.")
        self.speaker = speaker if self.speakers > 1 else 0
        # Fed to every engine of a multi-speaker voice; a voice of one has no such input.
        self._speaker_feed = ({SPEAKER_INPUT: np.array([self.speaker], np.int64)}
                              if self.speakers > 1 else {})
        self.sample_rate: int = config.sample_rate
        self.hop: int = config.hop_length
        self._id_map = config.phoneme_id_map
        self._noise_scale = config.noise_scale if noise_scale is None else noise_scale
        self._noise_w_scale = config.noise_w_scale if noise_w_scale is None else noise_w_scale
        self._length_scale = _checked_length_scale(length_scale) or config.length_scale
        # Phonemization only: synthesis goes through the split engines below.
        self._voice = PiperVoice(session=None, config=config)

        self.engines, self.channels = _engines(voice, self.speakers > 1, provider,
                                               intra_op_threads, tuple(batch_sizes))
        self._acoustic, self._flow, self._vocoder = self.engines.values()
        self.providers: dict[str, ProviderChoice] = {
            name: stage.choice for name, stage in self.engines.items()}
        self._own_state(seed)

    def _own_state(self, seed: int | None) -> None:
        """What each voice has of its own, beside the files, settings and engines it may
        share with others (with_seed)."""
        # Prior noise is drawn on the stream's thread, duration noise on the acoustic
        # worker's: a generator each (numpy's are not thread-safe).
        prior_seed, duration_seed = np.random.SeedSequence(seed).spawn(2)
        self._rng = np.random.default_rng(prior_seed)
        self._duration_rng = np.random.default_rng(duration_seed)
        self._started = time.perf_counter()  # the latest stream's start
        self._emitted = 0  # samples it has made
        # The acoustic stage's own worker: onnxruntime releases the GIL, so a later
        # window's encoder runs on the other core while the vocoder makes audio.
        self._acoustic_worker = ThreadPoolExecutor(1, thread_name_prefix="tts-acoustic",
                                                   initializer=_yield_to_others)
        self._shapes: dict[str, set[tuple[int, ...]]] = {
            "acoustic": set(), "flow": set(), "vocoder": set()
        }
        # The latents of the sentence being spoken, and of its preview: on the device
        # when the engines are (every engine of a voice has the same provider).
        self._latent_track = LatentTrack(self.channels, self.on_device)
        self._preview_track = LatentTrack(self.channels, self.on_device)

    def with_seed(self, seed: int | None) -> StreamingTTS:
        """A voice of these files, settings and engines with noise of its own from
        `seed`, speaking as StreamingTTS(..., seed=seed) with the same arguments would:
        the files are not checked again (this voice checked them). For a server that
        makes a voice per request on its event loop: the checks' ~15 stat calls each
        let go of the GIL and wait to take it back, 48.2 ms (P50) beside 8 busy threads
        on the 2-vCPU VM against 0.041 ms here (bench/results/stream_voice_2vcpu_xeon.json)."""
        other = object.__new__(StreamingTTS)
        other.__dict__.update(self.__dict__)  # shared; _own_state replaces what is its own
        other._own_state(seed)
        return other

    @property
    def batch_sizes(self) -> tuple[int, ...]:
        """The batch sizes its engines were built at, in order (Engine.batch_sizes)."""
        return self._acoustic.batch_sizes

    @property
    def on_device(self) -> bool:
        """Whether every engine of the voice runs on a GPU."""
        return all(stage.on_device for stage in self.engines.values())

    @property
    def shapes_seen(self) -> dict[str, set[tuple[int, ...]]]:
        """Input shapes each engine has been run with (acoustic: ids; others: latents)."""
        return {stage: set(shapes) for stage, shapes in self._shapes.items()}

    @staticmethod
    def shape_buckets(modes: Sequence[LatencyMode] = tuple(LATENCY_MODES.values()),
                      channels: int = LATENT_CHANNELS) -> dict[str, set[tuple[int, ...]]]:
        """Every input shape a stream in `modes` can run (acoustic: ids; others: latents)
        on a voice of `channels` latent channels."""
        flows = ({FLOW_WINDOW} | {mode.first_flow_width() for mode in modes}
                 | {mode.preview_widths()[0] for mode in modes if mode.previews})
        vocoders = {w for mode in modes for w in mode.vocoder_widths()}
        return {
            "acoustic": {(1, b) for b in BUCKETS},
            "flow": {(1, channels, w) for w in flows},
            "vocoder": {(1, channels, w) for w in vocoders},
        }

    def warm_up(self, progress: Callable[[float], None] | None = None,
                cancel: threading.Event | None = None) -> bool:
        """Run espeak and every engine at every shape once, silently, so the first real
        request pays no start-up. `progress` gets the fraction done after each run. Once
        `cancel` is set no further shape is run. Returns whether every shape ran."""
        phonemize(self._voice, "Ready.")
        prior_noise.prepare()
        buckets = self.shape_buckets(channels=self.channels)
        runs = [(stage, shape) for stage in ("acoustic", "flow", "vocoder")
                for shape in sorted(buckets[stage])]
        for done, (stage, shape) in enumerate(runs, 1):
            if cancel is not None and cancel.is_set():
                return False
            if stage == "acoustic":
                # Noise of zeros: warming draws nothing from the stream's generators, so
                # a seeded voice speaks the same warmed or not.
                self._acoustic.prepare(self._acoustic_feed(
                    np.zeros(shape[1], np.int64), 1, np.zeros((1, 2, shape[1]), np.float32)))
            elif stage == "flow":
                self._flow.prepare(self._flow_feed(np.zeros(shape[1:], np.float32),
                                                   np.ones(shape[2], np.float32)))
            else:
                self._vocoder.prepare(self._vocoder_feed(np.zeros(shape, np.float32)))
            if progress is not None:
                progress(done / len(runs))
        return True

    def close(self) -> None:
        """Stop the acoustic stage's worker thread (a stream still running ends with an
        error at its next window). For a voice put away before the process ends: a
        window closed while its voice loaded, a test done with it. Safe to call twice."""
        self._acoustic_worker.shutdown(wait=False, cancel_futures=True)

    def prepare(self, text: str) -> PreparedText:
        """`text` made ready for this voice's language (TextInputError: nothing in it this
        voice can speak): what stream() speaks."""
        return prepare_text(text, self._voice.config.espeak_voice)

    def phonemes_of(self, text: str) -> str:
        """The voice's symbols for `text` read on its own, its sentences run together:
        what captions match written words by (pipeline.voice.captions)."""
        return "".join("".join(sentence) for sentence in phonemize(self._voice, text))

    def stream(
        self,
        text: str,
        mode: ModeSource = LATENCY_MODES[DEFAULT_MODE],
        cancel: threading.Event | None = None,
        length_scale: float | None = None,
    ) -> Iterator[SentencePlan | AudioChunk]:
        """Speak `text` as plans, each followed by the audio chunks that tile it.

        `mode` is a LatencyMode or a callable returning the current one; it is read at
        every chunk, so a switch takes effect at the next. Raises TextInputError at once
        for text with nothing speakable (or from the iterator, if the voice can pronounce
        none of it). After `cancel` is set no further chunk is made.
        """
        prepared = self.prepare(text)
        scale = _checked_length_scale(length_scale) or self._length_scale
        current = mode if callable(mode) else (lambda: mode)
        return self._stream(prepared, current, cancel or threading.Event(), scale)

    def synthesize(
        self,
        text: str,
        mode: ModeSource = LATENCY_MODES[DEFAULT_MODE],
        cancel: threading.Event | None = None,
        length_scale: float | None = None,
    ) -> Iterator[SpeechSegment]:
        """`stream` gathered in memory: one SpeechSegment per plan, yielded once its last
        chunk is made, with the plan's text (a sentence's, "" for a later window of a long
        one), phonemes and notices. In premium mode a plan is a whole sentence, timed
        exactly as the unsplit voice times it, unless the sentence outgrows the mode's
        windows (`first_window` phonemes for the stream's first, `window` + `lookahead`
        after it). Raises as `stream` does; a segment the cancel cut short is not yielded."""
        return _segments(self.stream(text, mode, cancel, length_scale))

    def _stream(
        self,
        prepared: PreparedText,
        current: Callable[[], LatencyMode],
        cancel: threading.Event,
        length_scale: float,
    ) -> Iterator[SentencePlan | AudioChunk]:
        state = _StreamState(notices=list(prepared.notices))
        self._started, self._emitted = time.perf_counter(), 0
        spoke = False
        behind = TypedText(prepared.spans)
        for piece, phonemes in spoken_sentences(self._voice, prepared.text):
            if cancel.is_set():
                return
            self._latent_track.clear()
            self._preview_track.clear()
            sentence = _Sentence(piece, [BOS, *phonemes, EOS], self._latent_track,
                                 self._preview_track, typed=behind.typed(piece) if piece else "")
            yield from self._sentence(sentence, state, current, cancel, length_scale)
            spoke = True
        if not spoke:
            raise nothing_to_speak(prepared.text, self.voice.name)

    def _sentence(
        self,
        sentence: _Sentence,
        state: _StreamState,
        current: Callable[[], LatencyMode],
        cancel: threading.Event,
        length_scale: float,
    ) -> Iterator[SentencePlan | AudioChunk]:
        self._commit_window(sentence, current(), state, length_scale)
        span_index = 0
        position = 0
        while not cancel.is_set():
            mode = current()
            span = sentence.spans[span_index]
            if position == span.start:
                yield span.plan
            end = min(position + mode.chunk_core(state.chunks), span.end)
            samples = self._chunk(sentence, position, end, mode, state, cancel, length_scale)
            if samples is None:
                return
            if state.chunks + 1 >= PREFETCH_AFTER_CHUNKS and span_index == len(sentence.spans) - 1:
                self._prefetch_window(sentence, mode, state, length_scale)
            state.chunks += 1
            self._emitted += len(samples)
            yield AudioChunk(samples, (position - span.start) * self.hop, self.sample_rate,
                             end == span.end)
            position = end
            if position == span.end:
                span_index += 1
                if span_index == len(sentence.spans):
                    if sentence.complete:
                        return
                    self._commit_window(sentence, current(), state, length_scale)

    def _chunk(
        self,
        sentence: _Sentence,
        start: int,
        end: int,
        mode: LatencyMode,
        state: _StreamState,
        cancel: threading.Event,
        length_scale: float,
    ) -> np.ndarray | None:
        """Audio of frames [start, end), or None if cancelled while making it."""
        if end == start:
            return np.zeros(0, np.float32)
        if mode.previews and (state.chunks <= 1 or (state.windows == 1 and not sentence.complete)):
            audio = self._preview(sentence, start, end, mode, state)
            if audio is not None:
                return audio
        context = mode.context_frames
        width = (mode.first_chunk_frames + context if state.chunks == 0
                 else mode.chunk_core(state.chunks) + 2 * context)
        while True:
            if cancel.is_set():
                return None
            left = max(0, start - context)
            if sentence.complete:
                # Shifting the window back, not padding it, keeps the sentence's own end.
                left = max(0, min(left, sentence.prior_frames - width))
                needed = min(left + width, sentence.prior_frames)
            else:
                needed = left + width
            if sentence.usable_latents >= needed:
                break
            self._advance(sentence, needed, mode, state, length_scale)
        # Past the committed latents, the lookahead's; past those, zeros: only a sentence
        # shorter than the window gets there, and its trailing silence (the last ~60 ms)
        # differs from whole-sentence decoding by up to 2e-4.
        track = sentence.latent
        valid = track.frames + (0 if sentence.complete else track.ahead)
        audio = self._run_vocoder(track.window(left, width, valid))
        return self._scaled(audio[(start - left) * self.hop:(end - left) * self.hop])

    def _preview(
        self, sentence: _Sentence, start: int, end: int, mode: LatencyMode, state: _StreamState
    ) -> np.ndarray | None:
        """Audio of frames [start, end) of the stream's first window from flow runs from
        frame 0 over that window's own priors (committed and lookahead); None where they
        do not reach. Exact latents near the window's end need the next window's priors,
        and that window (~190 ms to read) is still being read on the acoustic worker
        while these chunks play. The first two chunks share one run, as narrow as it can
        be, so the second is only a vocoder run (it is due as soon as the first has
        played); one run over the whole window then serves the rest of its chunks."""
        if state.chunks <= 1:
            flow_width, first_width, second_width = mode.preview_widths()
            if state.chunks == 0:
                self._flow_preview(sentence, flow_width)
                left, vocoder_width = 0, first_width
            elif not sentence.preview_width:
                return None  # the first chunk was made exactly, in a mode that does not preview
            else:
                left, vocoder_width = max(0, start - mode.first_context), second_width
        else:
            vocoder_width = mode.chunk_core(state.chunks) + 2 * mode.context_frames
            left = max(0, start - mode.context_frames)
            if not sentence.preview_wide:
                frames = sentence.prior_frames + sentence.lookahead.shape[1]
                width = min((w for w in (mode.first_flow_width(), FLOW_WINDOW) if w >= frames),
                            default=FLOW_WINDOW)
                self._flow_preview(sentence, width)
                sentence.preview_wide = state.flowed = True
            if left + vocoder_width + mode.first_flow_context > sentence.preview_width:
                return None
        preview = sentence.preview
        audio = self._run_vocoder(preview.window(left, vocoder_width, preview.frames))
        return self._scaled(audio[(start - left) * self.hop:(end - left) * self.hop])

    def _flow_preview(self, sentence: _Sentence, width: int) -> None:
        """The preview's latents: a flow run of `width` frames from frame 0 over the
        window's priors, committed and lookahead; zeros past those."""
        prior, mask, real = self._prior_over([sentence.prior, sentence.lookahead], width)
        self._run_flow(prior, mask, sentence.preview.writer(0, 0, real))
        sentence.preview.frames, sentence.preview_width = real, width

    @staticmethod
    def _scaled(audio: np.ndarray) -> np.ndarray:
        return np.clip(audio * GAIN, -1.0, 1.0).astype(np.float32)

    def _advance(
        self,
        sentence: _Sentence,
        needed: int,
        mode: LatencyMode,
        state: _StreamState,
        length_scale: float,
    ) -> None:
        """One engine run towards latents for frames [0, needed)."""
        done = sentence.latent_frames
        committed = sentence.prior_frames
        width = FLOW_WINDOW if state.flowed else mode.first_flow_width()
        right = FLOW_CONTEXT
        left = max(0, done - FLOW_CONTEXT)
        parts = [sentence.prior[:, left:left + width]]
        if sentence.complete:
            core_end = min(left + width - right, committed)
        else:
            parts.append(sentence.lookahead)
            core_end = min(left + width, left + sum(p.shape[1] for p in parts)) - right
            if done == committed or core_end <= done:
                self._commit_window(sentence, mode, state, length_scale)
                return
        # Frames [done, core_end) of the run's latents: the committed ones it makes, then
        # (where the run reaches past the committed frames) the lookahead's.
        prior, mask, _ = self._prior_over(parts, width)
        track = sentence.latent
        self._run_flow(prior, mask, track.writer(done - left, done, core_end - done))
        state.flowed = True
        track.frames, track.ahead = min(core_end, committed), max(0, core_end - committed)

    def _next_window(self, sentence: _Sentence, mode: LatencyMode, index: int) -> _Window:
        symbols = sentence.symbols
        start = sentence.committed
        low = max(0, start - mode.lookbehind)
        core = mode.window_core(index)
        lookahead = mode.first_lookahead if index == 0 else mode.lookahead
        if index == 1 and mode.previews:
            # Read while the first window's ~350 ms play: it must fit SECOND_WINDOW_IDS,
            # unless the whole rest of the sentence does (then it needs no lookahead).
            fits = (SECOND_WINDOW_IDS - 2) // 2 - (start - low)
            core = len(symbols) - start if len(symbols) - start <= fits else min(core, fits - lookahead)
        if len(symbols) - start <= core + lookahead:
            end = len(symbols)
        else:
            end = _window_cut(symbols, start + core // 2, start + core)
            if end <= start:
                end = start + core
        return _Window(start, end, low, min(len(symbols), end + lookahead))

    def _prefetch_window(
        self, sentence: _Sentence, mode: LatencyMode, state: _StreamState, length_scale: float
    ) -> None:
        """Start the acoustic run of the window after the latest one on the acoustic
        worker, so it overlaps the making of this window's audio instead of stalling
        the stream when this window's audio runs out (a 200-phoneme window takes
        ~190 ms here, more than a short first window lasts)."""
        if sentence.complete or sentence.prefetched is not None:
            return
        window = self._next_window(sentence, mode, state.windows)
        ids, _ = symbol_ids(sentence.symbols[window.low:window.high], self._id_map)
        # Its audio is heard once the committed frames not yet made have played.
        ahead_s = (sentence.prior_frames - sentence.latent_frames) * self.hop / self.sample_rate
        future = self._acoustic_worker.submit(
            self._run_acoustic, np.asarray(ids, np.int64), length_scale, self._deadline(ahead_s))
        sentence.prefetched = (window, length_scale, future)

    def _commit_window(
        self, sentence: _Sentence, mode: LatencyMode, state: _StreamState, length_scale: float
    ) -> None:
        """Run the acoustic engine on the next phoneme window (or take the prefetched
        run, if the mode still asks for that window); fix its frames and plan."""
        symbols = sentence.symbols
        window = self._next_window(sentence, mode, state.windows)
        state.windows += 1
        start, end, low, high = window.start, window.end, window.low, window.high
        ids, widths = symbol_ids(symbols[low:high], self._id_map)
        prefetched, sentence.prefetched = sentence.prefetched, None
        if prefetched is not None and prefetched[:2] == (window, length_scale):
            mean, log_scale, id_frames = prefetched[2].result()
        else:
            mean, log_scale, id_frames = self._run_acoustic(np.asarray(ids, np.int64), length_scale)
        bounds = np.cumsum([0, *widths])
        first_id, end_id = bounds[start - low], bounds[end - low]
        span_start = sentence.prior_frames
        prior = self._prior(mean, log_scale, id_frames, first_id, end_id)
        sentence.prior = np.concatenate([sentence.prior.reshape(prior.shape[0], -1), prior], axis=1)
        sentence.lookahead = self._prior(mean, log_scale, id_frames, end_id, bounds[high - low])
        sentence.latent.ahead = 0
        sentence.committed = end

        # Each symbol's frames: its ids' frames summed, read off one running sum. A numpy
        # slice and sum per symbol took 184 us for a later window's 98 symbols, the
        # running sum 15 (16 against 10 for a first window's 8; 2-vCPU AMD VM): paid
        # while the window before plays, by every stream under one GIL.
        frames_before = np.concatenate([[0], np.cumsum(id_frames)])
        own = bounds[start - low:end - low + 1]
        samples = (np.diff(frames_before[own]) * self.hop).tolist()
        alignments = list(zip(symbols[start:end], samples))
        total = sum(samples)
        notices, state.notices = state.notices, []
        plan = SentencePlan(
            text=sentence.text if start == 0 else "",
            phonemes=fold_phonemes(alignments, self.sample_rate),
            total_samples=total,
            sample_rate=self.sample_rate,
            notices=notices,
            words=word_timings(alignments, self.sample_rate),
            ends_sentence=end == len(symbols),
            typed=sentence.typed if start == 0 else "",
        )
        sentence.spans.append(_Span(plan, span_start, span_start + total // self.hop))

    def _prior(
        self, mean: np.ndarray, log_scale: np.ndarray, id_frames: np.ndarray, a: int, b: int
    ) -> np.ndarray:
        """Prior latents of ids [a, b): each id's mean repeated for its frames, plus noise."""
        frames = id_frames[a:b]
        prior = np.repeat(mean[:, a:b], frames, axis=1)
        if self._noise_scale > 0:
            spread = np.repeat(np.exp(log_scale[:, a:b]), frames, axis=1)
            noise = prior_noise.standard_normal(self._rng, prior.shape)
            prior += noise * spread * np.float32(self._noise_scale)
        return prior

    def _acoustic_feed(self, ids: np.ndarray, length_scale: float,
                       noise: np.ndarray | None = None) -> dict[str, np.ndarray]:
        bucket = next(b for b in BUCKETS if b >= len(ids))
        if noise is None:
            noise = self._duration_rng.standard_normal((1, 2, bucket), np.float32)
        padded = np.zeros((1, bucket), np.int64)
        padded[0, :len(ids)] = ids
        self._shapes["acoustic"].add(padded.shape)
        scales = np.array([self._noise_scale, length_scale, self._noise_w_scale], np.float32)
        return {_IDS: padded, _ID_LENGTHS: np.array([len(ids)], np.int64), _SCALES: scales,
                NOISE_INPUT: noise, **self._speaker_feed}

    def _run_acoustic(
        self, ids: np.ndarray, length_scale: float, deadline: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if deadline is None:
            deadline = self._deadline()
        mean, log_scale, frames = self._acoustic.run(self._acoustic_feed(ids, length_scale),
                                                     deadline)
        return mean[0], log_scale[0], frames[0, 0, :len(ids)].astype(np.int64)

    def _prior_over(self, parts: Sequence[np.ndarray],
                    width: int) -> tuple[np.ndarray, np.ndarray, int]:
        """The flow's input over the priors `parts` laid side by side (frames past `width`
        left out), zero-padded to `width` frames, and its mask; and how many frames are
        real. One buffer filled in place: np.concatenate and np.pad took ~66 us of
        Python a run against ~7 (2-vCPU VM), paid before a stream's first chunk."""
        prior = np.zeros((parts[0].shape[0], width), np.float32)
        real = 0
        for part in parts:
            take = min(part.shape[1], width - real)
            if take > 0:
                prior[:, real:real + take] = part[:, :take]
                real += take
        mask = np.zeros(width, np.float32)
        mask[:real] = 1.0
        return prior, mask, real

    def _flow_feed(self, prior: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
        feed = {_PRIOR_LATENT: prior[None], _FRAME_MASK: mask[None, None], **self._speaker_feed}
        self._shapes["flow"].add(feed[_PRIOR_LATENT].shape)
        return feed

    def _run_flow(self, prior: np.ndarray, mask: np.ndarray, keep) -> None:
        """The flow's latents for `prior` and `mask`, given to `keep` (a track's writer)
        where they are made."""
        self._flow.run(self._flow_feed(prior, mask), self._deadline(), keep)

    def _vocoder_feed(self, latents: np.ndarray | DeviceColumns
                      ) -> dict[str, np.ndarray | DeviceColumns]:
        """The vocoder's input for `latents`, a batch of one (1, channels, frames)."""
        feed = {_LATENT: latents, **self._speaker_feed}
        self._shapes["vocoder"].add(feed[_LATENT].shape)
        return feed

    def _run_vocoder(self, latents: np.ndarray | DeviceColumns) -> np.ndarray:
        return self._vocoder.run(self._vocoder_feed(latents), self._deadline())[0].reshape(-1)

    def _deadline(self, ahead_s: float = 0.0) -> float:
        """When the audio the stream makes next is heard, give or take its start lead, on
        time.perf_counter(): what the engine runs of all streams are ordered by. A
        stream's first audio ranks FIRST_AUDIO_PRIORITY_S earlier."""
        first = FIRST_AUDIO_PRIORITY_S if self._emitted == 0 and ahead_s == 0 else 0.0
        return self._started + self._emitted / self.sample_rate + ahead_s - first


# Engines by (voice model, provider, intra-op threads, batch sizes), with the voice's
# latent channels: every stream of the process shares them (their runs are thread-safe),
# so 50 streams load the voice once, and a new Speaker none. A voice once used keeps its
# engines for the life of the process: a second medium voice took the app from 415 to
# 720 MB resident on the 2-core VM and switching back and forth stayed at 742 MB, while
# letting a voice's engines go when unused gave back only ~16 MB (the allocator keeps the
# pages) and made each switch back load again (2.8 s against 1.7 s).
_ENGINES: dict[tuple[Path, str, int, tuple[int, ...], tuple[tuple[str, str], ...], bool],
               tuple[dict[str, Engine], int]] = {}
_ENGINES_LOCK = threading.Lock()


def _engines(voice: VoiceFiles, speakers: bool, provider: str, threads: int,
             batch_sizes: tuple[int, ...]) -> tuple[dict[str, Engine], int]:
    precision = tuple(sorted(ENGINE_PRECISION.items()))
    if ENGINE_PRECISION.get("acoustic", "fp32") != "fp32":
        raise ValueError("the acoustic engine computes in fp32: its durations move with rounding")
    key = (voice.model.resolve(), provider, threads, batch_sizes, precision, ENGINE_REWRITES)
    with _ENGINES_LOCK:
        if key in _ENGINES:
            return _ENGINES[key]
        graphs, channels = stage_graphs(voice, speakers)
        engines = {name: Engine(name, graph, provider, threads, batch_sizes,
                                ENGINE_PRECISION.get(name, "fp32"), ENGINE_REWRITES)
                   for name, graph in graphs.items()}
        _ENGINES[key] = engines, channels
        return _ENGINES[key]


def stage_graphs(voice: VoiceFiles, speakers: bool) -> tuple[dict[str, onnx.ModelProto], int]:
    """The voice's graph split where the stream runs it ("acoustic", "flow", "vocoder",
    the graphs its engines are made of), and the voice's latent channels. VoiceError
    for a voice exported differently from the ones this streams."""
    model = onnx.load(str(voice.model))
    extractor = Extractor(model)
    # The speaker's embedding conditions the duration predictor, the flow and the
    # vocoder alike.
    given = [SPEAKER_INPUT] if speakers else []

    def graph(inputs: list[str], outputs: list[str]) -> onnx.ModelProto:
        try:
            return extractor.extract_model([*inputs, *given], outputs)
        except ValueError:  # a tensor the split needs is not in this export's graph
            raise VoiceError(
                f"{voice.model}: is a piper voice exported differently from the ones "
                f"Lipsync Studio streams (its graph has no {', '.join(inputs + outputs)} "
                "where the voice is split).") from None

    projection = next((i for i in model.graph.initializer if i.name == _PRIOR_PROJECTION), None)
    if projection is None:
        raise VoiceError(f"{voice.model}: is not a piper VITS voice (it has no "
                             f"{_PRIOR_PROJECTION}).")
    # The duration predictor's noise is drawn by the stream, not in the graph
    # (static_graph.noise_as_input), so `seed` fixes it too and a CPU and a GPU run
    # can be compared.
    graphs = {
        "acoustic": noise_as_input(graph([_IDS, _ID_LENGTHS, _SCALES],
                                         [_PRIOR_MEAN, _PRIOR_LOG_SCALE, _ID_FRAMES])),
        "flow": graph([_PRIOR_LATENT, _FRAME_MASK], [_LATENT]),
        "vocoder": graph([_LATENT], [_AUDIO]),
    }
    return graphs, projection.dims[0] // 2


def _checked_length_scale(length_scale: float | None) -> float | None:
    if length_scale is None:
        return None
    low, high = _LENGTH_SCALE_RANGE
    if not low <= length_scale <= high:
        raise ValueError(f"length_scale must be between {low} and {high}, got {length_scale}")
    return float(length_scale)


def _segments(items: Iterator[SentencePlan | AudioChunk]) -> Iterator[SpeechSegment]:
    plan, samples = None, []
    for item in items:
        if isinstance(item, SentencePlan):
            plan, samples = item, []
            continue
        samples.append(item.samples)
        if item.last:
            yield SpeechSegment(plan.text, np.concatenate(samples), plan.sample_rate,
                                plan.phonemes, plan.notices)


def _yield_to_others() -> None:
    """Lower the calling thread's priority a little (Linux schedules threads one by one),
    so that the worker takes only the CPU that chunks and display ticks leave."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PREFETCH_NICE)
        except OSError:
            log.warning("could not lower the acoustic worker's priority", exc_info=True)


# Pauses a window may end on: the voice breathes there anyway, and the mouth rests.
_CLAUSE_PAUSES = frozenset({",", ";", ":", ".", "!", "?", "—", "…"})


def _window_cut(symbols: Sequence[str], lowest: int, limit: int) -> int:
    """Where a window's committed phonemes end: after the last clause pause (and its
    word gap) at or beyond `lowest`, else after the last word gap, else at `limit`."""
    pause = max((i for i in range(lowest, limit - 1) if symbols[i] in _CLAUSE_PAUSES
                 and symbols[i + 1] == " "), default=-1)
    return pause + 2 if pause >= 0 else word_gap_cut(symbols, lowest, limit)
