"""One client's speech for the API: the voice streamed on a thread of its own, each plan's
cues ahead of its audio, handed to the server's loop through a bounded pipe.

What the loop gets (`await next()`), in order:

- ``Cues`` (or a future of them): a plan's visemes and words in the stream's own time
  (seconds from its first sample), before any of that plan's audio. Timing the written
  words takes ~0.5 ms a plan (each word phonemized on its own; 1.42 ms a stream of ~3
  plans, bench/results/caption_words_2vcpu_xeon.json): with a `cues_worker` that runs
  beside the making of the plan's first chunk instead of before it;
- ``bytes``: 16-bit PCM audio, mono, at `sample_rate`, as it is made;
- ``ApiFault``: a piece of text with nothing to speak (the stream goes on);
- ``Finished``: the end, once every text given has been spoken (not after a cancel:
  nobody reads then).

Text comes whole (`say`), or in pieces (`push`, then `flush` or `finish`): pieces are
held until a sentence is complete, as Engine.append holds them (pipeline/text/
incremental.py says the rule), and each text released is spoken right after the one
before in the same stream: its first sample follows the last one's at once, so pieces
join with no gap beyond the pause the voice itself makes between sentences.

The thread never runs more than `ahead_s` of audio ahead of real time from the first
byte: a client plays in real time, and audio made sooner than that only takes the CPU
from streams whose next chunk is due. Its pipe holds PIPE_ITEMS items, so a client that
does not read holds at most that much here (and its socket's buffer) while the thread
waits. The latency mode is read at every chunk: `switch_mode` applies to the next.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from app.api.protocol import ApiFault
from pipeline.audio.pcm import pcm16
from pipeline.core.started_threads import StartedThreads
from pipeline.text.incremental import SentencePieces
from pipeline.text.input import TextInputError
from pipeline.voice.captions import CaptionTrack
from pipeline.voice.speaker import MAX_AHEAD_S
from pipeline.voice.streaming_tts import LATENCY_MODES, SentencePlan, StreamingTTS
from pipeline.voice.viseme_track import VisemeTrack

log = logging.getLogger(__name__)

# Items waiting for the loop: chunks are 3-64 frames (35-740 ms), so this holds seconds
# of audio, enough that a reading client never waits on the pipe.
PIPE_ITEMS = 32
# How often a waiting thread looks at its cancel flag.
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Cues:
    visemes: list[dict]
    words: list[dict]

    def message(self) -> dict:
        return {"type": "cues", "visemes": self.visemes, "words": self.words}


@dataclass(frozen=True, slots=True)
class Finished:
    samples: int
    sample_rate: int

    def message(self) -> dict:
        return {"type": "end", "samples": self.samples,
                "duration": round(self.samples / self.sample_rate, 6)}


class _Pipe:
    """Thread → loop, bounded; put() waits for room (or the cancel), get() awaits."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: queue.Queue = queue.Queue(PIPE_ITEMS)
        self._ready = asyncio.Event()

    def put(self, item, cancel: threading.Event) -> bool:
        while not cancel.is_set():
            try:
                self._items.put(item, timeout=_POLL_S)
            except queue.Full:
                continue
            try:
                self._loop.call_soon_threadsafe(self._ready.set)
            except RuntimeError:  # the loop is gone: nobody reads any more
                return False
            return True
        return False

    async def get(self):
        while True:
            try:
                return self._items.get_nowait()
            except queue.Empty:
                self._ready.clear()
            try:  # an item put between the first look and the clear
                return self._items.get_nowait()
            except queue.Empty:
                await self._ready.wait()


