"""The GPU path against the same machine's CPU path, in one run (issue 14).

Voice: time to first audio (first AudioChunk in hand) for a 5-, 20- and 60-word
sentence on the GPU engines and on the CPU engines the app uses without a GPU
(one intra-op thread, pipeline.voice.streaming_tts), interleaved run by run; the
real-time factor of a 2,000-word text on the GPU; the process's CPU time per second
of speech made, on each path; host↔device copies per chunk (counted by the engines:
each input up, each output down) and the copy nodes onnxruntime put in the captured
graphs; and 50 voice streams started at once, each pulled on its own thread and
played back in simulation from the app's start lead: first audio P50/P99 and
underruns (bench/tts_latency.py's player). Their runs are ordered by deadline and
batched (pipeline/infer/engine.py); `requests_per_run` says how many shared a run.
Where one stream's first audio goes (`first_audio_parts_ms`, each path): each engine's
runs before its first chunk, uploads and downloads included, and the time outside them
(the stream's Python and waits), each a P50 of its own, so they need not sum to the
total's P50. The stream's Python alone is the python section's `python_ms_per_stream`.

Mouth frames (where CUDA-GL interop works): the sprite rig's frame made by the CUDA
kernel (render/gpu/cuda_sprite_renderer.py) against the GL shader path on the same GPU,
at 512² and 1024², each timed from the draw call to the frame complete in the GL
framebuffer (glFinish): interop map, kernel, unmap and blit included; for the GL path
also the GPU's own time per frame (timer queries), apart from submission and waiting; the largest
difference between the two; host copies per frame (the renderers count theirs). The
same for the photo rig's mouth frame (render/gpu/cuda_photo_renderer.py against
PhotoRenderer) on portraits of 1024 and 2048 pixels, and the whole avatar frame around
it, whose composite is GL's in both.

50 streams are also started at several Python switch intervals in turn (the gil
section): the device lane's thread needs the GIL back after every run, and how long a
busy stream may keep it is the interval.

The lip-shape model's 10 ms step on the CPU (what the app runs) and as a CUDA graph
through the engine layer: which is faster decides where it runs.

The precision section: the flow and the vocoder computing in TF32 and in float16 on the
GPU against FP32 (what ships): the audio's distance from FP32's, first audio, and 50
streams at once, where a run at a batch of 64 may be bound by arithmetic, not launches.

The api section: 50 /stream clients opened at once on the real app (`lipsync-studio
--headless --api-port P` in a process of its own, bench/api.py's clients), its voice on
the GPU and then on the CPU path, in the same run. With the API on, the app builds its
engines at the batch sizes for its api_max_streams (pipeline.infer.engine.batch_sizes_for:
STREAM_BATCHES for the default 64), so this is the API as a user gets it. On the lent GPU
machine it needs packaging/carry_app.sh's pieces.

Last line of output: one JSON object.
Usage: python bench/gpu.py [--runs 20] [--streams 50] [--out bench/results/gpu.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402
from bench.tts_latency import TEXTS, _first_audio_ms, _underruns  # noqa: E402
from pipeline.audio.output import AudioOutput  # noqa: E402
from pipeline.core.modes import DEFAULT_MODE  # noqa: E402
from pipeline.infer import sessions  # noqa: E402
from pipeline.infer.engine import CONCURRENT_BATCH_SIZES  # noqa: E402
from pipeline.infer.sessions import COUNT_COPIES_ENV  # noqa: E402
from pipeline.core.clock import MediaClock  # noqa: E402
from pipeline.core.gil import AUDIO_SWITCH_INTERVAL_S, hand_over_within  # noqa: E402
from pipeline.voice.start_lead import START_LEAD_INITIAL_S, StartLead, floor_for  # noqa: E402
from pipeline.voice.streaming_tts import LATENCY_MODES, AudioChunk, StreamingTTS  # noqa: E402
from render.gl.gl_platform import use_egl  # noqa: E402

LENGTHS = ("short5", "medium20", "long60")
# The simulated device of the heard-first-audio figure: 10.7 ms from a block's callback
# to its sound (two 256-sample periods at 48 kHz, JACK's default of two periods).
DEVICE_S = 512 / 48000
# Batch sizes the 50 streams may be run at: the app's for concurrent streams, one graph
# each per shape (78 in all; ~0.6 s each to build and capture on the H200).
STREAM_BATCHES = CONCURRENT_BATCH_SIZES


def _long_text(words: int) -> str:
    """`words` words of ordinary prose: the benchmark texts, repeated."""
    pool = " ".join(TEXTS[name] for name in ("long60", "medium20", "para4")).split()
    return " ".join(pool[i % len(pool)] for i in range(words))


def _speak(tts: StreamingTTS, text: str, mode) -> tuple[list[float], list[int], float]:
    """(times each chunk was ready, its samples, CPU seconds of the process) for one
    whole stream pulled as fast as it comes; times from the call."""
    cpu = time.process_time()
    start = time.perf_counter()
    ready, samples = [], []
    for item in tts.stream(text, mode):
        if isinstance(item, AudioChunk) and len(item.samples):
            ready.append(time.perf_counter() - start)
            samples.append(len(item.samples))
    return ready, samples, time.process_time() - cpu


def _transfers(tts: StreamingTTS) -> tuple[int, int]:
    stages = tts.engines.values()
    return (sum(s.transfers.uploads + s.transfers.downloads for s in stages),
            sum(s.transfers.runs for s in stages))


def _streams(tts_of, text: str, mode, count: int) -> dict:
    """`count` streams started together (a barrier), each on its own thread."""
    barrier = threading.Barrier(count)
    results: list[tuple[list[float], list[int], int]] = [None] * count  # type: ignore[list-item]

    def one(i: int) -> None:
        tts = tts_of()
        barrier.wait()
        try:
            ready, samples, _ = _speak(tts, text, mode)
        except Exception as exc:  # noqa: BLE001 - raised below, from the caller's thread
            results[i] = exc
            return
        results[i] = (ready, samples, tts.sample_rate)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [r for r in results if isinstance(r, Exception)]
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} streams failed, the first with: "
                           f"{type(failed[0]).__name__}: {failed[0]}") from failed[0]
    first = [r[0][0] * 1000 for r in results]
    underruns = sum(_underruns(ready, samples, rate, START_LEAD_INITIAL_S)
                    for ready, samples, rate in results)
    return {"streams": count, "ttfa_p50_ms": round(float(np.percentile(first, 50)), 2),
            "ttfa_p99_ms": round(float(np.percentile(first, 99)), 2),
            "ttfa_max_ms": round(max(first), 2), "underruns": int(underruns)}


class SimulatedOutput:
    """An audio output played on the wall clock, for the app's real Speaker: a device at
    `rate` whose callback takes `block` samples every block period from `start` (its
    read head), heard `device_s` after the block it is in was taken; it writes no nearer
    its read head than `safety_blocks` blocks (earliest_pos; the app's AudioOutput
    SAFETY_BLOCKS unless told), and drops what comes later than that (write_at), as the
    real one does."""

    def __init__(self, rate: int, block: int, device_s: float, start: float,
                 safety_blocks: int = AudioOutput.SAFETY_BLOCKS) -> None:
        self.sample_rate, self.block, self._start = rate, block, start
        self.safety_blocks = safety_blocks
        self.scheduled_end = 0
        self.dropped = 0
        # Sample p is taken by the callback at start + (p // block + 1) blocks and heard
        # device_s after that callback: media time 0 is heard at start + block + device_s.
        self.clock = MediaClock(rate)
        self.clock.on_output_block(0, start + block / rate + device_s)

    @property
    def read_pos(self) -> int:
        taken = int((time.monotonic() - self._start) * self.sample_rate) // self.block
        return max(0, taken) * self.block

    def earliest_pos(self) -> int:
        return self.read_pos + self.safety_blocks * self.block

    def write_at(self, pos: int, samples: np.ndarray) -> int:
        late = min(len(samples), max(0, self.earliest_pos() - pos))
        self.scheduled_end = max(self.scheduled_end, pos + len(samples))
        self.dropped += late
        return late

    def stop_speech(self) -> float:
        return self.clock.media_time_now()


def _heard_first_audio(tts: StreamingTTS, texts: list[str], mode, floor_s: float,
                       block: int, speeches: int, rng: np.random.Generator,
                       safety_blocks: int = AudioOutput.SAFETY_BLOCKS) -> dict:
    """`speeches` speeches through one of the app's Speakers (as the app keeps one: its
    thread and its start lead, adapting from the app's initial lead but never below
    `floor_s`, live from one speech to the next) on a SimulatedOutput at 48 kHz with
    `block`-sample blocks and a 10.7 ms device, each asked for at a random phase to the
    output's callbacks: heard first audio (request to first sound at the listener) and
    underruns. Each speech is asked for once the last is made (a barge-in, as a chat
    message arriving then would be)."""
    from pipeline.core.events import SpeechFinished, SpeechStarted
    from pipeline.voice.speaker import Speaker
    from pipeline.voice.speech_timeline import SpeechTimeline

    events: list = []
    done = threading.Event()

    def on_event(event) -> None:
        events.append(event)
        if isinstance(event, SpeechFinished):
            done.set()

    output = SimulatedOutput(48000, block, DEVICE_S, time.monotonic(), safety_blocks)
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, on_event, mode=mode)
    speaker.start_lead = StartLead(floor_s)
    heard, synthesis, leads, underruns = [], [], [], 0
    interval = sys.getswitchinterval()
    hand_over_within(AUDIO_SWITCH_INTERVAL_S)  # as the app's AudioOutput does when it opens
    try:
        for k in range(speeches):
            events.clear()
            done.clear()
            _idle_before_speech(rng, block)
            leads.append(speaker.start_lead.lead_s * 1000)
            speaker.say(texts[k % len(texts)])
            done.wait(30)
            started = next(e for e in events if isinstance(e, SpeechStarted))
            finished = next(e for e in events if isinstance(e, SpeechFinished))
            heard.append(started.first_audio_s * 1000)
            synthesis.append(started.synthesis_s * 1000)
            underruns += finished.underruns + finished.gaps
    finally:
        speaker.close()
        sys.setswitchinterval(interval)
    return {"floor_ms": floor_s * 1000, "block": block, "safety_blocks": safety_blocks,
            "speeches": speeches,
            "heard_p50_ms": round(float(np.percentile(heard, 50)), 2),
            "heard_p99_ms": round(float(np.percentile(heard, 99)), 2),
            "synthesis_p50_ms": round(float(np.percentile(synthesis, 50)), 2),
            "underruns": int(underruns), "dropped_samples": int(output.dropped),
            "leads_ms": [round(v, 1) for v in leads]}


def _idle_before_speech(rng: np.random.Generator, block: int) -> None:
    """The gap before each speech of _heard_first_audio: 50 ms, then a random part of a
    `block`-sample block at 48 kHz (a random phase to the output's callbacks)."""
    time.sleep(0.05 + rng.uniform(0, block / 48000))


def _first_audio_after_idle(tts: StreamingTTS, mode, block: int, runs: int) -> dict:
    """First audio of the short text asked for directly (no Speaker) after the idle gap
    each of _heard_first_audio's speeches has before it: the synthesis the Speaker's
    first chunk would take if it added nothing."""
    rng = np.random.default_rng(2)
    times = []
    for _ in range(runs):
        _idle_before_speech(rng, block)
        times.append(_first_audio_ms(tts, TEXTS["short5"], mode))
    return _p50_p99(times)


def _by_thread(tts: StreamingTTS, mode, runs: int) -> dict:
    """First audio (medium text) asked for on the thread that warmed the engines up and on
    a thread never used before, interleaved: the app speaks from its speaker's thread and
    the API from a thread per stream, and onnxruntime keeps CUDA graphs per thread
    (pipeline/infer/engine.py, _DeviceLane)."""
    same, fresh = [], []
    for _ in range(runs):
        same.append(_first_audio_ms(tts, TEXTS["medium20"], mode))
        box: list[float] = []
        thread = threading.Thread(target=lambda: box.append(_first_audio_ms(tts, TEXTS["medium20"], mode)))
        thread.start()
        thread.join()
        fresh.extend(box)
    return {"warming_thread": _p50_p99(same), "fresh_thread": _p50_p99(fresh)}


def _knee(tts_of, text: str, mode, counts: tuple[int, ...], deadline: float) -> dict:
    """_streams at each of `counts` in turn, until one has underruns or `deadline`
    (perf_counter) has passed: the most voices that played in real time (0 if the
    smallest did not), whether the search ended on underruns, and every count's figures."""
    runs, most = [], 0
    for count in counts:
        if time.perf_counter() > deadline:
            return {"realtime_voices_max": most, "ended_on_underruns": False, "runs": runs}
        result = _streams(tts_of, text, mode, count)
        runs.append(result)
        print("knee", mode.name, result, flush=True)
        if result["underruns"]:
            return {"realtime_voices_max": most, "ended_on_underruns": True, "runs": runs}
        most = count
    return {"realtime_voices_max": most, "ended_on_underruns": False, "runs": runs}


def _python_ms(tts: StreamingTTS, texts: list[str], mode) -> dict:
    """The stream's own work outside its engines' runs: the CPU time of the thread that
    pulls it (time.thread_time: waits for the device or another thread are not in it)
    less that spent in Engine.run on that thread, per stream to its first chunk and per
    chunk after, over `texts` one at a time: what streams started together pay one after
    another under the GIL. `espeak_to_first_chunk` is the part of it in espeak-ng's
    phonemization (pipeline.voice.phonemes.phonemize), which holds the GIL too."""
    from pipeline.infer import engine as engine_module
    from pipeline.voice import phonemes as phonemes_module

    spent, read = [0.0], [0.0]
    pulling = threading.get_ident()
    original, phonemize = engine_module.Engine.run, phonemes_module.phonemize

    def timed(self, feed, deadline=None, keep=None):
        if threading.get_ident() != pulling:
            return original(self, feed, deadline, keep)
        start = time.thread_time()
        try:
            return original(self, feed, deadline, keep)
        finally:
            spent[0] += time.thread_time() - start

    def reading(voice, text):
        start = time.thread_time()
        try:
            return phonemize(voice, text)
        finally:
            read[0] += time.thread_time() - start

    engine_module.Engine.run, phonemes_module.phonemize = timed, reading
    first, espeak, later = [], [], []
    try:
        for text in texts:
            spent[0] = read[0] = 0.0
            start = time.thread_time()
            chunks = 0
            for item in tts.stream(text, mode):
                if isinstance(item, AudioChunk) and len(item.samples):
                    chunks += 1
                    if chunks == 1:
                        first.append((time.thread_time() - start - spent[0]) * 1000)
                        espeak.append(read[0] * 1000)
                        spent[0], start = 0.0, time.thread_time()
            if chunks > 1:
                later.append((time.thread_time() - start - spent[0]) * 1000 / (chunks - 1))
    finally:
        engine_module.Engine.run, phonemes_module.phonemize = original, phonemize
    return {"to_first_chunk": _p50_p99(first), "espeak_to_first_chunk": _p50_p99(espeak),
            "per_later_chunk": _p50_p99(later)}


def _busy_before(trace: list, until: float) -> dict[str, tuple[int, float]]:
    """Per engine, its runs on the lane (engine._DeviceQueue.trace) that began before
    `until`, and their busy ms up to it."""
    busy: dict[str, tuple[int, float]] = {}
    for start, end, name, _, _, _ in trace:
        if start < until:
            runs, ms = busy.get(name, (0, 0.0))
            busy[name] = (runs + 1, ms + (min(end, until) - start) * 1000)
    return busy


def _trace_summary(trace: list, started: float, until: float) -> dict:
    """Where the device lane's time went while streams ran (engine._DeviceQueue.trace):
    per engine its runs, requests, batch sizes and busy time, in all and before `until`
    (the P99 stream's first audio), and the lane's busy share of that first stretch."""
    summary: dict = {}
    before = _busy_before(trace, until)
    for _, _, name, _, _, _ in trace:
        runs, ms = before.get(name, (0, 0.0))
        summary.setdefault(name, {"runs": 0, "requests": 0, "busy_ms": 0.0, "runs_before_p99": runs,
                                  "busy_ms_before_p99": round(ms, 2), "batch_sizes": {}})
    for start, end, name, size, requests, _ in trace:
        row = summary[name]
        row["runs"] += 1
        row["requests"] += requests
        row["busy_ms"] += (end - start) * 1000
        row["batch_sizes"][str(size)] = row["batch_sizes"].get(str(size), 0) + 1
    for row in summary.values():
        row["busy_ms"] = round(row["busy_ms"], 2)
    busy = sum(ms for _, ms in before.values())
    return {"engines": summary, "lane_busy_share_before_p99": round(busy / max(1e-9, (until - started) * 1000), 3),
            "first_run_after_ms": round((trace[0][0] - started) * 1000, 2) if trace else None}


def _first_audio_parts(tts: StreamingTTS, mode, runs: int) -> dict:
    """Where one stream's first audio goes, per text length: each engine's runs on the
    lane before the first chunk (engine._DeviceQueue.trace: the run with its uploads and
    downloads), and the rest (the stream's Python, and waits between runs), P50 over
    `runs` of each, in ms: what a shorter time to first audio has to cut."""
    from pipeline.infer import engine as engine_module

    queue = engine_module._QUEUE if tts.on_device else engine_module._CPU_QUEUE
    parts: dict = {name: {} for name in LENGTHS}
    for _ in range(runs):
        for name in LENGTHS:
            queue.trace = trace = []
            try:
                started = time.perf_counter()
                total = _first_audio_ms(tts, TEXTS[name], mode)
            finally:
                queue.trace = None
            until = started + total / 1000
            row = {"total": total}
            for engine, (engine_runs, ms) in _busy_before(trace, until).items():
                row[engine], row[f"{engine}_runs"] = ms, engine_runs
            row["outside_runs"] = total - sum(v for k, v in row.items()
                                              if k != "total" and not k.endswith("_runs"))
            for key, value in row.items():
                parts[name].setdefault(key, []).append(value)
    return {name: {key: round(float(np.percentile(values, 50)), 3) for key, values in rows.items()}
            for name, rows in parts.items()}


def _p50_p99(milliseconds: list[float]) -> dict:
    return {"p50_ms": round(float(np.percentile(milliseconds, 50)), 3),
            "p99_ms": round(float(np.percentile(milliseconds, 99)), 3)}


def _ready(rig, side: int) -> dict:
    """GL's and CUDA's renderers set up on `rig` at side², in the current context."""
    from render.gpu.mouth_path import CUDA, OPENGL
    from render.rigs.loader import renderer_made

    return {name: renderer_made(rig, (0.0, 0.0, 0.0, 0.0), (side, side), path)
            for name, path in (("gl", OPENGL), ("cuda", CUDA))}


def _close(result: dict, side: int, worst: int, renderers: dict, copies_before: int, runs: int) -> None:
    """The size's difference and CUDA's host copies per frame into `result`; the renderers released."""
    result[f"max_diff_{side}"] = worst
    result[f"host_copies_per_frame_{side}"] = (renderers["cuda"].host_copies - copies_before) / runs
    for renderer in renderers.values():
        renderer.release()


def _gpu_ms(draw, runs: int) -> dict:
    """The GPU's own time for `draw(i)`, frame by frame, by GL timer queries
    (GL_TIME_ELAPSED): where a frame's wall time goes that is not the GPU's work
    (submission, the wait in glFinish)."""
    import ctypes

    from OpenGL import GL

    # The raw entry point: PyOpenGL's wrapper has no array type for GLuint64.
    from OpenGL.raw.GL.VERSION.GL_3_3 import glGetQueryObjectui64v

    query = int(GL.glGenQueries(1)[0])
    elapsed = ctypes.c_uint64()
    values = []
    # The first query's result is discarded: llvmpipe gave a nonsense first one (674 s).
    for i in range(-1, runs):
        GL.glBeginQuery(GL.GL_TIME_ELAPSED, query)
        draw(i)
        GL.glEndQuery(GL.GL_TIME_ELAPSED)
        glGetQueryObjectui64v(query, GL.GL_QUERY_RESULT, ctypes.byref(elapsed))
        if i >= 0:
            values.append(elapsed.value / 1e6)
    GL.glDeleteQueries(1, [query])
    return _p50_p99(values)


def _mouth_frames(runs: int) -> dict:
    """CUDA and GL sprite frames at each size, interleaved frame by frame
    (render/gpu/path_timing.py, the loop the app times its choice with)."""
    from render.gl.egl_target import EglTarget
    from render.gpu.interop import cuda_unavailable
    from render.gpu.path_timing import interleaved_ms, sprite_frame
    from tests.harness.drawn_rig import drawn_rig

    result: dict = {}
    with EglTarget(64, 64) as target:
        if (reason := cuda_unavailable()) is not None:
            return {"skipped": reason, "renderer": target.description}
        result["renderer"] = target.description
        for side in (512, 1024):
            target.resize(side, side)
            target.make_current()
            rig = drawn_rig(side)
            renderers = _ready(rig, side)
            copies_before = renderers["cuda"].host_copies
            frames: dict = {}
            worst = [0]

            def compare(name, step, renderer, i, frames=frames, worst=worst) -> None:
                if i % 50 == 0:
                    frames[name] = renderer.read_pixels().astype(np.int16)
                    if name == "cuda":
                        worst[0] = max(worst[0], int(np.abs(frames["gl"] - frames["cuda"]).max()))

            times = interleaved_ms(renderers, runs, {"frame": sprite_frame}, after=compare)
            for name in renderers:
                result[f"{name}_{side}"] = _p50_p99(times[name, "frame"])
            _alone(result, renderers, runs, "frame", sprite_frame, f"_alone_{side}")
            result[f"gl_gpu_time_{side}"] = _gpu_ms(lambda i: sprite_frame(renderers["gl"], i), runs)
            _close(result, side, worst[0], renderers, copies_before, runs)
    return result


def _alone(result: dict, renderers: dict, runs: int, step: str, make, suffix: str) -> None:
    """Each path's frames drawn alone, as the app draws once it has chosen a path, into
    `result` under name + `suffix`. Interleaved frame by frame with the other path (as
    these sections time both, and as the app times its choice), a frame also pays for the
    GPU turning between CUDA's work and GL's: on a lent H100 the GL sprite frame at 1024² took P99 0.48-0.51 ms
    interleaved and 0.23-0.24 ms alone, the photo mouth 0.28-0.33 and 0.15-0.16
    (bench/results/gpu_h100_df05219.json, gpu_h100_df05219_mouth_again.json)."""
    from render.gpu.path_timing import interleaved_ms

    for name, renderer in renderers.items():
        alone = interleaved_ms({name: renderer}, runs, {step: make})
        result[f"{name}{suffix}"] = _p50_p99(alone[name, step])


def _picked(frames: dict, part: str, side: int) -> dict:
    """The path the app picks at `side` (the lower P99 interleaved, render/gpu/
    mouth_path.py) and its P50/P99 drawn alone, as the app then draws."""
    name = min(("gl", "cuda"), key=lambda n: frames[f"{n}{part}_{side}"]["p99_ms"])  # a tie: GL
    return {"path": name, **frames[f"{name}{part}_alone_{side}"]}


def _photo_frames(runs: int) -> dict:
    """CUDA and GL photo-rig mouth frames, portraits of 1024 and 2048 pixels shown 1:1,
    interleaved frame by frame (render/gpu/path_timing.py): the mouth frame alone (from
    the call to the frame complete: glFinish for GL, the kernels' stream synchronised and
    glFinish for CUDA) and the whole avatar frame (glFinish)."""
    from render.gl.egl_target import EglTarget
    from render.gpu.path_timing import interleaved_ms, photo_mouth_frame, photo_pose
    from tests.harness.drawn_portrait import compare_mouth_frames, drawn_portrait

    def whole_frame(renderer, i: int) -> None:
        renderer.draw(photo_pose(i), 0.0, (i % 5) / 5)

    result: dict = {}
    with EglTarget(64, 64) as target:
        for side in (1024, 2048):
            target.resize(side, side)
            target.make_current()
            rig = drawn_portrait(size=side)
            renderers = _ready(rig, side)
            copies_before = renderers["cuda"].host_copies
            frames: dict = {}
            found = [0, 0]  # the worst difference, tie pixels

            def compare(name, step, renderer, i, rig=rig, frames=frames, found=found) -> None:
                if step != "mouth":
                    return
                if i % 50 == 0:
                    frames[name] = renderer.read_mouth_frame().astype(np.int16)
                    if name == "cuda":
                        # Apart from pixel centres on the opening's edges, which either
                        # rasteriser's rounding may own (tests/test_gpu_frames.py).
                        apart, tied = compare_mouth_frames(rig, [photo_pose(i)], [frames["gl"]],
                                                           [frames["cuda"]], renderer.mouth_size, 2)
                        found[0], found[1] = max(found[0], apart), found[1] + tied
                renderer._frame_pose = None  # the whole frame makes its mouth anew

            times = interleaved_ms(renderers, runs, {"mouth": photo_mouth_frame, "draw": whole_frame},
                                   after=compare)
            for (name, part), values in times.items():
                result[f"{name}_{part}_{side}"] = _p50_p99(values)
            _alone(result, renderers, runs, "mouth", photo_mouth_frame, f"_mouth_alone_{side}")
            result[f"mouth_frame_size_{side}"] = list(renderers["cuda"].mouth_size)
            result[f"tie_pixels_over_2_{side}"] = found[1]
            _close(result, side, found[0], renderers, copies_before, runs)
    return result


def _lip_shape(runs: int) -> dict:
    """The lip-shape model's step (one 10 ms hop) on the CPU session the app uses
    (LipShapeModel) and as a captured CUDA graph through the voice's engine layer,
    interleaved hop by hop, and the largest difference of the graph's outputs from the
    CPU's: which is faster decides where it runs (pipeline/lipsync/model.py)."""
    import onnx

    from pipeline.infer.engine import Engine
    from pipeline.lipsync.features import N_MELS, POWER_FLOOR
    from pipeline.lipsync.model import DEFAULT_MODEL, LipShapeModel

    rng = np.random.default_rng(0)
    hops = rng.normal(-4.0, 2.0, (runs, N_MELS)).astype(np.float32)
    model = LipShapeModel()
    graph = onnx.load(str(DEFAULT_MODEL))
    engine = Engine("lip-shape", graph, "cuda")
    outputs = [o.name for o in graph.graph.output]
    window = np.full((1, 4, N_MELS), np.log(POWER_FLOOR), np.float32)  # the model's silence
    state = np.zeros((2, 1, 160), np.float32)
    engine.prepare({"feats": window, "state": state})
    times: dict[str, list[float]] = {"cpu": [], "cuda_graph": []}
    worst = 0.0
    for hop in hops:
        start = time.perf_counter()
        probs, _ = model.step_all_heads(hop)
        times["cpu"].append((time.perf_counter() - start) * 1000)
        window = np.concatenate([window[:, 1:], hop[None, None]], axis=1)
        start = time.perf_counter()
        result = dict(zip(outputs, engine.run({"feats": window, "state": state})))
        times["cuda_graph"].append((time.perf_counter() - start) * 1000)
        state = result["next_state"]
        worst = max(worst, float(np.abs(result["probs"] - probs).max()))
    report = {name: _p50_p99(values) for name, values in times.items()}
    report["cuda_graph"]["captured"] = engine.graphs == 1
    report["graph_max_diff_probs"] = float(f"{worst:.2e}")
    return report


SECTIONS = ("voice", "threads", "heard", "python", "lip", "mouth", "photo", "gil", "streams", "knee",
            "cudnn", "precision", "api")
# The precision section's variants (streaming_tts.ENGINE_PRECISION), what ships first.
PRECISION_VARIANTS = {"fp32": {}, "fp32_splines_as_exported": {}, "fp32_as_exported": {},
                      "tf32_flow_vocoder": {"flow": "tf32", "vocoder": "tf32"},
                      "fp16_flow_vocoder": {"flow": "fp16", "vocoder": "fp16"}}
# Variants built with fewer graph rewrites than ship (streaming_tts.ENGINE_REWRITES), each
# with those it keeps: what the others gain, against "fp32".
REWRITE_VARIANTS = {"fp32_splines_as_exported": ("fused_layer_norms",), "fp32_as_exported": ()}
# cuDNN's frontend found no fp16 algorithm by HEURISTIC for the vocoder's dilated
# convolutions at a batch of 64 on the lent H100 ("HEURISTIC_QUERY_FAILED"), so fp16 is
# built with EXHAUSTIVE (timing every candidate) too.
EXHAUSTIVE_VARIANTS = ("fp16_flow_vocoder",)
# Python switch intervals the 50 streams are started at in the gil section: 5 ms is
# Python's default, 1 ms what the app sets with a sound device (pipeline/audio/output.py).
SWITCH_INTERVALS_S = (0.005, 0.001, 0.0005, 0.0002)
# Candidate start-lead floors on the GPU path beside the shipped one, at a JACK/PipeWire
# low-latency period of 256 samples (48 kHz), and the shipped floor at 128. The speeches
# play on the wall clock, so the sweep speaks the shortest text (1.8 s) 10 times a
# candidate, and the shipped floor the short and medium texts (1.8 and 5.5 s) 20 times:
# about 2.5 minutes, where every floor at both sizes on all four texts took 25.
FLOORS_S = (0.0, 0.006, 0.012)
SWEEP_SPEECHES = 10
# Voices started together in the knee search, in turn, until underruns appear.
KNEE_COUNTS = (25, 50, 75, 100, 150, 200, 300)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--streams", type=int, default=50)
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--frames", type=int, default=500)
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--knee-budget-s", type=float, default=240.0,
                        help="the knee search stops starting counts after this long")
    parser.add_argument("--variants", nargs="+", choices=PRECISION_VARIANTS,
                        default=list(PRECISION_VARIANTS), help="the precision section's (fp32 always)")
    parser.add_argument("--add-to", action="store_true",
                        help="keep the figures of the report already at --out (a run split into "
                             "calls under a time limit, on the same machine) and add this run's")
    args = parser.parse_args()
    sections = set(args.sections)
    mode = LATENCY_MODES[DEFAULT_MODE]
    use_egl()

    loaded = time.perf_counter()
    gpu = StreamingTTS(provider="auto")
    gpu.warm_up()
    gpu_load_s = time.perf_counter() - loaded
    cpu = StreamingTTS(provider="cpu")
    cpu.warm_up()
    report: dict = json.loads(args.out.read_text()) if args.add_to and args.out.exists() else {}
    report |= {"machine": describe(os.environ.get("BENCH_DEVICE", "")), "mode": mode.name,
               "runs": args.runs, "on_gpu": gpu.on_device,
               "gpu_load_and_warm_up_s": round(gpu_load_s, 1),
               "cudnn_conv_algo_search": sessions.CUDNN_CONV_ALGO_SEARCH,
               "providers": {name: asdict(c) for name, c in gpu.providers.items()}}

    def checkpoint() -> None:
        # Each section's figures are kept as soon as it ends: a run cut short by its
        # time limit still brings back what it measured.
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(report, indent=2) + "\n")

    if "voice" in sections:
        _voice(report, gpu, cpu, mode, args.runs, args.words)
        checkpoint()
    if "threads" in sections:
        report["first_audio_by_thread"] = _by_thread(gpu, mode, args.runs)
        print("threads", report["first_audio_by_thread"], flush=True)
        checkpoint()
    texts = [TEXTS[name] for name in ("short5", "medium20", "long60", "para4")]
    if "heard" in sections:
        floor = floor_for(gpu.on_device)
        rng = np.random.default_rng(0)
        sweep = [_heard_first_audio(gpu, [TEXTS["short5"]], mode, each, 256, SWEEP_SPEECHES, rng)
                 for each in FLOORS_S if each != floor]
        sweep.append(_heard_first_audio(gpu, [TEXTS["short5"]], mode, floor, 128, SWEEP_SPEECHES, rng))
        shipped = _heard_first_audio(gpu, [TEXTS["short5"], TEXTS["medium20"]], mode, floor, 256, 20,
                                     np.random.default_rng(1))
        # The output's margin before stop 40 (two blocks), on the same speeches: the baseline.
        two_blocks = _heard_first_audio(gpu, [TEXTS["short5"], TEXTS["medium20"]], mode, floor,
                                        256, 20, np.random.default_rng(1), safety_blocks=2)
        report["heard_first_audio"] = {"device_ms": round(DEVICE_S * 1000, 2), "sweep": sweep,
                                       "shipped_floor": shipped,
                                       "shipped_floor_two_safety_blocks": two_blocks,
                                       "direct_after_idle": _first_audio_after_idle(gpu, mode, 256, 20)}
        report["heard_first_audio_p50_ms"] = shipped["heard_p50_ms"]
        report["heard_first_audio_underruns"] = shipped["underruns"]
        print("heard", report["heard_first_audio"], flush=True)
        checkpoint()
    if "python" in sections:
        report["python_ms_per_stream"] = {path: _python_ms(tts, texts * 5, mode)
                                          for path, tts in (("gpu", gpu), ("cpu", cpu))}
        print("python", report["python_ms_per_stream"], flush=True)
        checkpoint()
    if "lip" in sections:
        report["lip_shape_model"] = _lip_shape(args.frames)
        print("lip shape", report["lip_shape_model"], flush=True)
        checkpoint()
    if "mouth" in sections:
        mouth = _mouth_frames(args.frames)
        report["mouth_frames"] = mouth
        print("mouth", mouth, flush=True)
        if "skipped" not in mouth:
            report["mouth_frame_p99_ms"] = {f"{s}": mouth[f"cuda_{s}"]["p99_ms"] for s in (512, 1024)}
            report["gl_mouth_frame_p99_ms"] = {f"{s}": mouth[f"gl_{s}"]["p99_ms"] for s in (512, 1024)}
            report["picked_mouth_frame_ms"] = {f"{s}": _picked(mouth, "", s) for s in (512, 1024)}
            report["host_copies_per_frame"] = max(mouth[f"host_copies_per_frame_{s}"] for s in (512, 1024))
        checkpoint()
    if "photo" in sections:
        photo = _photo_frames(args.frames)
        report["photo_mouth_frames"] = photo
        print("photo", photo, flush=True)
        report["photo_mouth_frame_p99_ms"] = {f"{s}": photo[f"cuda_mouth_{s}"]["p99_ms"] for s in (1024, 2048)}
        report["gl_photo_mouth_frame_p99_ms"] = {f"{s}": photo[f"gl_mouth_{s}"]["p99_ms"] for s in (1024, 2048)}
        report["picked_photo_mouth_frame_ms"] = {f"{s}": _picked(photo, "_mouth", s) for s in (1024, 2048)}
        report["host_copies_per_frame"] = max(report.get("host_copies_per_frame", 0.0),
                                              *(photo[f"host_copies_per_frame_{s}"] for s in (1024, 2048)))
        checkpoint()
    if sections & {"gil", "streams", "knee"}:
        _streams_section(report, sections, args.streams, mode, args.knee_budget_s)
        checkpoint()
    if "cudnn" in sections:
        report["cudnn_algo_search"] = _cudnn_search(gpu, mode, args.runs)
        print("cudnn", report["cudnn_algo_search"], flush=True)
        checkpoint()
    if "precision" in sections:
        report["precision"] = _precision(args.streams, mode, args.runs, tuple(args.variants))
        print("precision", report["precision"], flush=True)
        checkpoint()
    if "api" in sections:
        from bench.api import streams_on_app

        api = {provider: streams_on_app({"inference_provider": provider}, args.streams)
               for provider in ("auto", "cpu")}
        report["api50"] = api
        report["api50_ttfb_p50_ms"] = api["auto"]["ttfb_p50_ms"]
        report["api50_ttfb_p99_ms"] = api["auto"]["ttfb_p99_ms"]
        report["api50_underruns"] = api["auto"]["underruns"]
        report["api50_lead_for_no_underruns_ms"] = api["auto"]["lead_for_no_underruns_ms"]
        print("api", api, flush=True)
    publish(report, args.out)


