"""The studio behind every front end, driven as the window and headless drive it."""

from __future__ import annotations

import pytest

from app.messages import Severity
from app.settings import Settings, SettingsStore
from app.studio import Studio
from pipeline.core.events import InputStatus


@pytest.fixture
def studio(qt_app, tmp_path):
    s = Studio(SettingsStore(tmp_path / "settings.json"), Settings(mic_enabled=False),
               measure_modes=False)
    yield s
    s.close()


def test_a_microphone_that_is_on_is_good_news_before_the_engine_holds_it(studio):
    """The engine reports a microphone's status before it holds that microphone: the
    news must be read from the event, or 'is on' kept the warning sign."""
    assert studio.engine.mic is None
    studio._on_event(InputStatus("started", "Microphone 'system' is on", "system"))
    on = next(m for m in studio.messages.shown() if m.text == "Microphone 'system' is on")
    assert on.severity is Severity.INFO and on.expires_at is not None
    studio._on_event(InputStatus("lost", "Microphone 'system' was lost", "system"))
    lost = next(m for m in studio.messages.shown() if m.text.endswith("was lost"))
    assert lost.severity is Severity.WARNING


@pytest.fixture
def studio_with_mic(qt_app, jack_server, tmp_path):
    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=True, mic_device="system"), measure_modes=False)
    assert s.engine.start_mic() is None
    yield s
    s.close()


def test_mute_and_push_to_talk_reach_the_microphone_stage(studio_with_mic):
    studio = studio_with_mic
    stage = studio.engine.mic_stage
    studio.do_action("mic_mute")
    assert stage.muted
    assert any(m.text.startswith("Microphone muted") for m in studio.messages.shown())
    studio.do_action("mic_mute")
    assert not stage.muted
    # With a push-to-talk key in use the mic is shut unless the key is held.
    studio.set_push_to_talk(True)
    assert stage.muted
    studio.do_action("push_to_talk", pressed=True)
    assert not stage.muted
    studio.do_action("push_to_talk", pressed=False)
    assert stage.muted
    # The mic reopened (a setting changed): the new stage is muted the same way.
    studio.apply(Settings(mic_enabled=True, mic_device="system", mic_gate_db=-40.0))
    assert studio.engine.mic_stage is not stage and studio.engine.mic_stage.muted


def test_speaking_an_empty_clipboard_says_so(studio):
    from PySide6.QtGui import QGuiApplication

    QGuiApplication.clipboard().setText("")
    studio.do_action("speak_clipboard")
    assert any(m.text == "The clipboard holds no text to speak." for m in studio.messages.shown())
    QGuiApplication.clipboard().setText("Hello chat")
    studio.do_action("speak_clipboard")  # no voice loaded in this studio
    assert any(m.text.startswith("The voice is still loading") for m in studio.messages.shown())


