"""`lipsync-studio` entry point: the desktop app, `say` for speech and cues and `render`
for talking-avatar videos, without a window.

Every error is one line on stderr, never a traceback; exit status 2 for a command line
argparse cannot parse, 1 for anything else the user must fix (see EXIT_STATUS). File
paths are checked before any slow work, so a typo costs no synthesis and leaves no
half-written output.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import signal
import sys
import time
import wave
from pathlib import Path

import numpy as np

from app import library_command
from app.api import command as api_command
from app.command_line import fail, saved_settings
from app.heap import keep_large_blocks_apart
from app.obs import command as obs_command
from app.settings import Settings
from pipeline.audio.pcm import pcm16
from pipeline.core.modes import DEFAULT_MODE, MODE_NAMES, OFFLINE_MODE
from pipeline.core.output_paths import OutputPathError, check_output_path
from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
from pipeline.lipsync import cue_formats

log = logging.getLogger("lipsync_studio")

AVATAR_WINDOW_TITLE = "Lipsync Studio — Avatar"  # render/outputs/avatar_window.py's TITLE

EXIT_STATUS = (
    "exit status: 0 done; 1 the work could not be done, and the message says why: a file "
    "that cannot be read or written (I/O errors: a missing input, a folder, a missing "
    "folder, no permission), an input that is not what it should be, text with nothing "
    "to speak, no sound device; 2 a command line that cannot be parsed."
)


CAPTIONS_HELP = ("write word-timed captions of the speech to this file: WebVTT (.vtt) or SRT "
                 "(.srt), by its suffix; the words at the times they are heard")
CUE_FILE_HELP = ("its suffix picks the format: .json (Rhubarb-shaped, OVR visemes), .tsv and "
                 ".xml (Rhubarb's, shapes A-H and X), .dat (Moho / Papagayo switch data), "
                 ".motion3.json (Live2D's ParamMouthOpenY and ParamMouthForm), .vrma (VRM "
                 "animation, expressions aa ih ou ee oh)")
FORMAT_HELP = ("the cue file's format, where its suffix does not say it or to write Rhubarb's "
               "shapes A-H and X in .json (rhubarb); ovr is the .json of the 15 OVR visemes")
FPS_HELP = ("frames per second of a .dat, .motion3.json or .vrma cue file "
            "(default {fps:g}, Rhubarb's for Moho)")


CUE_FORMAT_NAMES = tuple(cue_formats.FORMATS)


class CliError(Exception):
    """Something the user must fix, said in one line that names the path (if any) and
    what is wrong with it."""


WINDOWLESS = ("Without a command it opens the app's window. These open no window: say, "
              "lipsync, render, voices, avatars, obs setup, api token, and --headless (the app "
              "without its window).")
VOICE_HELP = ("the voice: a name 'lipsync-studio voices' lists, or the path of a piper voice's "
              ".onnx (its .onnx.json beside it); default: the settings' voice, else the bundled "
              "one")
SPEAKER_HELP = "the speaker of a multi-speaker voice, by number or name (default: the settings')"


def version() -> str:
    """The installed package's version, or pyproject.toml's when run from a checkout."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("lipsync-studio")
    except PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"] + " (not installed)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lipsync-studio",
        description="Real-time lip-synced avatar: type text, the avatar speaks it. "
        + WINDOWLESS,
        epilog=EXIT_STATUS,
    )
    parser.add_argument("--version", action="version", version=f"lipsync-studio {version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail")
    parser.add_argument("--output-window", action="store_true",
                        help=f"open the avatar-only window ({AVATAR_WINDOW_TITLE}) for OBS at start")
    parser.add_argument("--headless", action="store_true",
                        help="run the voice, microphone and outputs (browser source, virtual "
                        "camera) without a window; lines typed on standard input are spoken; "
                        "Ctrl-C stops")
    parser.add_argument("--browser-source-port", type=_port, metavar="P",
                        help="serve the avatar page for OBS's browser source on 127.0.0.1:P")
    parser.add_argument("--api-port", type=_port, metavar="P",
                        help="serve the API for bots and tools on 127.0.0.1:P (HTTP and "
                        "WebSocket; docs/api.md), in the window or with --headless")
    commands = parser.add_subparsers(dest="command")
    say = commands.add_parser(
        "say", help="speak TEXT and write mouth cues, without a window",
        description="Speak TEXT with the settings' voice, the bundled one unless changed, or "
        "the one --voice names. With --wav the speech is written to a file instead of "
        "played; --cues writes mouth cues for animation tools.",
    )
    say.add_argument("text", help="what to say")
    say.add_argument("--voice", help=VOICE_HELP)
    say.add_argument("--speaker", help=SPEAKER_HELP)
    say.add_argument("--wav", type=Path, help="write the speech to this WAV file instead of playing it")
    say.add_argument("--cues", type=Path, help="write mouth cues to this file; " + CUE_FILE_HELP
                     + ", or .vtt / .srt for the captions")
    say.add_argument("--captions", type=Path, help=CAPTIONS_HELP)
    say.add_argument("--format", choices=CUE_FORMAT_NAMES, help=FORMAT_HELP)
    say.add_argument("--fps", type=float, help=FPS_HELP.format(fps=cue_formats.DEFAULT_FPS))
    say.add_argument("--rate", type=float, default=1.0, help="speaking rate, 0.5-2.0 (default 1.0)")
    say.add_argument("--mode", choices=MODE_NAMES, default=DEFAULT_MODE,
                     help="latency mode: how soon speech starts against how it sounds")
    say.add_argument("--seed", type=int, metavar="N",
                     help="make the voice's variation repeatable: the same text, mode, rate "
                     "and seed give the same audio (as the API's seed does)")
    lipsync = commands.add_parser(
        "lipsync", help="write mouth cues for an audio file (the live mic model, offline)",
        description="Mouth cues for a recording (any format FFmpeg reads, video files' sound "
        "too) from the lip-shape model the live mic uses.",
    )
    lipsync.add_argument("audio", type=Path, help="a recording: WAV, MP3, OGG, Opus, FLAC, M4A, or "
                         "the sound of a video file (MP4, MKV, WebM, MOV)")
    lipsync.add_argument("--out", type=Path, required=True,
                         help="the cue file to write; " + CUE_FILE_HELP)
    lipsync.add_argument("--format", choices=CUE_FORMAT_NAMES, help=FORMAT_HELP)
    lipsync.add_argument("--fps", type=float, help=FPS_HELP.format(fps=cue_formats.DEFAULT_FPS))
    words = lipsync.add_mutually_exclusive_group()
    words.add_argument("--text", help="the words spoken in the recording: the shapes come from "
                       "the words, their timing from the audio (words the audio does not bear "
                       "out are listed, and keep the audio's own shapes)")
    words.add_argument("--transcript", type=Path, help="the words spoken, from a UTF-8 text file")
    render = commands.add_parser(
        "render", help="export a talking-avatar video (MP4 with its audio), without a window",
        description="Render the avatar speaking TEXT (or lip-syncing --audio) into an MP4 "
        "video with H.264 pictures and AAC sound. Needs no display: OpenGL through EGL, "
        "on the GPU where there is one (e.g. NVIDIA's EGL device), else on the CPU "
        "(Mesa's llvmpipe); the first line it prints says which.",
    )
    render.add_argument("text", nargs="?", help="what to say (leave out with --audio)")
    render.add_argument("--audio", type=Path, help="a recording to lip-sync instead of speaking "
                        "text (WAV, MP3, OGG, FLAC, M4A, a video file's sound)")
    render.add_argument("--avatar", type=Path,
                        help="a face picture (PNG/JPG), a saved photo rig folder, or a sprite rig "
                        "(manifest.json or its folder); default: the avatar chosen in the "
                        "settings, else the bundled one")
    render.add_argument("--face", type=int, metavar="N",
                        help="with a picture of several faces, the face that talks, numbered from 0 "
                        "left to right (without it such a picture is refused, listing the faces)")
    render.add_argument("--voice", help=VOICE_HELP)
    render.add_argument("--speaker", help=SPEAKER_HELP)
    render.add_argument("--expression", metavar="NAME",
                        help="the avatar's expression throughout (happy, surprised, angry, sad… "
                        "as the avatar has them; default neutral); it moves (bounce, tilt, "
                        "sway) as the settings' motion strengths say")
    render.add_argument("--out", type=Path, required=True, help="the .mp4 file to write")
    render.add_argument("--captions", type=Path, help=CAPTIONS_HELP + " (with TEXT)")
    render.add_argument("--cues", type=Path, help="write the video's mouth cues beside it, at "
                        "its frame rate; " + CUE_FILE_HELP + ", or .vtt / .srt for the captions "
                        "(with TEXT)")
    render.add_argument("--format", choices=CUE_FORMAT_NAMES, help=FORMAT_HELP)
    render.add_argument("--fps", type=float, default=30.0, help="frames per second (default 30)")
    sizes = render.add_mutually_exclusive_group()
    sizes.add_argument("--size", help="video WIDTHxHEIGHT in pixels, or 720p or 1080p (default: "
                       "the avatar's own, at most 1920x1080)")
    sizes.add_argument("--height", type=int, help="video height in pixels; the width follows the avatar")
    render.add_argument("--background",
                        help="background colour behind the avatar (default: the settings' "
                        f"background colour, {Settings.background} unless changed)")
    render.add_argument("--rate", type=float, default=1.0, help="speaking rate, 0.5-2.0 (default 1.0)")
    render.add_argument("--mode", choices=MODE_NAMES, default=OFFLINE_MODE,
                        help="voice latency mode; offline nothing waits, so the default is premium "
                        "(whole-sentence prosody)")
    voices = commands.add_parser(
        "voices", help="list the voices: the bundled one and those in the voices folder",
        description="The voices 'say --voice' and the app can use: the bundled one and every "
        "piper voice (NAME.onnx with NAME.onnx.json) in the voices folder of the config "
        "directory. Voices that cannot be used are named on stderr with what is wrong.",
    )
    voices.add_argument("--json", action="store_true", help="print them as JSON")
    library_command.add_parser(commands)
    obs_command.add_parser(commands)
    api_command.add_parser(commands)
    return parser


