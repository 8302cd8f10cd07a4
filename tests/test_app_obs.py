"""The app and a real OBS 29 together (tests/harness/obs.py): the settings panel's "Add
to OBS" sets OBS up for the running app, then the app keeps the microphone's sync offset in
OBS at its measured delay (also across a latency mode change), and `obs setup` from a
terminal finds the running app's record while it runs, and no record once it quit."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from app.obs.link import SOURCE_NAME
from app.obs.running_app import read_running_app
from pipeline.core.events import DelayChange
from tests.harness.app_driver import QUIET, open_window, pump, pump_until
from tests.harness.obs import KEY, MIC

# Settings, records and the OBS password in a folder of each test's, no system keyring.
pytestmark = [pytest.mark.display, pytest.mark.audio,
              pytest.mark.usefixtures("harness_device", "obs_config")]


def _offset(obs_client) -> int:
    return obs_client.send("GetInputAudioSyncOffset", {"inputName": MIC}, raw=True)["inputAudioSyncOffset"]


def test_add_to_obs_from_the_panel_then_the_mic_offset_follows(qt_app, jack_server, obs, obs_client,
                                                               obs_config):
    if MIC not in [i["inputName"] for i in obs_client.send("GetInputList", raw=True)["inputs"]]:
        obs_client.send("CreateInput", {"sceneName": "Scene", "inputName": MIC,
                                        "inputKind": "pulse_input_capture", "inputSettings": {},
                                        "sceneItemEnabled": True}, raw=True)
    obs_client.send("SetInputAudioSyncOffset", {"inputName": MIC, "inputAudioSyncOffset": 0}, raw=True)
    settings = replace(QUIET, mic_enabled=True, mic_device="system", output_window=True,
                       output_size="320x240", output_background="chroma", chroma_colour=KEY,
                       obs_port=obs.port)
    window = open_window(obs_config, settings)
    # The stage measures its latency all along and moves its delay when it must: every
    # value it has had is one Add to OBS may have read from the app's record.
    offsets = {window.engine.mic_stage.sync_offset_ms if window.engine.mic_stage else None}
    window.engine.events.subscribe(lambda change: offsets.add(round(change.new * 1e3)), DelayChange)
    try:
        stage = window.engine.mic_stage
        assert stage is not None, "the JACK test server's microphone did not open"
        running = read_running_app()
        assert running["pid"] == os.getpid() and running["output_background"] == "chroma"
        assert running["mic_sync_offset_ms"] == stage.sync_offset_ms

        panel = window.open_settings()
        panel.obs_setup.password.setText(obs.password)
        panel.obs_setup.add()
        pump_until(lambda: panel.obs_setup.succeeded is not None, 90, "Add to OBS")
        assert panel.obs_setup.succeeded, panel.obs_setup.result.toPlainText()
        assert f"'{MIC}'" in panel.obs_setup.result.toPlainText()
        assert panel.obs_live_updates.isChecked()
        names = [i["inputName"] for i in obs_client.send("GetInputList", raw=True)["inputs"]]
        assert SOURCE_NAME in names
        assert _offset(obs_client) in offsets  # set by Add to OBS, from our record

        # Ticked, which applies at once (the panel is not modal): from now on the app keeps
        # the offset in step itself. Its first push may come before or after Add to OBS's own
        # write, so the test waits for the two to agree rather than zeroing OBS's in between.
        pump_until(lambda: window.settings.obs_live_updates, 5, "the tick applied")
        pump_until(lambda: _offset(obs_client) == window.engine.mic_stage.sync_offset_ms != 0, 20,
                   "the app setting OBS's mic offset")
        # A latency mode change sends the offset again (OBS's is zeroed first to see it).
        obs_client.send("SetInputAudioSyncOffset", {"inputName": MIC, "inputAudioSyncOffset": 0}, raw=True)
        window.apply_settings(replace(window.settings, latency_mode="premium"))
        pump_until(lambda: _offset(obs_client) == window.engine.mic_stage.sync_offset_ms != 0, 20,
                   "the offset following the latency mode")
        assert read_running_app()["latency_mode"] == "premium"
        assert read_running_app()["mic_sync_offset_ms"] == window.engine.mic_stage.sync_offset_ms
    finally:
        window.close()
        pump(0.1)
    assert read_running_app() is None  # the app quit: obs setup uses the saved settings


def test_the_offset_log_follows_each_move_from_where_the_last_one_left_it(qt_app, jack_server, obs_config,
                                                                          caplog):
    # The voice loading restarts the mic's measurement: its delay goes back to where it
    # started, with no raise or calm step-down to log it, and the log said "raised from
    # 30 to 195 ms" and then "raised from 30 to 50 ms". Restarted here again once the
    # delay has risen from its start value (it does within seconds here: 30 → 50 ms).
    import re

    window = open_window(obs_config, replace(QUIET, mic_enabled=True, mic_device="system"))
    try:
        stage = window.engine.mic_stage
        assert stage is not None, "the JACK test server's microphone did not open"
        with caplog.at_level("INFO", logger="app.obs.live"):
            stage.restart_measurement()  # from the start value, with the log listening
            start = stage.sync_offset_ms
            pump_until(lambda: stage.sync_offset_ms > start, 20, "the delay raised")
            raised = stage.sync_offset_ms
            stage.restart_measurement()
            pump_until(lambda: stage.sync_offset_ms > start, 20, "the delay raised again")
            pump(0.2)
    finally:
        window.close()
        pump(0.1)
    moves = [tuple(map(int, m.groups())) for m in
             re.finditer(r"the mic's OBS sync offset: (\d+) → (\d+) ms", caplog.text)]
    assert (start, raised) in moves and (raised, start) in moves, caplog.text
    assert all(a[1] == b[0] for a, b in zip(moves, moves[1:])), f"a move left out: {moves}"


def test_captions_reach_an_obs_text_source_as_they_are_heard(qt_app, jack_server, obs, obs_client,
                                                             obs_config):
    from app.obs.credentials import save_password
    from tests.harness.app_driver import say, wait_until_quiet

    source = "Test captions from the app"
    settings = replace(QUIET, captions_to_obs=True, obs_captions_source=source, obs_port=obs.port)
    save_password(obs.password)  # as Add to OBS leaves it
    window = open_window(obs_config, settings)
    seen: set[str] = set()
    try:
        say(window, "Papa made a map of five big boats.")

        def caption_now() -> str:
            names = [i["inputName"] for i in obs_client.send("GetInputList", raw=True)["inputs"]]
            if source not in names:
                return ""
            return obs_client.send("GetInputSettings", {"inputName": source}, raw=True)["inputSettings"].get("text", "")

        end = window.engine.clock.media_time_now() + 8
        while window.engine.clock.media_time_now() < end and not {"Papa", "boats."} <= set(" ".join(seen).split()):
            pump(0.05)
            seen.add(caption_now())
        wait_until_quiet(window)
    finally:
        window.close()
        pump(0.1)
    # OBS's text source was made by the app and showed the sentence as it was heard.
    words = " ".join(seen).split()
    assert "Papa" in words and "boats." in words, seen


def test_obs_quitting_and_coming_back_is_said_once_each_and_captions_reach_it_again(
        qt_app, obs, obs_config):
    from app.obs.credentials import save_password
    from app.settings import Settings, SettingsStore
    from app.studio import OBS, Studio
    from tests.harness.obs import connect

    source = "Test captions across a restart"
    save_password(obs.password)  # as Add to OBS leaves it
    studio = Studio(SettingsStore(obs_config / "settings.json"),
                    Settings(captions_to_obs=True, obs_captions_source=source, obs_port=obs.port,
                             mic_enabled=False), measure_modes=False)
    lost = (f"OBS: the connection to OBS at 127.0.0.1:{obs.port} was lost (did it quit?); "
            "reconnecting, the captions and the mic's sync offset wait until it is back.")
    back = (f"OBS: connected again at 127.0.0.1:{obs.port}; the captions and the mic's sync "
            "offset reach it again.")

    def caption_in_obs() -> str:  # through a connection of its own: OBS restarts
        view = connect(obs)
        try:
            names = [i["inputName"] for i in view.send("GetInputList", raw=True)["inputs"]]
            return (view.send("GetInputSettings", {"inputName": source}, raw=True)
                    ["inputSettings"].get("text", "") if source in names else "")
        finally:
            view.disconnect()

    def obs_said() -> list[str]:
        return [m.text for m in studio.messages.history() if m.key == OBS]

    try:
        studio.obs.offer_caption("Before OBS quits")  # as the outputs do, word by word
        pump_until(lambda: caption_in_obs() == "Before OBS quits", 10, "the first caption")
        obs.kill()  # as OBS crashing: no goodbye on the websocket
        studio.obs.offer_caption("While OBS is away")
        pump_until(lambda: lost in obs_said(), 10, "the message that OBS is gone")
        obs.start()
        # The link reconnects within 20 s (backoff to 4 s), else the pusher every 5 s.
        pump_until(lambda: back in obs_said(), 30, "the message that OBS is back")
        assert caption_in_obs() == "While OBS is away"  # what waited was sent once back
        assert obs_said() == [lost, back]
    finally:
        studio.close()
