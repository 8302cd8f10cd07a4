"""The choice of the mouth frames' path (render/gpu/mouth_path.py), branch by branch, from
stated inputs: what the settings ask, why CUDA-GL interop cannot be used, both paths'
times. The times are the H200's (docs/gpu.md, bench/results/gpu_h200.json)."""

import pytest

from render.gpu.mouth_path import (
    CUDA,
    OPENGL,
    MouthPath,
    PathTime,
    PathTimes,
    choose,
    needs_times,
    size_moved,
    size_text,
)

NO_DEVICE = "no CUDA device (CUDA driver version is insufficient for CUDA runtime version)"
# The photo mouth frame at 1024 px: CUDA's P99 the lower, GL's P50 the lower.
PHOTO_1024 = PathTimes((1024, 1024), opengl=PathTime(0.35, 0.71), cuda=PathTime(0.41, 0.54), frames=100)
# The sprite frame at 1024²: GL's both.
SPRITE_1024 = PathTimes((1024, 1024), opengl=PathTime(0.19, 0.39), cuda=PathTime(0.45, 0.67), frames=100)


def test_forced_opengl_needs_nothing_measured_and_says_the_settings_chose():
    for unavailable in (None, NO_DEVICE):
        assert choose(OPENGL, unavailable) == MouthPath(OPENGL, "OpenGL, as the settings ask")
        assert not needs_times(OPENGL, unavailable)


def test_forced_cuda_runs_where_it_can_and_falls_back_with_a_warning_where_not():
    assert choose(CUDA, None) == MouthPath(CUDA, "CUDA, as the settings ask")
    assert not needs_times(CUDA, None)
    fell = choose(CUDA, NO_DEVICE)
    assert fell == MouthPath(OPENGL, "OpenGL: the settings ask for CUDA, but CUDA-GL interop is "
                                     f"not available here: {NO_DEVICE}", warning=True)


def test_auto_without_interop_is_opengl_with_the_reason_and_no_warning():
    assert not needs_times("auto", NO_DEVICE)
    assert choose("auto", NO_DEVICE) == MouthPath(
        OPENGL, f"OpenGL: CUDA-GL interop is not available here: {NO_DEVICE}")


def test_auto_takes_the_lower_p99_and_says_both():
    assert needs_times("auto", None)
    # CUDA's P50 is the higher here: the display's deadline sees the P99.
    assert choose("auto", None, PHOTO_1024) == MouthPath(
        CUDA, "CUDA: 0.54 ms P99 against OpenGL's 0.71 ms for this rig at 1024 px")
    assert choose("auto", None, SPRITE_1024) == MouthPath(
        OPENGL, "OpenGL: 0.39 ms P99 against CUDA's 0.67 ms for this rig at 1024 px")
    tie = PathTimes((1280, 720), PathTime(0.3, 0.5), PathTime(0.2, 0.5), 100)
    assert choose("auto", None, tie) == MouthPath(
        OPENGL, "OpenGL: 0.50 ms P99 against CUDA's 0.50 ms for this rig at 1280×720 px")


def test_a_cuda_failure_is_opengl_with_a_warning_whatever_was_asked():
    failed = "cuModuleLoadData failed: <CUresult.CUDA_ERROR_INVALID_PTX: 218>"
    for setting in ("auto", CUDA):
        assert choose(setting, None, PHOTO_1024, failed) == MouthPath(
            OPENGL, f"OpenGL: CUDA-GL interop failed here: {failed}", warning=True)


def test_what_cannot_be_chosen_is_refused():
    with pytest.raises(ValueError, match="use one of auto, opengl, cuda"):
        choose("vulkan", None)
    with pytest.raises(ValueError, match="needs both timed"):
        choose("auto", None, None)


def test_a_measurement_holds_within_twice_or_half_the_pixels():
    assert not size_moved((1024, 1024), (1024, 1024))
    assert not size_moved((1024, 1024), (1448, 1448))  # 2.0× the pixels
    assert size_moved((1024, 1024), (1450, 1450))
    assert not size_moved((1280, 720), (1280 // 2, 720))
    assert size_moved((1280, 720), (600, 720))
    assert size_text((512, 512)) == "512 px" and size_text((1280, 720)) == "1280×720 px"


def test_times_are_p50_and_p99_of_the_frames():
    t = PathTime.of([float(ms) for ms in range(1, 101)])
    assert t.p50_ms == pytest.approx(50.5) and t.p99_ms == pytest.approx(99.01)
