"""AudioOutput through the real PortAudio and a real JACK server, recorded back by a
JACK client connected to the stream's output ports."""

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import sounddevice

from pipeline.audio.devices import (
    AudioUnavailable,
    list_devices,
    list_devices_now,
    reinitialize_portaudio,
)
from pipeline.audio.input import AudioInput
from pipeline.audio.output import AudioOutput
from pipeline.audio.resample import resample
from tests.harness.jack_recorder import JackRecorder, measure_jack_clock
from tests.harness.services import JackServer, run_in_child
from tests.harness.stall_watch import StallWatch, every_take_missed

pytestmark = pytest.mark.audio


def recorded(action, attempts=3):
    """Runs ``action`` while JACK records the output; runs it again if JACK lost a cycle
    (an xrun on a busy machine shifts the recording and says nothing about the app)."""
    watches = []
    for _ in range(attempts):
        rec = JackRecorder()
        with StallWatch() as watch:
            rec.start()
            result = action()
            rec.stop()
        if rec.xruns == 0:
            return rec, result
        watches.append(watch)
    every_take_missed(watches, "JACK lost cycles in every take")


def first_nonzero(x):
    nz = np.flatnonzero(x)
    assert len(nz), "nothing was heard"
    return int(nz[0])


def chirp(rate, seconds, f0=200.0, f1=5000.0):
    t = np.arange(int(rate * seconds)) / rate
    # A phase offset so the first sample is not zero and marks the start exactly.
    phase = 2 * np.pi * (f0 * t + (f1 - f0) / (2 * seconds) * t * t) + 0.3
    return (0.5 * np.sin(phase)).astype(np.float32)


def test_jack_clock_is_measured_against_monotonic(jack_server):
    facts = measure_jack_clock()
    assert facts.clock in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW")
    assert abs(facts.offsets[facts.clock]) < 0.0005


def test_speech_is_heard_bit_exact_where_and_when_the_clock_says(jack_server, output):
    rate = output.sample_rate
    assert rate == jack_server.rate
    first = resample(chirp(22050, 0.3), 22050, rate)  # piper's rate, as speech will come
    second = chirp(rate, 0.2, f0=3000, f1=300)

    def play():
        start = output.read_pos + rate // 10
        follow = start + len(first)
        assert output.write_at(start, first) == 0 and output.write_at(follow, second) == 0
        predicted = output.clock.monotonic_at(start / rate)
        time.sleep(0.75)
        # Read while recorded: after the recording, a stall of this process (the first
        # np.testing call imports numpy.testing, 126 ms with the GIL held) can make an
        # xrun, after which the clock rightly maps later samples elsewhere.
        return start, follow, predicted, output.clock.monotonic_at(follow / rate)

    recorder, (start, follow, predicted, predicted_later) = recorded(play)

    audio = recorder.audio
    i0 = first_nonzero(audio[:, 0])
    both = np.concatenate([first, second])
    for ch in range(audio.shape[1]):
        np.testing.assert_array_equal(audio[i0:i0 + len(both), ch], both)
    assert not audio[i0 + len(both):].any()

    heard = recorder.heard_time(i0)
    period = jack_server.period / rate
    assert abs(heard - predicted) < 0.001 + period, (heard - predicted)
    # The prediction also holds a whole utterance later, after clock updates.
    assert abs(recorder.heard_time(i0 + len(first)) - predicted_later) < 0.001 + period

    assert output.last_block == jack_server.period
    assert output.output_latency == pytest.approx(2 * jack_server.period / rate, abs=1e-4)


def test_stop_speech_fades_out_without_a_click_and_stays_silent(jack_server, output):
    rate = output.sample_rate
    t = np.arange(2 * rate) / rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t + 0.3)).astype(np.float32)

    def play_and_stop():
        start = output.read_pos + rate // 20
        assert output.write_at(start, tone) == 0
        time.sleep(0.3)
        pressed = time.monotonic()
        end_media = output.stop_speech()
        time.sleep(0.3)
        return start, pressed, end_media

    recorder, (start, pressed, end_media) = recorded(play_and_stop)
    end_predicted = output.clock.monotonic_at(end_media)

    audio = recorder.audio[:, 0]
    i0 = first_nonzero(audio)
    last = int(np.flatnonzero(audio)[-1])
    played = last + 1 - i0
    assert abs(played - (round(end_media * rate) - start)) <= 1
    assert played < len(tone) // 2
    natural_step = 0.5 * 2 * np.pi * 440 / rate
    assert np.abs(np.diff(audio[i0:])).max() < natural_step * 1.2
    np.testing.assert_array_equal(audio[i0:i0 + played - 480], tone[:played - 480])
    assert np.abs(audio[last - 16:last + 1]).max() < 0.5 * 0.11
    assert not audio[last + 1:].any()
    assert abs(recorder.heard_time(last + 1) - end_predicted) < 0.001 + jack_server.period / rate
    # Nothing is left scheduled after the block in which the fade ended.
    assert 0 <= output.scheduled_end - round(end_media * rate) <= jack_server.period
    # The fade starts on the next block the device takes: sound ends within two blocks
    # and the fade of the press, plus the device's own output latency.
    block = jack_server.period / rate
    assert end_predicted - pressed <= 2 * block + output.FADE_SECONDS + output.output_latency + 0.002


