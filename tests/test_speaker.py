"""The speech stage end to end: real voice, real PortAudio on the JACK test server."""

import queue
import time

import numpy as np
import pytest

from pipeline.core.clock import MediaClock
from pipeline.core.events import (
    SentenceTimed,
    SpeechFailed,
    SpeechFinished,
    SpeechNotice,
    SpeechStarted,
    VisemeTimed,
    WordTimed,
)
from pipeline.core.visemes import VISEME_INDEX
from pipeline.voice.speaker import Speaker
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from tests.streaming_cases import KERNEL_ROUNDING_SNR_DB, snr_db


@pytest.fixture(scope="module")
def tts():
    voice = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    voice.warm_up()
    return voice


class Events:
    """The speaker's events: waited for one kind at a time (``next``), and all of them
    kept in order (``seen``)."""

    def __init__(self):
        self.q = queue.Queue()
        self.seen = []

    def __call__(self, event):
        self.seen.append(event)
        self.q.put(event)

    def next(self, kind, timeout=20):
        deadline = time.monotonic() + timeout
        while True:
            event = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            if isinstance(event, kind):
                return event


@pytest.mark.audio
def test_sentences_play_back_to_back_with_visemes_on_the_same_clock(tts, output):
    # Back to back needs a take in which the machine kept up. Where chunks came after
    # their time to play (underruns: the voice fell behind playback, and the next sentence
    # then starts late, a gap, a pause by design) or JACK lost cycles (our callback missed
    # its period: underflows, the media clock re-anchored by the time lost), the take says
    # nothing about placement or timing. Measured at load 4.2-4.3: 4 of 8 takes had 1-3
    # underruns, each with a gap; 1 of 14 lost cycles (3 underflows, a gap, the first onset
    # heard 136 ms off). Such a take is played again, with the start lead the speaker
    # learnt from it as the app would; no clean take in 3 skips the test. A gap in a take
    # without underruns fails it.
    lead, takes = None, []
    for take in range(3):
        underflows, anchors = output.underflows, output.clock.anchors
        events = Events()
        timeline = SpeechTimeline()
        speaker = Speaker(tts, timeline, output, output.clock, events)
        if lead is not None:
            speaker.start_lead.lead_s = lead
        try:
            requested = time.monotonic()
            speaker.say("Papa made a map. Five big boxes move slowly.")
            started = events.next(SpeechStarted)
            finished = events.next(SpeechFinished)
            times, visemes = timeline.onsets()
            scheduled_end = output.scheduled_end / output.sample_rate
            lead = speaker.start_lead.lead_s
        finally:
            speaker.close()
        heard_at = output.clock.monotonic_at(times[0])
        lost = (output.underflows - underflows, output.clock.anchors - anchors)
        takes.append(f"{finished.underruns} underruns, {finished.gaps} gaps, {lost[0]} underflows")
        if lost == (0, 0) and finished.underruns == 0:
            break
        print(f"take {take + 1}: the machine did not keep up ({takes[-1]})")
    else:
        pytest.skip(f"the machine did not keep up in any of 3 takes ({'; '.join(takes)})")
    # How soon first audio comes is a speed figure: bench/tts_latency.py and bench/av_sync.py.
    assert 0 < started.synthesis_s < started.first_audio_s
    assert not finished.cancelled and finished.gaps == 0
    # Both sentences were placed on the timeline back to back: onsets are sorted and the
    # last one lies before the end of the scheduled audio.
    assert np.all(np.diff(times) > 0)
    assert times[-1] < finished.end_media_time
    assert finished.end_media_time == pytest.approx(scheduled_end)
    # The first onset is heard when the Started event said it would be: the same media
    # time, mapped by the clock then and now. The clock's estimate settles by the callbacks'
    # scheduling delay meanwhile: measured 4.1-9.6 ms (12 takes without lost cycles, load
    # 4.1-4.3), within 20 ms, two JACK periods.
    assert heard_at - requested == pytest.approx(started.first_audio_s, abs=0.02)


@pytest.mark.audio
def test_stop_silences_and_cuts_the_mouth(tts, output):
    events = Events()
    timeline = SpeechTimeline()
    speaker = Speaker(tts, timeline, output, output.clock, events)
    try:
        speaker.say("This is a long sentence that we will interrupt. " * 4)
        events.next(SpeechStarted)
        speaker.stop()
        stopped_at = output.clock.media_time_now()
        finished = events.next(SpeechFinished)
        assert finished.cancelled
        time.sleep(0.1)
        # Nothing is scheduled past the fade, and the mouth rests soon after it.
        assert output.scheduled_end / output.sample_rate < stopped_at + 0.1
        assert timeline.end_time < stopped_at + 0.2
        pose = timeline.frame_pose(stopped_at + 0.25, 1 / 60)
        assert pose.openness == 0.0
    finally:
        speaker.close()