def _port(text: str) -> int:
    """A TCP port for argparse: 1024-65535 (lower ones need root)."""
    if not text.isdigit() or not 1024 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use 1024 to 65535")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:
        # websockets logs every page request and connection of the browser source at INFO.
        logging.getLogger("websockets").setLevel(logging.WARNING)
    try:
        if args.command == "say":
            return _say(args)
        if args.command == "lipsync":
            return _lipsync(args)
        if args.command == "render":
            return _export(args)
        if args.command == "voices":
            return _voices(args)
        if args.command == "avatars":
            return library_command.run(args)
        if args.command == "obs":
            return obs_command.run(args)
        if args.command == "api":
            return api_command.run(args)
    except CliError as exc:
        return fail(str(exc))
    # The long-running app (window or headless); the commands above end in seconds.
    keep_large_blocks_apart()
    # `kill -USR1 PID` prints every thread's stack to stderr: what a hung app is waiting
    # on, without a debugger (tests/test_dist.py asks a bundle that does not exit).
    # Windows has no such signal.
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    if args.headless:
        from app.headless import run_headless

        return run_headless(output_window=args.output_window or None,
                            browser_port=args.browser_source_port, api_port=args.api_port)
    return _run_app(args)


def _run_app(args: argparse.Namespace) -> int:
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        or os.environ.get("QT_QPA_PLATFORM", "").startswith(("offscreen", "minimal"))
    ):
        print(
            "lipsync-studio: no display found (DISPLAY and WAYLAND_DISPLAY are unset).\n"
            "Start it from a desktop session, or without a screen use: xvfb-run -a lipsync-studio",
            file=sys.stderr,
        )
        return 2
    from app.ui.main_window import run_app

    return run_app(output_window=args.output_window or None,
                   browser_port=args.browser_source_port, api_port=args.api_port)


