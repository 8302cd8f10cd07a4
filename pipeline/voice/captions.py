"""Captions from the speech timeline: the words of each sentence as the voice reads it,
timed by the voice's own word timings, laid out as broadcast captions, shown live a fixed
lead before they are heard (CaptionTrack) and written to WebVTT or SRT files.

The words shown are the sentence as typed (after cleaning: pipeline.text.input), with its
punctuation, timed by the words the voice reads, its normalized text: "$5" is shown over
"5 dollars", "3.5%" over "3.5 percent", "Dr." over "Doctor" (typed_words pairs them).

Alignment: the voice times phoneme words (WordTimed: runs of symbols between pauses),
and espeak reads words apart from how they are written: "25" is two phoneme words,
"of the" one ("ʌvðə"), "well-known" one. Each written word is phonemized on its own,
and the characters of those symbols (stress, length marks and pauses left out) are
matched in order against the symbols of the phoneme words as they arrive
(difflib.SequenceMatcher). Written and phoneme words linked by a match form a group;
every written word of a group is timed from the group's first phoneme word's start to
its last one's end, so each time written is a phoneme word's own. A written word with
nothing matched (a lone "—") joins the group before it; a phoneme word with nothing
matched extends the group before it (the "dot" of "Hello.World"); unmatched words on
both sides between two matches pair up as a group. Where fewer than half of the phoneme
symbols match (a reading nothing here predicts) once _WAIT_WORDS phoneme words are in,
the rest of the sentence is shown at once, timed from the first unaligned phoneme word
to the sentence's last, and logged.

Layout, as broadcast captions: at most MAX_LINE_CHARS characters a line (a longer word
has its own line) and MAX_LINES lines a block; a sentence starts a new block, and a
full block starts the next. Lines fill greedily, so words arriving later never move
the ones already shown.
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from pathlib import Path

from pipeline.core.events import SentenceTimed, SpeechEvent, SpeechFinished, VisemeTimed, WordTimed
from pipeline.core.visemes import LENGTH_MARKS, PAUSES, STRESS_MARKS
from pipeline.text.normalizer import word_pairs
from pipeline.voice.speaker import MAX_AHEAD_S
from pipeline.voice.streaming_tts import SentencePlan

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 42
MAX_LINES = 2
# A block stays up this long after its last word ends (unless the next one replaces it):
# long enough to finish reading a short sentence, short enough not to linger over silence.
HOLD_S = 1.5
DEFAULT_LEAD_S = 0.15
# Below this share of the phoneme symbols matched, an alignment is not trusted.
_MIN_MATCHED = 0.5
# While a sentence's words are still arriving, they are matched against the written
# words ahead of the cursor up to about this many times their symbols (plus a word):
# enough for a number read as several words, little enough that a common word is not
# matched to its twin further on.
_LOOKAHEAD_FACTOR = 2
# A reading that does not align while fewer of the sentence's phoneme words than this are
# in waits for the next: a word is read apart from how it sounds alone ("A" is "eɪ" alone,
# "ɐ" before "cat"), and the word after it, read as written, places it.
_WAIT_WORDS = 2
_IGNORED = frozenset(PAUSES) | frozenset(STRESS_MARKS) | frozenset(LENGTH_MARKS)
_CACHE_LIMIT = 4096
# A sentence over (its hold included) this long before the newest one starts is off the
# screen: the speaker schedules speech at most MAX_AHEAD_S ahead of what is heard.
_SHOWN_S = 2 * MAX_AHEAD_S

Phonemizer = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class CaptionWord:
    """A written word heard over [start, end) (seconds on the timeline it was fed in),
    on line `line` of caption block `block` (blocks count up from 0 across sentences)."""

    text: str
    start: float
    end: float
    block: int
    line: int


def _sounds(symbols: str) -> str:
    return "".join(s for s in symbols if s not in _IGNORED)


def align(written: Sequence[str], spoken: Sequence[str], complete: bool
          ) -> list[tuple[int, int, int, int]] | None:
    """Groups (first written, end written, first spoken, end spoken), half-open ranges
    in order, of written words' sounds (`written`) against phoneme words' (`spoken`),
    both as `_sounds` keeps them. The groups tile `spoken`; with `complete` they tile
    `written` too, else written words after the last match are left out (not spoken
    yet). None when fewer than _MIN_MATCHED of the spoken sounds match."""
    a_owner = [i for i, w in enumerate(written) for _ in w]
    b_owner = [j for j, w in enumerate(spoken) for _ in w]
    blocks = SequenceMatcher(None, "".join(written), "".join(spoken),
                             autojunk=False).get_matching_blocks()
    if not b_owner or sum(b.size for b in blocks) < _MIN_MATCHED * len(b_owner):
        return None
    groups: list[list[int]] = []  # [first written, last written, first spoken, last spoken]
    for a, b, size in blocks:
        for i, j in zip(a_owner[a:a + size], b_owner[b:b + size]):
            last_i, last_j = (groups[-1][1], groups[-1][3]) if groups else (-1, -1)
            if i == last_i or j == last_j:  # linked to the group before: it grows
                groups[-1][1], groups[-1][3] = i, j
                continue
            if i > last_i + 1 and j > last_j + 1:
                # Unmatched words on both sides in between: a group of their own.
                groups.append([last_i + 1, i - 1, last_j + 1, j - 1])
            elif groups:
                # Unmatched words on one side only: they go with the group before.
                groups[-1][1], groups[-1][3] = i - 1, j - 1
            groups.append([i, i, j, j])
    groups[0][0] = groups[0][2] = 0  # unmatched words before the first match join it
    last = groups[-1]
    if complete and last[1] + 1 < len(written) and last[3] + 1 < len(spoken):
        groups.append([last[1] + 1, len(written) - 1, last[3] + 1, len(spoken) - 1])
    elif complete:
        last[1] = len(written) - 1
    groups[-1][3] = len(spoken) - 1
    return [(g[0], g[1] + 1, g[2], g[3] + 1) for g in groups]


def typed_words(typed: str, said: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The typed words of a sentence and, for each, the half-open range of the words of
    `said` (its normalized text, what the voice reads) that say it: "$5" is said by
    "5 dollars". Words typed and said alike pair one to one; a typed word with nothing
    said for it shares the range before it (the first, the one after it), and words said
    with nothing typed for them join the typed word before (the first, after)."""
    words: list[str] = []
    ranges: list[tuple[int, int]] = []
    at = 0  # said words so far
    for typed_part, said_part in word_pairs(typed, said):
        part, count = typed_part.split(), len(said_part.split())
        if part:
            words += part
            ranges += [(at if ranges else 0, at + count)] * len(part)
        elif count and ranges:
            ranges[-1] = (ranges[-1][0], at + count)
        at += count
    for k in range(len(ranges)):
        if ranges[k][0] == ranges[k][1]:  # nothing said for it
            ranges[k] = ranges[k - 1] if k else next((r for r in ranges if r[0] < r[1]), (0, 0))
    return words, ranges


