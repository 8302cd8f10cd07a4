"""Text that arrives in pieces (an LLM's tokens, a chat relay) turned into text the voice
can speak: whole sentences, released as soon as each is known to be complete.

A sentence end is only known once what follows it has arrived: "3." may go on as
"3.14", "Mr" as "Mr." and then a name. So a piece is held until a sentence-ending mark
is followed by white space (or a line break comes), or until the caller says the text is
complete. A long sentence is not waited for to its end: past CLAUSE_CHARS held, it is
released at its last clause mark (, ; : —) followed by white space, and past
MAX_HELD_CHARS at its last word gap.
"""

from __future__ import annotations

import re

from pipeline.text.input import SENTENCE_END

# Where the voice splits sentences (split_sentences), or a line break: a chat relay's
# line is complete when the next begins.
_COMPLETE = re.compile(rf"{SENTENCE_END.pattern}|\n\s*")
# A run-on text with no sentence end is released at a word gap past this many
# characters, so a listener is not kept waiting: about 3 s of speech at the voice's
# rate (bench/tts_latency.py's paragraph: ~15 characters a second).
MAX_HELD_CHARS = 200
# A long sentence starts at a clause once this much is held: ~5 s of speech, so the
# voice reads a clause long enough to keep its phrasing (a short one, "Well,", read on
# its own falls like a sentence end), while a listener waits no more than an LLM takes
# to write 80 characters (well under a second at 100+ characters a second).
CLAUSE_CHARS = 80
_CLAUSE = re.compile(r"[,;:—](?=\s)\s*")


class SentencePieces:
    """Collects pieces; ``push`` returns the text that is now complete (or "")."""

    def __init__(self, max_held: int = MAX_HELD_CHARS) -> None:
        self._held = ""
        self._max_held = max_held

    @property
    def held(self) -> str:
        """What has arrived but is not complete yet."""
        return self._held

    def push(self, piece: str) -> str:
        held = self._held + piece
        end = 0
        for match in _COMPLETE.finditer(held):
            end = match.end()
        # Each rule applies to what the one before leaves: a sentence released may leave
        # a long unfinished one behind it, which is not to wait for the next piece.
        if len(held) - end > CLAUSE_CHARS:
            for match in _CLAUSE.finditer(held, end):
                end = match.end()
        if len(held) - end > self._max_held:
            gap = held.rfind(" ", end, len(held) - 1)
            end = gap + 1 if gap > end else end
        ready, self._held = held[:end], held[end:]
        return ready.strip()

    def flush(self) -> str:
        """All that is held, complete or not (the text has ended)."""
        ready, self._held = self._held, ""
        return ready.strip()

    def clear(self) -> None:
        self._held = ""
