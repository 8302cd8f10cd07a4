"""Talking-avatar videos: frames rendered offscreen at exact media times, streamed with
their audio into an H.264 + AAC MP4 (PyAV, whose wheels bundle FFmpeg).

Frame k shows the media span [k/fps, (k+1)/fps): its mouth pose comes from the same
`frame_pose(t_start, period)` the live view pulls, blinks and breathing from the same
pure functions of time, so an export looks like what the app shows. Frames go to the
encoder one at a time and audio is fed alongside them, so memory stays bounded however
long the recording is.

Frames cross from the GL to the encoder in one of two ways (FrameReadback), chosen by
what draws them:

- YUYV (YuyvFrames): the renderer draws over nothing, and render/gl/yuv_pack.py's pass
  puts the frame over the background and packs it as YUYV 4:2:2, BT.601 limited range, on
  the GPU: 2 bytes a pixel cross to the host where RGBA takes 4, and the encoder's
  conversion to yuv420p is a repack with the chroma of each two rows averaged, no matrix.
- RGBA (RgbaFrames): the renderer draws over the background, the RGBA pixels are read back
  and FFmpeg's swscale converts them to yuv420p on the CPU (BT.601 limited too).

Either way the video is tagged BT.601 limited range (matrix and range in the stream's VUI),
so players decode its colours as they were encoded. YUYV where the GL is a GPU; RGBA
where it renders on the CPU (renders_on_cpu: Mesa's llvmpipe), where the pass runs on
the cores the encoder needs and costs more than it saves. At 1280×720 on a 2-core VM
(bench/export_readback.py, bench/results/export_readback_vm_2core_epyc_llvmpipe.json):
readback P50 3.9 ms RGBA vs 8.6 ms YUYV (the pass included), encode 9.3 vs 7.2 ms (no
matrix), draw + readback + encode 22.8 vs 25.5 ms a frame; a whole export 26.9 ms a
frame either way.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from av.video.reformatter import ColorRange
from OpenGL import GL

from pipeline.audio.audio_file import AudioFileError, audio_info, read_blocks
from pipeline.core.avatar_state import AvatarState, still_state
from pipeline.core.frames import PhonemeTiming, SpeechSegment, VisemeCue, frame_count
from pipeline.core.output_paths import OutputPathError, check_output_path
from pipeline.lipsync.model import infer_file
from pipeline.voice.cues import concat_tracks
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.viseme_track import VisemeTrack
from render.gl.offscreen import FramebufferTarget, renders_on_cpu
from render.gl.readback import read_sync
from render.gl.yuv_pack import YuyvPass
from render.gpu.path_picker import MouthPathPicker
from render.outputs.frame_size import SizeError, parse_size
from render.rigs.loader import AvatarRig
from render.timing import idle_motion
from render.timing.avatar_motion import AvatarMotion
from render.timing.frame_producer import PoseSource

FPS_RANGE = (1.0, 120.0)
# H.264 (4:2:0) needs even sides; past 4096 x264 leaves the levels players decode.
SIZE_RANGE = (16, 4096)
# A rig's own size is the default, shrunk to fit full HD: a 24-megapixel photo would
# otherwise make a video few players decode smoothly.
DEFAULT_MAX_SIZE = (1920, 1080)
# Sample rates AAC signals directly; other rates are resampled to 48 kHz.
AAC_RATES = frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000,
                       64000, 88200, 96000})
# FFmpeg's AVCOL_SPC_SMPTE170M (libavutil/pixfmt.h; PyAV has no enum of AVColorSpace): the
# BT.601 matrix, yuv_pack's and swscale's default for RGB to YUV.
BT601_COLORSPACE = 6


class ExportError(Exception):
    """A video that cannot be made; the message is for the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class Soundtrack:
    """What the video says: mono audio, streamed in blocks, and the mouth for any frame.

    `blocks()` starts the audio from its first sample each time it is called; `cues` are
    the visemes the mouth follows, for a cue file beside the video."""

    sample_rate: int
    duration: float
    blocks: Callable[[], Iterable[np.ndarray]]
    pose: PoseSource
    cues: list[VisemeCue]