@dataclass(slots=True)
class _Sentence:
    tokens: list[str]  # the words said, which the voice's words are aligned with
    sounds: list[str | None]  # each token's sounds on its own, filled as needed
    times: list[tuple[float, float] | None]  # each token's
    spoken: list[tuple[str, float, float]]  # phoneme words: sounds, start, end
    typed: list[str]  # the words shown
    says: list[tuple[int, int]]  # the tokens that say each typed word (typed_words)
    placement: list[tuple[int, int]]  # (block, line) of each typed word
    shown: list[str]  # each typed word's block text up to and including it
    cursor: tuple[int, int] = (0, 0)  # first token and phoneme word not final
    fallback: bool = False
    done: bool = False

    @property
    def end(self) -> float:
        """Where its last word timed ends (-inf for none)."""
        return max((times[1] for times in self.times if times is not None), default=-math.inf)

    def typed_times(self) -> list[tuple[float, float] | None]:
        """Each typed word's time: from the first of the tokens saying it, once timed, to
        the last of them timed."""
        out: list[tuple[float, float] | None] = []
        for first, end in self.says:
            timed = [times for times in self.times[first:end] if times is not None]
            out.append((self.times[first][0], timed[-1][1])
                       if timed and self.times[first] is not None else None)
        return out


class CaptionTrack:
    """Caption text by media time, fed as the speaker publishes a speech's sentences
    and words (`on_event`, or `sentence` / `word` / `finish`), asked by the display
    for what to show (`text_at`).

    Feed it on one thread, the one the voice phonemizes on (a subscriber to the
    speaker's events runs on the speaker's own): `phonemize` calls espeak. `text_at`
    may be called from any other thread, lock-free: it reads one tuple the feeder
    swaps, and allocates nothing.

    Invariants: a word is shown from `start - lead_s` until the next word shown
    replaces it or HOLD_S after its end; shown times never decrease; a sentence
    scheduled at `s` replaces every word heard from `s` on (speech never overlaps).
    Sentences off the screen for good (_SHOWN_S) are forgotten, unless `keep_all`
    (for a file: `words`); either way each word costs the same.
    """

    # The speaker's events on_event takes: what a subscriber feeding it subscribes to.
    EVENTS = (WordTimed, SentenceTimed, SpeechFinished, VisemeTimed)

    def __init__(self, phonemize: Phonemizer, lead_s: float = DEFAULT_LEAD_S,
                 keep_all: bool = False) -> None:
        if lead_s < 0:
            raise ValueError("the captions lead must not be negative")
        self._phonemize = phonemize
        self._lead_s = lead_s
        self._keep_all = keep_all
        self._cache: dict[str, str] = {}
        self._sentences: list[_Sentence] = []
        # A plan's words announced by the speaker, not aligned yet (on_event).
        self._held_words: list[tuple[str, float, float]] = []
        self._shown_from = 0  # sentences before this one are off the screen
        self._next_block = 0
        self._request: int | None = None  # the request of the latest speaker event
        # (request, media time) of a Stop: that request's events still in flight then
        # (scheduled from that time on) are never heard.
        self._stopped: tuple[int, float] | None = None
        # What text_at reads: show times (ascending), texts, hide times, per timed word.
        self._state: tuple[tuple[float, ...], tuple[str, ...], tuple[float, ...]] = ((), (), ())

    @property
    def lead_s(self) -> float:
        """How long before it is heard a word is shown; fixed for the track's life (the
        published show times hold it), so a new lead takes a new track."""
        return self._lead_s

    def text_at(self, t: float) -> str:
        """The caption shown at media time `t`: the current block's lines ("\\n"
        between them) up to its last word shown by then, or "" for none."""
        shows, texts, hides = self._state
        k = bisect_right(shows, t) - 1
        if k < 0 or t >= hides[k]:
            return ""
        return texts[k]

    def on_event(self, event: SpeechEvent) -> None:
        """Feed one of the speaker's events (others are ignored). A plan's words are
        aligned together, as `plan` aligns them: the speaker announces them one after
        another and then the plan's visemes (Speaker._announce), so they are held until
        the next event that is not a word (a VisemeTimed, a sentence, the end) or a cut.
        Aligned one at a time, a reading that only the words after it explain ("to a",
        read "tʊ ɐ") made the rest of the sentence fall back to showing at once."""
        if not isinstance(event, self.EVENTS):
            return
        stopped = self._stopped
        if stopped is not None and event.request == stopped[0]:
            if isinstance(event, SpeechFinished):
                self._stopped = None
            elif event.start >= stopped[1]:
                return
        elif stopped is not None and isinstance(event, SentenceTimed):
            # Another request speaks: the Stop is behind it. (A new Speaker numbers its
            # requests from 1 again; the stopped one has finished by then.)
            self._stopped = None
        self._request = event.request
        if isinstance(event, WordTimed):
            self._held_words.append((event.phonemes, event.start, event.end))
            return
        self._words_held()
        if isinstance(event, SentenceTimed):
            self.sentence(event.text, event.start, event.typed)
        elif isinstance(event, SpeechFinished):
            self.finish()

    def plan(self, plan: SentencePlan, start: float) -> None:
        """Feed a plan of the voice's stream heard from `start` on, as the speaker
        announces it (its sentence, if it starts one, then its words, aligned together)."""
        if plan.text:
            self.sentence(plan.text, start, plan.typed)
        self._words([(w.phonemes, start + w.start, start + w.end) for w in plan.words])

    def sentence(self, text: str, start: float, typed: str = "") -> None:
        """A sentence whose words follow (`word`), heard from `start` on: `text` as the
        voice reads it (normalized), shown as `typed` ("" : as `text`)."""
        self.cut(start)
        tokens = text.split()
        if not tokens:
            return
        shown_words, says = typed_words(typed or text, text)
        placement, shown = self._lay_out(shown_words)
        self._sentences.append(_Sentence(tokens, [None] * len(tokens), [None] * len(tokens), [],
                                         shown_words, says, placement, shown))
        sentences = self._sentences
        while (self._shown_from < len(sentences) - 1
               and sentences[self._shown_from].end + HOLD_S < start - _SHOWN_S):
            self._shown_from += 1
        if not self._keep_all and self._shown_from:
            del sentences[:self._shown_from]
            self._shown_from = 0

    def word(self, phonemes: str, start: float, end: float) -> None:
        """The next phoneme word of the current sentence, heard over [start, end)."""
        self._words(((phonemes, start, end),))

    def _words_held(self) -> None:
        if self._held_words:
            self._words(self._held_words)
            self._held_words = []

    def _words(self, words: Sequence[tuple[str, float, float]]) -> None:
        """The current sentence's next phoneme words (symbols, start, end), aligned and
        published once for all of them: a plan's words come together, and aligning and
        publishing after each of them cost 1.5x the CPU time a stream and made 15 sentences
        in 207 streams fall back (bench/results/caption_words_2vcpu_xeon.json)."""
        sentence = self._sentences[-1] if self._sentences else None
        if sentence is None or sentence.done or not words:
            return
        sentence.spoken.extend((_sounds(phonemes), start, end) for phonemes, start, end in words)
        self._align(sentence, complete=False)
        self._publish()

    def finish(self) -> None:
        """The speech's words are all fed: the last sentence's alignment is final."""
        if self._sentences and not self._sentences[-1].done:
            self._close(self._sentences[-1])
            self._publish()

    def cut(self, t: float) -> None:
        """Speech stops at media time `t`: words heard from `t` on are dropped, one
        being heard then ends at `t`. The current sentence takes no more words, and its
        written words the voice never reached stay untimed (closing it as complete would
        give them the last spoken word's time, as for a reading nothing predicted)."""
        self._words_held()
        if self._sentences and not self._sentences[-1].done:
            last = self._sentences[-1]
            self._align(last, complete=False)
            last.done = True
        for s in self._sentences[self._shown_from:]:  # those before ended long before t
            for i, times in enumerate(s.times):
                if times is not None and times[0] >= t:
                    s.times[i] = None
                elif times is not None and times[1] > t:
                    s.times[i] = (times[0], t)
        self._publish()

    def stop(self, t: float) -> None:
        """The user stopped the speech at media time `t`: `cut(t)`, and the events of the
        stopped speech the speaker had sent before the Stop but that arrive after it
        (a sentence or words scheduled from `t` on) are dropped: they are never heard."""
        if self._request is not None:
            self._stopped = (self._request, t)
        self.cut(t)

    def words(self) -> list[CaptionWord]:
        """Every word timed and kept, in order, as typed."""
        return [CaptionWord(word, times[0], times[1], *s.placement[i])
                for s in self._sentences
                for i, (word, times) in enumerate(zip(s.typed, s.typed_times()))
                if times is not None]

    def _lay_out(self, tokens: list[str]) -> tuple[list[tuple[int, int]], list[str]]:
        """Each token's (block, line) and its block's text up to it, the sentence
        starting a block of its own."""
        block, line, width = self._next_block, 0, 0
        placement: list[tuple[int, int]] = []
        shown: list[str] = []
        text = ""
        for token in tokens:
            if width and width + 1 + len(token) > MAX_LINE_CHARS:
                line, width = line + 1, 0
                if line == MAX_LINES:
                    block, line, text = block + 1, 0, ""
            if width:
                text, width = f"{text} {token}", width + 1 + len(token)
            else:
                text, width = (f"{text}\n{token}" if text else token), len(token)
            placement.append((block, line))
            shown.append(text)
        self._next_block = block + 1
        return placement, shown

    def _sounds_of(self, s: _Sentence, i: int) -> str:
        sounds = s.sounds[i]
        if sounds is None:
            token = s.tokens[i]
            sounds = self._cache.get(token)
            if sounds is None:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                sounds = self._cache[token] = _sounds(self._phonemize(token))
            s.sounds[i] = sounds
        return sounds

    def _close(self, sentence: _Sentence) -> None:
        self._align(sentence, complete=True)
        sentence.done = True

    def _align(self, s: _Sentence, complete: bool) -> None:
        first_token, first_word = s.cursor
        spoken = s.spoken[first_word:]
        if not spoken:
            return
        groups = None
        if not s.fallback:
            end = first_token
            if complete:
                end = len(s.tokens)
            else:
                budget = _LOOKAHEAD_FACTOR * sum(len(w[0]) for w in spoken)
                total = 0
                while end < len(s.tokens) and total <= budget:
                    total += len(self._sounds_of(s, end))
                    end += 1
                end = min(len(s.tokens), end + 1)  # one more, for words read as one
            written = [self._sounds_of(s, i) for i in range(first_token, end)]
            groups = align(written, [w[0] for w in spoken], complete)
            if groups is None and not complete and len(spoken) < _WAIT_WORDS:
                return  # the next words may explain the reading
            if groups is None:
                s.fallback = True
                # The sentence as typed and shown: the voice's symbols mean nothing to a
                # user, and the log is theirs to read.
                log.info("captions: could not time the words of %r by the voice's reading of "
                         "them; showing the rest of the sentence at once", " ".join(s.typed))
        if groups is None:
            # The rest of the sentence at once, over the phoneme words not aligned.
            for i in range(first_token, len(s.tokens)):
                s.times[i] = (spoken[0][1], spoken[-1][2])
            return
        for t0, t1, w0, w1 in groups:
            for i in range(first_token + t0, first_token + t1):
                s.times[i] = (spoken[w0][1], spoken[w1 - 1][2])
        if not complete:
            # The last group may still grow (a number whose words are still arriving,
            # a reading the next words explain): it is aligned again with them.
            t0, _, w0, _ = groups[-1]
            s.cursor = (first_token + t0, first_word + w0)

    def _publish(self) -> None:
        shows: list[float] = []
        texts: list[str] = []
        hides: list[float] = []
        for s in self._sentences[self._shown_from:]:
            for i, times in enumerate(s.typed_times()):
                if times is not None:
                    shows.append(times[0] - self._lead_s)
                    texts.append(s.shown[i])
                    hides.append(times[1] + HOLD_S)
        self._state = (tuple(shows), tuple(texts), tuple(hides))


