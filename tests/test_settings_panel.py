"""The settings panel on a real Qt display: every knob of Settings, validated by the model."""

from dataclasses import asdict, fields

import pytest

from app.settings import Settings
from pipeline.audio.devices import list_devices
from pipeline.lipsync.model import MIC_TRADES, MODES_MS
from pipeline.voice.streaming_tts import LATENCY_MODES


@pytest.fixture
def panel(qt_app):
    from app.ui.settings_panel import SettingsPanel

    made = []

    def make(settings=Settings(), measured=None):
        made.append(SettingsPanel(settings, measured))
        return made[-1]

    yield make
    for dialog in made:
        dialog.deleteLater()
    qt_app.processEvents()


def test_every_mode_states_its_trades_for_voice_and_microphone(panel):
    assert set(MIC_TRADES) == set(MODES_MS) == set(LATENCY_MODES)
    dialog = panel(Settings(latency_mode="balanced"), {"ultra": 26.4, "balanced": 27.1})
    labels = [dialog.mode.itemText(i) for i in range(dialog.mode.count())]
    assert labels == ["ultra (synthesis first audio 26 ms here)",
                      "balanced (synthesis first audio 27 ms here)", "premium (not measured yet)"]
    # And which first audio that is: not the one heard, which the status line shows.
    assert "synthesis first audio" in dialog.first_audio_note.text().lower()
    assert "heard first audio" in dialog.first_audio_note.text()
    assert dialog.mode_description.text() == (
        f"{LATENCY_MODES['balanced'].description} {MIC_TRADES['balanced']}")
    dialog.mode.setCurrentIndex(dialog.mode.findData("ultra"))
    assert "10 ms look-ahead" in dialog.mode_description.text()
    assert LATENCY_MODES["ultra"].description in dialog.mode_description.text()


def test_every_setting_is_edited_and_comes_back_validated(panel):
    dialog = panel()
    dialog.mode.setCurrentIndex(dialog.mode.findData("premium"))
    dialog.speech_queue.setCurrentIndex(dialog.speech_queue.findData("queue"))
    dialog.mic_enabled.setChecked(False)
    dialog.mic_gain.setValue(6.5)
    dialog.mic_gate.setValue(-42.0)
    dialog.mic_lipsync.setCurrentIndex(dialog.mic_lipsync.findData("volume"))
    dialog.avatar.setText("  /tmp/rig/manifest.json ")
    dialog.rate.setValue(1.25)
    dialog.volume.setValue(0.8)
    dialog.fps.setValue(30)
    dialog.software_gl_fps.setValue(24)
    dialog.blinking.setChecked(False)
    dialog.breathing.setChecked(False)
    dialog.background.setText("#102030")
    dialog.inference.setCurrentIndex(dialog.inference.findData("cpu"))
    dialog.output_window.setChecked(True)
    dialog.output_size.setCurrentText("800x800")
    dialog.output_borderless.setChecked(True)
    dialog.output_on_top.setChecked(True)
    dialog.output_background.setCurrentIndex(dialog.output_background.findData("chroma"))
    dialog.output_colour.setText("navy")
    dialog.chroma_colour.setText("#0000ff")
    dialog.browser_source.setChecked(True)
    dialog.browser_source_port.setValue(9000)
    dialog.virtual_camera.setChecked(True)
    dialog.virtual_camera_size.setCurrentText("1080p")
    dialog.virtual_camera_fps.setCurrentIndex(dialog.virtual_camera_fps.findData(60))
    dialog.captions_lead.setValue(200)
    dialog.captions_in_window.setChecked(False)
    dialog.captions_to_obs.setChecked(True)
    dialog.obs_host.setText("192.0.2.7")
    dialog.obs_port.setValue(4456)
    dialog.obs_scene.setText("Just chatting")
    dialog.obs_captions_source.setText("Subtitles")
    dialog.obs_live_updates.setChecked(True)
    dialog.obs_fps.setValue(60)
    dialog.api_enabled.setChecked(True)
    dialog.api_port.setValue(9100)
    dialog.api_bind_address.setText("0.0.0.0")
    dialog.api_allow_network.setChecked(True)
    dialog.api_allowed_origins.setText("https://example.com")
    dialog.api_max_message_bytes.setValue(32768)
    dialog.api_messages_per_second.setValue(20)
    dialog.api_max_streams.setValue(8)
    dialog.vtube_studio.setChecked(True)
    dialog.vtube_studio_host.setText("192.0.2.8")
    dialog.vtube_studio_port.setValue(8002)
    dialog.vtube_studio_offset.setValue(40)
    dialog.vmc.setChecked(True)
    dialog.vmc_host.setText("192.0.2.9")
    dialog.vmc_port.setValue(39540)
    dialog.vmc_blendshapes.setCurrentIndex(dialog.vmc_blendshapes.findData("vrm1"))
    dialog.vmc_offset.setValue(-20)
    dialog._accept()
    result = dialog.result_settings()
    assert dialog.error.text() == ""
    expected = Settings(latency_mode="premium", speech_queue="queue", mic_enabled=False, mic_gain_db=6.5,
                        mic_gate_db=-42.0, mic_lipsync="volume",
                        avatar_manifest="/tmp/rig/manifest.json", speech_rate=1.25, volume=0.8,
                        target_fps=30, software_gl_fps=24, blinking=False, breathing=False, background="#102030",
                        inference_provider="cpu", output_window=True, output_size="800x800", output_borderless=True,
                        output_on_top=True, output_background="chroma", output_colour="navy",
                        chroma_colour="#0000ff", browser_source=True, browser_source_port=9000,
                        virtual_camera=True, virtual_camera_size="1080p", virtual_camera_fps=60,
                        captions_lead_ms=200.0, captions_in_window=False, captions_to_obs=True,
                        obs_host="192.0.2.7", obs_port=4456, obs_scene="Just chatting",
                        obs_captions_source="Subtitles", obs_live_updates=True, obs_fps=60,
                        api_enabled=True, api_port=9100, api_bind_address="0.0.0.0",
                        api_allow_network=True, api_allowed_origins="https://example.com",
                        api_max_message_bytes=32768, api_messages_per_second=20,
                        api_max_streams=8, vtube_studio=True, vtube_studio_host="192.0.2.8",
                        vtube_studio_port=8002, vtube_studio_offset_ms=40.0, vmc=True,
                        vmc_host="192.0.2.9", vmc_port=39540, vmc_blendshapes="vrm1",
                        vmc_offset_ms=-20.0)
    assert result == expected
    # Every field but the version was set to something other than its default here, or
    # is a device (next test): the panel has a widget for each knob.
    changed = {k for k, v in asdict(result).items() if v != getattr(Settings(), k)}
    devices = {"audio_output_device", "mic_device"}
    assert changed | devices | {"version"} == {f.name for f in fields(Settings)}