def _lipsync(args: argparse.Namespace) -> int:
    from pipeline.lipsync.forced_align import transcript_cues
    from pipeline.lipsync.model import infer_file

    duration = _check_audio(args.audio)
    fmt = _cue_output(args.out, args.format, args.fps, words=False)
    text = args.text
    if args.transcript is not None:
        try:
            text = args.transcript.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"cannot read the transcript {args.transcript}: "
                           f"{exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CliError(f"the transcript {args.transcript} is not UTF-8 text") from None
    unsupported = []
    try:
        if text is None:
            cues = infer_file(args.audio)
        else:
            aligned = transcript_cues(args.audio, text)
            cues, unsupported = aligned.cues, aligned.unsupported
    except ValueError as exc:  # AudioFileError (damaged past where it was measured), TranscriptError
        raise CliError(str(exc)) from None
    _write_cues(args.out, fmt, cues, duration, str(args.audio), _cue_fps(args.fps))
    if unsupported:
        shown = ", ".join(f"{w.text!r} at {w.start:.2f}-{w.end:.2f} s" for w in unsupported[:10])
        more = f" and {len(unsupported) - 10} more" if len(unsupported) > 10 else ""
        print(f"note: {len(unsupported)} word(s) of the transcript are not borne out by the "
              f"audio; their spans keep the audio's own shapes: {shown}{more}", file=sys.stderr)
    how = "shapes from the transcript" if text is not None else "shapes from the audio"
    print(f"{len(cues)} cues for {duration:.2f} s of audio ({how}), wrote {args.out} "
          f"({fmt.title})")
    return 0