# Files: the true times (no lead: a file says when each word is heard; a player that
# shows captions early applies its own offset), rounded to the millisecond, the formats'
# resolution.

class CaptionFileError(ValueError):
    """A captions path with a suffix that names no captions format; says which do."""


def caption_format(path: Path) -> str:
    """"vtt" or "srt", from `path`'s suffix; CaptionFileError for anything else."""
    suffix = path.suffix.lower()
    if suffix not in (".vtt", ".srt"):
        raise CaptionFileError(f"{path}: captions are written as WebVTT (.vtt) or SRT (.srt), "
                               "chosen by the file's suffix")
    return suffix[1:]


def caption_blocks(words: Sequence[CaptionWord], until: float = math.inf
                   ) -> list[tuple[float, float, list[CaptionWord]]]:
    """(start, end, words) per block: from its first word's start until the next block's
    first start, HOLD_S after its last word's end or `until` (where the sound ends),
    whichever comes first."""
    blocks: list[list[CaptionWord]] = []
    for w in words:
        if blocks and blocks[-1][0].block == w.block:
            blocks[-1].append(w)
        else:
            blocks.append([w])
    out = []
    for k, block in enumerate(blocks):
        end = min(block[-1].end + HOLD_S, until)
        if k + 1 < len(blocks):
            end = min(end, blocks[k + 1][0].start)
        out.append((block[0].start, end, block))
    return out


