"""The shipped lip-shape model through its streaming API, the smoother, and file cues."""

import wave

import numpy as np
import pytest

from pipeline.core.modes import DEFAULT_MODE, MIC_TRADES, MODE_NAMES, MODES_MS, PREMIUM
from pipeline.core.visemes import OVR_VISEMES, VISEME_INDEX
from pipeline.lipsync.model import (
    LipFrame,
    LipShapeModel,
    VisemeSmoother,
    infer_file,
)

SIL, PP, AA = VISEME_INDEX["sil"], VISEME_INDEX["PP"], VISEME_INDEX["aa"]


@pytest.fixture(scope="module")
def papa():
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    segment = next(tts.synthesize("Papa.", LATENCY_MODES[PREMIUM]))
    return segment.audio, segment.sample_rate


def _stream(model, audio, rate, block=None):
    block = block or rate // 100
    frames = []
    for i in range(0, len(audio), block):
        frames += model.push(audio[i:i + block], rate)
    return frames


def test_frames_every_10_ms_with_probabilities(papa):
    audio, rate = papa
    frames = _stream(LipShapeModel(), audio, rate)
    assert len(frames) == len(audio) * 100 // rate
    assert np.allclose(np.diff([f.time_s for f in frames]), 0.01)
    for f in frames:
        assert f.probs.shape == (len(OVR_VISEMES),)
        assert abs(float(f.probs.sum()) - 1.0) < 1e-4
        assert 0.0 <= f.openness <= 1.0


@pytest.mark.parametrize("mode", list(MODES_MS))
def test_output_ignores_audio_beyond_the_lookahead(papa, mode):
    audio, rate = papa
    changed = audio.copy()
    cut = len(audio) // 2
    changed[cut:] = np.random.default_rng(1).uniform(-0.5, 0.5, len(audio) - cut)
    a = _stream(LipShapeModel(lookahead_ms=MODES_MS[mode]), audio, rate)
    b = _stream(LipShapeModel(lookahead_ms=MODES_MS[mode]), changed, rate)
    horizon = cut / rate - MODES_MS[mode] / 1000
    before = [i for i, f in enumerate(a) if f.time_s <= horizon]
    after = [i for i, f in enumerate(a) if f.time_s > horizon + 0.05]
    assert before and after
    assert all(np.array_equal(a[i].probs, b[i].probs) for i in before)
    assert any(not np.allclose(a[i].probs, b[i].probs, atol=1e-3) for i in after)


def test_every_latency_mode_name_has_a_head_and_a_trade():
    assert tuple(MODES_MS) == tuple(MIC_TRADES) == MODE_NAMES
    assert LipShapeModel().lookahead_ms == MODES_MS[DEFAULT_MODE]


def test_lookahead_picks_the_fitting_head():
    model = LipShapeModel(lookahead_ms=45)
    assert model.lookahead_ms == 30
    with pytest.raises(ValueError, match="below the smallest"):
        model.set_lookahead(5)


def test_silence_is_sil():
    frames = _stream(LipShapeModel(), np.zeros(48_000, np.float32), 48_000)
    assert all(int(np.argmax(f.probs)) == SIL for f in frames)


def test_papa_shows_lips_closing_then_opening(papa):
    audio, rate = papa
    shown = [int(np.argmax(f.probs)) for f in _stream(LipShapeModel(lookahead_ms=60), audio, rate)]
    first_pp = shown.index(PP)
    assert AA in shown[first_pp:]


@pytest.mark.parametrize("rate", [8_000, 96_000])
def test_other_rates_and_stereo_int16(papa, rate):
    from pipeline.audio.resample import resample

    audio, source_rate = papa
    converted = resample(audio, source_rate, rate)
    stereo = (np.stack([converted, converted], axis=1) * 32767 * 0.9).astype(np.int16)
    frames = _stream(LipShapeModel(lookahead_ms=60), stereo, rate)
    shown = [int(np.argmax(f.probs)) for f in frames]
    assert len(frames) == len(converted) * 100 // rate
    assert AA in shown and shown[-1] == SIL


def test_clipping_and_dc_offset_give_sane_output(papa):
    audio, rate = papa
    clipped = np.clip(audio * 20, -1, 1)
    frames = _stream(LipShapeModel(), clipped, rate)
    assert AA in [int(np.argmax(f.probs)) for f in frames]
    offset = _stream(LipShapeModel(), np.full(rate, 0.3, np.float32), rate)
    assert all(int(np.argmax(f.probs)) == SIL for f in offset[10:])


def test_nan_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        LipShapeModel().push(np.full(480, np.nan, np.float32), 48_000)


def _frame(top: int, p: float = 0.9) -> LipFrame:
    probs = np.full(len(OVR_VISEMES), (1 - p) / (len(OVR_VISEMES) - 1), np.float32)
    probs[top] = p
    return LipFrame(0.0, probs, 0.5)


def test_smoother_never_skips_a_one_frame_closure():
    smoother = VisemeSmoother()
    poses = [smoother.update(_frame(v)) for v in [AA] * 10 + [PP] + [AA] * 5]
    assert poses[10].dominant == PP and poses[10].openness == 0.0


def test_smoother_does_not_chatter_between_close_rivals():
    smoother = VisemeSmoother()
    e, ih = VISEME_INDEX["E"], VISEME_INDEX["ih"]
    shown = []
    for i in range(40):
        probs = np.zeros(len(OVR_VISEMES), np.float32)
        probs[e], probs[ih] = (0.52, 0.48) if i % 2 else (0.48, 0.52)
        shown.append(smoother.update(LipFrame(0.0, probs, 0.5)).dominant)
    assert sum(a != b for a, b in zip(shown[5:], shown[6:])) <= 1


def test_smoother_shows_a_change_of_mouth_shape_without_delay():
    # The first frame the model favours an open round "oh" over "aa" by more than the
    # group margin, the shown viseme is "oh" (the previous settings took a frame more).
    smoother = VisemeSmoother()
    oh = VISEME_INDEX["oh"]
    for _ in range(10):
        smoother.update(_frame(AA))
    probs = np.full(len(OVR_VISEMES), 0.05 / (len(OVR_VISEMES) - 2), np.float32)
    probs[oh], probs[AA] = 0.6, 0.35
    assert smoother.update(LipFrame(0.0, probs, 0.5)).dominant == oh


def test_infer_file_reads_24_bit_stereo_wav(papa, tmp_path):
    from pipeline.audio.resample import resample

    audio, rate = papa
    audio48 = resample(audio, rate, 48_000)
    pcm = (np.clip(audio48, -1, 1) * (2**23 - 1)).astype(np.int32)
    frames = np.stack([pcm, pcm], axis=1).reshape(-1)
    raw = np.stack([frames & 0xFF, frames >> 8 & 0xFF, frames >> 16 & 0xFF], axis=1)
    path = tmp_path / "papa.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(3)
        w.setframerate(48_000)
        w.writeframes(raw.astype(np.uint8).tobytes())
    cues = infer_file(path)
    assert cues[0].start == 0.0
    assert abs(cues[-1].end - len(audio48) / 48_000) < 0.011
    assert all(a.end == b.start for a, b in zip(cues, cues[1:]))
    assert {"PP", "aa"} <= {c.value for c in cues}


def test_infer_file_refuses_non_audio(tmp_path):
    path = tmp_path / "notes.wav"
    path.write_text("not audio at all")
    with pytest.raises(ValueError, match="is not an audio or video file this app can read"):
        infer_file(path)