def _export(args: argparse.Namespace) -> int:
    from render.gl.gl_platform import INSTALL_HINT, missing_egl_libraries, use_egl

    # On Linux, drawn through EGL, chosen before anything imports OpenGL: a GPU where EGL
    # offers one, else Mesa on the CPU, and no display server either way. Elsewhere
    # (Windows, macOS: no EGL, and no display server to need) through Qt's own GL.
    # use_egl() is refused only where main() runs inside a process whose OpenGL is
    # already bound (the test session's Qt GL): the frames are drawn with that
    # (render/gl/offscreen.py offscreen_target).
    egl = sys.platform.startswith("linux") and use_egl()
    if egl and (missing := missing_egl_libraries()):
        return fail(f"rendering needs OpenGL through EGL, and {' and '.join(missing)} "
                     f"cannot be loaded here: {INSTALL_HINT}")
    # PyOpenGL announces at INFO that its optional C accelerator is missing.
    logging.getLogger("OpenGL.acceleratesupport").setLevel(logging.WARNING)
    from PySide6.QtGui import QGuiApplication

    from app.outputs import motion_strengths
    from pipeline.core.expressions import ExpressionError
    from pipeline.face.landmarks import PortraitError, SeveralFacesError
    from pipeline.text.input import TextInputError
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
    from pipeline.voice.voice_files import VoiceError
    from render.gl.offscreen import OffscreenError, offscreen_target
    from render.gpu.path_picker import MouthPathPicker
    from render.outputs.background import ColourError, parse_colour
    from render.outputs.video_export import (
        ExportError,
        ProgressLine,
        VideoSettings,
        audio_file_soundtrack,
        check_fps,
        check_output,
        export_video,
        fit_size,
        speech_soundtrack,
        video_size,
    )
    from render.rigs.loader import is_picture, load_avatar_rig, rig_expressions
    from render.rigs.manifest import RigError
    from render.rigs.photo import import_portrait
    from render.timing.avatar_motion import AvatarMotion

    if (args.text is None) == (args.audio is None):
        return fail("render needs TEXT to speak or --audio FILE to lip-sync (one of the two)")
    # As the app shows it: the settings' avatar, background and motion, unless told otherwise.
    settings = saved_settings()
    if args.avatar is None or args.background is None:
        if args.avatar is None:
            args.avatar = Path(settings.avatar_manifest or DEFAULT_AVATAR_MANIFEST)
        if args.background is None:
            args.background = settings.background
    if not 0.5 <= args.rate <= 2.0:
        return fail(f"--rate {args.rate:g} is out of range: use 0.5 to 2.0")
    if args.face is not None and not is_picture(args.avatar):
        return fail(f"--face picks a face in a picture (PNG/JPG); {args.avatar} is a rig")
    if args.audio is not None and (args.voice is not None or args.speaker is not None):
        return fail("--voice and --speaker choose who speaks TEXT; a recording lip-synced "
                     "with --audio has its own voice")
    voice, speaker = _chosen_voice(args, settings) if args.audio is None else (None, 0)
    try:
        # A video has no alpha: a colour's own alpha is applied over black.
        r, g, b, a = parse_colour(args.background)
    except ColourError as exc:
        return fail(f"--background {exc}")
    try:
        check_output(args.out)
    except ExportError as exc:
        return fail(str(exc))
    if args.audio is not None and args.captions is not None:
        return fail("--captions needs TEXT: a recording lip-synced with --audio has no words "
                     "to caption")
    captions_format = _check_captions(args.captions)
    # The cue file's frames are the video's: --fps is the video's rate here.
    cue_format = _cue_output(args.cues, args.format, None, words=args.audio is None)
    if args.audio is not None:
        _check_audio(args.audio)
    try:
        check_fps(args.fps)
        size = video_size(args.size) if args.size else None
        # Qt rasterises the sprite rig's SVGs and must exist before any rig loads. With
        # EGL's GL, Qt's offscreen platform, which needs no display.
        QGuiApplication.instance() or QGuiApplication(
            ["lipsync-studio", *(["-platform", "offscreen"] if egl else [])])
        rig = (import_portrait(args.avatar, args.face)
               if args.face is not None and args.avatar.exists() else load_avatar_rig(args.avatar))
        size = size or fit_size(rig.canvas_size, args.height)
        motion = AvatarMotion(lambda: 0.0, strengths=motion_strengths(settings))
        motion.set_offered(rig_expressions(rig))
        if args.expression is not None:
            motion.fader.fade_seconds = 0.0  # the whole video in it, from its first frame
            motion.set_expression(args.expression)
        # The mouth frames' path as the settings ask, said once chosen (with the video's
        # GL current, before its first frame).
        paths = MouthPathPicker(settings.mouth_frames)
        paths.on_change = lambda: _say_mouth_paths(paths)
        # The GL target before the speech: a machine that cannot draw is told so at once.
        with offscreen_target(*size) as target:
            print(f"rendering on {target.description}", file=sys.stderr)
            segments, captions = [], None
            if args.audio is not None:
                print(f"lip-syncing {args.audio} ...", file=sys.stderr)
                soundtrack = audio_file_soundtrack(args.audio)
            else:
                print("synthesizing the speech ...", file=sys.stderr)
                tts = StreamingTTS(voice=voice.files, speaker=speaker)
                captions = _caption_track(tts, args.captions is not None
                                          or (cue_format is not None and cue_format.captions))
                _, segments = _render(tts, args.text, LATENCY_MODES[args.mode], args.rate, captions)
                soundtrack = speech_soundtrack(segments)
            video = VideoSettings(args.fps, size, (r * a, g * a, b * a))
            result = export_video(args.out, rig, soundtrack, video, target,
                                  ProgressLine(sys.stderr), motion=motion, mouth_paths=paths)
    except SeveralFacesError as exc:  # its message lists the faces, numbered as --face takes them
        return fail(f"{exc.message}\nChoose one with --face N.")
    except (ExportError, RigError, PortraitError, OffscreenError, TextInputError,
            VoiceError, ExpressionError) as exc:
        return fail(str(exc))
    if args.captions is not None:
        _write_captions(args.captions, captions, captions_format, result.duration)
    if args.cues is not None:
        _write_cues(args.cues, cue_format, soundtrack.cues, result.duration,
                    str(args.audio or args.out), result.fps, captions)
    w, h = result.size
    print(f"wrote {result.path}: {result.duration:.2f} s, {result.frames} frames at "
          f"{result.fps:g} fps, {w}x{h}" + (f", wrote {args.captions}" if args.captions else "")
          + (f", wrote {args.cues}" if args.cues else ""))
    return 0