def _voice(report: dict, gpu: StreamingTTS, cpu: StreamingTTS, mode, runs: int, words: int) -> None:
    """First audio on each path, CPU time per second of speech, copies per chunk, and the
    real-time factor of a long text on the GPU."""
    times = {(path, name): [] for path in ("gpu", "cpu") for name in LENGTHS}
    for _ in range(runs):
        for name in LENGTHS:
            times["gpu", name].append(_first_audio_ms(gpu, TEXTS[name], mode))
            times["cpu", name].append(_first_audio_ms(cpu, TEXTS[name], mode))
    for name in LENGTHS:
        g, c = np.percentile(times["gpu", name], 50), np.percentile(times["cpu", name], 50)
        report[name] = {"ttfa_p50_ms": round(float(g), 2),
                        "ttfa_p99_ms": round(float(np.percentile(times["gpu", name], 99)), 2),
                        "cpu_ttfa_p50_ms": round(float(c), 2),
                        "cpu_over_gpu": round(float(c / g), 2)}
        print(name, report[name], flush=True)

    report["first_audio_parts_ms"] = {path: _first_audio_parts(tts, mode, runs)
                                      for path, tts in (("gpu", gpu), ("cpu", cpu))}
    print("first audio parts", report["first_audio_parts_ms"], flush=True)

    # CPU time per second of speech, and copies per chunk, on one paragraph each.
    text = TEXTS["long60"]
    for path, tts in (("gpu", gpu), ("cpu", cpu)):
        copies_before, runs_before = _transfers(tts)
        ready, samples, cpu_s = _speak(tts, text, mode)
        copies, runs_after = _transfers(tts)
        speech_s = sum(samples) / tts.sample_rate
        report[f"cpu_s_per_speech_s_{path}"] = round(cpu_s / speech_s, 4)
        if path == "gpu":
            report["host_copies_per_chunk"] = round((copies - copies_before) / len(samples), 2)
            report["engine_runs_per_chunk"] = round((runs_after - runs_before) / len(samples), 2)

    long_text = _long_text(words)
    start = time.perf_counter()
    _, samples, _ = _speak(gpu, long_text, mode)
    report[f"rtf_{words}_words_gpu"] = round(
        (time.perf_counter() - start) / (sum(samples) / gpu.sample_rate), 4)