class SpeechStream:
    """`voice(seed)` makes the stream's own StreamingTTS (the engines are shared: see
    pipeline/voice/streaming_tts.py); the stream closes it at its end. It is made on one
    of `runner`'s threads, for as long as it lasts. Call every method but `next` from the
    loop's thread or any other one; `next` from the loop."""

    def __init__(self, voice: Callable[[int | None], StreamingTTS], *, mode: str,
                 length_scale: float, seed: int | None, loop: asyncio.AbstractEventLoop,
                 runner: StartedThreads, ahead_s: float = MAX_AHEAD_S,
                 now: Callable[[], float] = time.monotonic,
                 cues_worker: StartedThreads | None = None, with_cues: bool = True) -> None:
        self._tts = voice(seed)
        self.sample_rate = self._tts.sample_rate
        self.mode = mode
        self._length_scale = length_scale
        self._ahead_s = ahead_s
        self._now = now
        self._pipe = _Pipe(loop)
        self._texts: queue.Queue[str | None] = queue.Queue()
        self._pieces = SentencePieces()
        self._cancel = threading.Event()
        self._finished = False
        self._cues_worker = cues_worker
        self._with_cues = with_cues  # an audio file (OpenAI's endpoint) has no use for them
        self._captions = CaptionTrack(self._tts.phonemes_of, keep_all=True)
        self._words_sent = 0
        runner.submit(self._run)

    # -- text in --------------------------------------------------------------------

    def say(self, text: str) -> None:
        """Speak `text`, then end."""
        self._texts.put(text)
        self.finish()

    def push(self, piece: str) -> None:
        """A piece of a longer text: spoken once what it completes is complete."""
        ready = self._pieces.push(piece)
        if ready:
            self._texts.put(ready)

    def flush(self) -> None:
        """Speak what is held now, complete or not; more text may follow."""
        ready = self._pieces.flush()
        if ready:
            self._texts.put(ready)

    def finish(self) -> None:
        """No more text: what is held is spoken, then the stream ends."""
        if not self._finished:
            self._finished = True
            self.flush()
            self._texts.put(None)

    def switch_mode(self, mode: str) -> None:
        self.mode = mode

    def cancel(self) -> None:
        """Stop making audio (the client went away); the thread ends within _POLL_S or a
        chunk's synthesis."""
        self._cancel.set()
        self._texts.put(None)

    @property
    def held(self) -> str:
        return self._pieces.held

    async def next(self):
        item = await self._pipe.get()
        if not isinstance(item, Future):
            return item
        try:
            return await asyncio.wrap_future(item)
        except Exception as exc:  # the stream goes on without these cues, saying so
            log.exception("an API stream's cues failed")
            return ApiFault("unavailable", f"The cues of a sentence failed: {exc}")

    # -- the thread -----------------------------------------------------------------

    def _run(self) -> None:
        samples = 0
        first_byte: float | None = None
        try:
            while not self._cancel.is_set():
                text = self._texts.get()
                if text is None:
                    break
                try:
                    stream = self._tts.stream(text, lambda: LATENCY_MODES[self.mode],
                                              self._cancel, self._length_scale)
                    for item in stream:
                        if isinstance(item, SentencePlan):
                            if not self._with_cues:
                                continue
                            offset = samples / self.sample_rate
                            cues = (self._cues(item, offset) if self._cues_worker is None else
                                    self._cues_worker.submit(self._cues, item, offset))
                            if not self._pipe.put(cues, self._cancel):
                                return
                            continue
                        if first_byte is None:
                            first_byte = self._now()
                        self._wait_for_room(samples, first_byte)
                        samples += len(item.samples)
                        if not self._pipe.put(pcm16(item.samples), self._cancel):
                            return
                except TextInputError as exc:
                    if not self._pipe.put(ApiFault("nothing_to_speak", str(exc)), self._cancel):
                        return
        except Exception as exc:  # the stream must end with a reply, whatever broke
            log.exception("an API speech stream failed")
            self._pipe.put(ApiFault("unavailable", f"Speech failed: {exc}"), self._cancel)
        finally:
            self._tts.close()
        # Once cancelled nobody reads: the end is put only for a reader.
        self._pipe.put(Finished(samples, self.sample_rate), self._cancel)

    def _cues(self, plan: SentencePlan, offset: float) -> Cues:
        """The plan's cues, heard from `offset` in the stream. Called for each plan in
        order, by one thread at a time (the stream's, or the one cues worker)."""
        captions = self._captions
        captions.plan(plan, offset)
        if plan.ends_sentence:
            captions.finish()
        words = captions.words()
        cues = Cues(_visemes(plan, offset), [_word(w) for w in words[self._words_sent:]])
        self._words_sent = len(words)
        return cues

    def _wait_for_room(self, samples: int, first_byte: float) -> None:
        while not self._cancel.is_set():
            ahead = samples / self.sample_rate - (self._now() - first_byte)
            if ahead <= self._ahead_s:
                return
            self._cancel.wait(min(_POLL_S, ahead - self._ahead_s))


def _visemes(plan: SentencePlan, offset: float) -> list[dict]:
    return [{"start": round(offset + cue.start, 6), "end": round(offset + cue.end, 6),
             "value": cue.value} for cue in VisemeTrack(plan.phonemes).cues()]


def _word(word) -> dict:
    return {"start": round(word.start, 6), "end": round(word.end, 6), "word": word.text}