def _wait(qt_app, condition, timeout: float = 60.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while not condition() and time.monotonic() < end:
        qt_app.processEvents()
        time.sleep(0.02)
    return condition()


def test_the_voice_switches_live_and_a_broken_one_keeps_the_voice_in_use(qt_app, tmp_path):
    import shutil
    from dataclasses import replace

    from app.voices import voices_folder
    from tests.harness.voices import make_voice

    make_voice(voices_folder(), "de_DE-joe-medium")
    broken = make_voice(tmp_path, "xx_XX-broken-medium")
    broken.config.write_text("{")
    s = Studio(SettingsStore(tmp_path / "settings.json"), Settings(mic_enabled=False),
               measure_modes=False)
    try:
        s.start()
        assert _wait(qt_app, lambda: s.tts is not None)
        first = s.tts
        assert first.voice.name == "en_US-joe-medium"
        s.apply(replace(s.settings, voice="de_DE-joe-medium", voice_rates={"de_DE-joe-medium": 0.7}))
        assert _wait(qt_app, lambda: s.tts is not first)
        assert s.engine.tts.voice.name == "de_DE-joe-medium" and s.engine.speaker.speech_rate == 0.7
        german = s.tts
        s.apply(replace(s.settings, voice=str(broken.model)))
        assert _wait(qt_app, lambda: any("is not a voice config" in m.text
                                         for m in s.messages.shown()))
        assert s.tts is german and s.engine.tts is german
        # Two choices in a row: the later one wins, even if the earlier loads last.
        s.apply(replace(s.settings, voice="de_DE-joe-medium"))
        s.apply(replace(s.settings, voice=None))
        assert _wait(qt_app, lambda: s.tts.voice.name == "en_US-joe-medium")
        assert not _wait(qt_app, lambda: s.tts.voice.name != "en_US-joe-medium", timeout=3.0)
        assert not any("is not a voice config" in m.text for m in s.messages.shown())
    finally:
        s.close()
        shutil.rmtree(voices_folder())


def test_with_the_api_on_the_voice_is_built_for_its_streams_which_share_its_engines(
        qt_app, tmp_path):
    from dataclasses import replace

    from app.api.speech import _voice_factory
    from tests.harness.app_process import free_port

    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=False, api_enabled=True, api_port=free_port(),
                        api_max_streams=50), measure_modes=False)
    try:
        s.start()
        assert _wait(qt_app, lambda: s.tts is not None and s.api is not None)
        assert s.tts.batch_sizes == (1, 8, 64)
        stream = _voice_factory(s.api, s.tts)(1)
        try:
            # The same engines, warm, whose runs of concurrent streams a GPU batches.
            assert stream.engines is s.tts.engines
        finally:
            stream.close()
        s.apply(replace(s.settings, api_max_streams=4))
        assert s.voice_batch_sizes() == (1, 8)
        s.apply(replace(s.settings, api_enabled=False))
        assert s.voice_batch_sizes() == (1,)
        # On the CPU the sizes do not change how the voice runs: it is not warmed again.
        first = s.tts
        assert not _wait(qt_app, lambda: s.tts is not first, timeout=3.0)
    finally:
        s.close()


def test_a_broken_voice_at_start_leaves_the_bundled_one_speaking(qt_app, tmp_path):
    from tests.harness.voices import make_voice

    broken = make_voice(tmp_path, "xx_XX-broken-medium")
    broken.config.write_text("{")
    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=False, voice=str(broken.model)), measure_modes=False)
    try:
        s.start()
        assert _wait(qt_app, lambda: s.tts is not None)
        assert s.tts.voice.name == "en_US-joe-medium"
        assert any("The bundled voice speaks until" in m.text for m in s.messages.shown())
    finally:
        s.close()


def test_each_avatar_keeps_its_voice_and_next_avatar_brings_it(qt_app, tmp_path):
    import shutil

    from app.voices import voices_folder
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from tests.harness.voices import make_voice

    make_voice(voices_folder(), "de_DE-joe-medium")
    store = SettingsStore(tmp_path / "settings.json")
    # A second sprite avatar: the bundled one's files under another folder.
    sprite = tmp_path / "avatars" / "twin"
    shutil.copytree(DEFAULT_AVATAR_MANIFEST.parent, sprite)
    s = Studio(store, Settings(mic_enabled=False), measure_modes=False)
    try:
        twin = s.library.adopt(sprite / "manifest.json")
        s.library.set_voice(twin, "de_DE-joe-medium")
        s.start()
        assert _wait(qt_app, lambda: s.tts is not None)
        assert s.tts.voice.name == "en_US-joe-medium"
        s.do_action("next_avatar")
        assert _wait(qt_app, lambda: s.settings.avatar_manifest == str(sprite / "manifest.json"))
        assert _wait(qt_app, lambda: s.tts.voice.name == "de_DE-joe-medium")
        s.do_action("previous_avatar")
        # The bundled one, first in the library.
        assert _wait(qt_app, lambda: s.settings.avatar_manifest is None)
        assert _wait(qt_app, lambda: s.tts.voice.name == "en_US-joe-medium")
    finally:
        s.close()
        shutil.rmtree(voices_folder())