def test_missing_device_is_reported_in_words(jack_server):
    assert "system" in list_devices("output")
    out = AudioOutput("Speakers that are not there")
    with pytest.raises(AudioUnavailable) as err:
        out.start()
    message = str(err.value)
    assert "'Speakers that are not there' was not found" in message
    assert "system" in message


def test_closing_leaves_a_clock_that_keeps_running(jack_server):
    out = AudioOutput("system")
    out.start()
    assert out.callbacks > 0 and not out.clock.free_running
    before = out.clock.media_time_now()
    out.close()
    assert out.clock.free_running
    time.sleep(0.02)
    assert out.clock.media_time_now() > before + 0.015


def test_harness_player_feeds_a_portaudio_input_bit_exact(jack_server, tmp_path):
    """The JACK player that later tests use as the microphone."""
    import wave

    import sounddevice as sd

    from tests.harness.jack_recorder import JackPlayer

    rate = jack_server.rate
    pcm = (chirp(rate, 0.2) * 32767).astype("<i2")
    path = tmp_path / "mic.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())
    captured = np.zeros(rate, dtype=np.float32)
    filled = [0]

    def callback(indata, frames, time_info, status):
        n = min(frames, len(captured) - filled[0])
        captured[filled[0]:filled[0] + n] = indata[:n, 0]
        filled[0] += n

    with sd.InputStream(device="system", channels=1, dtype="float32", callback=callback):
        player = JackPlayer(path)
        player.start()
        deadline = time.monotonic() + 2
        while not player.done and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
        player.stop()
    i0 = first_nonzero(captured)
    np.testing.assert_array_equal(captured[i0:i0 + len(pcm)], pcm.astype(np.float32) / 32768.0)


def test_audio_that_comes_too_late_is_dropped_not_shifted(output):
    time.sleep(0.1)
    pos = output.earliest_pos() - 100
    dropped = output.write_at(pos, np.full(1000, 0.1, np.float32))
    # What is still ahead of the read head keeps its place, so sound and mouth stay in step.
    assert 100 <= dropped < 1000
    assert output.scheduled_end == pos + 1000


FRESH_LISTING = ("import json, sounddevice as sd; print(json.dumps([[d['name'], "
                 "d['max_input_channels'], d['max_output_channels']] for d in sd.query_devices()]))")


def test_this_processs_jack_connection_is_not_offered_as_a_device(jack_server, output):
    mic = AudioInput("system", gate_db=None)
    mic.start()
    try:
        # With a stream each way, PortAudio's JACK client here has ports both ways, and a
        # newly initialised PortAudio (the settings panel's listing) lists it as a device.
        fresh = subprocess.run([sys.executable, "-c", FRESH_LISTING], capture_output=True,
                               text=True, check=True)
        assert ["PortAudio", 2, 2] in json.loads(fresh.stdout.splitlines()[-1])
        assert list_devices_now("output") == ["system"]
        assert list_devices_now("input") == ["system"]
    finally:
        mic.close()


HOLD_STREAMS = ("import sys, sounddevice as sd; s = sd.Stream(device='system', channels=1, "
                "callback=lambda indata, outdata, frames, time, status: outdata.fill(0)); "
                "s.start(); print('open', flush=True); sys.stdin.read()")