def _say_mouth_paths(paths) -> None:
    """The video's mouth-frame path on stderr when chosen: a warning where it is not what
    the settings ask, or CUDA failed."""
    summary = paths.summary()
    if summary is not None:
        print(("warning: " if paths.warnings() else "") + summary, file=sys.stderr)


def _voices(args: argparse.Namespace) -> int:
    from app.voices import catalogue, voices_folder

    found = catalogue()
    for problem in found.problems.values():
        print(f"note: not usable: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps({"folder": str(voices_folder()),
                          "voices": [voice.as_json() for voice in found.voices]}, indent=2))
        return 0
    rows = [("NAME", "LANGUAGE", "QUALITY", "RATE", "SPEAKERS", "PATH")] + [
        (voice.name, voice.language, voice.quality or "-", f"{voice.sample_rate} Hz",
         str(max(1, len(voice.speakers))), str(voice.path)) for voice in found.voices]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1])
    print(f"\nAdd a voice by copying its NAME.onnx and NAME.onnx.json into {voices_folder()}")
    return 0


def _chosen_voice(args: argparse.Namespace, settings: Settings | None):
    """(the Voice, its speaker id) asked for by --voice and --speaker, else the `settings`'
    (the saved ones, read once by the command; None where both flags are given); CliError
    for one that cannot be used, before any slow work."""
    from app.voices import choose_voice
    from pipeline.voice.voice_files import VoiceError

    try:
        voice = choose_voice(settings.voice if args.voice is None else args.voice)
    except VoiceError as exc:
        raise CliError(str(exc)) from None
    if args.speaker is None:
        # The settings' speaker belongs to the settings' voice.
        return voice, settings.voice_speaker if args.voice is None and voice.speakers else 0
    if not voice.speakers:
        raise CliError(f"--speaker is for a voice of several speakers; {voice.name} has one")
    if args.speaker.isdigit() and int(args.speaker) < len(voice.speakers):
        return voice, int(args.speaker)
    if args.speaker in voice.speakers:
        return voice, voice.speakers.index(args.speaker)
    listed = ", ".join(map(voice.speaker_label, range(len(voice.speakers))))
    raise CliError(f"--speaker {args.speaker}: {voice.name} has no such speaker; its speakers "
                   f"are {listed}")