def test_a_saved_device_that_is_unplugged_stays_chosen(panel):
    dialog = panel(Settings(audio_output_device="USB Headset", mic_device="Blue Yeti"))
    assert dialog.output.currentText() == "USB Headset"
    assert dialog.mic.currentText() == "Blue Yeti"
    dialog._accept()
    kept = dialog.result_settings()
    assert (kept.audio_output_device, kept.mic_device) == ("USB Headset", "Blue Yeti")
    dialog = panel(Settings(audio_output_device="USB Headset"))
    dialog.output.setCurrentIndex(0)  # System default
    dialog._accept()
    assert dialog.result_settings().audio_output_device is None


def test_a_bad_value_is_explained_and_nothing_is_taken(panel):
    original = Settings()
    dialog = panel(original)
    dialog.background.setText("not a colour")
    dialog.output_size.setCurrentText("big")
    dialog._accept()
    assert "background" in dialog.error.text() and "#rrggbbaa" in dialog.error.text()
    assert "output_size" in dialog.error.text()
    assert dialog.result_settings() is original
    assert not dialog.result()  # the dialog did not close as accepted


def test_devices_plugged_in_after_start_can_be_chosen(panel, jack_server):
    from tests.harness.jack_recorder import plug_in_microphone, plug_in_speaker

    usb = plug_in_microphone("lss-new-mic")
    speaker = plug_in_speaker("lss-new-speaker")
    try:
        # This process's PortAudio predates them.
        assert "lss-new-mic" not in list_devices("input")
        assert "lss-new-speaker" not in list_devices("output")
        dialog = panel(Settings())
        # Listed after the devices this process knows; the machine's own sound card or
        # sound server, where it has one, is among those.
        mics = [dialog.mic.itemText(i) for i in range(dialog.mic.count())]
        assert mics == ["System default", *list_devices("input"), "lss-new-mic"]
        outputs = [dialog.output.itemText(i) for i in range(dialog.output.count())]
        assert outputs == ["System default", *list_devices("output"), "lss-new-speaker"]
        assert "system" in mics and "system" in outputs  # the JACK test server's
        dialog.mic.setCurrentText("lss-new-mic")
        dialog.output.setCurrentText("lss-new-speaker")
        dialog._accept()
        chosen = dialog.result_settings()
        assert (chosen.mic_device, chosen.audio_output_device) == ("lss-new-mic", "lss-new-speaker")
    finally:
        usb.stop()
        speaker.close()