def test_another_programs_jack_connection_is_not_listed_and_choosing_it_is_explained(jack_server):
    # Its stream each way makes it a capture and a playback device to PortAudio. Before,
    # it was listed as both, and chosen, it was opened: the voice played into that
    # program, heard by no one and nothing said, and the microphone captured its sound.
    other = subprocess.Popen([sys.executable, "-c", HOLD_STREAMS], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline() == "open\n"
        reinitialize_portaudio()  # so that this process's PortAudio lists it
        listed = [d["name"] for d in sounddevice.query_devices() if d["name"].startswith("PortAudio")]
        assert len(listed) == 1, listed  # "PortAudio", or "PortAudio-01" while ours has that name
        assert list_devices("input") == ["system"] and list_devices("output") == ["system"]
        # By its name, and by a part of it, which sounddevice matches to it.
        for name in (listed[0], "portaudio"):
            with pytest.raises(AudioUnavailable) as err:
                AudioOutput(name).start()
            assert str(err.value) == (
                f"'{listed[0]}' is not an audio output: it is the JACK connection of a program "
                "that uses PortAudio (Lipsync Studio's own, or another's). Choose one of: system "
                "in Settings.")
    finally:
        other.stdin.close()
        other.wait(10)
        reinitialize_portaudio()  # forget it for the tests after this one


EXITS = 3
# Three watchdogs: with one, half the exits of the old code failed; with three, 10 of 10.
MICROPHONES = 3
# A child took 1.4 s (twice, at load 0.4) on the 2-core VM.
EXIT_TIMEOUT = 30


def test_a_process_exits_cleanly_with_its_streams_still_open():
    # Each in a process of its own, which ends with microphones (their watchdogs running)
    # and an output still open. sounddevice's own exit handler terminated PortAudio while
    # a watchdog, seeing its stream stop, closed it on another thread: the process then
    # aborted in PortAudio (pa_jack.c Terminate or UpdateQueue) or hung.
    for _ in range(EXITS):
        _, result = run_in_child("tests.test_audio_output:exit_with_streams_open",
                                 timeout=EXIT_TIMEOUT)
        assert result == {"open": ["system"] * (MICROPHONES + 1)}


def exit_with_streams_open() -> None:
    JackServer()  # its jackd ends with this process
    reinitialize_portaudio()  # it enumerated before this server existed
    mics = [AudioInput("system", gate_db=None) for _ in range(MICROPHONES)]
    for mic in mics:
        mic.start()
    out = AudioOutput("system")
    out.start()
    time.sleep(0.2)
    print(json.dumps({"open": [mic.device_name for mic in mics] + [out.device_name]}))


# In a process of its own, on a server of its own, frozen (SIGSTOP) under an open stream:
# the abort waits for a process cycle and the close gives up after CLOSE_WAIT. Then the
# server either runs on (SIGCONT) or stops while frozen (SIGTERM, then SIGCONT), as a
# user restarting it. Closing the stream once its server is stopping is what aborted the
# app in the suite (PortAudio's CleanUpStream asserting), and what the old code did here.

def test_a_stream_whose_server_stops_during_its_close_is_abandoned_not_closed():
    _, result = run_in_child("tests.test_audio_output:close_as_the_server_stops",
                             timeout=EXIT_TIMEOUT)
    assert result == {"close_gave_up": True, "closed": False, "abandoned": True,
                      "server_gone": True}


def test_a_stream_whose_server_was_held_up_during_its_close_is_closed():
    # Abandoned, its JACK client would still run at this process's exit, which crashed it.
    _, result = run_in_child("tests.test_audio_output:close_as_the_server_runs_on",
                             timeout=EXIT_TIMEOUT)
    assert result == {"close_gave_up": True, "closed": True, "abandoned": False,
                      "server_gone": False}


def close_as_the_server_stops() -> None:
    _close_under_a_frozen_server(stops=True)


def close_as_the_server_runs_on() -> None:
    _close_under_a_frozen_server(stops=False)


def _close_under_a_frozen_server(*, stops: bool) -> None:
    import os
    import signal

    from pipeline.audio.devices import (
        CLOSE_WAIT,
        close_stream,
        lost_its_server,
        open_stream,
        sound_server_gone,
        start_stream,
        streams_stuck,
    )

    server = JackServer()  # its jackd ends with this process
    reinitialize_portaudio()
    stream = open_stream("output", device="system", samplerate=48000, channels=1,
                         dtype="float32", callback=lambda out, *_: out.fill(0))
    start_stream(stream)
    time.sleep(0.2)
    os.kill(server.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    close_stream(stream, "frozen-closer")
    gave_up = time.monotonic() - started >= CLOSE_WAIT
    if stops:
        os.kill(server.proc.pid, signal.SIGTERM)
    os.kill(server.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while streams_stuck() and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"close_gave_up": gave_up, "closed": stream.closed,
                      "abandoned": lost_its_server(stream), "server_gone": sound_server_gone()}))
