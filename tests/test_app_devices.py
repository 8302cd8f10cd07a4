"""The app with sound devices that come and go while it runs. A module of its own: the
switch re-initialises PortAudio, which closes every stream in the process, and only one
window (one engine, as in the app) may be open then; a window kept open by another
module's fixture would be left holding streams that no longer exist."""

from __future__ import annotations

import time

import numpy as np
import pytest

from app.settings import Settings
from pipeline.audio.devices import reinitialize_portaudio
from pipeline.audio.resample import resample
from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
from tests.harness.app_driver import (
    open_window,
    pump,
    pump_until,
    say,
    wait_until_quiet,
)
from tests.harness.jack_recorder import plug_in_microphone

pytestmark = [pytest.mark.display, pytest.mark.audio]

USB_MIC = "lss-usb-mic"


def test_a_chosen_microphone_plugged_in_while_speaking_is_taken_after_the_speech(
        qt_app, jack_server, tmp_path):
    w = open_window(tmp_path, Settings(audio_output_device="system", mic_device=USB_MIC,
                                       blinking=False, breathing=False))
    usb = None
    try:
        assert (f"Microphone '{USB_MIC}' is not connected — using 'system' until it is"
                in w.notices)
        assert w.engine.mic.device_name == "system"
        # Made before the long sentence starts: loading a voice and synthesising took 3 s
        # (2.6 + 0.4 s, at load 3.5), and with it the 8.2 s sentence had ended before the
        # check below that the voice is still speaking (2 of 8 runs).
        tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
        text = "Hello there. How are you today?"
        speech = np.concatenate([resample(s.audio, s.sample_rate, jack_server.rate)
                                 for s in tts.synthesize(text, LATENCY_MODES["premium"])])
        say(w, "While this long sentence is being read out to everyone watching the stream, "
               "somebody plugs the microphone that was chosen in the settings back in.")
        usb = plug_in_microphone(USB_MIC, speech)
        # Looking for it takes CPU from the voice, and switching re-initialises PortAudio,
        # which would cut it: neither while it speaks (longer than a probe interval).
        pump(w.engine.mic.probe_interval + 1.0)
        assert not w.engine.speaker.idle
        assert w.engine.mic.device_name == "system"
        assert not any("connected again" in notice for notice in w.notices)
        wait_until_quiet(w)
        pump_until(lambda: f"Microphone '{USB_MIC}' is connected again" in w.notices, 5,
                   "noticing the microphone")
        pump_until(lambda: w.engine.mic is not None and w.engine.mic.device_name == USB_MIC, 5,
                   "the switch")
        assert w.notices[-1] == f"Microphone '{USB_MIC}' is on"
        assert not w.finished.cancelled

        # The new microphone drives the mouth, on the reopened output's clock.
        usb.play()
        opened, loudest = 0.0, -200.0
        end = time.monotonic() + len(speech) / jack_server.rate + 0.3
        while time.monotonic() < end:
            pump(0.02)
            pose = w.engine.mouth.frame_pose(w.engine.clock.media_time_now(), 1 / 60)
            opened = max(opened, pose.openness)
            loudest = max(loudest, w.engine.mic.level().peak_db)
        assert loudest > -20.0 and opened > 0.3
        # And the voice plays on the reopened output, heard to its end.
        say(w, "Back on the new microphone.")
        wait_until_quiet(w)
        assert not w.finished.cancelled and w.engine.output.device_name == "system"
    finally:
        w.close()
        if usb is not None:
            usb.stop()
        reinitialize_portaudio()  # forget the device for the tests after this one