def _ms(t: float) -> int:
    return round(t * 1000)


def _clock(ms: int, separator: str) -> str:
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    seconds, millis = divmod(rest, 1000)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}{separator}{millis:03d}"


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webvtt(words: Sequence[CaptionWord], until: float = math.inf) -> str:
    """A WebVTT file: one cue per block, its words revealed by inline timestamps.

    A cue per block with `<hh:mm:ss.mmm>` before each later word is the karaoke form
    WebVTT defines: every player shows the block whole and readable, and those that
    honour the timestamps (browsers' :past / :future styling) reveal it word by word;
    a cue per word would flash single words in players that show one cue at a time.
    A timestamp is written only where the time moves on (words sharing a phoneme word,
    "of the", share one), and never at or before the cue's start or at its end.
    """
    out = ["WEBVTT", ""]
    for n, (start, end, block) in enumerate(caption_blocks(words, until), 1):
        start_ms, end_ms = _ms(start), _ms(end)
        last_ms = start_ms
        lines: list[list[str]] = []
        for w in block:
            while len(lines) <= w.line:
                lines.append([])
            text = _vtt_escape(w.text)
            ms = _ms(w.start)
            if last_ms < ms < end_ms:
                text = f"<{_clock(ms, '.')}>{text}"
                last_ms = ms
            lines[-1].append(text)
        out += [str(n), f"{_clock(start_ms, '.')} --> {_clock(end_ms, '.')}",
                *(" ".join(line) for line in lines), ""]
    return "\n".join(out)