@dataclass(frozen=True, slots=True)
class VideoSettings:
    fps: float = 30.0
    size: tuple[int, int] = (512, 512)
    background: tuple[float, float, float] = (0.125, 0.137, 0.165)


@dataclass(frozen=True, slots=True)
class ExportResult:
    path: Path
    duration: float
    frames: int
    size: tuple[int, int]
    fps: float


def speech_soundtrack(segments: Sequence[SpeechSegment]) -> Soundtrack:
    """Synthesized sentences back to back, each one's visemes placed at its first
    sample, as the live speech stage places them on the media clock."""
    if not segments:
        raise ExportError("There is no speech to put in the video.")
    rate = segments[0].sample_rate
    timeline = SpeechTimeline()
    samples = 0
    for segment in segments:
        if segment.sample_rate != rate:
            raise ValueError(f"segments differ in sample rate ({rate} vs {segment.sample_rate} Hz)")
        timeline.schedule(VisemeTrack(segment.phonemes), samples / rate)
        samples += len(segment.audio)
    return Soundtrack(rate, samples / rate, lambda: (s.audio for s in segments),
                      timeline.frame_pose, concat_tracks(segments)[1])


def audio_file_soundtrack(path: Path) -> Soundtrack:
    """A recording (any format pipeline.audio.audio_file reads, mixed to mono) whose
    mouth follows the lip-shape model the live microphone uses, its cues timed like
    phonemes."""
    if not path.is_file():
        raise ExportError(f"Audio file not found: {path}.")
    try:
        info = audio_info(path)
        cues = infer_file(path)
    except AudioFileError as exc:
        raise ExportError(f"{exc}.") from None
    rate, duration = info.sample_rate, info.duration
    timeline = SpeechTimeline()
    if cues:
        timeline.schedule(VisemeTrack([PhonemeTiming(c.value, c.value, c.start, c.end)
                                       for c in cues]), 0.0)
    return Soundtrack(rate, duration, lambda: read_blocks(path)[1], timeline.frame_pose, cues)


def video_size(text: str) -> tuple[int, int]:
    """The size `text` asks for (frame_size.parse_size), checked with check_size."""
    try:
        size = parse_size(text)
    except SizeError as exc:
        raise ExportError(f"Video size {exc}.") from None
    check_size(size)
    return size


def check_size(size: tuple[int, int]) -> None:
    lo, hi = SIZE_RANGE
    w, h = size
    if not (lo <= w <= hi and lo <= h <= hi):
        raise ExportError(f"Video size {w}x{h} is out of range: each side must be {lo} to {hi} pixels.")
    if w % 2 or h % 2:
        raise ExportError(f"Video size {w}x{h} has an odd side; H.264 video needs even width "
                          "and height.")


def check_fps(fps: float) -> None:
    lo, hi = FPS_RANGE
    if not (math.isfinite(fps) and lo <= fps <= hi):
        raise ExportError(f"Frame rate {fps:g} is out of range: use {lo:g} to {hi:g} frames per second.")


def fit_size(canvas: tuple[int, int], height: int | None = None,
             limit: tuple[int, int] = DEFAULT_MAX_SIZE) -> tuple[int, int]:
    """The video size for a canvas: `height` pixels high at the canvas's aspect, or the
    canvas itself shrunk to fit `limit`; both sides rounded to even."""
    cw, ch = canvas
    if height is None:
        scale = min(1.0, limit[0] / cw, limit[1] / ch)
        w, h = cw * scale, ch * scale
    else:
        w, h = cw * height / ch, height
    size = (max(2, 2 * round(w / 2)), max(2, 2 * round(h / 2)))
    check_size(size)
    return size


def check_output(path: Path) -> None:
    """Refuse an output the export could not write, before any work is done: the check
    every output of the app goes through (pipeline.core.output_paths), and an .mp4 name."""
    try:
        check_output_path(path)
    except OutputPathError as exc:
        raise ExportError(str(exc)) from None
    if path.suffix.lower() != ".mp4":
        raise ExportError(f"cannot write {path}: the output must be an .mp4 file")