def _twins(studio, count: int) -> list:
    """`count` sprite avatars in the studio's library after the bundled one: its files
    under other folders."""
    import shutil

    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST

    twins = []
    for number in range(count):
        folder = studio.library.folder / f"twin{number}"
        shutil.copytree(DEFAULT_AVATAR_MANIFEST.parent, folder)
        twins.append(studio.library.adopt(folder / "manifest.json"))
    return twins


def _reading(monkeypatch, first_seconds: float = 0.0):
    """Who reads the avatars the studio shows: a list of (thread id, setting), in the
    order read, and an event set once the first read started (it takes `first_seconds`
    longer)."""
    import threading
    import time

    import app.studio

    read = app.studio.read_avatar
    readers = []
    first = threading.Event()

    def reading(setting):
        readers.append((threading.get_ident(), setting))
        if len(readers) == 1:
            first.set()
            time.sleep(first_seconds)
        return read(setting)

    monkeypatch.setattr(app.studio, "read_avatar", reading)
    return readers, first


def test_a_library_choice_is_read_off_the_gui_thread_and_shown_once_read(
        qt_app, studio, monkeypatch):
    """Reading an avatar held the GUI thread, which draws every output's frames, for
    43-140 ms: the avatar froze at each switch."""
    import threading

    studio.load_avatar(None)
    bundled = studio.rig
    [twin] = _twins(studio, 1)
    readers, _ = _reading(monkeypatch, first_seconds=0.3)
    studio.use_avatar(twin)
    assert studio.rig is bundled  # still reading: the GUI thread went on
    assert _wait(qt_app, lambda: studio.rig is not bundled, timeout=10.0)
    assert studio.settings.avatar_manifest == twin.setting
    assert [setting for _, setting in readers] == [twin.setting]
    assert threading.main_thread().ident not in [ident for ident, _ in readers]


def test_quick_next_avatar_presses_end_on_the_last_choice_even_when_the_first_reads_last(
        qt_app, studio, monkeypatch):
    """Each press steps from the avatar chosen last, not the one still shown, and a read
    for a choice passed over is not shown (nor, if not started, made)."""
    studio.load_avatar(None)
    twins = _twins(studio, 3)
    readers, first = _reading(monkeypatch, first_seconds=0.5)
    shown = []
    studio.avatar_changed.connect(lambda: shown.append(studio.settings.avatar_manifest))
    studio.do_action("next_avatar")
    assert first.wait(10)  # the first read is under way, and takes the longest
    studio.do_action("next_avatar")
    studio.do_action("next_avatar")
    assert _wait(qt_app, lambda: studio.settings.avatar_manifest == twins[2].setting, 10.0)
    assert not _wait(qt_app, lambda: studio.settings.avatar_manifest != twins[2].setting, 1.0)
    assert shown == [twins[2].setting]
    assert [setting for _, setting in readers] == [twins[0].setting, twins[2].setting]


def test_an_unreadable_avatar_chosen_is_told_and_the_avatar_stays(qt_app, studio, monkeypatch):
    """The error raised reading it is told on the GUI thread, also when it was chosen
    over another still being read; the next avatar then steps from the one shown."""
    import threading

    studio.load_avatar(None)
    bundled = studio.rig
    good, broken = _twins(studio, 2)
    broken.manifest.write_text("{")
    readers, first = _reading(monkeypatch, first_seconds=0.3)
    studio.do_action("next_avatar")
    assert first.wait(10)
    studio.use_avatar(broken)
    told = f"{broken.name} could not be shown: "
    assert _wait(qt_app, lambda: any(m.text.startswith(told) for m in studio.messages.shown()),
                 timeout=10.0)
    message = next(m.text for m in studio.messages.shown() if m.text.startswith(told))
    assert message.endswith(" The avatar stays as it was.")
    assert not _wait(qt_app, lambda: studio.rig is not bundled, timeout=1.0)
    assert studio.settings.avatar_manifest is None
    assert threading.main_thread().ident not in [ident for ident, _ in readers]
    studio.do_action("next_avatar")
    assert _wait(qt_app, lambda: studio.settings.avatar_manifest == good.setting, 10.0)


