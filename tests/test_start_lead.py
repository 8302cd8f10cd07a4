"""The start lead's policy (pipeline/voice/start_lead.py), and which floor a speaker gets."""

from __future__ import annotations

import pytest

from pipeline.core.clock import MediaClock
from pipeline.voice.speaker import Speaker
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.start_lead import (
    DEVICE_START_LEAD_MIN_S,
    SLACK_MARGIN_S,
    START_LEAD_INITIAL_S,
    START_LEAD_MAX_S,
    START_LEAD_MIN_S,
    StartLead,
    floor_for,
)


@pytest.mark.parametrize("floor", [START_LEAD_MIN_S, DEVICE_START_LEAD_MIN_S])
def test_the_lead_doubles_after_underruns_and_gives_back_half_the_unused_slack(floor):
    lead = StartLead(floor)
    assert floor < lead.lead_s == START_LEAD_INITIAL_S < START_LEAD_MAX_S
    lead.adapt(1, 0.05)  # late: slack measured or not, it doubles
    assert lead.lead_s == 2 * START_LEAD_INITIAL_S
    for _ in range(10):
        lead.adapt(2, None)
    assert lead.lead_s == START_LEAD_MAX_S
    lead.adapt(0, None)  # nothing measured (one chunk): kept
    lead.adapt(0, SLACK_MARGIN_S)  # all used: kept
    assert lead.lead_s == START_LEAD_MAX_S
    lead.adapt(0, SLACK_MARGIN_S + 0.1)
    assert lead.lead_s == pytest.approx(START_LEAD_MAX_S - 0.05)
    for _ in range(20):
        lead.adapt(0, START_LEAD_MAX_S)
    assert lead.lead_s == floor


def test_a_lead_never_starts_outside_its_floor_and_ceiling():
    assert StartLead(0.1, lead_s=0.0).lead_s == 0.1
    assert StartLead(0.0, lead_s=1.0).lead_s == START_LEAD_MAX_S


def test_the_floor_follows_where_the_voice_runs():
    # A GPU voice's later chunks come far ahead of real time; the CPU's come close to it.
    assert floor_for(on_device=True) == DEVICE_START_LEAD_MIN_S < floor_for(on_device=False)
    assert floor_for(on_device=False) == START_LEAD_MIN_S


def test_a_speaker_on_the_cpu_voice_gets_the_cpu_floor():
    from pipeline.voice.streaming_tts import StreamingTTS

    tts = StreamingTTS(provider="cpu")
    assert not tts.on_device
    speaker = Speaker(tts, SpeechTimeline(), None, MediaClock(22050), lambda event: None)
    try:
        assert speaker.start_lead.floor_s == START_LEAD_MIN_S
        assert speaker.start_lead.lead_s == START_LEAD_INITIAL_S
    finally:
        speaker.close()