def _check_output(path: Path) -> None:
    """CliError unless a file can be written at ``path`` (pipeline.core.output_paths)."""
    try:
        check_output_path(path)
    except OutputPathError as exc:
        raise CliError(str(exc)) from None


def _check_audio(path: Path) -> float:
    """The duration in seconds of the recording at ``path`` (any format FFmpeg decodes:
    pipeline.audio.audio_file); CliError if it is missing, a folder, empty, not audio or
    holds no sound."""
    from pipeline.audio.audio_file import AudioFileError, audio_info

    if not path.exists():
        raise CliError(f"Audio file not found: {path}")
    if path.is_dir():
        raise CliError(f"{path} is a folder, not an audio file")
    try:
        if path.stat().st_size == 0:
            raise CliError(f"{path} is empty, not an audio file")
        return audio_info(path).duration
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    except AudioFileError as exc:
        raise CliError(str(exc)) from None


def _check_captions(path: Path | None) -> str | None:
    """The captions format of `path` ("vtt" or "srt"), None without one; CliError for
    another suffix or a path that cannot be written."""
    from pipeline.voice.captions import CaptionFileError, caption_format

    if path is None:
        return None
    try:
        fmt = caption_format(path)
    except CaptionFileError as exc:
        raise CliError(str(exc)) from None
    _check_output(path)
    return fmt


def _caption_track(tts, wanted: bool):
    """A track that keeps every word, where a captions file is `wanted` (else None)."""
    from pipeline.voice.captions import CaptionTrack

    return CaptionTrack(tts.phonemes_of, keep_all=True) if wanted else None