def _streams_section(report: dict, sections: set[str], count: int, mode, knee_budget_s: float) -> None:
    """Many voices at once on the engines' batch sizes: the copy nodes and CUDA graphs of
    those engines, `count` streams started together, and the knee per latency mode."""
    # The streams' engines (three batch sizes) are built with their copy nodes counted,
    # which the app's warm-up does not pay for.
    os.environ[COUNT_COPIES_ENV] = "1"
    loaded = time.perf_counter()
    counted = StreamingTTS(provider="auto", batch_sizes=STREAM_BATCHES)
    counted.warm_up()
    report["streams_warm_up_counting_copy_nodes_s"] = round(time.perf_counter() - loaded, 1)
    report["copy_nodes_in_graphs"] = {
        name: sum(n or 0 for n in stage.device_copies.values()) if None not in stage.device_copies.values()
        else "not counted" for name, stage in counted.engines.items()}
    report["cuda_graphs"] = {name: f"{stage.graphs}/{len(stage.device_copies)}"
                             for name, stage in counted.engines.items()}
    report["engine_notes"] = [note for stage in counted.engines.values() for note in stage.notes]
    # What the device lane sizes its batches by (pipeline.infer.engine.batch_count): each
    # batch size's run time, fastest and slowest of the engine's shapes.
    report["graph_run_ms"] = {
        name: {str(size): [round(min(times) * 1e3, 2), round(max(times) * 1e3, 2)]
               for size in stage.batch_sizes
               if (times := [t for (_, s), t in stage.run_seconds.items() if s == size])}
        for name, stage in counted.engines.items()}

    def tts_of() -> StreamingTTS:
        return StreamingTTS(provider="auto", batch_sizes=STREAM_BATCHES)

    stages = list(counted.engines.values())
    if "gil" in sections:
        before = sys.getswitchinterval()  # the process's (the streams section runs at it)
        sweep = []
        try:
            for interval in SWITCH_INTERVALS_S:
                sys.setswitchinterval(interval)
                result = _traced_streams(tts_of, stages, TEXTS["medium20"], mode, count)
                sweep.append({"switch_interval_ms": interval * 1000, **result})
                print("gil", sweep[-1], flush=True)
        finally:
            sys.setswitchinterval(before)
        report["streams50_by_switch_interval"] = sweep
    if "streams" in sections:
        report["streams50"] = _traced_streams(tts_of, stages, TEXTS["medium20"], mode, count)
        report["streams50"]["switch_interval_ms"] = sys.getswitchinterval() * 1000
        report["streams50_ttfa_p50_ms"] = report["streams50"]["ttfa_p50_ms"]
        report["streams50_ttfa_p99_ms"] = report["streams50"]["ttfa_p99_ms"]
        report["streams50_underruns"] = report["streams50"]["underruns"]
        print("streams", report["streams50"], flush=True)
    if "knee" in sections:
        deadline = time.perf_counter() + knee_budget_s
        knees = {}
        for name, each in LATENCY_MODES.items():
            counts = KNEE_COUNTS if time.perf_counter() < deadline else ()
            knees[name] = _knee(tts_of, TEXTS["medium20"], each, counts, deadline)
        report["knee"] = knees
        report["realtime_voices_max"] = {name: k["realtime_voices_max"] for name, k in knees.items()}