# SRT has no escapes, and a line of a cue that reads as a timing line ("00:00:01,000 -->
# 00:00:02,000", typed words) starts a new cue in its readers (FFmpeg took the line and
# one before it that reads as a cue's number out of the cue): an arrow in a word is
# written with a word joiner, which shows nothing, inside it.
_SRT_ARROW = "-\u2060->"


def srt(words: Sequence[CaptionWord], until: float = math.inf) -> str:
    """An SRT file: one cue per block (SRT has no timing inside a cue)."""
    out = []
    for n, (start, end, block) in enumerate(caption_blocks(words, until), 1):
        lines: list[list[str]] = []
        for w in block:
            while len(lines) <= w.line:
                lines.append([])
            lines[-1].append(w.text.replace("-->", _SRT_ARROW))
        out += [str(n), f"{_clock(_ms(start), ',')} --> {_clock(_ms(end), ',')}",
                *(" ".join(line) for line in lines), ""]
    return "\n".join(out)


def caption_document(words: Sequence[CaptionWord], fmt: str, duration: float,
                     origin: float = 0.0) -> str:
    """The file text of `words` in format `fmt` ("vtt" or "srt", caption_format's) for
    `duration` seconds of sound, their times counted from `origin` (the media time the
    sound starts at)."""
    if origin:
        words = [replace(w, start=w.start - origin, end=w.end - origin) for w in words]
    return (webvtt if fmt == "vtt" else srt)(words, duration)

