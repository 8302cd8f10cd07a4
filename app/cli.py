"""`lipsync-studio` entry point: the desktop app, and `say` for speech and cues without a window."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import wave
from pathlib import Path

import numpy as np

log = logging.getLogger("lipsync_studio")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lipsync-studio",
        description="Real-time lip-synced avatar: type text, the avatar speaks it.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail")
    commands = parser.add_subparsers(dest="command")
    say = commands.add_parser(
        "say", help="speak TEXT and write mouth cues, without a window",
        description="Speak TEXT with the bundled voice. With --wav the speech is written "
        "to a file instead of played; --cues writes Rhubarb-shaped mouth cues.",
    )
    say.add_argument("text", help="what to say")
    say.add_argument("--wav", type=Path, help="write the speech to this WAV file instead of playing it")
    say.add_argument("--cues", type=Path, help="write mouth cues (JSON) to this file")
    say.add_argument("--format", choices=("ovr", "rhubarb"), default="ovr",
                     help="cue values: the 15 OVR visemes (default) or Rhubarb's A-H and X shapes")
    say.add_argument("--rate", type=float, default=1.0, help="speaking rate, 0.5-2.0 (default 1.0)")
    say.add_argument("--mode", choices=("ultra", "balanced", "premium"), default="balanced",
                     help="latency mode: how soon speech starts against how it sounds")
    lipsync = commands.add_parser(
        "lipsync", help="write mouth cues for an audio file (the live mic model, offline)",
        description="Mouth cues for a WAV file from the lip-shape model the live mic uses.",
    )
    lipsync.add_argument("audio", type=Path, help="a WAV file (8-96 kHz, mono or stereo, 16/24/32-bit)")
    lipsync.add_argument("--out", type=Path, required=True, help="cues JSON to write")
    lipsync.add_argument("--format", choices=("ovr", "rhubarb"), default="ovr",
                         help="cue values: the 15 OVR visemes (default) or Rhubarb's A-H and X shapes")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "say":
        return _say(args)
    if args.command == "lipsync":
        return _lipsync(args)
    return _run_app()


def _run_app() -> int:
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
    from app.main_window import run_app

    return run_app()


def _lipsync(args: argparse.Namespace) -> int:
    from pipeline.cues import cues_document
    from pipeline.lipsync_model import infer_file

    if not args.audio.is_file():
        return _fail(f"{args.audio}: no such file")
    if not args.out.resolve().parent.is_dir():
        return _fail(f"cannot write {args.out}: folder {args.out.resolve().parent} does not exist")
    try:
        with wave.open(str(args.audio)) as f:
            duration = f.getnframes() / f.getframerate()
        cues = infer_file(args.audio)
    except (wave.Error, EOFError, ValueError) as exc:
        return _fail(f"{args.audio} is not a readable WAV file ({exc})")
    document = cues_document(cues, str(args.audio), duration, args.format)
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"{len(document['mouthCues'])} cues for {duration:.2f} s of audio, wrote {args.out}")
    return 0


def _fail(message: str) -> int:
    print(f"lipsync-studio: {message}", file=sys.stderr)
    return 1


def _say(args: argparse.Namespace) -> int:
    from pipeline.audio_output import AudioUnavailable
    from pipeline.cues import concat_tracks, cues_document
    from pipeline.streaming_tts import LATENCY_MODES, StreamingTTS
    from pipeline.text_input import TextInputError

    if not 0.5 <= args.rate <= 2.0:
        return _fail(f"--rate {args.rate:g} is out of range: use 0.5 to 2.0")
    for path in (args.wav, args.cues):
        if path is not None and not path.resolve().parent.is_dir():
            return _fail(f"cannot write {path}: folder {path.resolve().parent} does not exist")
    tts = StreamingTTS()
    tts.warm_up()
    mode = LATENCY_MODES[args.mode]
    try:
        if args.wav is None:
            first_audio_s, cues, duration = _play(tts, args.text, mode, args.rate)
        else:
            first_audio_s, segments = _render(tts, args.text, mode, args.rate)
            audio, cues = concat_tracks(segments)
            duration = len(audio) / tts.sample_rate
    except TextInputError as exc:
        return _fail(str(exc))
    except AudioUnavailable as exc:
        return _fail(f"cannot play the speech: {exc} (--wav FILE writes it to a file instead)")
    if args.wav is not None:
        with wave.open(str(args.wav), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(tts.sample_rate)
            out.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    if args.cues is not None:
        sound_file = str(args.wav) if args.wav is not None else ""
        document = cues_document(cues, sound_file, duration, args.format)
        args.cues.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"time to first audio {first_audio_s * 1000:.0f} ms ({args.mode}), {duration:.2f} s of speech"
          + (f", wrote {args.wav}" if args.wav else "") + (f", wrote {args.cues}" if args.cues else ""))
    return 0


def _render(tts, text: str, mode, rate: float):
    """Synthesize to memory: (time to first audio chunk, one SpeechSegment per plan)."""
    from pipeline.frames import SpeechSegment
    from pipeline.streaming_tts import SentencePlan

    started = time.monotonic()
    first_audio_s = None
    segments: list[SpeechSegment] = []
    chunks: list[np.ndarray] = []
    for item in tts.stream(text, mode, length_scale=1.0 / rate):
        if isinstance(item, SentencePlan):
            for notice in item.notices:
                print(f"note: {notice}", file=sys.stderr)
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


def _play(tts, text: str, mode, rate: float):
    """Play through the default output as it is synthesized, through the app's own
    speech stage; returns the time to first audio, the cues of what played and its
    duration."""
    import queue

    from pipeline.audio_output import AudioOutput
    from pipeline.speaker import Speaker, SpeechFailed, SpeechFinished, SpeechNotice, SpeechStarted
    from pipeline.speech_timeline import SpeechTimeline
    from pipeline.text_input import TextInputError, prepare_text

    prepare_text(text)  # refuses text with nothing to speak before a device is opened
    output = AudioOutput()
    output.start()
    events: queue.Queue = queue.Queue()
    timeline = SpeechTimeline()
    speaker = Speaker(tts, timeline, output, output.clock, events.put,
                      speech_rate=rate, mode=mode)
    first_audio_s = 0.0
    try:
        speaker.say(text)
        while True:
            event = events.get()
            if isinstance(event, SpeechStarted):
                first_audio_s = event.first_audio_s
            elif isinstance(event, SpeechNotice):
                print(f"note: {event.message}", file=sys.stderr)
            elif isinstance(event, SpeechFailed):
                raise TextInputError(event.message)
            elif isinstance(event, SpeechFinished):
                break
        cues = timeline.cues()
        while output.read_pos < output.scheduled_end:
            time.sleep(0.02)
        time.sleep(output.output_latency)
    finally:
        speaker.close()
        output.close()
    return first_audio_s, cues, (cues[-1].end if cues else 0.0)
