"""The window's status line as text, from the figures the engine and the presenter keep:
pure, so its wording is tested without a window."""

from __future__ import annotations

from app.first_audio import HEARD_FIRST_AUDIO, SYNTHESIS_FIRST_AUDIO, FirstAudio

STATUS_FIRST_AUDIO_NOTE = (
    f"{HEARD_FIRST_AUDIO.capitalize()}: from Enter to the first sample at the sound card. "
    f"{SYNTHESIS_FIRST_AUDIO.capitalize()}: from Enter to the first sound synthesized, the "
    "figure that Settings shows for each latency mode.")


def first_audio_text(first: FirstAudio | None) -> str:
    return first.text() if first is not None else f"{HEARD_FIRST_AUDIO} –"


def frames_text(stats: dict) -> str:
    """The presenter's counters: late frames are shown as a fallback, the last one held or
    its neighbours' midpoint; frames of the producer's degraded path (it fell 2 ticks
    behind) are said only when there were any."""
    text = (f"frames {stats['presented']} presented / {stats['late']} late "
            f"({stats['held']} held, {stats['interpolated']} interpolated)")
    if stats["degraded_shown"]:
        text += f" / {stats['degraded_shown']} degraded"
    return f"{text} · {stats['fps']:.0f} fps ({stats['display_mode']})"


def status_line(first: FirstAudio | None, av_offset_ms: float | None, stats: dict,
                audio: tuple[str, int] | None, mic: str | None) -> str:
    """`av_offset_ms`: the median A/V offset measured (None before any); `audio`: the
    output's (device name, sample rate), None when audio is off; `mic`: the mic stage's
    own status, None without one."""
    parts = [first_audio_text(first),
             f"A/V offset {av_offset_ms:+.1f} ms" if av_offset_ms is not None else "A/V offset –",
             frames_text(stats),
             f"audio {audio[0]} {audio[1] / 1000:g} kHz" if audio is not None else "audio off"]
    if mic is not None:
        parts.append(mic)
    return " · ".join(parts)