@pytest.mark.audio
def test_new_text_while_speaking_takes_over(tts, output):
    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events)
    try:
        first = speaker.say("One two three four five six seven eight nine ten. " * 3)
        events.next(SpeechStarted)
        second = speaker.say("Barge in.")
        finished_first = events.next(SpeechFinished)
        started_second = events.next(SpeechStarted)
        finished_second = events.next(SpeechFinished)
    finally:
        speaker.close()
    assert finished_first.request == first and finished_first.cancelled
    assert started_second.request == second
    assert finished_second.request == second and not finished_second.cancelled


def test_without_an_audio_device_the_mouth_still_runs_on_its_own_clock(tts):
    events = Events()
    clock = MediaClock(22050)
    timeline = SpeechTimeline()
    speaker = Speaker(tts, timeline, None, clock, events)
    try:
        requested = clock.media_time_now()
        speaker.say("Silent movie.")
        started = events.next(SpeechStarted)
        finished = events.next(SpeechFinished)
        times, _ = timeline.onsets()
        end = timeline.end_time
    finally:
        speaker.close()
    assert len(times) > 3
    # On the free-running clock, the first mouth shape comes when the Started event said
    # its sound would (the clock is the monotonic one, so media and wall seconds agree),
    # and the mouth runs to the end of the silent speech. Where "now" lies by then depends
    # on how fast this machine synthesizes (0.17-0.55 s after the first onset here), so it
    # is not compared.
    assert times[0] - requested == pytest.approx(started.first_audio_s, abs=1e-3)
    assert 0 < started.synthesis_s < started.first_audio_s
    assert end == pytest.approx(finished.end_media_time)


def test_bad_text_is_reported_and_the_worker_keeps_going(tts):
    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), None, MediaClock(22050), events)
    try:
        speaker.say("   ")
        failed = events.next(SpeechFailed)
        speaker.say("Hi 😀 你好")
        notices = [events.next(SpeechNotice).message, events.next(SpeechNotice).message]
        events.next(SpeechFinished)
    finally:
        speaker.close()
    assert "empty" in failed.message
    assert any("emoji" in n for n in notices) and any("Chinese" in n for n in notices)


PARAGRAPH = ("We are testing how the voice behaves when people interrupt it. " * 6).strip()


def _rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.audio
def test_stop_silences_within_20_ms_with_a_fade_not_a_click(tts, output):
    from tests.harness.jack_recorder import JackRecorder

    events = Events()
    recorder = JackRecorder(max_seconds=6)
    recorder.start()
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events)
    try:
        speaker.say(PARAGRAPH)
        events.next(SpeechStarted)
        time.sleep(1.0)
        pressed = time.monotonic()
        speaker.stop()
        events.next(SpeechFinished)
        time.sleep(0.3)
    finally:
        speaker.close()
        recorder.stop()
    audio = recorder.audio[:, 0]
    loud = np.nonzero(np.abs(audio) > 1e-4)[0]
    last_sound = recorder.heard_time(int(loud[-1]))
    # Sound ends within 20 ms of the press, not counting the device's own output latency:
    # the fade starts in the next block the device takes (one JACK period, 10.7 ms, at most)
    # and lasts 4 ms; the rest is the wait for the speaker's lock (held while a chunk is
    # placed) and the recorder's and PortAudio's latency figures disagreeing. Measured
    # 6.8-16.6 ms (14 runs, load 2.5-4.2), also in takes where JACK lost cycles elsewhere.
    assert last_sound - pressed - output.output_latency <= 0.020
    # The cut is a fade: no step at the end bigger than the speech's own typical steps.
    tail = audio[max(0, loud[-1] - 240):loud[-1] + 1]
    speech_steps = np.abs(np.diff(audio[loud[0]:loud[-1]]))
    assert np.abs(np.diff(tail)).max() <= np.percentile(speech_steps, 99.9)


