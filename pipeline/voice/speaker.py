"""The speech stage: text in; audio on the output timeline and visemes on the speech
timeline, both stamped in media time before they play.

A worker thread pulls the streaming voice chunk by chunk: each sentence's plan (its exact
phoneme timeline) goes on the media clock with its first audio, right after the previous
sentence, and every chunk is written at its exact place behind it. Long text streams with
bounded memory; Stop and barge-in cancel between chunks and silence what is scheduled.

Text can also be appended to what is being said (``append``): it is spoken right after,
sample-contiguous with it when it comes in time, as one speech would be. Text arriving
in pieces (an LLM's tokens) is held until a sentence is complete (SentencePieces).

Besides the speech's start and end, each sentence, word and viseme is published with
the media time it will be heard at, as soon as it is scheduled (ahead of hearing: what
captions and other apps follow).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.audio.output import AudioOutput
from pipeline.audio.resample import StreamResampler
from pipeline.core.clock import MediaClock
from pipeline.core.events import (
    SentenceTimed,
    SpeechEvent,
    SpeechFailed,
    SpeechFinished,
    SpeechNotice,
    SpeechStarted,
    VisemeTimed,
    WordTimed,
)
from pipeline.core.modes import DEFAULT_MODE
from pipeline.text.incremental import SentencePieces
from pipeline.text.input import TextInputError
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.start_lead import StartLead, floor_for
from pipeline.voice.streaming_tts import (
    LATENCY_MODES,
    LatencyMode,
    SentencePlan,
    StreamingTTS,
)
from pipeline.voice.viseme_track import VisemeTrack

log = logging.getLogger(__name__)

# How far synthesis may run ahead of playback: enough to ride out a slow sentence,
# little enough that Stop never throws away minutes of work.
MAX_AHEAD_S = 8.0
# Without an audio device, speech starts this long after the request is scheduled.
SILENT_LEAD_S = 0.05


@dataclass(slots=True)
class _Request:
    id: int
    text: str
    requested_at: float
    cancel: threading.Event
    append: bool = False  # continues the speech before it instead of interrupting it
    stops: int = 0  # Speaker._stops when it was made: a Stop since ends what it continues


class Speaker:
    """Runs speech requests one at a time on its own worker thread.

    With `output` None (no audio device) speech is scheduled on `clock` alone: the
    mouth still moves in time, silently.
    """

    def __init__(
        self,
        tts: StreamingTTS,
        timeline: SpeechTimeline,
        output: AudioOutput | None,
        clock: MediaClock,
        on_event: Callable[[SpeechEvent], None],
        *,
        volume: float = 1.0,
        speech_rate: float = 1.0,
        mode: LatencyMode = LATENCY_MODES[DEFAULT_MODE],
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tts = tts
        self._timeline = timeline
        self._output = output
        self._clock = clock
        self._emit = on_event
        self.volume = volume
        self.speech_rate = speech_rate
        # Read by the stream at every chunk: a switch while speaking applies to the next.
        self.mode = mode
        self._now = now
        self._requests: queue.Queue[_Request | None] = queue.Queue()
        # Requests queued or speaking that a Stop must cancel (the caller's thread's).
        self._live: list[_Request] = []
        self._next_id = 0
        self._stops = 0
        self._pieces = SentencePieces()
        # The worker's: where the last speech's sound ends (output samples), and the Stop
        # count it was scheduled under, for a request that continues it.
        self._tail: tuple[int, int] | None = None
        # Held while checking for cancellation and scheduling, and while stopping, so a
        # sentence can never be scheduled after the Stop that should have dropped it.
        self._schedule_lock = threading.Lock()
        self._silent_end = 0.0
        # The jitter buffer before each speech's first sound (pipeline/voice/start_lead.py).
        self.start_lead = StartLead(floor_for(tts.on_device))
        self._finished_id = 0  # the last request the worker is done with
        self._heard_until = 0.0  # media time at which the last speech's sound ends
        self._worker = threading.Thread(target=self._run, name="speaker", daemon=True)
        self._worker.start()

    @property
    def rate(self) -> int:
        return self._output.sample_rate if self._output is not None else self._tts.sample_rate

    @property
    def idle(self) -> bool:
        """Nothing being synthesised, waiting or still to be heard."""
        # Each counter has one writer (say's caller, the worker), so no lock is needed.
        return (self._finished_id == self._next_id
                and self._clock.media_time_now() >= self._heard_until)

    def say(self, text: str) -> int:
        """Speak `text`, interrupting whatever is being said (barge-in). Returns its id."""
        self.stop()
        return self._queue(text, append=False)

    def append(self, text: str, final: bool = True) -> int | None:
        """Speak `text` after what is being said, gap-free when it comes before that ends
        (or now, if nothing is). With ``final`` False, `text` is a piece of a longer
        text: only the sentences it completes are queued, the rest waits for the next
        piece. Returns the id of the request queued, None if `text` only was held."""
        ready = self._pieces.push(text)
        if final:
            ready = " ".join(t for t in (ready, self._pieces.flush()) if t)
        return self._queue(ready, append=True) if ready else None

    def _queue(self, text: str, append: bool) -> int:
        self._next_id += 1
        request = _Request(self._next_id, text, self._now(), threading.Event(), append, self._stops)
        self._live = [r for r in self._live if r.id > self._finished_id] + [request]
        self._requests.put(request)
        return request.id

    def stop(self) -> None:
        """Silence speech now (short fade) and let the mouth close; text queued or held
        to be appended is dropped too."""
        self._pieces.clear()
        with self._schedule_lock:
            self._stops += 1
            for request in self._live:
                request.cancel.set()
            self._live = []
            if self._output is not None:
                end = self._output.stop_speech()
            else:
                end = self._clock.media_time_now()
                self._silent_end = end
            self._timeline.cut(end)
            self._heard_until = min(self._heard_until, end)

    def close(self) -> None:
        self.stop()
        self._requests.put(None)
        self._worker.join(timeout=5)

    def _run(self) -> None:
        # The first resampling in a process costs ~16 ms more (numpy sets up its einsum
        # path): paid here, not by the first chunk of the first speech.
        if self._tts.sample_rate != self.rate:
            StreamResampler(self._tts.sample_rate, self.rate).process(
                np.zeros(self._tts.hop * 4, np.float32), last=True)
        while (request := self._requests.get()) is not None:
            try:
                if not request.cancel.is_set():
                    self._speak(request)
            except TextInputError as exc:
                self._emit(SpeechFailed(request.id, str(exc)))
            except Exception as exc:  # the worker must survive anything one request does
                log.exception("speech request %d failed", request.id)
                self._emit(SpeechFailed(request.id, f"Speech failed: {exc}"))
            finally:
                self._finished_id = request.id

    def _speak(self, request: _Request) -> None:
        rate = self.rate
        started = False
        gaps = underruns = 0
        plan: SentencePlan | None = None
        plan_start = written = 0
        end_pos = None
        # Continuing: the first plan follows the last speech's sound if it is still to
        # be heard, as a speech's second sentence follows its first (a gap, counted, if
        # it cannot); after a Stop, or once that sound is over, it starts afresh.
        if (request.append and self._tail is not None and self._tail[1] == request.stops
                and self._tail[0] / rate > self._clock.media_time_now()):
            end_pos = self._tail[0]
        resampler: StreamResampler | None = None
        words = 0  # of the sentence being read
        least_slack: int | None = None  # samples
        stream = self._tts.stream(
            request.text, mode=lambda: self.mode, cancel=request.cancel,
            length_scale=1.0 / self.speech_rate,
        )
        for item in stream:
            if isinstance(item, SentencePlan):
                for message in item.notices:
                    self._emit(SpeechNotice(request.id, message))
                plan, written, plan_start = item, 0, -1
                resampler = (StreamResampler(item.sample_rate, rate)
                             if item.sample_rate != rate else None)
                continue
            audio = item.samples if resampler is None else resampler.process(item.samples, item.last)
            if self.volume != 1.0:
                audio = audio * np.float32(self.volume)
            self._wait_for_room(request, rate)
            scheduled = None
            with self._schedule_lock:
                if request.cancel.is_set():
                    break
                if plan_start < 0:
                    # A plan's mouth shapes go on the media clock with its first audio:
                    # right after the previous plan, or as soon as possible if synthesis
                    # fell behind (a pause, not a glitch).
                    plan_start = self._start_of_plan(end_pos, lead=0.0 if started else self.start_lead.lead_s)
                    if end_pos is not None and plan_start > end_pos:
                        gaps += 1
                    track = VisemeTrack(plan.phonemes)
                    self._timeline.schedule(track, plan_start / rate)
                    # As many samples as the resampler makes of the plan (it rounds up).
                    end_pos = plan_start + -(-plan.total_samples * rate // plan.sample_rate)
                    scheduled = track
                if started and self._output is not None:
                    slack = plan_start + written - self._output.earliest_pos()
                    least_slack = slack if least_slack is None else min(least_slack, slack)
                dropped = self._write(plan_start + written, audio)
                if dropped:
                    underruns += 1
                written += len(audio)
            if scheduled is not None:
                # Published outside the lock: subscribers run on this thread, and a Stop
                # waiting for the lock must not wait for them too.
                words = self._announce(request.id, plan, scheduled, plan_start / rate, words)
            if not started:
                started = True
                heard_at = self._clock.monotonic_at(plan_start / rate)
                self._emit(SpeechStarted(
                    request.id, heard_at - request.requested_at, self._now() - request.requested_at,
                ))
        least_slack_s = None if least_slack is None else least_slack / rate
        self.start_lead.adapt(underruns + gaps, least_slack_s)
        if end_pos is not None and not request.cancel.is_set():
            self._heard_until = end_pos / rate
        self._tail = None if end_pos is None or request.cancel.is_set() else (end_pos, request.stops)
        self._emit(SpeechFinished(
            request.id, (end_pos or 0) / rate, request.cancel.is_set(), gaps, underruns,
            least_slack_s,
        ))

    def _announce(self, request: int, plan: SentencePlan, track: VisemeTrack, start: float,
                  words: int) -> int:
        """Publish the plan's sentence, words and visemes at their media times; returns
        the count of the sentence's words so far (``words`` before this plan)."""
        if plan.text:
            self._emit(SentenceTimed(request, plan.text, start, plan.typed))
            words = 0
        for word in plan.words:
            self._emit(WordTimed(request, words, word.phonemes, start + word.start, start + word.end))
            words += 1
        for cue in track.cues():
            self._emit(VisemeTimed(request, cue.value, start + cue.start, start + cue.end))
        return words

    def _start_of_plan(self, previous_end: int | None, lead: float) -> int:
        rate = self.rate
        if self._output is not None:
            start = self._output.earliest_pos() + round(lead * rate)
        else:
            start = int(round((self._clock.media_time_now() + SILENT_LEAD_S + lead) * rate))
        return start if previous_end is None else max(start, previous_end)

    def _write(self, pos: int, audio: np.ndarray) -> int:
        if self._output is None:
            self._silent_end = (pos + len(audio)) / self.rate
            return 0
        return self._output.write_at(pos, audio)

    def _wait_for_room(self, request: _Request, rate: int) -> None:
        while not request.cancel.is_set():
            if self._output is not None:
                ahead = (self._output.scheduled_end - self._output.read_pos) / rate
            else:
                ahead = self._silent_end - self._clock.media_time_now()
            if ahead < MAX_AHEAD_S:
                return
            request.cancel.wait(0.05)
