"""The one event catalogue, and the bus that carries it: every stage publishes what
happened as one of the typed records below, and anyone (the window, the command line,
the API, the browser source's page) subscribes to the kinds it wants.

Every event has one JSON form (`event_json`): ``{"type": "event", "event": NAME, ...}``
with the record's fields, NAME from EVENT_NAMES. Times on the media clock (speech
``start``/``end``) also come as ``*_heard_at``: the wall-clock instant (Unix seconds)
they are heard, for a client that has no view of our audio clock.

The bus is Qt-free and thread-agnostic: ``publish`` calls each matching subscriber on
the publishing thread, in the order they subscribed. The stages publish from their
worker threads (the speaker's, the microphone's watchdog), never from an audio
callback, so a subscriber must return quickly and hand anything slow to a thread of its
own (a Qt window posts to its own thread through a signal, the API to its loop).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, Literal

log = logging.getLogger(__name__)

Handler = Callable[[Any], None]


# -- speech (pipeline/voice/speaker.py publishes these) -------------------------------

@dataclass(frozen=True, slots=True)
class SpeechStarted:
    request: int
    first_audio_s: float  # request → first sample heard
    synthesis_s: float  # request → first sentence synthesized


@dataclass(frozen=True, slots=True)
class SpeechNotice:
    request: int
    message: str


@dataclass(frozen=True, slots=True)
class SpeechFailed:
    request: int
    message: str


@dataclass(frozen=True, slots=True)
class SpeechFinished:
    request: int
    end_media_time: float
    cancelled: bool
    gaps: int  # sentences that could not follow the previous one seamlessly
    underruns: int  # chunks that arrived after their time to play (their late part dropped)
    # The least slack of the chunks after the first (seconds before their place could no
    # longer be written); None without an audio device or with one chunk only.
    least_slack_s: float | None = None


@dataclass(frozen=True, slots=True)
class SentenceTimed:
    """A sentence scheduled: heard from ``start`` (media time, seconds) on; ``typed`` is
    what was typed for it ("$5" where ``text`` says "5 dollars"; "" = as ``text``)."""

    request: int
    text: str
    start: float
    typed: str = ""


@dataclass(frozen=True, slots=True)
class WordTimed:
    """A word scheduled: the voice's symbols for it (`phonemes`), heard over [start, end)
    in media time. `index` counts the words of the sentence last announced by
    SentenceTimed, across the windows it is read in."""

    request: int
    index: int
    phonemes: str
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class VisemeTimed:
    """A viseme scheduled as the mouth's target over [start, end) in media time: the
    speech timeline's own cues (pipeline.voice.viseme_track), one event each."""

    request: int
    viseme: str
    start: float
    end: float


SpeechEvent = (SpeechStarted | SpeechNotice | SpeechFailed | SpeechFinished
               | SentenceTimed | WordTimed | VisemeTimed)


# -- devices (pipeline/audio/input.py, the engine) -------------------------------------

@dataclass(frozen=True, slots=True)
class InputStatus:
    """What happened to the microphone, with a message for the user's status line."""

    kind: Literal["started", "lost", "recovered", "switched", "retrying", "available", "invalid"]
    message: str
    device: str


@dataclass(frozen=True, slots=True)
class DeviceNotice:
    """Something the user must know about a device that is not a microphone status of
    its own (InputStatus): audio turned off, a model that fell back, a sound server that
    cannot be restarted. ``message`` is meant for the user; None says the condition is
    over."""

    device: Literal["output", "microphone"]
    message: str | None


# -- the mic's delay (pipeline/lipsync/mic.py) ----------------------------------------

@dataclass(frozen=True, slots=True)
class DelayChange:
    """A move of MicLipSync's delay, for the status line: the OBS offset to enter changed."""

    at: float  # on the stage's clock
    old: float
    new: float
    worst_ms: float  # a raise: the worst capture → pose latency that asked for it (NaN: a reset)


# -- what is shown (app/outputs.py) ----------------------------------------------------

@dataclass(frozen=True, slots=True)
class CaptionShown:
    """The caption on the avatar now ("" : none), as the outputs show it."""

    text: str


EVENT_NAMES: dict[type, str] = {
    SpeechStarted: "speech_started",
    SpeechNotice: "speech_notice",
    SpeechFailed: "speech_failed",
    SpeechFinished: "speech_finished",
    SentenceTimed: "sentence",
    WordTimed: "word",
    VisemeTimed: "viseme",
    InputStatus: "mic_status",
    DeviceNotice: "device",
    DelayChange: "obs_delay",
    CaptionShown: "caption",
}
EVENT_KINDS: dict[str, type] = {name: kind for kind, name in EVENT_NAMES.items()}
# Fields on the media clock, which also get their wall-clock hearing time.
_MEDIA_TIMES = frozenset({"start", "end", "end_media_time"})


def event_json(event: object, heard_at: Callable[[float], float] | None = None) -> dict:
    """The JSON form of `event` (a mapping of JSON values). `heard_at` maps a media time
    to the wall-clock instant it is heard (Unix seconds); without it no ``*_heard_at``."""
    out: dict[str, Any] = {"type": "event", "event": EVENT_NAMES[type(event)]}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[f.name] = value
        if heard_at is not None and f.name in _MEDIA_TIMES and value is not None:
            out[f.name.removesuffix("_media_time") + "_heard_at"] = heard_at(value)
    return out


class EventBus:
    """Invariant: ``publish`` takes no lock and never sees a half-changed subscriber
    list: subscribing replaces the whole tuple (one reference swap), so a publisher reads
    either the old tuple or the new one."""

    def __init__(self) -> None:
        self._subscribers: tuple[tuple[Handler, tuple[type, ...]], ...] = ()
        self._changing = threading.Lock()  # between subscribers only, never publish

    def subscribe(self, handler: Handler, *kinds: type) -> Callable[[], None]:
        """Call ``handler(event)`` for every event that is an instance of one of
        ``kinds`` (every event if none is given). Returns the unsubscribe call."""
        entry = (handler, kinds)
        with self._changing:
            self._subscribers = (*self._subscribers, entry)

        def unsubscribe() -> None:
            with self._changing:
                self._subscribers = tuple(s for s in self._subscribers if s is not entry)

        return unsubscribe

    def publish(self, event: object) -> None:
        """Hand ``event`` to its subscribers. One that raises is logged and the rest still
        get the event: a broken listener must not stop speech or the microphone."""
        for handler, kinds in self._subscribers:
            if kinds and not isinstance(event, kinds):
                continue
            try:
                handler(event)
            except Exception:
                log.exception("a subscriber to %s failed", type(event).__name__)