def test_the_studio_hears_its_hotkeys_while_another_program_has_focus(
        qt_app, x_display, window_manager, tmp_path):
    """The wiring from the settings' hotkeys to the studio's actions, with real X keys
    sent while another program's window has focus (app/hotkeys.py is tested on its own in
    tests/test_hotkeys.py)."""
    import subprocess
    from dataclasses import replace

    from tests.harness.other_program import OtherProgram

    hotkeys = {"expression:happy": "<ctrl>+<alt>+1", "mic_mute": "<ctrl>+<alt>+m"}
    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=False, hotkeys=hotkeys), measure_modes=False)
    other = OtherProgram(x_display)
    try:
        s.load_avatar(None)  # the bundled avatar: it has happy
        s._bind_hotkeys(s.hotkeys.start())
        assert s.hotkeys.is_global and s.hotkey_problems == []
        subprocess.run(["xdotool", "windowactivate", "--sync", str(other.window)], check=True)
        subprocess.run(["xdotool", "key", "ctrl+alt+1"], check=True)
        assert _wait(qt_app, lambda: s.expression == "happy", timeout=5.0)
        subprocess.run(["xdotool", "key", "ctrl+alt+m"], check=True)
        assert _wait(qt_app, lambda: s.mic_muted, timeout=5.0)
        # Rebound live from the settings: the old combination does nothing any more.
        s.apply(replace(s.settings, hotkeys={"expression:sad": "<ctrl>+<alt>+1"}))
        subprocess.run(["xdotool", "key", "ctrl+alt+1"], check=True)
        assert _wait(qt_app, lambda: s.expression == "sad", timeout=5.0)
        # One combination on two actions: said, by name.
        s.apply(replace(s.settings, hotkeys={"stop": "<ctrl>+<alt>+1",
                                             "expression:sad": "<ctrl>+<alt>+1"}))
        assert any("is set for both" in m.text for m in s.messages.shown())
    finally:
        other.stop()
        s.close()


def test_push_to_talk_never_shuts_a_mic_whose_key_cannot_be_heard(studio_with_mic):
    """Headless with no display hears no key: push to talk would keep the mic shut for
    good, so it is not put in force."""
    studio = studio_with_mic
    studio.settings = Settings(mic_enabled=True, mic_device="system",
                               hotkeys={"push_to_talk": "<f9>"})
    studio.hotkeys.is_global = False  # as when Hotkeys.start found no desktop to listen in
    studio._bind_hotkeys([])
    assert not studio.push_to_talk and not studio.engine.mic_stage.muted
    studio.hotkeys_in_window = True  # a window binds it as its own shortcut
    studio._bind_hotkeys([])
    assert studio.push_to_talk and studio.engine.mic_stage.muted


def test_show_hide_hides_the_avatar_in_every_output_and_says_so(studio):
    studio.do_action("toggle_avatar")
    assert studio.outputs.avatar_motion.hidden
    assert any(m.text.startswith("The avatar is hidden in every output")
               for m in studio.messages.shown())
    studio.do_action("toggle_avatar")
    assert not studio.outputs.avatar_motion.hidden
    assert not any(m.text.startswith("The avatar is hidden") for m in studio.messages.shown())