def _traced_streams(tts_of, stages: list, text: str, mode, count: int) -> dict:
    """_streams, with where the device lane's time went (_trace_summary) and how many
    requests shared a run."""
    from pipeline.infer import engine as engine_module

    batched, runs = (sum(s.transfers.batched for s in stages), sum(s.transfers.runs for s in stages))
    engine_module._QUEUE.trace = trace = []
    started = time.perf_counter()
    try:
        result = _streams(tts_of, text, mode, count)
    finally:
        engine_module._QUEUE.trace = None
    result["device_runs"] = _trace_summary(trace, started, started + result["ttfa_p99_ms"] / 1000)
    result["requests_per_run"] = round(
        (sum(s.transfers.batched for s in stages) - batched)
        / max(1, sum(s.transfers.runs for s in stages) - runs), 2)
    return result


def _cudnn_search(gpu: StreamingTTS, mode, runs: int) -> dict:
    """First audio with cuDNN's convolution algorithms chosen by timing (EXHAUSTIVE,
    onnxruntime's default) against the shipped choice (sessions.CUDNN_CONV_ALGO_SEARCH),
    interleaved run by run; the other engines are built last, as the process's engines
    are cached by voice and provider."""
    from pipeline.voice import streaming_tts

    shipped = sessions.CUDNN_CONV_ALGO_SEARCH
    other = "EXHAUSTIVE" if shipped != "EXHAUSTIVE" else "HEURISTIC"
    kept = dict(streaming_tts._ENGINES)
    streaming_tts._ENGINES.clear()
    sessions.CUDNN_CONV_ALGO_SEARCH = other
    try:
        alternative = StreamingTTS(provider="auto")
        alternative.warm_up()
    finally:
        sessions.CUDNN_CONV_ALGO_SEARCH = shipped
        streaming_tts._ENGINES.update(kept)
    times: dict = {(which, name): [] for which in (shipped, other) for name in LENGTHS}
    for _ in range(runs):
        for name in LENGTHS:
            times[shipped, name].append(_first_audio_ms(gpu, TEXTS[name], mode))
            times[other, name].append(_first_audio_ms(alternative, TEXTS[name], mode))
    return {which: {name: _p50_p99(times[which, name]) for name in LENGTHS}
            for which in (shipped, other)}