def _cue_output(path: Path | None, name: str | None, fps: float | None, words: bool,
                flag: str = "--cues"):
    """The CueFormat (pipeline.lipsync.cue_formats) to write `path` in, None without a
    path; CliError, before any slow work, for a path that cannot be written, a format
    its suffix does not name, --format or --fps without a file to apply to, --fps for a
    format without frames, or captions where there are no `words`."""
    if path is None:
        given = [option for option, value in (("--format", name), ("--fps", fps)) if value is not None]
        if given:
            raise CliError(f"{' and '.join(given)} {'say' if len(given) > 1 else 'says'} how the "
                           f"{flag} file is written; "
                           f"give {flag} FILE too")
        return None
    _check_output(path)
    try:
        fmt = cue_formats.cue_format(path, name)
        if fps is not None:
            cue_formats.check_fps(fps)
    except cue_formats.CueFormatError as exc:
        raise CliError(str(exc)) from None
    if fps is not None and not fmt.frame_rate:
        raise CliError(f"--fps is for the frames of a .dat, .motion3.json or .vrma file; "
                       f"{path} is {fmt.title}, timed without frames")
    if fmt.captions and not words:
        raise CliError(f"{path}: {fmt.title} hold words, and a recording has none to caption; "
                       f"write its mouth cues instead ({cue_formats.MOUTH_SUFFIXES})")
    return fmt


def _cue_fps(fps: float | None) -> float:
    return cue_formats.DEFAULT_FPS if fps is None else fps


def _write_cues(path: Path, fmt, cues, duration: float, sound_file: str, fps: float,
                captions=None, origin: float = 0.0) -> None:
    """Write a cue file of `fmt`; a captions format is written from `captions` (a
    CaptionTrack) instead, its times from `origin`."""
    if fmt.captions:
        _write_captions(path, captions, fmt.name, duration, origin)
        return
    try:
        path.write_bytes(cue_formats.cue_file(fmt, cues, duration, sound_file, fps))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None


