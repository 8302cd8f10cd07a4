"""The live stage: microphone blocks in, mouth poses stamped with their capture instant out.

A worker thread reads hops from AudioInput, runs an analyser on them and publishes each
hop's pose in a ring keyed by the monotonic instant of the audio it describes. The
renderer reads without locks, as it does SpeechTimeline.

Mapping frames to mic poses: a live mouth cannot be shown before the voice was captured
and analysed. So the frame presented at monotonic instant P shows the voice captured at
P − ``delay``; ``frame_pose(t_start, period)`` turns the frame's media time into P with the
media clock (``MediaClock.monotonic_at``) and answers ``pose_at_monotonic(P − delay)``,
or a lip closure captured since the previous frame's that no frame would show otherwise.
``delay`` covers capture → pose ready (measured: ``latency()``) plus ``render_margin``
(the frame producer's poll and the display taking the frame before it is presented).
The mouth trails the voice by ``delay`` — the value to enter as the mic's "Sync Offset" in
OBS (``sync_offset_ms``) — so it moves rarely: up at once when the latency needs more, down
only once a stall is well over, in a few steps (``MicLipSync._review_delay``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.audio.input import AudioInput, CapturedBlock, dbfs
from pipeline.core.easing import smoothstep
from pipeline.core.events import DelayChange
from pipeline.core.frames import MouthPose
from pipeline.core.visemes import MUST_SHOW_INDICES, VISEME_INDEX
from pipeline.lipsync.model import FRAME_S, LipShapeModel, VisemeSmoother
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.viseme_track import SIL_POSE

# (block, sample rate) → [(instant the pose describes, seconds from the stream's first
# sample; pose)] for every hop completed by this block. Called with consecutive blocks.
Analyser = Callable[[np.ndarray, int], list[tuple[float, MouthPose]]]

log = logging.getLogger(__name__)

_SIL = VISEME_INDEX["sil"]
_AA = VISEME_INDEX["aa"]


class VolumeGate:
    """The PNGtuber baseline and fallback mode: the mouth opens with loudness.

    Per 10 ms hop, the RMS of the last ``window`` seconds (causal); the gate opens above
    ``open_db``, and closes only after ``hold`` seconds below ``close_db`` (hysteresis
    against chatter). Openness follows the level between ``close_db`` and ``full_db``
    with an attack and a release time constant; the viseme is aa while open, sil shut.
    Each pose describes the centre of its window.
    """

    def __init__(self, *, open_db: float = -40.0, close_db: float = -46.0, full_db: float = -12.0,
                 window: float = 0.020, hop: float = 0.010, hold: float = 0.060,
                 attack: float = 0.010, release: float = 0.040) -> None:
        self.open_db, self.close_db, self.full_db = open_db, close_db, full_db
        self.window, self.hop, self.hold = window, hop, hold
        self.attack, self.release = attack, release
        self._rate = 0
        self._history = np.zeros(0, dtype=np.float32)
        self._filled = 0
        self._seen = 0
        self._next_hop_end = 0
        self._open = False
        self._below_since = -math.inf
        self._openness = 0.0

    def __call__(self, block: np.ndarray, sample_rate: int) -> list[tuple[float, MouthPose]]:
        if sample_rate != self._rate:
            self._rate = sample_rate
            self._history = np.zeros(max(1, round(self.window * sample_rate)), dtype=np.float32)
            self._filled = self._seen = 0
            self._next_hop_end = round(self.hop * sample_rate)
        poses: list[tuple[float, MouthPose]] = []
        hop = round(self.hop * sample_rate)
        consumed = 0
        while consumed < len(block):
            take = min(len(block) - consumed, self._next_hop_end - self._seen)
            self._push(block[consumed:consumed + take])
            consumed += take
            self._seen += take
            if self._seen == self._next_hop_end:
                self._next_hop_end += hop
                poses.append(self._pose())
        return poses

    def _push(self, samples: np.ndarray) -> None:
        history = self._history
        n = len(samples)
        if n >= len(history):
            history[:] = samples[-len(history):]
        else:
            history[:-n] = history[n:]
            history[-n:] = samples
        self._filled = min(len(history), self._filled + n)

    def _pose(self) -> tuple[float, MouthPose]:
        rate = self._rate
        now = self._seen / rate
        window = self._history[-self._filled:]
        level = dbfs(math.sqrt(float(np.dot(window, window)) / max(1, len(window))))
        if level >= self.open_db:
            self._open = True
            self._below_since = math.inf
        elif level < self.close_db:
            self._below_since = min(self._below_since, now)
            if now - self._below_since >= self.hold - 1e-9:  # sample counts over the rate
                self._open = False
        else:
            self._below_since = math.inf
        target = 0.0
        if self._open:
            target = min(1.0, max(0.05, (level - self.close_db) / (self.full_db - self.close_db)))
        tau = self.attack if target > self._openness else self.release
        self._openness += (target - self._openness) * (1.0 - math.exp(-self.hop / tau))
        mix = 1.0 if self._open else 0.0
        return now - self._filled / rate / 2, MouthPose(_SIL, _AA, mix, self._openness)


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Capture (ADC) instant of the audio a pose describes → the pose ready, in ms."""

    p50_ms: float
    p99_ms: float
    count: int


