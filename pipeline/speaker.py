"""The speech stage: text in; audio on the output timeline and visemes on the speech
timeline, both stamped in media time before they play.

A worker thread synthesizes sentence by sentence and schedules each right after the
previous one, so long text streams with bounded memory. Stop and barge-in cancel the
request between model calls and silence what is already scheduled.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.audio_output import AudioOutput
from pipeline.clock import MediaClock
from pipeline.resample import resample
from pipeline.speech_timeline import SpeechTimeline
from pipeline.text_input import TextInputError
from pipeline.tts import PiperTTS
from pipeline.viseme_track import VisemeTrack
from pipeline.worker_priority import run_as_background_work

log = logging.getLogger(__name__)

# How far synthesis may run ahead of playback: enough to ride out a slow sentence,
# little enough that Stop never throws away minutes of work.
MAX_AHEAD_S = 8.0
# Without an audio device, speech starts this long after the request is scheduled.
SILENT_LEAD_S = 0.05


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


SpeechEvent = SpeechStarted | SpeechNotice | SpeechFailed | SpeechFinished


@dataclass(slots=True)
class _Request:
    id: int
    text: str
    requested_at: float
    cancel: threading.Event


class Speaker:
    """Runs speech requests one at a time on its own worker thread.

    With `output` None (no audio device) speech is scheduled on `clock` alone: the
    mouth still moves in time, silently.
    """

    def __init__(
        self,
        tts: PiperTTS,
        timeline: SpeechTimeline,
        output: AudioOutput | None,
        clock: MediaClock,
        on_event: Callable[[SpeechEvent], None],
        *,
        volume: float = 1.0,
        speech_rate: float = 1.0,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tts = tts
        self._timeline = timeline
        self._output = output
        self._clock = clock
        self._emit = on_event
        self.volume = volume
        self.speech_rate = speech_rate
        self._now = now
        self._requests: queue.Queue[_Request | None] = queue.Queue()
        self._current: _Request | None = None
        self._next_id = 0
        # Held while checking for cancellation and scheduling, and while stopping, so a
        # sentence can never be scheduled after the Stop that should have dropped it.
        self._schedule_lock = threading.Lock()
        self._silent_end = 0.0
        self._worker = threading.Thread(target=self._run, name="speaker", daemon=True)
        self._worker.start()

    @property
    def rate(self) -> int:
        return self._output.sample_rate if self._output is not None else self._tts.sample_rate

    def say(self, text: str) -> int:
        """Speak `text`, interrupting whatever is being said (barge-in). Returns its id."""
        self.stop()
        self._next_id += 1
        request = _Request(self._next_id, text, self._now(), threading.Event())
        self._current = request
        self._requests.put(request)
        return request.id

    def stop(self) -> None:
        """Silence speech now (short fade) and let the mouth close."""
        with self._schedule_lock:
            current = self._current
            if current is not None:
                current.cancel.set()
            if self._output is not None:
                end = self._output.stop_speech()
            else:
                end = self._clock.media_time_now()
                self._silent_end = end
            self._timeline.cut(end)

    def close(self) -> None:
        self.stop()
        self._requests.put(None)
        self._worker.join(timeout=5)

    def _run(self) -> None:
        run_as_background_work()
        while (request := self._requests.get()) is not None:
            if request.cancel.is_set():
                continue
            try:
                self._speak(request)
            except TextInputError as exc:
                self._emit(SpeechFailed(request.id, str(exc)))
            except Exception as exc:  # the worker must survive anything one request does
                log.exception("speech request %d failed", request.id)
                self._emit(SpeechFailed(request.id, f"Speech failed: {exc}"))

    def _speak(self, request: _Request) -> None:
        rate = self.rate
        first = True
        gaps = 0
        end_pos = 0
        for segment in self._tts.synthesize(
            request.text, cancel=request.cancel, length_scale=1.0 / self.speech_rate
        ):
            for message in segment.notices:
                self._emit(SpeechNotice(request.id, message))
            synthesized_at = self._now()
            audio = resample(segment.audio, segment.sample_rate, rate)
            if self.volume != 1.0:
                audio = audio * np.float32(self.volume)
            track = VisemeTrack(segment.phonemes)
            self._wait_for_room(request, rate)
            with self._schedule_lock:
                if request.cancel.is_set():
                    break
                start_pos = self._place(audio, rate, contiguous=not first)
                if not first and start_pos > end_pos:
                    gaps += 1
                end_pos = start_pos + len(audio)
                self._timeline.schedule(track, start_pos / rate)
            if first:
                heard_at = self._clock.monotonic_at(start_pos / rate)
                self._emit(SpeechStarted(
                    request.id, heard_at - request.requested_at, synthesized_at - request.requested_at,
                ))
                first = False
        self._emit(SpeechFinished(request.id, end_pos / rate, request.cancel.is_set(), gaps))

    def _place(self, audio: np.ndarray, rate: int, contiguous: bool) -> int:
        if self._output is not None:
            return self._output.schedule(audio, contiguous=contiguous)
        earliest = self._clock.media_time_now() + SILENT_LEAD_S
        start = max(earliest, self._silent_end) if contiguous else earliest
        self._silent_end = start + len(audio) / rate
        return int(round(start * rate))

    def _wait_for_room(self, request: _Request, rate: int) -> None:
        while not request.cancel.is_set():
            if self._output is not None:
                ahead = (self._output.scheduled_end - self._output.read_pos) / rate
            else:
                ahead = self._silent_end - self._clock.media_time_now()
            if ahead < MAX_AHEAD_S:
                return
            request.cancel.wait(0.05)
