import json

from app.settings import SETTINGS_VERSION, Settings, SettingsStore, validate


def test_round_trip(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    settings = Settings(audio_output_device="system", speech_rate=1.25, blinking=False)
    store.save(settings)
    assert store.load() == settings
    assert store.problems == []
    assert json.loads(store.path.read_text())["version"] == SETTINGS_VERSION


def test_bad_values_fall_back_one_by_one_and_are_reported():
    settings, problems = validate({
        "speech_rate": 9.0, "volume": "loud", "target_fps": 60, "blinking": "yes",
        "background": "reddish", "colour": 1,
    })
    assert settings.speech_rate == 1.0 and settings.volume == 1.0
    assert settings.target_fps == 60  # a good value next to bad ones is kept
    assert settings.blinking is True and settings.background == Settings().background
    text = "\n".join(problems)
    for name in ("speech_rate", "volume", "blinking", "background", "'colour'"):
        assert name in text
    assert len(problems) == 5


def test_integers_are_accepted_for_floats_but_not_booleans():
    settings, problems = validate({"speech_rate": 2, "volume": True})
    assert settings.speech_rate == 2.0 and isinstance(settings.speech_rate, float)
    assert settings.volume == 1.0 and len(problems) == 1


def test_corrupt_file_is_kept_aside_and_defaults_used(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    store = SettingsStore(path)
    assert store.load() == Settings()
    assert "unreadable" in store.problems[0]
    backups = list(tmp_path.glob("settings.json.bad-*"))
    assert len(backups) == 1 and backups[0].read_text() == "{not json"
    assert not path.exists()


def test_newer_version_keeps_what_fits(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": 99, "volume": 0.5}))
    store = SettingsStore(path)
    assert store.load().volume == 0.5
    assert "version 99" in store.problems[0]


def test_latency_mode_must_be_a_known_mode():
    settings, problems = validate({"latency_mode": "ludicrous"})
    assert settings.latency_mode == "balanced"
    assert "ultra, balanced, premium" in problems[0]
    assert validate({"latency_mode": "ultra"})[0].latency_mode == "ultra"


def test_colours_are_accepted_in_every_form_users_type():
    # Names and #rrggbbaa as well as #rrggbb (issue 13); anything else names the forms.
    settings, problems = validate({"background": "DarkSlateGray", "output_colour": "#00ff0080",
                                   "chroma_colour": "#0f0", "output_size": "800x600"})
    assert problems == []
    assert (settings.background, settings.output_colour, settings.chroma_colour,
            settings.output_size) == ("DarkSlateGray", "#00ff0080", "#0f0", "800x600")
    settings, problems = validate({"chroma_colour": "greenish", "output_size": "huge"})
    assert settings.chroma_colour == Settings().chroma_colour
    assert any("#rrggbbaa" in p and "colour name" in p for p in problems)
    assert any("WIDTHxHEIGHT" in p for p in problems)


def test_a_bad_entry_in_a_mapping_loses_only_itself():
    settings, problems = validate({
        "hotkeys": {"stop": "<ctrl>+x", "dance": "<ctrl>+d", "expression:happy": "<f1>"},
        "voice_rates": {"joe": 1.5, "fast": 3, "odd": True},
    })
    assert settings.hotkeys == {"stop": "<ctrl>+x", "expression:happy": "<f1>"}
    assert settings.voice_rates == {"joe": 1.5}
    assert problems == [
        "voice_rates: 'fast' = 3 must be between 0.5 and 2; left out",
        "voice_rates: 'odd' = True must be a float; left out",
        "hotkeys: 'dance' = '<ctrl>+d' is not an action (the actions: stop, mic_mute, "
        "push_to_talk, speak_clipboard, next_avatar, previous_avatar, toggle_avatar, "
        "expression:NAME); left out",
    ]
    _, problems = validate({"hotkeys": ["stop"]})
    assert problems[0].startswith("hotkeys = ['stop'] must be a mapping of names to values")


def test_mouth_frames_are_kept_checked_and_default_to_auto_for_older_files(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    store.save(Settings(mouth_frames="cuda"))
    assert store.load().mouth_frames == "cuda" and store.problems == []
    settings, problems = validate({"mouth_frames": "vulkan"})
    assert settings.mouth_frames == "auto"
    assert problems == ["mouth_frames = 'vulkan' must be one of auto, opengl, cuda; using 'auto'"]
    # A file saved before the setting existed: the same version, the default, nothing said.
    store.path.write_text(json.dumps({"version": SETTINGS_VERSION, "volume": 0.5}))
    assert store.load() == Settings(volume=0.5) and store.problems == []