def export_video(out: Path, rig: AvatarRig, soundtrack: Soundtrack, settings: VideoSettings,
                 target: FramebufferTarget,
                 progress: Callable[[int, int], None] | None = None,
                 readback: str | None = None, motion: AvatarMotion | None = None,
                 mouth_paths: MouthPathPicker | None = None) -> ExportResult:
    """Render the avatar `rig` speaking `soundtrack` into the MP4 `out`, drawn on
    `target` (render/gl/offscreen.py offscreen_target(), made by the caller so that a
    machine with no GL is told so before the speech is synthesised; resized here to the
    video's size, closed by the caller). The file appears only when complete.

    `readback`: "yuyv" or "rgba" (the module's docstring), or None for the one that suits
    the target's GL (frame_readback). `motion` moves the avatar and sets its expression
    at each frame's time, as the live outputs do (None: still and neutral). `mouth_paths`
    chooses the renderer's mouth-frame path for the rig at the video's size (the live
    outputs' picker; None: OpenGL's)."""
    check_output(out)
    check_fps(settings.fps)
    # Even sides (checked here): H.264's 4:2:0 needs them, and YUYV packs pixel pairs.
    check_size(settings.size)
    fps = Fraction(settings.fps).limit_denominator(1001)
    period = 1.0 / float(fps)
    frames = frame_count(soundtrack.duration, float(fps))
    w, h = settings.size
    partial = out.with_name(f".{out.name}.part")
    try:
        target.make_current()
        target.resize(w, h)
        frames_from = frame_readback(target, settings.background, readback)
        renderer = None
        paths = mouth_paths or MouthPathPicker()
        try:
            renderer = paths.made(rig, frames_from.clear_color, (w, h), target)
            with av.open(str(partial), "w", format="mp4",
                         options={"movflags": "+faststart"}) as container:
                _encode(container, target, renderer, frames_from, soundtrack, fps, period,
                        frames, progress, motion)
        finally:
            target.make_current()
            if renderer is not None:
                renderer.release()
            paths.forget(target)
            frames_from.release()
        os.replace(partial, out)
    except OSError as exc:
        raise ExportError(f"cannot write {out}: {exc.strerror or exc}") from None
    finally:
        partial.unlink(missing_ok=True)
    return ExportResult(out, soundtrack.duration, frames, (w, h), float(fps))


class RgbaFrames:
    """The frame read back as RGBA, the renderer drawing over the opaque background;
    swscale makes it yuv420p (BT.601 limited, its default)."""

    def __init__(self, target: FramebufferTarget, background: tuple[float, float, float]):
        self.clear_color = (*background, 1.0)
        self._target = target
        self._pixels = np.empty((target.height, target.width, 4), np.uint8)
        self.nbytes = self._pixels.nbytes

    def frame(self) -> av.VideoFrame:
        """The frame just drawn on the target, for the encoder."""
        self._target.read_pixels(self._pixels)
        return av.VideoFrame.from_ndarray(self._pixels, format="rgba")

    def release(self) -> None:
        pass