@pytest.mark.audio
def test_rapid_stop_and_speak_neither_stalls_nor_leaks(tts, output):
    import threading

    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events)
    try:
        speaker.say("Warm up the worker first.")
        events.next(SpeechFinished)
        threads, rss = threading.active_count(), _rss_mb()
        started = time.monotonic()
        for i in range(100):
            speaker.say(f"Message number {i}, please read it out loud.")
            time.sleep(0.025)
            speaker.stop()
        storm_s = time.monotonic() - started
        last = speaker.say("And this one is heard to the end.")
        while (event := events.next(SpeechFinished)).request != last:
            pass
        assert not event.cancelled
        assert threading.active_count() == threads
        assert _rss_mb() - rss < 40, "memory grew during 100 stop/speak cycles"
        # Neither stalls: 100 x 25 ms of sleep is 2.5 s, and say() and stop() each wait for
        # the next audio block to take the fade (one JACK period, 10.7 ms, at most; 0.1 s if
        # no callback comes): 4.6 s if every wait were a whole period. Measured 4.26-4.72 s
        # (14 runs, load 2.2-4.8; stop() median 6.6-6.8 ms, worst 121 ms). A stop that waited
        # for the chunk being synthesized (a first chunk takes 37-242 ms here) would take
        # over 6 s.
        assert storm_s < 6
    finally:
        speaker.close()


@pytest.mark.audio
def test_mode_switch_storm_while_speaking(tts, output):
    import random

    from pipeline.voice.streaming_tts import LATENCY_MODES

    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events)
    modes = list(LATENCY_MODES.values())
    rng = random.Random(7)
    try:
        request = speaker.say(PARAGRAPH)
        events.next(SpeechStarted)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            speaker.mode = rng.choice(modes)
            time.sleep(0.02)
        speaker.mode = LATENCY_MODES["balanced"]
        finished = events.next(SpeechFinished, timeout=40)
        assert finished.request == request and not finished.cancelled
        # Every sentence was planned and written: the audio runs to the plan's end.
        assert output.scheduled_end / output.sample_rate == pytest.approx(finished.end_media_time, abs=0.001)
    finally:
        speaker.close()


@pytest.mark.audio
def test_the_slack_of_a_speech_is_measured_on_the_output_and_steers_the_lead(tts, output):
    from pipeline.voice.start_lead import SLACK_MARGIN_S, START_LEAD_MIN_S

    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events)
    try:
        leads = [speaker.start_lead.lead_s]
        finished = []
        for _ in range(3):
            speaker.say("Papa made a map. Five big boxes move slowly.")
            finished.append(events.next(SpeechFinished))
            leads.append(speaker.start_lead.lead_s)
    finally:
        speaker.close()
    for f, before, after in zip(finished, leads, leads[1:]):
        assert f.least_slack_s is not None
        if f.underruns or f.gaps:
            assert after == min(2 * before, 0.2)
        else:  # the lead gives back half of what went unused
            assert after == pytest.approx(max(START_LEAD_MIN_S, before - max(
                0.0, f.least_slack_s - SLACK_MARGIN_S) / 2))


TWO_SENTENCES = ("Papa made a map.", "Five big boxes move slowly.")


def _recorded_speech(tts, output, speak) -> tuple[np.ndarray, list[SpeechFinished], Events]:
    """What the listener hears of ``speak(speaker)``'s speech, from its first sound to
    its last: a take without underruns or lost JACK cycles (3 tries, else skip)."""
    from tests.harness.jack_recorder import JackRecorder

    problems = []
    for _ in range(3):
        events = Events()
        recorder = JackRecorder(max_seconds=8)
        recorder.start()
        underflows = output.underflows
        # Premium reads each sentence whole, as one speech's second sentence is read: in
        # the other modes a new request's first sentence starts with a short preview
        # window, whose durations differ slightly by design (test_streaming_tts bounds it).
        speaker = Speaker(tts, SpeechTimeline(), output, output.clock, events,
                          mode=LATENCY_MODES["premium"])
        speaker.start_lead.lead_s = 0.1  # a first chunk in time even on a loaded machine
        try:
            ids = speak(speaker)
            finished = []
            while len(finished) < len(ids):
                finished.append(events.next(SpeechFinished))
            # Finished says synthesis is done: the sound plays on until the read head
            # reaches what was scheduled, and is heard one output latency later.
            while output.read_pos < output.scheduled_end:
                time.sleep(0.02)
            time.sleep(0.1 + output.output_latency)
        finally:
            speaker.close()
            recorder.stop()
        problem = (sum(f.underruns for f in finished), output.underflows - underflows,
                   recorder.xruns)
        if problem == (0, 0, 0):
            audio = recorder.audio[:, 0]
            loud = np.flatnonzero(audio)
            return audio[loud[0]:loud[-1] + 1], finished, events
        problems.append(problem)
    pytest.skip(f"the machine did not keep up in any of 3 takes (underruns, underflows, "
                f"xruns): {problems}")