def _write_captions(path: Path, track, fmt: str, duration: float, origin: float = 0.0) -> None:
    # Files carry the true times, no display lead (pipeline.voice.captions).
    from pipeline.voice.captions import caption_document

    track.finish()
    try:
        path.write_text(caption_document(track.words(), fmt, duration, origin), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None


def _write_wav(path: Path, audio: np.ndarray, sample_rate: int) -> None:
    # The file is opened here, not by wave.open: a Wave_write whose own open failed
    # prints a traceback from its __del__ ("Exception ignored in"), past any handler.
    try:
        with open(path, "wb") as file, wave.open(file, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(sample_rate)
            out.writeframes(pcm16(audio))
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None


def _say(args: argparse.Namespace) -> int:
    from pipeline.audio.devices import AudioUnavailable
    from pipeline.text.input import TextInputError
    from pipeline.voice.cues import concat_tracks
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
    from pipeline.voice.voice_files import VoiceError

    if not 0.5 <= args.rate <= 2.0:
        return fail(f"--rate {args.rate:g} is out of range: use 0.5 to 2.0")
    if args.wav is not None:
        _check_output(args.wav)
    cue_format = _cue_output(args.cues, args.format, args.fps, words=True)
    captions_format = _check_captions(args.captions)
    voice, speaker = _chosen_voice(
        args, saved_settings() if args.voice is None or args.speaker is None else None)
    try:
        tts = StreamingTTS(seed=args.seed, voice=voice.files, speaker=speaker)
    except VoiceError as exc:
        return fail(str(exc))
    if args.wav is None:
        # Warm-up runs every engine shape once (~1.0 s of the 2.6 s a short `say --wav`
        # took on the 2-vCPU VM) so that played speech starts on time; a file is not
        # heard as it is made, and its speech runs only the shapes it needs.
        tts.warm_up()
    captions = _caption_track(tts, args.captions is not None
                              or (cue_format is not None and cue_format.captions))
    captions_origin = 0.0
    mode = LATENCY_MODES[args.mode]
    try:
        if args.wav is None:
            first_audio_s, cues, duration, captions_origin = _play(
                tts, args.text, args.mode, args.rate, captions)
        else:
            first_audio_s, segments = _render(tts, args.text, mode, args.rate, captions)
            audio, cues = concat_tracks(segments)
            duration = len(audio) / tts.sample_rate
    except TextInputError as exc:
        return fail(str(exc))
    except AudioUnavailable as exc:
        return fail(f"cannot play the speech: {exc} (--wav FILE writes it to a file instead)")
    if args.wav is not None:
        _write_wav(args.wav, audio, tts.sample_rate)
    if args.cues is not None:
        sound_file = str(args.wav) if args.wav is not None else ""
        _write_cues(args.cues, cue_format, cues, duration, sound_file, _cue_fps(args.fps),
                    captions, captions_origin)
    if args.captions is not None:
        _write_captions(args.captions, captions, captions_format, duration, captions_origin)
    print(f"time to first audio {first_audio_s * 1000:.0f} ms ({args.mode}"
          + (", no warm-up" if args.wav is not None else "") + f"), {duration:.2f} s of speech"
          + (f", wrote {args.wav}" if args.wav else "") + (f", wrote {args.cues}" if args.cues else "")
          + (f", wrote {args.captions}" if args.captions else ""))
    return 0


def _render(tts, text: str, mode, rate: float, captions=None):
    """Synthesize to memory: (time to first audio chunk, one SpeechSegment per plan);
    each plan also feeds `captions` (a CaptionTrack), at its place in the audio."""
    from pipeline.core.frames import SpeechSegment
    from pipeline.voice.streaming_tts import SentencePlan

    started = time.monotonic()
    first_audio_s = None
    segments: list[SpeechSegment] = []
    chunks: list[np.ndarray] = []
    samples = 0  # where the plan starts in the audio
    for item in tts.stream(text, mode, length_scale=1.0 / rate):
        if isinstance(item, SentencePlan):
            for notice in item.notices:
                print(f"note: {notice}", file=sys.stderr)
            if captions is not None:
                captions.plan(item, samples / item.sample_rate)
            samples += item.total_samples
            chunks = []
            segments.append(SpeechSegment(item.text, np.zeros(0, np.float32), item.sample_rate,
                                          item.phonemes))
            continue
        if first_audio_s is None:
            first_audio_s = time.monotonic() - started
        chunks.append(item.samples)
        if item.last:
            segments[-1].audio = np.concatenate(chunks)
    return first_audio_s or 0.0, segments


def _play(tts, text: str, mode_name: str, rate: float, captions=None):
    """Play through the default output as it is synthesized, through the app's own
    Engine; returns the time to first audio, the cues of what played, its duration and
    the media time it started at. `captions` (a CaptionTrack) follows the speaker's
    events on the speaker's thread, where the voice phonemizes. Raises
    AudioUnavailable when there is no output to play on."""
    import queue

    from app.engine import Engine
    from app.settings import Settings
    from pipeline.audio.devices import AudioUnavailable
    from pipeline.core.events import (
        SentenceTimed,
        SpeechFailed,
        SpeechFinished,
        SpeechNotice,
        SpeechStarted,
    )
    from pipeline.text.input import TextInputError, prepare_text

    prepare_text(text)  # refuses text with nothing to speak before a device is opened
    engine = Engine(Settings(latency_mode=mode_name, speech_rate=rate, mic_enabled=False))
    events: queue.Queue = queue.Queue()
    if captions is not None:
        # Subscribed first: the bus calls in order, so the track has every word by the
        # time SpeechFinished reaches this thread.
        engine.events.subscribe(captions.on_event, *captions.EVENTS)
    engine.events.subscribe(events.put, SpeechStarted, SpeechNotice, SpeechFailed, SpeechFinished,
                            SentenceTimed)
    first_audio_s = 0.0
    origin = None  # the first sentence's media time: where the cues' timeline starts
    try:
        if engine.start_audio() is not None:
            raise AudioUnavailable(engine.audio_problem)
        engine.attach_voice(tts)
        engine.say(text)
        while True:
            event = events.get()
            if isinstance(event, SpeechStarted):
                first_audio_s = event.first_audio_s
            elif isinstance(event, SentenceTimed):
                origin = event.start if origin is None else origin
            elif isinstance(event, SpeechNotice):
                print(f"note: {event.message}", file=sys.stderr)
            elif isinstance(event, SpeechFailed):
                raise TextInputError(event.message)
            elif isinstance(event, SpeechFinished):
                break
        cues = engine.timeline.cues()
        output = engine.output
        while output.read_pos < output.scheduled_end:
            time.sleep(0.02)
        time.sleep(output.output_latency)
    finally:
        engine.close()
    return first_audio_s, cues, (cues[-1].end if cues else 0.0), origin or 0.0
