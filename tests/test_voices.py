"""The voice catalogue with real piper voices: a second voice made from the bundled one
under another name and espeak language is listed, chosen and speaks its language;
broken voice files are refused with a message naming the file, the good ones staying."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from app.engine import Engine
from app.settings import Settings
from app.voices import add_voice, catalogue, choose_voice, voices_folder
from pipeline.voice.streaming_tts import LATENCY_MODES, SentencePlan, StreamingTTS
from pipeline.voice.voice_files import BUNDLED_VOICE, VoiceError
from tests.harness.voices import make_multi_speaker_voice, make_voice

GERMAN = "de_DE-joe-medium"
TEXT = "Guten Tag, wie geht es dir? Schönes Wetter heute."


@pytest.fixture(scope="module")
def voices(own_config_dir):
    """The test session's voices folder (conftest's own config dir) with the German voice."""
    make_voice(voices_folder(), GERMAN)
    yield voices_folder()
    shutil.rmtree(voices_folder())


def _plans(tts: StreamingTTS, text: str) -> tuple[list[SentencePlan], np.ndarray]:
    plans, audio = [], []
    for item in tts.stream(text, LATENCY_MODES["premium"]):
        (plans if isinstance(item, SentencePlan) else audio).append(
            item if isinstance(item, SentencePlan) else item.samples)
    return plans, np.concatenate(audio)


def test_the_second_voice_is_listed_with_its_language(voices):
    found = catalogue()
    assert found.names == [BUNDLED_VOICE.name, GERMAN] and not found.problems
    german = found.named(GERMAN)
    assert (german.language, german.quality, german.sample_rate, german.speakers) == (
        "de", "medium", 22050, ())
    assert german.path == voices / f"{GERMAN}.onnx" and not german.bundled
    assert choose_voice(GERMAN) == german == choose_voice(str(german.path))
    assert choose_voice(None).bundled and choose_voice(BUNDLED_VOICE.name).bundled


def test_the_second_voice_speaks_german_and_its_visemes_come_from_german(voices, caplog):
    german = StreamingTTS(voice=choose_voice(GERMAN).files, noise_scale=0.0, noise_w_scale=0.0)
    english = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    with caplog.at_level(logging.INFO, logger="pipeline.voice.viseme_track"):
        german_plans, german_audio = _plans(german, TEXT)
    english_plans, english_audio = _plans(english, TEXT)
    said = ["".join(p.phoneme for p in plan.phonemes) for plan in german_plans]
    # espeak's German reading: "Tag" with a long back a and a final devoiced k, "schönes"
    # with a long rounded ø; English espeak reads "tæɡ" and has no ø.
    assert "tɑːk" in said[0] and "øː" in said[1], said
    english_said = "".join(p.phoneme for plan in english_plans for p in plan.phonemes)
    assert "tæɡ" in english_said and "ø" not in english_said
    # It speaks: audio as long as its plans, and sound in it (the bundled voice's speech
    # peaks at 0.54 raw, median of 96 renders; a silent stream would be 0).
    assert len(german_audio) == sum(plan.total_samples for plan in german_plans)
    assert np.abs(german_audio).max() > 0.2
    assert len(german_audio) != len(english_audio)
    # Every German sound gets a viseme; the ones the map lacks are said once, with the
    # viseme they are shown as (ø has none of its own in pipeline.core.visemes).
    visemes = [p.viseme for plan in german_plans for p in plan.phonemes]
    assert {"FF", "DD", "kk", "SS"} <= set(visemes) and visemes.count("sil") < len(visemes) / 2
    told = [r.getMessage() for r in caplog.records if "has no viseme of its own" in r.getMessage()]
    assert any("'øː'" in message for message in told), told
    assert len(told) == len(set(told))


BROKEN = {
    "bad-json": ("{not json", "is not a voice config (not valid JSON"),
    "no-espeak": (json.dumps({"audio": {"sample_rate": 22050}, "num_symbols": 256,
                              "num_speakers": 1, "phoneme_id_map": {}}),
                  "is not a piper voice config ('espeak' is missing or wrong)"),
    "pinyin": (None, "the voice reads text with piper's pinyin phonemizer, which is not installed"),
}


@pytest.mark.parametrize("kind", ["bad-json", "no-espeak", "pinyin", "no-model", "no-config",
                                  "text-model", "onnx-not-piper", "speakers-mismatch"])
def test_a_broken_voice_is_refused_by_name_and_the_good_ones_stay(tmp_path, kind):
    folder = tmp_path / "voices"
    make_voice(folder, GERMAN)
    files = make_voice(folder, f"xx_XX-{kind}-medium",
                       **({"phoneme_type": "pinyin"} if kind == "pinyin" else {}))
    if kind in ("bad-json", "no-espeak"):
        files.config.write_text(BROKEN[kind][0])
    wrong, expected = {
        "bad-json": (files.config, BROKEN["bad-json"][1]),
        "no-espeak": (files.config, BROKEN["no-espeak"][1]),
        "pinyin": (files.config, BROKEN["pinyin"][1]),
        "no-model": (files.config, f"its model {files.model.name} is missing"),
        "no-config": (files.model, f"its config {files.config.name} is missing"),
        "text-model": (files.model, "is not an ONNX model, so not a piper voice"),
        "onnx-not-piper": (files.model, "is an ONNX model but not a piper voice (its inputs "
                           "are x; a piper voice takes input, input_lengths, scales)"),
        "speakers-mismatch": (files.model, "does not match its config: the model has one "
                              "speaker, the config says 4"),
    }[kind]
    if kind == "no-model":
        files.model.unlink()
    elif kind == "no-config":
        files.config.unlink()
    elif kind == "text-model":
        files.model.write_text("these are words, not a model")
    elif kind == "onnx-not-piper":
        identity = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], "other",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        onnx.save(helper.make_model(identity), str(files.model))
    elif kind == "speakers-mismatch":
        config = json.loads(files.config.read_text())
        files.config.write_text(json.dumps({**config, "num_speakers": 4}))
    found = catalogue(folder)
    assert found.names == [BUNDLED_VOICE.name, GERMAN]
    assert list(found.problems) == [files.name], found.problems
    assert found.problems[files.name].startswith(f"{wrong}: {expected}"), found.problems
    for choice in (files.name, str(files.model)):
        with pytest.raises(VoiceError, match="^" + str(wrong).replace(".", r"\.")):
            choose_voice(choice, folder)


def test_adding_a_voice_copies_it_checked(tmp_path):
    folder = tmp_path / "voices"
    source = make_voice(tmp_path / "downloads", GERMAN)
    added = add_voice(source.config, folder)  # either file of the pair names it
    assert added.path == folder / source.model.name and added.language == "de"
    assert sorted(p.name for p in folder.iterdir()) == [source.model.name, source.config.name]
    assert add_voice(source.model, folder) == added  # the same voice again: kept
    other = make_voice(tmp_path / "other", GERMAN, "fr")
    with pytest.raises(VoiceError, match=f"A voice named {GERMAN} is installed already"):
        add_voice(other.model, folder)
    broken = make_voice(tmp_path / "broken", "de_DE-broken-medium")
    broken.config.write_text("{")
    with pytest.raises(VoiceError, match="is not a voice config"):
        add_voice(broken.model, folder)
    with pytest.raises(VoiceError, match="is not a piper voice"):
        add_voice(tmp_path / "song.wav", folder)
    assert catalogue(folder).names == [BUNDLED_VOICE.name, GERMAN]
    assert sorted(p.name for p in folder.iterdir()) == [source.model.name, source.config.name]


def test_a_bad_name_lists_the_installed_voices(voices):
    with pytest.raises(VoiceError) as refused:
        choose_voice("de_DE-nobody")
    assert str(refused.value).startswith(f"No voice named 'de_DE-nobody'. Installed: "
                                         f"{BUNDLED_VOICE.name}, {GERMAN} ")
    with pytest.raises(VoiceError, match="Voice not found: /nowhere/x.onnx"):
        choose_voice("/nowhere/x.onnx")


def test_a_multi_speaker_voice_names_its_speakers_and_speaks_as_the_one_asked(tmp_path):
    files = make_multi_speaker_voice(tmp_path, {"alice": 0, "bob": 2})
    voice = choose_voice(str(files.model))
    assert voice.speakers == ("alice", "1", "bob")
    # The id reaches every engine: without it onnxruntime refuses the run.
    tts = StreamingTTS(voice=files, speaker=2, noise_scale=0.0, noise_w_scale=0.0)
    plans, audio = _plans(tts, "Hello there.")
    assert len(audio) == sum(p.total_samples for p in plans) and np.abs(audio).max() > 0.2
    with pytest.raises(VoiceError, match="has speakers 0 to 2: there is no speaker 3"):
        StreamingTTS(voice=files, speaker=3)


def test_the_engine_loads_the_chosen_voice_at_its_own_rate(voices):
    engine = Engine(Settings(voice=GERMAN, speech_rate=1.2, voice_rates={GERMAN: 0.8},
                             mic_enabled=False))
    try:
        tts = Engine.load_voice(provider="cpu", voice=engine.settings.voice)
        engine.attach_voice(tts)
        assert engine.tts.voice.name == GERMAN and engine.speaker.speech_rate == 0.8
        engine.apply(Settings(voice=GERMAN, speech_rate=1.2, voice_rates={GERMAN: 1.5},
                              mic_enabled=False))
        assert engine.speaker.speech_rate == 1.5
        # A voice with no rate of its own takes the general one.
        engine.attach_voice(StreamingTTS())
        assert engine.speaker.speech_rate == 1.2
        with pytest.raises(VoiceError, match="No voice named 'gone'"):
            Engine.load_voice(provider="cpu", voice="gone")
        assert engine.tts.voice == BUNDLED_VOICE  # the voice in use stays
    finally:
        engine.close()


def test_the_settings_box_lists_picks_adds_and_sets_speaker_and_rate(voices, qt_app, tmp_path):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from app.ui.voices_box import VoicesBox

    held = [Settings(speech_rate=1.1)]
    box = VoicesBox(lambda: held[0])
    box.changed.connect(lambda settings: held.__setitem__(0, settings))
    box.resize(480, 420)
    box.show()
    QTest.qWaitForWindowExposed(box)

    def rows():
        return [[box.list.topLevelItem(i).text(c) for c in range(3)]
                for i in range(box.list.topLevelItemCount())]

    def add(path: Path):
        """What Add voice… does with the file picked: added on a thread, the box still
        answering meanwhile."""
        outcome = []
        box.added.connect(outcome.append)
        box.add(str(path))
        assert not box.add_button.isEnabled() and box.adding.isVisible()
        # A copy and check take ~220 ms on the 2-core VM; 10 s is for a busy machine.
        deadline = time.monotonic() + 10
        while not outcome and time.monotonic() < deadline:
            QTest.qWait(10)
        assert outcome, "adding a voice did not end"
        box.added.disconnect(outcome.append)
        assert box.add_button.isEnabled() and not box.adding.isVisible()
        return outcome[0]

    def click_row(index: int) -> None:
        item = box.list.topLevelItem(index)
        QTest.mouseClick(box.list.viewport(), Qt.MouseButton.LeftButton,
                         pos=box.list.visualItemRect(item).center())

    try:
        assert rows() == [[BUNDLED_VOICE.name, "en-us", "medium"], [GERMAN, "de", "medium"]]
        assert box.selected.bundled and not box.speaker.isEnabled()
        assert box.rate.value() == 1.1 and not box.rate.isEnabled()  # the general rate
        click_row(1)
        assert held[0].voice == GERMAN and held[0].voice_speaker == 0
        # Its own rate: ticked and typed, then given back to the general one.
        QTest.mouseClick(box.own_rate, Qt.MouseButton.LeftButton)
        box.rate.setFocus()
        box.rate.selectAll()
        QTest.keyClicks(box.rate, "0.8")
        QTest.keyClick(box.rate, Qt.Key.Key_Return)
        assert held[0].voice_rates == {GERMAN: 0.8} and held[0].speech_rate == 1.1
        click_row(0)
        assert held[0].voice is None and box.rate.value() == 1.1 and not box.own_rate.isChecked()
        click_row(1)
        assert box.own_rate.isChecked() and box.rate.value() == 0.8
        # A broken voice is refused in words; the choice stays.
        broken = make_voice(tmp_path / "downloads", "de_DE-broken-medium")
        broken.config.write_text("[1, 2")
        before = held[0]
        assert add(broken.model) is None
        assert held[0] == before and box.problems.isVisible()
        assert box.problems.text().startswith(f"{broken.config}: is not a voice config")
        assert [row[0] for row in rows()] == [BUNDLED_VOICE.name, GERMAN]
        # A multi-speaker voice: added, chosen, its speakers offered.
        several = make_multi_speaker_voice(tmp_path / "downloads", {"alice": 0, "bob": 2})
        assert add(several.model).speakers == ("alice", "1", "bob")
        assert held[0].voice == several.name and box.selected.name == several.name
        assert box.speaker.isEnabled()
        assert [box.speaker.itemText(i) for i in range(box.speaker.count())] == [
            "0: alice", "1", "2: bob"]
        assert not box.problems.isVisible()
        box.speaker.setCurrentIndex(2)
        assert held[0].voice_speaker == 2
        assert [row[0] for row in rows()] == [BUNDLED_VOICE.name, GERMAN, several.name]
        # Chosen elsewhere (a voice put in the folder, an avatar's voice): shown as chosen.
        french = make_voice(voices, "fr_FR-joe-medium", "fr")
        box.show_settings(replace(held[0], voice=french.name))
        assert box.selected.name == french.name and box.selected.language == "fr"
        # A choice that cannot be used selects nothing and says why.
        box.show_settings(replace(held[0], voice=str(broken.model)))
        assert box.selected is None and box.problems.text().startswith(str(broken.config))
    finally:
        box.close()
        for added in voices.iterdir():
            if not added.name.startswith(GERMAN):
                added.unlink()


def test_a_tone_language_voice_folds_its_tones_into_the_syllables(tmp_path):
    # espeak's Mandarin writes each syllable's tone as a digit after it ("sa5n" for the
    # 3 it reads in Mandarin): pitch, no mouth shape of its own. (Chinese characters are
    # still dropped before the voice by pipeline.text.input, which keeps Latin only.)
    files = make_voice(tmp_path, "zh_CN-joe-medium", "cmn")
    plans, audio = _plans(StreamingTTS(voice=files, noise_scale=0.0, noise_w_scale=0.0),
                          "Hello 3.")
    phonemes = [p.phoneme for plan in plans for p in plan.phonemes]
    assert any(p[-1].isdigit() and len(p) > 1 for p in phonemes), phonemes
    assert not any(p.isdigit() for p in phonemes), phonemes
    assert len(audio) == sum(plan.total_samples for plan in plans) and np.abs(audio).max() > 0.2
