"""Video export as a viewer gets it: real voice, real GL (Mesa under Xvfb in this
process; through EGL with no display in `lipsync-studio render`'s own), a real MP4 decoded
back with the same FFmpeg, and the real face landmarker watching the photo avatar."""

from __future__ import annotations

import ctypes
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import av
import numpy as np
import pytest
from av.video.reformatter import ColorRange

from tests.harness.app_driver import STILL

pytestmark = pytest.mark.display

REPO = Path(__file__).resolve().parent.parent
TEXT = "Papa made a map. Wow, what a view!"
FPS = 30.0
PERIOD = 1.0 / FPS


def decode(path: Path):
    """(RGB frames n×h×w×3, video fps, video frame count in the header, audio float32,
    audio rate, audio stream duration in seconds)."""
    with av.open(str(path)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        fps, header_frames = float(video.average_rate), video.frames
        audio_duration = float(audio.duration * audio.time_base)
        frames = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    with av.open(str(path)) as container:
        parts = [f.to_ndarray().reshape(-1) for f in container.decode(audio=0)]
        rate = container.streams.audio[0].rate
    return frames, fps, header_frames, np.concatenate(parts), rate, audio_duration


def best_lag(decoded: np.ndarray, reference: np.ndarray, max_lag: int) -> tuple[int, float]:
    """The shift of `decoded` against `reference` (samples, within ±max_lag) with the
    highest normalised correlation, and that correlation."""
    n = len(reference)
    padded = np.concatenate([np.zeros(max_lag, np.float32), decoded,
                             np.zeros(max_lag + n, np.float32)])
    best = (0, -1.0)
    ref = reference - reference.mean()
    for lag in range(-max_lag, max_lag + 1):
        seg = padded[max_lag + lag: max_lag + lag + n]
        seg = seg - seg.mean()
        corr = float(seg @ ref / (np.linalg.norm(seg) * np.linalg.norm(ref) + 1e-12))
        if corr > best[1]:
            best = (lag, corr)
    return best


def envelope(audio: np.ndarray, rate: int, frames: int, fps: float = FPS) -> np.ndarray:
    """RMS of the audio over each frame's span [k/fps, (k+1)/fps)."""
    out = np.zeros(frames)
    for k in range(frames):
        seg = audio[int(k / fps * rate): int((k + 1) / fps * rate)]
        out[k] = math.sqrt(float(np.mean(seg.astype(np.float64) ** 2))) if len(seg) else 0.0
    return out


def sync_shift(track: np.ndarray, loudness: np.ndarray, max_shift: int = 4) -> tuple[int, list[float]]:
    """The shift (frames; positive: the picture is late) at which `track` correlates
    best with the audio's loudness, and the correlation at each shift."""
    n = len(track)
    rs = [float(np.corrcoef(track[max(0, s):n + min(0, s)], loudness[max(0, -s):n - max(0, s)])[0, 1])
          for s in range(-max_shift, max_shift + 1)]
    return int(np.argmax(rs)) - max_shift, rs


def darkness(frames: np.ndarray, box: tuple[slice, slice]) -> np.ndarray:
    """Mean darkness (255 − luma) of each frame's box. An open mouth shows a dark cavity;
    unlike a difference of pictures, this barely moves when breathing shifts the face by
    a pixel."""
    luma = frames[(slice(None), *box)].astype(np.float32) @ np.array([0.299, 0.587, 0.114],
                                                                       np.float32)
    return 255.0 - luma.mean(axis=(1, 2))


def check_container(path: Path, duration: float, size: tuple[int, int], fps: float = FPS):
    """Frame count, rate and size as asked, audio as long as the speech within a frame;
    returns the decoded frames, audio and its rate."""
    frames, got_fps, header_frames, audio, rate, audio_duration = decode(path)
    expected = math.ceil(duration * fps - 1e-9)
    assert got_fps == fps
    assert len(frames) == header_frames == expected
    assert frames.shape[1:] == (size[1], size[0], 3)
    assert abs(audio_duration - duration) <= 1 / fps, (audio_duration, duration)
    return frames, audio, rate


@pytest.fixture(scope="module")
def speech():
    """A short sentence from the real voice, deterministic (no sampling noise)."""
    from app.cli import _render
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS

    _, segments = _render(StreamingTTS(noise_scale=0.0, noise_w_scale=0.0), TEXT,
                          LATENCY_MODES["premium"], 1.0)
    return segments


@pytest.fixture(scope="module")
def speech_wav(speech, tmp_path_factory):
    audio = np.concatenate([s.audio for s in speech])
    path = tmp_path_factory.mktemp("speech") / "speech.wav"
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(speech[0].sample_rate)
        f.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    return path


def sprite_mouth_box(size: tuple[int, int], margin: int = 3) -> tuple[slice, slice]:
    """Where the bundled avatar's mouth drawings are, with a margin for breathing."""
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.sprite_renderer import coverage_rect
    from render.rigs.sprite import load_sprite_rig

    x0, y0, x1, y1 = coverage_rect(*load_sprite_rig(DEFAULT_AVATAR_MANIFEST, 128).mouths.values())
    w, h = size
    return (slice(int(y0 * h) - margin, math.ceil(y1 * h) + margin),
            slice(int(x0 * w) - margin, math.ceil(x1 * w) + margin))


def test_sprite_video_has_the_speech_and_a_mouth_that_follows_it(qt_app, speech, tmp_path):
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from pipeline.core.visemes import VISEME_INDEX
    from render.gl.offscreen import offscreen_target
    from render.outputs.video_export import (
        VideoSettings,
        export_video,
        speech_soundtrack,
    )
    from render.rigs.loader import load_avatar_rig

    size = (160, 160)
    soundtrack = speech_soundtrack(speech)
    out = tmp_path / "talk.mp4"
    # Made at another size: the export sizes the target to the video.
    with offscreen_target(16, 16) as target:
        result = export_video(out, load_avatar_rig(DEFAULT_AVATAR_MANIFEST), soundtrack,
                              VideoSettings(FPS, size), target)
    assert result.path == out and result.size == size and result.fps == FPS
    assert not list(tmp_path.glob(".*part"))
    frames, audio, rate = check_container(out, soundtrack.duration, size)
    assert result.frames == len(frames)

    spoken = np.concatenate([s.audio for s in speech])
    assert rate == speech[0].sample_rate
    lag, corr = best_lag(audio[:len(spoken) + rate // 10], spoken, int(PERIOD * rate))
    print(f"sprite export: audio lag {lag} samples, correlation {corr:.4f}")
    assert corr > 0.95 and abs(lag) <= PERIOD * rate

    # Frames whose pose is silence show the rest mouth; open visemes a dark cavity.
    poses = [soundtrack.pose(k * PERIOD, PERIOD) for k in range(len(frames))]
    silent = [k for k, p in enumerate(poses) if p.viseme_a == p.viseme_b == VISEME_INDEX["sil"]]
    assert len(silent) >= 3, "the speech has pauses"
    dark = darkness(frames, sprite_mouth_box(size))
    openness = np.array([p.openness for p in poses])
    loudness = envelope(spoken, rate, len(frames))
    r_open = np.corrcoef(dark, openness)[0, 1]
    r_env = np.corrcoef(dark, loudness)[0, 1]
    rest = dark[silent]
    print(f"sprite export: mouth darkness at rest {rest.min():.1f}-{rest.max():.1f}, open "
          f"median {np.median(dark[openness > 0.5]):.1f}; vs pose openness r={r_open:.3f}, "
          f"vs audio envelope r={r_env:.3f}")
    assert rest.max() - rest.min() < 5.0
    assert np.median(dark[openness > 0.5]) > rest.max() + 20.0
    assert r_open > 0.9 and r_env > 0.45
    # Frame k shows span k: the pictures match the poses best unshifted.
    shifted = [np.corrcoef(dark[1:], openness[:-1])[0, 1], np.corrcoef(dark[:-1], openness[1:])[0, 1]]
    print(f"sprite export: r with poses one frame early/late {shifted[0]:.3f}/{shifted[1]:.3f}")
    assert r_open > max(shifted) + 0.1
    shift, rs = sync_shift(dark, loudness)
    print(f"sprite export: mouth vs audio envelope best at a shift of {shift} frames "
          f"(r by shift -4..4: {' '.join(f'{r:.2f}' for r in rs)})")
    assert abs(shift) <= 1


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """The command line in this process, whose Qt application is the test session's and
    whose PyOpenGL is bound to GLX (imported here first, whichever test runs first): render
    draws through Qt's offscreen GL then. Were EGL chosen here instead, the choice would
    outlive the call (PyOpenGL binds once per process) and reach the session's Qt GL tests;
    render_process runs it as users do, through EGL."""
    import OpenGL.GL  # noqa: F401

    from app.cli import main

    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def no_display_env() -> dict:
    """The test session's environment without a display server. QT_QPA_PLATFORM=xcb (an X
    platform) is kept on purpose: render must not go looking for one. The settings it
    reads hold the avatar still (no bounce, tilt or sway), so the mouth stays in the box
    check_mouth_follows looks at."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["QT_QPA_PLATFORM"] = "xcb"
    config = Path(tempfile.mkdtemp(prefix="still-config-"))
    (config / "settings.json").write_text(json.dumps(STILL))
    env["LIPSYNC_STUDIO_CONFIG_DIR"] = str(config)
    return env


def render_process(args: list[str], env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    """`lipsync-studio render ARGS` as a user runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "app", "render", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=REPO)


RENDERS_ON = re.compile(r"^rendering on (?P<renderer>.+) \((?P<platform>EGL device platform|"
                        r"EGL surfaceless platform)(?P<cpu>; on the CPU: .+)?\)$", re.M)


def check_renders_on(stderr: str) -> str:
    """The one line saying what draws the frames: a GL renderer through EGL, and where
    that is the CPU, said so. Returns the line."""
    from render.gl.offscreen import renders_on_cpu

    lines = RENDERS_ON.findall(stderr)
    assert len(lines) == 1, stderr
    renderer, platform, cpu = lines[0]
    assert bool(cpu) == renders_on_cpu(renderer), stderr
    # Mesa's surfaceless platform is the fallback where EGL gives no GPU.
    assert platform == "EGL device platform" or cpu, stderr
    return RENDERS_ON.search(stderr).group(0)


def check_mouth_follows(frames: np.ndarray, audio: np.ndarray, rate: int, fps: float,
                        size: tuple[int, int], what: str) -> None:
    """The bundled avatar's mouth opens and closes with the loudness of the audio, within
    a frame of it."""
    dark = darkness(frames, sprite_mouth_box(size))
    loudness = envelope(audio, rate, len(frames), fps)
    r_env = np.corrcoef(dark, loudness)[0, 1]
    shift, rs = sync_shift(dark, loudness)
    print(f"{what}: mouth darkness vs audio envelope r={r_env:.3f}, "
          f"darkness {dark.min():.1f}-{dark.max():.1f}; best at a shift of {shift} frames "
          f"(r by shift -4..4: {' '.join(f'{r:.2f}' for r in rs)})")
    assert dark.max() - dark.min() > 20.0 and r_env > 0.45
    assert abs(shift) <= 1


def test_cli_lip_syncs_an_audio_file_without_a_display(speech_wav, tmp_path):
    out = tmp_path / "from_wav.mp4"
    fps = 24.0
    result = render_process(["--audio", str(speech_wav), "--out", str(out), "--height", "128",
                             "--fps", "24"], no_display_env())
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout and "24 fps, 128x128" in result.stdout
    print(f"\n{check_renders_on(result.stderr)}")
    assert "rendering frame" in result.stderr and "Traceback" not in result.stderr

    with wave.open(str(speech_wav)) as f:
        rate = f.getframerate()
        wav = np.frombuffer(f.readframes(f.getnframes()), "<i2").astype(np.float32) / 32767
    frames, audio, got_rate = check_container(out, len(wav) / rate, (128, 128), fps)
    assert got_rate == rate
    lag, corr = best_lag(audio[:len(wav) + rate // 10], wav, int(rate / fps))
    print(f"--audio export: audio lag {lag} samples, correlation {corr:.4f}")
    assert corr > 0.95 and abs(lag) <= rate / fps
    # The mouth comes from the lip-shape model here, not from phoneme timings.
    check_mouth_follows(frames, wav, rate, fps, (128, 128), "--audio export")


@pytest.mark.parametrize("display", [False, True], ids=["no display", "with a display"])
def test_cli_renders_text_through_egl_with_or_without_a_display(request, tmp_path, display):
    """A fresh process as a user runs it. Without DISPLAY or WAYLAND_DISPLAY; and with the
    test session's Xvfb as DISPLAY, which it does not use: EGL either way."""
    env = no_display_env()
    if display:
        env["DISPLAY"] = request.getfixturevalue("x_display")
    out = tmp_path / "talk.mp4"
    result = render_process([TEXT, "--out", str(out), "--height", "128"], env)
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout and "30 fps, 128x128" in result.stdout
    print(f"\n{check_renders_on(result.stderr)}")
    assert "Traceback" not in result.stderr
    frames, fps, header_frames, audio, rate, duration = decode(out)
    assert fps == FPS and frames.shape[1:] == (128, 128, 3)
    assert len(frames) == header_frames == math.ceil(duration * FPS - 1e-9)
    assert f"{len(frames)} frames" in result.stdout
    assert 1.5 < duration < 5.0 and np.abs(audio).max() > 0.1
    check_mouth_follows(frames, audio, rate, FPS, (128, 128), "text export")


def egl_library_path(name: str) -> str:
    """The file this machine loads for `name` (e.g. libEGL.so.1), from this process's maps."""
    ctypes.CDLL(name)
    stem = name.split(".so")[0] + ".so"
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if f"/{stem}" in line}
    assert len(paths) == 1, paths
    return paths.pop()


def hidden(path: str, command: list[str]) -> list[str]:
    """`command` in a mount namespace of its own where `path` reads as an empty file
    (unshare as an unprivileged user): a machine without that library, for real."""
    return ["unshare", "-rm", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', path,
            *command]


@pytest.mark.parametrize("case", ["no EGL vendor", "no Mesa driver", "no libEGL", "no libOpenGL"])
def test_where_egl_gives_no_opengl_render_says_what_to_install(tmp_path, case):
    """One line naming the packages, exit status 1, no file, and said before the speech
    is synthesised (the GL target is made first)."""
    env = no_display_env()
    out = tmp_path / "a.mp4"
    command = [sys.executable, "-m", "app", "render", "Hi", "--out", str(out)]
    if case == "no EGL vendor":
        env["__EGL_VENDOR_LIBRARY_FILENAMES"] = "/nonexistent/egl_vendor.json"
    elif case == "no Mesa driver":
        env["GALLIUM_DRIVER"] = "no-such-driver"
    else:
        if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
            pytest.skip("unshare -rm (an unprivileged mount namespace) is not allowed here")
        command = hidden(egl_library_path({"no libEGL": "libEGL.so.1",
                                           "no libOpenGL": "libOpenGL.so.0"}[case]), command)
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60,
                            cwd=REPO)
    ours = [line for line in result.stderr.splitlines() if line.startswith("lipsync-studio:")]
    print(f"\n{case}: {ours}")
    assert result.returncode == 1, result.stderr
    assert len(ours) == 1 and "libegl1 libopengl0 libegl-mesa0 libgl1-mesa-dri" in ours[0], \
        result.stderr
    if case.startswith("no lib"):
        assert f"{case[3:]} cannot be loaded here" in ours[0]
    assert "Traceback" not in result.stderr and "synthesizing" not in result.stderr
    assert not out.exists()


@pytest.fixture()
def bad_inputs(tmp_path, speech_wav):
    (tmp_path / "folder.mp4").mkdir()
    (tmp_path / "file.txt").write_text("not a folder")
    (tmp_path / "notes.wav").write_text("these are words, not sound")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "manifest.json").write_text("{ not json")
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    from PIL import Image

    Image.new("RGB", (256, 256), (128, 140, 150)).save(tmp_path / "blank.png")
    return tmp_path


@pytest.mark.parametrize("args, message", [
    (["Hi", "--out", "{tmp}/missing/a.mp4"], "folder {tmp}/missing does not exist"),
    (["Hi", "--out", "{tmp}/file.txt/a.mp4"], "is not a folder"),
    (["Hi", "--out", "{tmp}/folder.mp4"], "it is a folder"),
    (["Hi", "--out", "{tmp}/a.avi"], "must be an .mp4 file"),
    (["Hi", "--size", "wide"], "is not WIDTHxHEIGHT"),
    (["Hi", "--size", "8x8"], "each side must be 16 to 4096"),
    (["Hi", "--size", "161x120"], "needs even width and height"),
    (["Hi", "--height", "9000"], "each side must be 16 to 4096"),
    (["Hi", "--fps", "0"], "Frame rate 0 is out of range"),
    (["Hi", "--fps", "nan"], "Frame rate nan is out of range"),
    (["Hi", "--avatar", "{tmp}/nobody.png"], "Avatar not found"),
    (["Hi", "--avatar", "{tmp}/broken"], "is not valid JSON"),
    (["Hi", "--avatar", "{tmp}/corrupt.png"], "is not a picture Lipsync Studio can read"),
    (["Hi", "--avatar", "{tmp}/blank.png"], "No face found in blank.png"),
    (["Hi", "--rate", "3"], "--rate 3 is out of range"),
    (["Hi", "--background", "mauvish"], "is not a colour"),
    (["--audio", "{tmp}/notes.wav"], "notes.wav is not an audio or video file this app can read"),
    (["--audio", "{tmp}/silence.wav"], "Audio file not found"),
    (["Hi", "--audio", "{wav}"], "TEXT to speak or --audio FILE"),
    ([], "TEXT to speak or --audio FILE"),
    (["..."], "Nothing to speak: the text has no letters or digits"),
])
def test_bad_input_gets_a_clear_message(qt_app, bad_inputs, speech_wav, capsys, args, message):
    tmp = str(bad_inputs)
    args = [a.format(tmp=tmp, wav=speech_wav) for a in args]
    if "--out" not in args:
        args += ["--out", f"{tmp}/out.mp4"]
    code, stdout, stderr = run_cli(["render", *args], capsys)
    assert code == 1
    assert message.format(tmp=tmp) in stderr, stderr
    assert "Traceback" not in stderr
    assert sorted(p.name for p in bad_inputs.glob("*mp4*")) == ["folder.mp4"]


def test_the_export_checks_its_output_as_the_command_line_does(tmp_path):
    """export_video's own check is the command line's (pipeline.core.output_paths): it also
    refuses a place where no file can be created though os.access allows it (/proc, as
    root), and a check that passes leaves nothing behind."""
    from render.outputs.video_export import ExportError, check_output

    with pytest.raises(ExportError, match=r"^cannot write /proc/x\.mp4: no file can be created "
                       r"in /proc \(No such file or directory\)$"):
        check_output(Path("/proc/x.mp4"))
    check_output(tmp_path / "fine.mp4")
    assert list(tmp_path.iterdir()) == []


def test_photo_video_jaw_follows_the_speech_as_the_landmarker_sees_it(qt_app, speech,
                                                                      astronaut_png, tmp_path):
    """The astronaut imported on the fly; MediaPipe watches the decoded video, and its
    jawOpen per frame must follow the loudness of the speech."""
    from pipeline.face.landmarks import FaceLandmarker
    from render.gl.offscreen import offscreen_target
    from render.outputs.video_export import (
        VideoSettings,
        export_video,
        speech_soundtrack,
    )
    from render.rigs.loader import load_avatar_rig

    size = (512, 512)
    soundtrack = speech_soundtrack(speech)
    out = tmp_path / "astronaut.mp4"
    rig = load_avatar_rig(astronaut_png)
    assert type(rig).__name__ == "PhotoRig"
    with offscreen_target(*size) as target:
        export_video(out, rig, soundtrack, VideoSettings(FPS, size), target)
    frames, audio, rate = check_container(out, soundtrack.duration, size)

    spoken = np.concatenate([s.audio for s in speech])
    lag, corr = best_lag(audio[:len(spoken) + rate // 10], spoken, int(PERIOD * rate))
    assert corr > 0.95 and abs(lag) <= PERIOD * rate

    with FaceLandmarker(max_faces=1) as landmarker:
        jaw = np.array([landmarker.detect(f)[0].blendshapes["jawOpen"] for f in frames])
    loudness = envelope(spoken, rate, len(frames))
    openness = np.array([soundtrack.pose(k * PERIOD, PERIOD).openness for k in range(len(frames))])
    r_env = np.corrcoef(jaw, loudness)[0, 1]
    r_open = np.corrcoef(jaw, openness)[0, 1]
    shift, rs = sync_shift(jaw, loudness)
    print(f"photo export: landmarker jawOpen vs audio envelope r={r_env:.3f}, vs pose openness "
          f"r={r_open:.3f}; jawOpen {jaw.min():.3f}-{jaw.max():.3f}; best at a shift of {shift} "
          f"frames (r by shift -4..4: {' '.join(f'{r:.2f}' for r in rs)})")
    assert r_env > 0.4 and r_open > 0.7
    assert abs(shift) <= 1
    assert jaw.max() - jaw.min() > 0.15


def test_cli_renders_a_saved_photo_rig(qt_app, astronaut_png, tmp_path, capsys):
    from render.rigs.photo import import_portrait
    from render.rigs.photo_manifest import save_photo_rig

    folder = tmp_path / "astronaut-rig"
    save_photo_rig(import_portrait(astronaut_png), folder)
    out = tmp_path / "saved.mp4"
    code, stdout, stderr = run_cli(["render", "Hi!", "--avatar", str(folder), "--out", str(out),
                                    "--size", "160x120"], capsys)
    assert code == 0, stderr
    frames, fps, header_frames, audio, rate, duration = decode(out)
    assert frames.shape[1:] == (120, 160, 3) and len(frames) == math.ceil(duration * FPS - 1e-9)
    # Letterboxed: the square portrait in the middle, background bars either side.
    background = np.array([0x20, 0x23, 0x2A])
    assert np.abs(frames[:, :, :15].astype(int) - background).max() <= 6
    assert np.abs(frames[:, :, 25:135].astype(int) - background).mean() > 30


def yuv420_planes(frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A decoded yuv420p frame's Y (h×w), Cb and Cr (h/2×w/2) levels, as they are in the
    file: no conversion to RGB by the decoder's own (approximate) fixed-point matrix."""
    assert frame.format.name == "yuv420p"
    planes = frame.to_ndarray()
    h, w = frame.height, frame.width
    quarter = h // 4
    return (planes[:h], planes[h:h + quarter].reshape(h // 2, w // 2),
            planes[h + quarter:].reshape(h // 2, w // 2))


def flat_blocks(rgb: np.ndarray, reach: int = 12) -> np.ndarray:
    """Which 2×2 blocks (the yuv420p chroma's) of an H×W×3 picture lie in a flat region: the
    same colour `reach` pixels all round, so that H.264 (crf 18) reproduces their levels.
    Its chroma is coded in 4×4 blocks of chroma samples (8×8 pixels) predicted from the
    blocks beside them: at reach 8 x264 left a 2-pixel column by the avatar's edge 1.3
    chroma levels off; at 12 nothing was more than 0.35 off."""
    window = 2 * reach + 2
    views = np.lib.stride_tricks.sliding_window_view(rgb, (window, window), axis=(0, 1))
    flat = (views.max(axis=(-2, -1)) == views.min(axis=(-2, -1))).all(axis=-1)
    # Window (i, j) covers rows i..i+window-1: the block at 2b sits reach rows below its top.
    blocks = np.zeros((rgb.shape[0] // 2, rgb.shape[1] // 2), bool)
    b0 = (reach + 1) // 2
    sub = flat[2 * b0 - reach::2, 2 * b0 - reach::2]
    blocks[b0:b0 + sub.shape[0], b0:b0 + sub.shape[1]] = sub
    return blocks


@pytest.mark.parametrize("readback", ["yuyv", "rgba"])
def test_exported_pixels_are_the_render_in_bt601_limited_range(qt_app, speech, tmp_path,
                                                               readback):
    """Either way frames reach the encoder, the file's levels on a flat region are the
    RGBA render over the background in BT.601 limited range, and the file says so.

    The bound, from the mechanism: each Y, Cb, Cr level is the exact value rounded to
    one of its two nearest integers (the pass's GL float → 8-bit conversion may take
    either; swscale's fixed point likewise), so it is less than 1 level off. yuv420p
    averages each 2×2 block's chroma: exact where the four are one colour, as on a flat
    region. Decoded with the exact inverse matrix, 1 level each of Y, Cb and Cr moves R, G
    and B by at most the sum of the inverse's row magnitudes: 2.76, 2.37 and 3.18 levels.

    Each video is one frame, an I-frame, which x264 (crf 18) reproduces exactly on a flat
    region (flat_blocks). Its P-frames add an inter-frame quantisation of their own that
    is no part of the colour path: in a whole sentence's export, frame 40 was 1.28 Cb
    levels off on a flat patch, alike with either readback."""
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.gl.offscreen import offscreen_target
    from render.gl.yuv_pack import BT601_LIMITED
    from render.outputs.video_export import (
        BT601_COLORSPACE,
        Soundtrack,
        VideoSettings,
        export_video,
        speech_soundtrack,
    )
    from render.rigs.loader import load_avatar_rig, renderer_for
    from render.timing import idle_motion

    bt601_limited = (BT601_COLORSPACE, ColorRange.MPEG)
    inverse = np.linalg.inv(BT601_LIMITED) * 255     # level offsets → 8-bit R'G'B'
    rgb_bound = np.abs(inverse).sum(axis=1)
    # Big enough for flat patches of the avatar's own colours 12 pixels round.
    size = (384, 320)
    background = (0.2, 0.6, 0.4)      # saturated: a wrong matrix shows in its chroma
    bg = np.round(np.array(background) * 255)
    rig = load_avatar_rig(DEFAULT_AVATAR_MANIFEST)
    speaking = speech_soundtrack(speech)
    rate = speech[0].sample_rate
    # The rest mouth, and the sentence's most open mouth.
    widest = max(range(int(speaking.duration * FPS)),
                 key=lambda k: speaking.pose(k * PERIOD, PERIOD).openness)
    for k in (0, widest):
        pose = speaking.pose(k * PERIOD, PERIOD)
        one_frame = Soundtrack(rate, PERIOD, lambda: [np.zeros(rate // 30, np.float32)],
                               lambda t, period, pose=pose: pose, [])
        out = tmp_path / f"{readback}{k}.mp4"
        with offscreen_target(*size) as target:
            export_video(out, rig, one_frame, VideoSettings(FPS, size, background), target,
                         readback=readback)
            # The same frame drawn over nothing, read as RGBA, over the 8-bit background.
            renderer = renderer_for(rig, (0.0, 0.0, 0.0, 0.0))
            renderer.initialize()
            renderer.set_rig(rig)
            renderer.resize(*size)
            target.bind()
            renderer.draw(pose, idle_motion.blink(0.0), idle_motion.breathing(0.0))
            rgba = target.read_pixels().astype(np.float64)
            renderer.release()
        reference, alpha = rgba[..., :3] + (255 - rgba[..., 3:]) * bg / 255, rgba[..., 3]
        with av.open(str(out)) as container:
            codec = container.streams.video[0].codec_context
            assert (codec.colorspace, codec.color_range) == bt601_limited
            (decoded,) = container.decode(video=0)
        assert (decoded.colorspace, decoded.color_range) == bt601_limited

        exact = reference / 255 @ BT601_LIMITED.T + (16, 128, 128)
        y, cb, cr = yuv420_planes(decoded)
        got = np.stack([y, np.repeat(np.repeat(cb, 2, 0), 2, 1),
                        np.repeat(np.repeat(cr, 2, 0), 2, 1)], axis=-1).astype(np.float64)
        flat = np.repeat(np.repeat(flat_blocks(reference), 2, 0), 2, 1)
        # Flat regions of the avatar itself (opaque) and of the background around it.
        assert (flat & (alpha == 255)).sum() > 200 and (flat & (alpha == 0)).sum() > 1000
        level_error = np.abs(got - exact)[flat].max(axis=0)
        rgb_error = np.abs((got - (16, 128, 128)) @ inverse.T - reference)[flat].max(axis=0)
        print(f"{readback} export of frame {k} (openness {pose.openness:.2f}): {flat.sum()} "
              f"flat pixels; largest error in levels (Y, Cb, Cr) {np.round(level_error, 3)}, "
              f"in R, G, B {np.round(rgb_error, 3)} (bounds {np.round(rgb_bound, 2)})")
        assert (level_error < 1).all()
        assert (rgb_error < rgb_bound).all()
