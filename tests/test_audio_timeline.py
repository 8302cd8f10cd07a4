import numpy as np
import pytest

from pipeline.audio.timeline import AudioTimeline


def ramp(n, start=1):
    return np.arange(start, start + n, dtype=np.float32)


def test_reads_what_was_written_at_absolute_positions_and_leaves_silence():
    tl = AudioTimeline(1000, capacity_seconds=1)
    tl.write(300, ramp(50))
    assert tl.scheduled_end == 350
    out = np.full(400, np.nan, dtype=np.float32)
    tl.read_into(0, out)
    assert not out[:300].any()
    np.testing.assert_array_equal(out[300:350], ramp(50))
    assert not out[350:].any()
    assert tl.read_pos == 400
    # 1000 samples later the same ring slots come round again: they must be silent.
    again = np.full(1000, np.nan, dtype=np.float32)
    tl.read_into(400, again)
    assert not again.any()


def test_wraps_around_the_ring_and_fills_strided_outputs():
    tl = AudioTimeline(100, capacity_seconds=1)
    out = np.zeros(90, dtype=np.float32)
    tl.read_into(0, out)
    tl.write(95, ramp(30))  # slots 95..99 then 0..24
    stereo = np.full((40, 2), np.nan, dtype=np.float32)
    tl.read_into(90, stereo[:, 0])
    np.testing.assert_array_equal(stereo[5:35, 0], ramp(30))
    assert not stereo[:5, 0].any() and not stereo[35:, 0].any()
    assert np.isnan(stereo[:, 1]).all()


def test_refuses_positions_behind_the_read_head_or_beyond_capacity():
    tl = AudioTimeline(100, capacity_seconds=1)
    tl.read_into(0, np.zeros(50, dtype=np.float32))
    with pytest.raises(ValueError, match="behind the read head"):
        tl.write(49, ramp(5))
    with pytest.raises(ValueError, match="do not fit"):
        tl.write(60, ramp(91))
    tl.write(60, ramp(90))
    assert tl.scheduled_end == 150
    with pytest.raises(ValueError, match="mono"):
        tl.write(60, np.zeros((4, 2), dtype=np.float32))


def test_skipped_positions_are_silenced():
    tl = AudioTimeline(100, capacity_seconds=1)
    tl.write(10, ramp(20))
    tl.read_into(40, np.zeros(10, dtype=np.float32))
    out = np.full(100, np.nan, dtype=np.float32)
    tl.read_into(50, out)  # slots 10..29 come round again as positions 110..129
    assert not out.any()


def test_discard_fades_linearly_then_silences():
    tl = AudioTimeline(1000, capacity_seconds=1)
    tl.write(0, np.ones(500, dtype=np.float32))
    tl.read_into(0, np.zeros(100, dtype=np.float32))
    end = tl.discard_from(200, fade_samples=9)
    assert end == 209
    assert tl.scheduled_end == 209
    out = np.zeros(400, dtype=np.float32)
    tl.read_into(100, out)
    np.testing.assert_array_equal(out[:100], np.ones(100))
    np.testing.assert_allclose(out[100:109], np.arange(9, 0, -1) / 10, rtol=1e-6)
    assert not out[109:].any()
    assert np.abs(np.diff(out)).max() <= 0.1 + 1e-6


def test_discard_past_the_end_changes_nothing_and_behind_the_head_is_refused():
    tl = AudioTimeline(1000, capacity_seconds=1)
    tl.write(0, np.ones(100, dtype=np.float32))
    assert tl.discard_from(150, fade_samples=10) == 100
    tl.read_into(0, np.zeros(10, dtype=np.float32))
    with pytest.raises(ValueError, match="behind the read head"):
        tl.discard_from(5, fade_samples=10)
    out = np.zeros(90, dtype=np.float32)
    tl.read_into(10, out)
    np.testing.assert_array_equal(out, np.ones(90))


def test_silence_from_drops_what_is_scheduled_after_a_position():
    timeline = AudioTimeline(1000, capacity_seconds=1)
    timeline.write(10, np.ones(100, np.float32))
    timeline.silence_from(50)
    assert timeline.scheduled_end == 50
    out = np.zeros(120, np.float32)
    timeline.read_into(0, out)
    assert out[10:50].all() and not out[50:].any()
