"""The last speech's time to first audio, as the studio keeps it and every front end says
it. Light on purpose: the settings panel and the status line name these figures without
loading the studio (and with it the voice)."""

from __future__ import annotations

from dataclasses import dataclass

# Two different times to first audio, named apart wherever they are shown (the settings
# panel, the window's status line, headless's console).
SYNTHESIS_FIRST_AUDIO = "synthesis first audio"
HEARD_FIRST_AUDIO = "heard first audio"


@dataclass(frozen=True, slots=True)
class FirstAudio:
    """The last speech's first audio: heard (request → first sample at the DAC) and
    synthesised, and the latency mode it was made in (None: switched as it started, so
    either mode could have made it)."""

    heard_ms: float
    synthesis_ms: float
    mode: str | None

    def text(self) -> str:
        mode = f"{self.mode} mode" if self.mode is not None else "latency mode switched as it started"
        return (f"{HEARD_FIRST_AUDIO} {self.heard_ms:.0f} ms ({mode}; "
                f"{SYNTHESIS_FIRST_AUDIO} {self.synthesis_ms:.0f} ms)")