class ModelAnalyser:
    """The trained lip-shape model as an Analyser: probabilities every 10 ms, smoothed
    into poses. Its lookahead (latency mode) can change while running."""

    def __init__(self, model: LipShapeModel, smoother: VisemeSmoother | None = None) -> None:
        self.model = model
        self.smoother = smoother or VisemeSmoother()

    def __call__(self, block: np.ndarray, sample_rate: int) -> list[tuple[float, MouthPose]]:
        return [(frame.time_s, self.smoother.update(frame))
                for frame in self.model.push(block, sample_rate)]


class MicLipSync:
    """Mouth poses from the microphone, on the capture clock and on the media timeline."""

    RING = 512  # poses kept: 5 s at 10 ms hops
    LATENCIES = 1000
    # The delay moves in steps this coarse so the OBS offset a user types stays valid.
    DELAY_STEP = 0.005
    # Seconds between looks at the latency: its P99 over LATENCIES hops (10 s) moves
    # little faster.
    REVIEW_EVERY = 1.0
    # Lowering, with hysteresis: each change is a value the user must type into OBS again.
    # - Only after SETTLE seconds in which the P99 of every review's new hops stayed
    #   LOWER_MARGIN under the delay. SETTLE is twice the 10 s a stall stays in the
    #   LATENCIES window: a lowering never comes while the raise rule still sees the
    #   stall, so it is not undone at the next review. The margin is two steps, above the
    #   few ms a healthy stage's P99 wobbles (issue 11: P50 13 ms, P99 17 ms).
    # - Each step keeps LOWER_KEEP of the excess over what a raise would set: after a
    #   300 ms stall, 295 → 95 → 45 → 30 ms, a minute in all; a calm that was misjudged
    #   costs a partial step, not a drop to the floor.
    # - A raise right after a lowering shows the calm was misleading (stalls that recur):
    #   the next lowering waits twice as long, up to SETTLE_MAX, so the delay holds
    #   instead of flapping.
    SETTLE = 20.0
    SETTLE_MAX = 320.0
    LOWER_MARGIN = 0.010
    LOWER_KEEP = 0.25

    def __init__(
        self,
        mic: AudioInput,
        analyser: Analyser,
        monotonic_at: Callable[[float], float],
        *,
        delay: float = 0.030,
        render_margin: float = 0.010,
        clock: Callable[[], float] = time.monotonic,
        on_delay_change: Callable[[DelayChange], None] = lambda change: None,
    ) -> None:
        """``clock`` is the monotonic clock the mic's capture instants are on; tests pass
        their own to replay hours of latencies without waiting for them.
        ``on_delay_change`` hears every move of the delay (the OBS offset to enter), on
        the stage's thread."""
        self.mic = mic
        self.analyser = analyser
        self.monotonic_at = monotonic_at
        self.clock = clock
        self.delay = delay
        self._initial_delay = delay
        self.render_margin = render_margin
        self._times = np.full(self.RING, -math.inf)
        self._poses: list[MouthPose] = [SIL_POSE] * self.RING
        self._count = 0
        self._latencies = np.zeros(self.LATENCIES)
        self._latency_count = 0
        self._reviewed = 0  # latencies looked at by the last review
        # Stream sample index → capture instant, for the blocks the analyser still looks at.
        self._block_index = np.zeros(64, dtype=np.int64)
        self._block_time = np.zeros(64)
        self._blocks = 0
        self._fed = 0  # samples given to the analyser: its stream's clock
        self._version = 0
        self._next_review = -math.inf
        self._settle = self.SETTLE
        self._calm_since = -math.inf
        self._calm_peak = 0.0
        self.last_change: DelayChange | None = None
        self._on_delay_change = on_delay_change
        # The latencies the last review judged the delay by; those measured since wait
        # for the next one (REVIEW_EVERY later, at the next captured block).
        self.last_review: LatencyStats | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Muted (a hotkey, push to talk released): the mouth stays shut for the mic. Set
        # from any thread; read once a pose.
        self.muted = False

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("MicLipSync already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="mic-lipsync", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
            self._thread = None

    def version(self) -> int:
        """Changes with every new pose (and delay step): frames made ahead are stale."""
        return self._version

    def _run(self) -> None:
        while not self._stop.is_set():
            block = self.mic.read(0.1)
            if block is not None:
                self.feed(block)

    def feed(self, block: CapturedBlock) -> None:
        """Analyse one captured block and publish its poses: the worker thread's step,
        for consecutive blocks of one stream. Only one thread may feed."""
        slot = self._blocks % len(self._block_index)
        self._block_index[slot] = self._fed
        self._block_time[slot] = block.capture_time
        self._blocks += 1
        self._fed += len(block.samples)
        for offset, pose in self.analyser(block.samples, block.sample_rate):
            self._publish(self._capture_time(offset, block.sample_rate), pose)
        now = self.clock()
        if now >= self._next_review:
            self._next_review = now + self.REVIEW_EVERY
            self._review_delay(now)

    def _capture_time(self, offset: float, rate: int) -> float:
        index = offset * rate
        b = self._blocks - 1
        oldest = max(0, self._blocks - len(self._block_index))
        while b > oldest and self._block_index[b % len(self._block_index)] > index:
            b -= 1
        slot = b % len(self._block_index)
        return float(self._block_time[slot]) + (index - float(self._block_index[slot])) / rate

    def _publish(self, captured: float, pose: MouthPose) -> None:
        if self.muted:
            # Still analysed, so the model's context is whole when the mic is unmuted.
            pose = SIL_POSE
        slot = self._count % self.RING
        previous = self._poses[(self._count - 1) % self.RING]
        self._poses[slot] = pose
        self._times[slot] = captured
        self._count += 1
        # Frames made ahead hold the newest pose; only a different one makes them stale
        # (a silent mic would otherwise have every frame re-made 100 times a second).
        if pose != previous:
            self._version += 1
        latency = self.clock() - captured
        self._latencies[self._latency_count % self.LATENCIES] = latency
        self._latency_count += 1

    def _review_delay(self, now: float) -> None:
        """Invariants: the delay is on the DELAY_STEP grid and never below the initial
        one; after a review it covers the P99 latency of the last LATENCIES hops plus
        render_margin; a lowering comes at least ``_settle`` seconds after the previous
        change and keeps the delay at or above the worst per-review P99 of that calm
        window plus render_margin."""
        stats = self.latency()
        recent = self._latencies_since_review()
        if stats.count < 50 or len(recent) == 0:
            return
        self.last_review = stats
        needed = stats.p99_ms / 1e3 + self.render_margin
        # The hops since the last review alone: the 10 s P99 would show a stall until
        # it leaves the window, and so keep the calm from starting for that long.
        recent_needed = float(np.percentile(recent, 99)) + self.render_margin
        if needed > self.delay:
            self._raise(now, needed)
        elif recent_needed > self.delay - self.LOWER_MARGIN:
            self._calm_since, self._calm_peak = now, 0.0
        else:
            if self._calm_since == -math.inf:
                self._calm_since = now
            self._calm_peak = max(self._calm_peak, recent_needed)
            if now - self._calm_since >= self._settle:
                self._lower(now)

    def _latencies_since_review(self) -> np.ndarray:
        count = self._latency_count
        first = max(self._reviewed, count - self.LATENCIES)
        self._reviewed = count
        return self._latencies[np.arange(first, count) % self.LATENCIES]

    def _steps(self, seconds: float) -> int:
        """``seconds`` rounded up to whole DELAY_STEPs (a hair of float noise forgiven)."""
        return math.ceil(seconds / self.DELAY_STEP - 1e-6)

    def _raise(self, now: float, needed: float) -> None:
        previous = self.last_change
        if previous is not None and previous.new < previous.old:
            self._settle = min(self.SETTLE_MAX, 2 * self._settle)
        stats = self.latency()
        hops = min(stats.count, self.LATENCIES)
        worst_ms = float(self._latencies[:hops].max()) * 1e3
        old = self._move(now, self._steps(needed), worst_ms)
        log.warning("mic → mouth delay (the mic's OBS Sync Offset) raised from %.0f ms to "
                    "%d ms: capture → pose latency up to %.0f ms (P99 %.0f ms) over the last "
                    "%d hops", old * 1e3, self.sync_offset_ms, worst_ms, stats.p99_ms, hops)

    def _lower(self, now: float) -> None:
        current = self._steps(self.delay)
        floor = max(self._steps(self._initial_delay), self._steps(self._calm_peak))
        lowered = floor + math.floor((current - floor) * self.LOWER_KEEP)
        if lowered >= current:
            return
        calm_s, p99_ms = now - self._calm_since, (self._calm_peak - self.render_margin) * 1e3
        old = self._move(now, lowered, math.nan)
        log.info("mic → mouth delay (the mic's OBS Sync Offset) lowered from %.0f ms to "
                 "%d ms: capture → pose latency P99 at most %.0f ms for %.0f s",
                 old * 1e3, self.sync_offset_ms, p99_ms, calm_s)

    def _move(self, now: float, steps: int, worst_ms: float) -> float:
        """Set the delay to ``steps`` DELAY_STEPs; returns the one it replaces."""
        old, self.delay = self.delay, steps * self.DELAY_STEP
        self.last_change = DelayChange(now, old, self.delay, worst_ms)
        self._calm_since, self._calm_peak = now, 0.0
        self._version += 1
        self._on_delay_change(self.last_change)
        return old

    def restart_measurement(self) -> None:
        """Forget the latencies measured so far and the delay they set: after start-up
        work (loading and warming up the voice) that slowed the stage for a while, the
        delay should fit how it runs from now on."""
        old = self.delay
        self._latency_count = self._reviewed = 0
        self.delay = self._initial_delay
        self._settle = self.SETTLE
        self._calm_since, self._calm_peak = -math.inf, 0.0
        self.last_change = self.last_review = None
        self._version += 1
        if old != self.delay:
            # A move like any other for those who follow the offset (OBS's); no raise
            # asked for it, so no worst latency, and the status line shows no change.
            self._on_delay_change(DelayChange(self.clock(), old, self.delay, math.nan))

    def latency(self) -> LatencyStats:
        n = min(self._latency_count, self.LATENCIES)
        if n == 0:
            return LatencyStats(math.nan, math.nan, 0)
        p50, p99 = np.percentile(self._latencies[:n], [50, 99]) * 1e3
        return LatencyStats(float(p50), float(p99), self._latency_count)

    @property
    def sync_offset_ms(self) -> int:
        """What to enter as the mic's audio Sync Offset in OBS: how far the mouth on
        screen trails the voice."""
        return round(self.delay * 1e3)

    def status_text(self) -> str:
        """The status line: measured mic → mouth latency, the OBS offset to enter, and
        when and why that offset last changed."""
        stats = self.latency()
        if stats.count == 0:
            return "Mic → mouth: waiting for sound"
        text = (f"Mic → mouth {stats.p50_ms:.0f} ms (P99 {stats.p99_ms:.0f} ms) · "
                f"OBS audio Sync Offset for the mic: {self.sync_offset_ms} ms")
        change = self.last_change
        if change is None:
            return text
        ago = f"{change.old * 1e3:.0f} ms {self.clock() - change.at:.0f} s ago"
        if change.new > change.old:
            return f"{text} (raised from {ago}: latency up to {change.worst_ms:.0f} ms)"
        return f"{text} (lowered from {ago})"

    def pose_at_monotonic(self, t: float) -> MouthPose:
        """The pose of the audio captured at ``t``: the latest hop at or before it (the
        newest if ``t`` is ahead of what has been analysed), rest before the first."""
        i = self._latest_at(t, self._count)
        return SIL_POSE if i < 0 else self._poses[i % self.RING]

    def _latest_at(self, t: float, count: int) -> int:
        """The index of the latest hop captured at or before ``t`` among the first
        ``count`` published (the newest if ``t`` is ahead of them); -1 before the first.
        ``count`` is ``_count`` read once by the caller: the slot the analysis thread
        writes next is never among those searched."""
        lo = max(0, count - self.RING + 1)
        hi = count
        times = self._times
        if hi == 0 or t < times[lo % self.RING]:
            return -1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if times[mid % self.RING] <= t:
                lo = mid
            else:
                hi = mid
        return lo

    def frame_pose(self, t_start: float, period: float) -> MouthPose:
        """The pose for the display frame visible over media [t_start, t_start + period).

        The pose of the voice captured at the frame's centre less the delay
        (``pose_at_monotonic``), unless that shows no lip closure or contact (MUST_SHOW)
        and a run of hops showing one begins in the hops captured in (centre − period,
        centre]: the smoother holds a closure for as little as 20 ms, which can lie
        wholly between two frame centres. Then the frame shows that run's last pose (of
        several runs the longest, ties the latest). So every closure published reaches
        at least one frame at any frame rate, and one that a frame's centre shows (a run
        begun at or before the previous centre) is not shown again by the next.
        On every display tick, against the analysis thread's writes: no lock, no list or
        array built, ``_count`` read once; it looks at no more than the period / 10 ms
        hops of the interval (FRAME_S, VolumeGate's hop too) and the one before it.
        """
        if period <= 0:
            raise ValueError("period must be positive")
        centre = self.monotonic_at(t_start + period / 2) - self.delay
        count = self._count
        latest = self._latest_at(centre, count)
        if latest < 0:
            return SIL_POSE
        ring, times, poses = self.RING, self._times, self._poses
        pose = poses[latest % ring]
        if pose.dominant in MUST_SHOW_INDICES:
            return pose
        previous_centre = centre - period
        best, best_hops = pose, 0
        run_viseme, run_hops, run_pose = -1, 0, pose  # the run walked back through
        oldest = max(0, count - ring + 1, latest - math.ceil(period / FRAME_S) - 1)
        for i in range(latest - 1, oldest - 1, -1):
            candidate = poses[i % ring]
            viseme = candidate.dominant
            if times[i % ring] <= previous_centre:
                if viseme == run_viseme:
                    run_hops = 0  # begun by the previous centre: that frame showed it
                break
            if viseme != run_viseme:
                if run_hops > best_hops:
                    best, best_hops = run_pose, run_hops
                run_viseme = viseme if viseme in MUST_SHOW_INDICES else -1
                run_hops, run_pose = 0, candidate
            if run_viseme >= 0:
                run_hops += 1
        return run_pose if run_hops > best_hops else best


class MouthMixer:
    """One mouth for TTS and mic: TTS speech while it is scheduled, the mic otherwise,
    crossfaded over ``crossfade`` seconds at each hand-over."""

    # A pause in TTS speech shorter than this keeps the mouth with TTS (sentence gaps):
    # the mic would otherwise hear the speakers for a moment.
    BRIDGE = 0.5

    def __init__(self, speech: SpeechTimeline, mic: MicLipSync, crossfade: float = 0.060) -> None:
        self.speech = speech
        self.mic = mic
        self.crossfade = crossfade
        self._spans_version = -1
        self._spans: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))

    def version(self) -> int:
        return self.speech.version() + self.mic.version()

    def _tts_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of TTS speech in media time, from the scheduled viseme onsets."""
        version = self.speech.version()
        if version != self._spans_version:
            times, visemes = self.speech.onsets()
            order = np.argsort(times, kind="stable")
            times, visemes = times[order], visemes[order]
            following = np.append(times[1:], self.speech.end_time)
            starts: list[float] = []
            ends: list[float] = []
            for t, v, until in zip(times.tolist(), visemes.tolist(), following.tolist()):
                if v == _SIL and until - t >= self.BRIDGE:
                    continue
                if ends and ends[-1] >= t:
                    ends[-1] = max(ends[-1], until)
                else:
                    starts.append(t)
                    ends.append(until)
            self._spans = (np.asarray(starts), np.asarray(ends))
            self._spans_version = version
        return self._spans

    def _tts_share(self, centre: float) -> float:
        """How much of the crossfade window around ``centre`` TTS speech covers, 0..1."""
        starts, ends = self._tts_spans()
        if len(starts) == 0:
            return 0.0
        lo, hi = centre - self.crossfade / 2, centre + self.crossfade / 2
        covered = np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0.0, None).sum()
        return smoothstep(float(covered) / self.crossfade)

    def frame_pose(self, t_start: float, period: float) -> MouthPose:
        share = self._tts_share(t_start + period / 2)
        if share >= 1.0:
            return self.speech.frame_pose(t_start, period)
        mic = self.mic.frame_pose(t_start, period)
        if share <= 0.0:
            return mic
        tts = self.speech.frame_pose(t_start, period)
        return MouthPose(mic.dominant, tts.dominant, share,
                         (1.0 - share) * mic.openness + share * tts.openness)