def test_the_mouth_frames_path_is_said_and_a_cuda_that_cannot_run_falls_back_with_a_warning(
        qt_app, tmp_path):
    """On this machine (no GPU): "auto" draws with OpenGL and the status says why, with no
    warning; "cuda" asked for falls back to OpenGL with a warning saying why; "opengl"
    as the settings ask. Through the browser source's frame feed, as the app draws it."""
    from dataclasses import replace

    from app.studio import MOUTH_FRAMES
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer
    from render.gpu.interop import cuda_unavailable
    from tests.harness.app_process import free_port

    with OffscreenTarget(16, 16):
        reason = cuda_unavailable()
    if reason is None:
        pytest.skip("CUDA-GL interop works here: tests/test_gpu_frames.py covers this machine")
    s = Studio(SettingsStore(tmp_path / "settings.json"),
               Settings(mic_enabled=False, browser_source=True, browser_source_port=free_port()),
               measure_modes=False)

    def warned():
        return [(m.text, m.severity) for m in s.messages.shown() if m.key == MOUTH_FRAMES]

    try:
        s.outputs.apply(s.settings)
        assert s.mouth_frames is None  # nothing drawn yet
        s.load_avatar(None)
        assert s.mouth_frames == f"mouth frames by OpenGL: CUDA-GL interop is not available here: {reason}"
        assert warned() == []
        feed = s.outputs.opened["browser_source"].feed
        s.apply(replace(s.settings, mouth_frames="cuda"))
        text = ("OpenGL: the settings ask for CUDA, but CUDA-GL interop is not available here: "
                f"{reason}")
        assert s.mouth_frames == f"mouth frames by {text}"
        assert warned() == [(f"Mouth frames by {text}.", Severity.WARNING)]
        assert type(feed.renderer) is SpriteGLRenderer
        s.apply(replace(s.settings, mouth_frames="opengl"))
        assert s.mouth_frames == "mouth frames by OpenGL, as the settings ask" and warned() == []
    finally:
        s.close()


def test_a_condition_told_again_in_the_same_words_reaches_the_front_end_once(studio_with_mic):
    """Headless prints each message a front end hears of: the microphone's "is on" was
    printed twice, once from its status and once from the check after start_mic."""
    studio = studio_with_mic
    studio.forget("microphone")  # told already as the fixture started the mic
    heard = []
    studio.on_message = heard.append
    status = studio.engine.mic.status
    studio._on_event(status)  # as the engine publishes it
    studio._show_mic_state()  # as start() then checks it
    assert [m.text for m in heard] == ["Microphone 'system' is on"]
    studio.tell("Microphone 'system' is on", Severity.WARNING, key="microphone")
    assert len(heard) == 2 and heard[-1].severity is Severity.WARNING  # news: it changed


def test_a_frame_stage_slowed_past_two_ticks_degrades_says_so_once_and_comes_back(
        qt_app, jack_server, tmp_path):
    import itertools
    import threading
    import time

    from app.frame_rate_watch import DEGRADED_MESSAGE, HOLD_S
    from tests.harness.app_driver import pump, pump_until

    studio = Studio(SettingsStore(tmp_path / "settings.json"),
                    Settings(mic_enabled=False, audio_output_device="system", output_window=True),
                    measure_modes=False)
    # The mouth's pose stage, which every frame producer the studio makes pulls through
    # (its sources are connected anew on some events), slowed at will: one frame in eight
    # takes three ticks (a stage slow throughout falls behind on either path, since the
    # degraded one halves the frames made, not what each costs).
    slow = threading.Event()
    full = studio.engine.timeline.frame_pose
    made = itertools.count()

    def pose(t_start: float, period: float):
        if slow.is_set() and next(made) % 8 == 0:
            time.sleep(3 / studio.frame_rate)
        return full(t_start, period)

    studio.engine.timeline.frame_pose = pose
    studio.start()

    def said() -> bool:
        return DEGRADED_MESSAGE in [m.text for m in studio.messages.shown()]

    try:
        presenter = studio._presenter()  # the avatar window's
        pump_until(lambda: presenter.producer is not None, 5, "the frame producer")
        slow.set()
        pump_until(said, 5, "the message")
        shown_before = presenter.slots.degraded_shown
        pump(2.5)  # slow still: its full path tried again each second, and given up again
        assert said() and presenter.slots.degraded_shown > shown_before
        slow.clear()
        pump_until(lambda: not said(), HOLD_S + 3, "the message going")
        assert not presenter.degraded
        assert [m.text for m in studio.messages.history()].count(DEGRADED_MESSAGE) == 1
    finally:
        studio.close()