class YuyvFrames:
    """The frame packed as YUYV on the GPU (render/gl/yuv_pack.py) over the background,
    the renderer drawing over nothing, and read back as that: half RGBA's bytes."""

    def __init__(self, target: FramebufferTarget, background: tuple[float, float, float]):
        w, h = target.width, target.height
        # Over nothing: the pass composites the background. 8-bit, as the renderer's clear
        # into the RGBA8 target would have made it.
        self.clear_color = (0.0, 0.0, 0.0, 0.0)
        self._target = target
        self._pass = YuyvPass(w, h, tuple(round(c * 255) for c in background))
        self._packed = np.empty((h, w // 2, 4), np.uint8)
        self._rows = np.empty((h, w, 2), np.uint8)
        self.nbytes = self._packed.nbytes

    def frame(self) -> av.VideoFrame:
        """The frame just drawn on the target, for the encoder, tagged BT.601 limited
        range so that swscale takes it as what it is."""
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self._target.fbo)
        self._pass.pack()
        # read_sync gives GL's bottom row first, and a top-row-first view of it; copied
        # top first into the array the encoder's frame is made from (each 4-byte texel
        # is two pixels' Y U / Y V).
        np.copyto(self._rows.reshape(self._packed.shape), read_sync(self._packed))
        frame = av.VideoFrame.from_ndarray(self._rows, format="yuyv422")
        frame.colorspace, frame.color_range = BT601_COLORSPACE, ColorRange.MPEG
        return frame

    def release(self) -> None:
        self._pass.release()


FrameReadback = RgbaFrames | YuyvFrames


def frame_readback(target: FramebufferTarget, background: tuple[float, float, float],
                   kind: str | None = None) -> FrameReadback:
    """How `target`'s frames reach the encoder: `kind` ("yuyv" or "rgba"), or None for
    YUYV where the GL is a GPU and RGBA where it renders on the CPU (the module's
    docstring says why)."""
    if kind is None:
        kind = "rgba" if renders_on_cpu(target.renderer) else "yuyv"
    if kind not in ("yuyv", "rgba"):
        raise ValueError(f"readback must be 'yuyv' or 'rgba', not {kind!r}")
    return (YuyvFrames if kind == "yuyv" else RgbaFrames)(target, background)


def video_stream(container, fps: Fraction, width: int, height: int):
    """The export's H.264 stream in `container`, tagged BT.601 limited range."""
    video = container.add_stream("libx264", rate=fps)
    video.width, video.height, video.pix_fmt = width, height, "yuv420p"
    video.options = {"crf": "18", "preset": "veryfast"}
    # Written into the H.264 VUI: without it players guess, and many guess BT.709 for HD.
    video.codec_context.colorspace = BT601_COLORSPACE
    video.codec_context.color_range = ColorRange.MPEG
    return video


def _encode(container, target: FramebufferTarget, renderer, frames_from: FrameReadback,
            soundtrack: Soundtrack, fps: Fraction, period: float, frames: int,
            progress: Callable[[int, int], None] | None, motion: AvatarMotion | None) -> None:
    video = video_stream(container, fps, target.width, target.height)
    rate = soundtrack.sample_rate
    audio = container.add_stream("aac", rate=rate if rate in AAC_RATES else 48_000)
    audio.layout = "mono"
    audio_blocks = iter(soundtrack.blocks())
    fed = 0  # audio samples handed to the encoder
    state = AvatarState()
    for k in range(frames):
        t = k * period
        target.bind()
        still_state(soundtrack.pose(t, period), idle_motion.blink(t), idle_motion.breathing(t),
                    state)
        if motion is not None:
            motion.apply(state, t)
        renderer.draw_state(state)
        frame = frames_from.frame()
        frame.pts = k
        container.mux(video.encode(frame))
        # Audio runs a frame ahead of the pictures, so the file interleaves evenly.
        fed = _feed_audio(container, audio, audio_blocks, rate, fed, (k + 2) * period)
        if progress is not None:
            progress(k + 1, frames)
    _feed_audio(container, audio, audio_blocks, rate, fed, math.inf)
    container.mux(audio.encode(None))
    container.mux(video.encode(None))


def _feed_audio(container, stream, blocks: Iterator[np.ndarray], rate: int, fed: int,
                until: float) -> int:
    while fed < until * rate:
        block = next(blocks, None)
        if block is None:
            break
        if not len(block):
            continue
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(block, np.float32).reshape(1, -1), format="flt", layout="mono")
        frame.sample_rate = rate
        frame.time_base = Fraction(1, rate)
        frame.pts = fed
        container.mux(stream.encode(frame))
        fed += len(block)
    return fed


class ProgressLine:
    """`progress` for export_video that redraws one line on a stream at most 4 times a second."""

    def __init__(self, stream, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self._shown = -math.inf

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if done < total and now - self._shown < 0.25:
            return
        self._shown = now
        end = "\n" if done == total else ""
        self.stream.write(f"\rrendering frame {done}/{total} ({100 * done // total}%)" + end)
        self.stream.flush()