@pytest.mark.audio
def test_appended_text_is_heard_gap_free_as_if_it_were_one_speech(tts, output):
    """Measured in the audio: a sentence appended while the first is spoken sounds
    sample for sample like the two said as one speech (the voice is deterministic with
    its noise off, and a speech's sentences are synthesized apart, so any pause or
    overlap at the join would show as a difference)."""
    whole, _, _ = _recorded_speech(tts, output, lambda s: [s.say(" ".join(TWO_SENTENCES))])
    joined, finished, events = _recorded_speech(
        tts, output, lambda s: [s.say(TWO_SENTENCES[0]), s.append(TWO_SENTENCES[1])])
    first, second = finished
    assert not first.cancelled and not second.cancelled and second.gaps == 0
    timed = [e for e in events.seen if isinstance(e, SentenceTimed)]
    assert [(t.request, t.text) for t in timed] == [(first.request, TWO_SENTENCES[0]),
                                                  (second.request, TWO_SENTENCES[1])]
    # The second sentence's sound starts on the sample after the first one's ends: as
    # long as the one speech, and the same sound, sample for sample, but for fp32 kernel
    # rounding (a sentence read as a speech's second runs the voice's engines at other
    # padded shapes; KERNEL_ROUNDING_SNR_DB is the worst such difference measured). A gap
    # of even one sample at the join shifts the whole second sentence: 20.7 dB for these
    # two sentences (2 samples: 14.9 dB; computed offline from the same synthesis).
    assert timed[1].start == first.end_media_time
    assert len(joined) == len(whole)
    assert snr_db(whole, joined) >= KERNEL_ROUNDING_SNR_DB


def test_pieces_are_spoken_a_sentence_at_a_time_and_a_stop_drops_what_is_held(tts):
    events = Events()
    speaker = Speaker(tts, SpeechTimeline(), None, MediaClock(22050), events)
    try:
        assert speaker.append("Papa made", final=False) is None
        first = speaker.append(" a map. Five big", final=False)
        assert first is not None
        second = speaker.append(" boxes move slowly.")
        while events.next(SpeechFinished).request != second:
            pass
        speaker.append("Never said", final=False)
        speaker.stop()  # drops what is held, so it is never said
        last = speaker.append("Said.")
        while events.next(SpeechFinished).request != last:
            pass
    finally:
        speaker.close()
    said = [(e.request, e.text) for e in events.seen if isinstance(e, SentenceTimed)]
    assert said == [(first, "Papa made a map."), (second, "Five big boxes move slowly."),
                    (last, "Said.")]
    ends = {e.request: e for e in events.seen if isinstance(e, SpeechFinished)}
    starts = {e.request: e.start for e in events.seen if isinstance(e, SentenceTimed)}
    # Continued on the clock without an audio device too: the second sentence's sound
    # starts where the first one's ends.
    assert ends[second].gaps == 0 and starts[second] == ends[first].end_media_time


def test_sentences_words_and_visemes_are_published_with_the_media_times_the_mouth_uses(tts):
    events = Events()
    timeline = SpeechTimeline()
    speaker = Speaker(tts, timeline, None, MediaClock(22050), events)
    try:
        request = speaker.say("Papa made a map. Five big boxes move slowly.")
        finished = events.next(SpeechFinished)
        times, visemes = timeline.onsets()
    finally:
        speaker.close()
    published = events.seen
    shapes = [e for e in published if isinstance(e, VisemeTimed)]
    words = [e for e in published if isinstance(e, WordTimed)]
    sentences = [e for e in published if isinstance(e, SentenceTimed)]
    assert {e.request for e in shapes + sentences + words} == {request}
    # Four words, then five, counted per sentence across the windows it is read in, in
    # order, each within its sentence's sound and with the voice's phonemes for it.
    assert [w.index for w in words] == [0, 1, 2, 3, 0, 1, 2, 3, 4]
    assert all(a.end <= b.start for a, b in zip(words, words[1:]))
    assert all(w.phonemes and w.start < w.end for w in words)
    assert words[0].start > sentences[0].start and words[4].start > sentences[1].start
    assert words[3].end <= sentences[1].start and words[-1].end < finished.end_media_time
    assert words[1].phonemes.startswith("m") and words[5].phonemes.startswith("b")  # made, big
    assert [e.text for e in sentences] == list(TWO_SENTENCES)
    # The mouth's own cues, at the media times the timeline shows them.
    assert [(e.start, VISEME_INDEX[e.viseme]) for e in shapes] == list(zip(times.tolist(),
                                                                           visemes.tolist()))
    assert all(a.end == pytest.approx(b.start, abs=1e-9) for a, b in zip(shapes, shapes[1:]))
    assert shapes[0].start == sentences[0].start
    assert shapes[-1].end == pytest.approx(finished.end_media_time, abs=1e-6)
    assert sentences[0].start < sentences[1].start < finished.end_media_time