def _precision(count: int, mode, runs: int, only: tuple[str, ...] = tuple(PRECISION_VARIANTS)
               ) -> dict:
    """Each of PRECISION_VARIANTS (REWRITE_VARIANTS with fewer graph rewrites) on
    the streams section's engines (batch sizes STREAM_BATCHES), one variant at a time
    (three variants' 78 CUDA graphs each did not fit an H100's 80 GB) and fp32 again at
    the end: how far its audio is from fp32's on
    the GPU, with the CPU path's distance from that as the yardstick (the same texts and
    seed on each); first audio alone; and `count` streams started at once, twice. A
    variant that cannot be built or run says why and the others go on."""
    from pipeline.voice import streaming_tts

    shipped = streaming_tts.ENGINE_PRECISION, streaming_tts.ENGINE_REWRITES

    def tts_of(seed: int | None = None) -> StreamingTTS:
        # Of the variant being measured: the engines are cached per precision and
        # rewrites, which the loop below sets for the whole of a variant, not per call:
        # the streams make theirs on 50 threads at once (set and reset per call, one
        # thread's reset let another build the shipped engines, unwarmed, mid-run).
        return StreamingTTS(provider="auto", batch_sizes=STREAM_BATCHES, seed=seed)

    def audio(tts: StreamingTTS, text: str) -> np.ndarray:
        return np.concatenate([item.samples for item in tts.stream(text, mode)
                               if isinstance(item, AudioChunk)])

    def distance(a: np.ndarray, b: np.ndarray) -> dict:
        if len(a) != len(b):
            return {"samples": [len(a), len(b)]}
        error = float(np.sum((a - b).astype(np.float64) ** 2))
        return {"max_abs_diff": round(float(np.max(np.abs(a - b))), 6),
                "snr_db": round(10 * np.log10(float(np.sum(a.astype(np.float64) ** 2)) / error), 1)
                if error else None}

    result: dict = {"variants": PRECISION_VARIANTS, "rewrites": REWRITE_VARIANTS,
                    "audio_against_fp32": {}, "first_audio": {},
                    "streams": {}}
    reference: dict[str, np.ndarray] = {}
    cpu_seeded = StreamingTTS(provider="cpu", seed=7)
    for name in ["fp32", *(n for n in PRECISION_VARIANTS if n in only and n != "fp32"), "fp32"]:
        label = name if name not in result["first_audio"] else f"{name}_again"
        start = time.perf_counter()
        search = sessions.CUDNN_CONV_ALGO_SEARCH
        streaming_tts.ENGINE_PRECISION = PRECISION_VARIANTS[name]
        streaming_tts.ENGINE_REWRITES = REWRITE_VARIANTS.get(name, shipped[1])
        try:
            if name in EXHAUSTIVE_VARIANTS:  # read when a session is made: at warm-up
                sessions.CUDNN_CONV_ALGO_SEARCH = "EXHAUSTIVE"
                result[f"{label}_cudnn_conv_algo_search"] = "EXHAUSTIVE"
            tts = tts_of()
            tts.warm_up()
            sessions.CUDNN_CONV_ALGO_SEARCH = search
            result[f"{label}_warm_up_s"] = round(time.perf_counter() - start, 1)
            result[f"{label}_engine_notes"] = [n for s in tts.engines.values() for n in s.notes]
            seeded = tts_of(seed=7)
            for text in LENGTHS:
                made = audio(seeded, TEXTS[text])
                if name == "fp32" and text not in reference:
                    reference[text] = made
                    result["audio_against_fp32"][text] = {
                        "cpu_path": distance(made, audio(cpu_seeded, TEXTS[text]))}
                else:
                    result["audio_against_fp32"][text][label] = distance(reference[text], made)
            result["first_audio"][label] = {
                text: _p50_p99([_first_audio_ms(tts, TEXTS[text], mode) for _ in range(runs)])
                for text in LENGTHS}
            result["streams"][label] = [
                _traced_streams(tts_of, list(tts.engines.values()), TEXTS["medium20"], mode, count)
                for _ in range(2)]
            print("precision", label, result["first_audio"][label], result["streams"][label],
                  flush=True)
        except Exception as exc:  # noqa: BLE001 - reported; the other variants go on
            result[f"{label}_failed"] = f"{type(exc).__name__}: {exc}"[:2000]
            print("precision", label, "failed:", result[f"{label}_failed"], flush=True)
        finally:
            sessions.CUDNN_CONV_ALGO_SEARCH = search
            streaming_tts.ENGINE_PRECISION, streaming_tts.ENGINE_REWRITES = shipped
            # Its engines (and their CUDA graphs' memory) go before the next are built.
            tts = seeded = None
            streaming_tts._ENGINES.clear()
            gc.collect()
    return result


if __name__ == "__main__":
    main()
