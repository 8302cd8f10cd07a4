"""The Flight of the Amazon Queen reader: its parsers on a small archive of the game's own
formats built here, then the real Debian package when apt can fetch it."""

from __future__ import annotations

import io
import struct
import subprocess

import numpy as np
import pytest
import soundfile

from bench.real_speech import fotaq
from bench.real_speech.clip import SAMPLE_RATE

BANK = b"AmBk\x00\x0f\x00\x01\x80\x00\x00\x00Datas   "  # the 20-byte header the engine skips


def h(*values: int) -> bytes:
    return struct.pack(f">{len(values)}h", *values)


def string(text: str, at: int, align: int = 2) -> bytes:
    """A length-prefixed string written at offset `at`, padded as Talk::getString skips."""
    raw = bytes([len(text)]) + text.encode("latin-1")
    end = (at + len(raw) + align - 1) & ~(align - 1) if text else at + 1
    return raw + b"\0" * (end - at - len(raw))


def queen_jas() -> bytes:
    """2 rooms; room 1 holds object 1 (Faye, a person) and 2 (a note); room 2 holds object 3
    (a person, Rita). TALK TO object 1 opens FAYE1.DOG (description 2)."""
    objects = [
        h(1, 0, 0, 0, 0, 1, 0, -4),  # name, x, y, description, entry, room, state, image
        h(2, 0, 0, 0, 0, 1, 0, 5),
        h(3, 0, 0, 0, 0, 2, 0, -3),
    ]
    body = h(2, 3, 3, 3) + b"".join(objects)  # rooms, names, objects, descriptions
    body += h(0, 2, 3)  # first object of each room, and the end
    body += h(0, 0)  # sfx per room
    body += h(0) + h(0)  # items, graphics
    body += h(2, 0) + h(1, 0)  # grid: per room, object max and no areas
    body += b"\0" * 8 * 3  # object boxes
    body += h(0) + h(0)  # walk-offs, description cycles
    body += h(1) + h(fotaq.VERB_TALK_TO, 1, 0, 0, 0, 0, 0, 1, 0, 0)  # command 1: talk to obj 1
    body += (h(0) + b"\0" * 6) * 3  # empty area/object/inventory tables still hold a record
    body += h(1) + h(1, 5, 1, 2)  # command 1's game state speaks description 2
    body += h(1)  # entry object
    body += h(0)  # furniture
    body += h(2, 0, 2, 0)  # actors, anims, actor names, actor files
    body += h(1, 1, 1, 0, 0, 14, 1, 0, 0, 0, 0, 0) + h(2, 1, 2, 0, 0, 14, 1, 0, 0, 0, 0, 0)
    body += h(0) + b"\0" * 6  # graphic anims: none, one record read
    return BANK + body + b"CEM10\0"


def queen2_jas() -> bytes:
    lines = ["Nice*03", "FAYE1.DOG", "It's a note*14*GMTake it"]  # descriptions
    lines += ["Faye", "note", "Rita", "ROOM1", "ROOM2"] + [f"verb{i}" for i in range(12)]
    lines += ["It doesn't seem to open*03"] + ["Close"] * 39  # Joe's 40 responses
    lines += ["FAYE", "RITA", ""]  # actor names
    return "\r\n".join(lines).encode("latin-1")


def cutaway() -> bytes:
    """Joe speaks object 1's line, Faye object 2's, object 3 animates the note, object 4 is
    text over a picture (no speaker)."""
    records = h(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + h(0)
    records += h(1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + h(0)
    records += h(2, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + h(0)
    records += h(0) + h(1, 0, 0, 0, 0, 0, 0, 0, 0) + h(-2)  # one frame, then the end
    records += h(-2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) + h(0)
    records += h(0)  # the word after the records, before the game states
    game_states = 12 + len(records)
    block = h(0) + h(0, 0, 0)  # no game states; Joe's final room and position
    sentences_at = game_states + len(block)
    sentences = b""
    for text in ("", "*FLGoing down*05*FF*03", "Hi Joe.*03And bye.", "*", "Meanwhile..."):
        sentences += string(text, sentences_at + len(sentences))
    banks_at = sentences_at + len(sentences)
    banks = h(0) + string("", banks_at + 2) + h(0)  # no banks, no dialogue after
    head = h(0, 4, 0, game_states, sentences_at, banks_at)
    return BANK + head + records + block + sentences + banks


def dialogue() -> bytes:
    """Talk key 5: Joe's opener and one option, the person's answer to it in two segments,
    a sigh (not speech), and the second-visit openers."""
    joe_at = 32 + 96
    joe = b""
    for ident, text in ((0, "Hello there.*03"), (6, "What's up?*02")):
        joe += h(0, ident) + string(text, joe_at + len(joe) + 4, 4)
    person1_at = joe_at + len(joe)
    person = b""
    for ident, text in ((6, "Not much.*02Really."), (7, "(sigh)")):
        person += h(0, ident) + string(text, person1_at + len(person) + 4, 4)
    person2_at = person1_at + len(person)
    first = string("Hello again.", person2_at)
    second = string("Hi again.", person2_at + len(first))
    head = h(1, 9, 5, 2, 2) + h(0) * 6 + struct.pack(">3H", person1_at, 0, person2_at)
    head += b"\0" * (32 - len(head))
    return BANK + head + b"\0" * 96 + joe + person + first + second


def archive(resources: dict[str, bytes]) -> bytes:
    """A rebuilt queen.1c holding `resources`."""
    names = sorted(resources)
    table_end = 15 + 21 * len(names)
    table, data = b"", b""
    for name in names:
        table += name.encode().ljust(12, b"\0") + struct.pack(
            ">BII", 1, table_end + len(data), len(resources[name])
        )
        data += resources[name]
    return b"QTBL" + b"CEM10\0" + b"\0\0\1" + struct.pack(">H", len(names)) + table + data


def small_archive() -> bytes:
    voices = [
        "C1A__012", "C1A__021", "C1A__022", "C1A__041", "05SSSSJ1", "050006J1",
        "050006P1", "050006P2", "050007P1", "05XXXXP1", "05XXXXJ1", "JOE00011", "JOE00431",
        "JOE00433", "88SSSSSS",
    ]
    resources = {f"{v}.SB": b"mp3" for v in voices}
    resources |= {"QUEEN.JAS": queen_jas(), "QUEEN2.JAS": queen2_jas()}
    resources |= {"C1A.CUT": cutaway(), "FAYE1.DOG": dialogue()}
    return archive(resources)


def test_archive_table_gives_each_resource_its_bytes():
    resources = fotaq.read_archive(archive({"A.SB": b"one", "QUEEN.JAS": b"two!"}))
    assert {k: bytes(v) for k, v in resources.items()} == {"A.SB": b"one", "QUEEN.JAS": b"two!"}
    with pytest.raises(ValueError, match="QTBL"):
        fotaq.read_archive(b"RIFF" + b"\0" * 20)


def test_segments_count_every_command_even_empty_ones():
    assert fotaq.segments("*FLGoing down*05*FF*03") == [(1, ""), (2, "Going down"), (3, ""),
                                                         (4, "")]
    # *XY carries a position; a segment ended by *GD (Joe grabs) is not spoken at all.
    assert fotaq.segments("Hi.*XY00(237,112)There*GDNow") == [(1, "Hi."), (3, "Now")]
    assert fotaq.segments("No code") == [(1, "No code")]


def test_clean_text_keeps_words_and_drops_sounds():
    assert fotaq.clean_text(" Super  Soldier Treatment^_. ") == "Super Soldier Treatment."
    assert fotaq.clean_text('It says "24 Hours"!') == 'It says "24 Hours"!'
    for noise in ("<gulp> ", "(sigh)", "@@ I think I'm in love @@", "Grrrrr!", "Chunga!", ""):
        assert fotaq.clean_text(noise) is None


def test_catalogue_of_a_small_archive():
    lines = fotaq.catalogue(fotaq.read_archive(small_archive()))
    got = {(x.name, x.text, x.character, x.sex, x.origin) for x in lines}
    assert got == {
        ("C1A__012", "Going down", "joe", "m", "C1A.CUT"),
        ("C1A__021", "Hi Joe.", "faye", "f", "C1A.CUT"),
        ("C1A__022", "And bye.", "faye", "f", "C1A.CUT"),
        ("05SSSSJ1", "Hello there.", "joe", "m", "FAYE1.DOG"),
        ("050006J1", "What's up?", "joe", "m", "FAYE1.DOG"),
        ("050006P1", "Not much.", "faye", "f", "FAYE1.DOG"),
        ("050006P2", "Really.", "faye", "f", "FAYE1.DOG"),
        ("05XXXXP1", "Hello again.", "faye", "f", "FAYE1.DOG"),
        ("05XXXXJ1", "Hi again.", "joe", "m", "FAYE1.DOG"),
        ("JOE00011", "It doesn't seem to open", "joe", "m", "QUEEN2.JAS"),
        ("JOE00431", "It's a note", "joe", "m", "QUEEN2.JAS"),
        ("JOE00433", "Take it", "joe", "m", "QUEEN2.JAS"),
    }
    assert [x.name for x in lines] == sorted(x.name for x in lines)


def test_a_person_with_two_possible_characters_is_left_out_unless_the_dialogue_names_one():
    jas = bytearray(queen_jas())
    # A second actor on Faye's slot in room 1 (another game state) who is Rita.
    assert jas.count(h(2, 0, 2, 0)) == 1
    actors_at = jas.index(h(2, 0, 2, 0))
    jas[actors_at : actors_at + 8] = h(3, 0, 2, 0)
    jas[actors_at + 8 : actors_at + 8] = h(1, 1, 2, 1, 1, 14, 1, 0, 0, 0, 0, 0)
    resources = fotaq.read_archive(small_archive())
    resources["QUEEN.JAS"] = memoryview(bytes(jas))
    names = {x.name for x in fotaq.catalogue(resources)}
    assert "C1A__012" in names and "C1A__021" not in names
    assert "050006P1" in names  # FAYE1.DOG: of FAYE and RITA, the actor its name starts with


def test_decode_gives_16k_float32():
    buf = io.BytesIO()
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(11025) / 11025)
    soundfile.write(buf, tone.astype(np.float32), 11025, format="MP3")
    audio = fotaq.decode(buf.getvalue())
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert abs(len(audio) - SAMPLE_RATE) < 0.05 * SAMPLE_RATE
    assert 0.2 < np.abs(audio).max() <= 1.0


@pytest.fixture(scope="module")
def real_archive():
    try:
        path = fotaq.fetch()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the Debian package is not fetchable here: {e}")
    return fotaq.read_archive(path.read_bytes())


def test_real_package_known_lines(real_archive):
    lines = {x.name: x for x in fotaq.catalogue(real_archive)}
    # Measured on 1.0.0-9: 6091 clips of 37 characters.
    assert len(lines) == 6091
    assert len({x.character for x in lines.values()}) == 37
    expected = {
        "020001P2": ("anderson", "You couldn't pilot your way out of a paper bag."),
        "C36A_061": ("anderson", "Very soon Doctor Ironstein!"),
        "C25B_012": ("joe", "Going down"),
        "JOE00011": ("joe", "It doesn't seem to open"),
        "CINTR512": ("rita", "You certainly know how to end the night with a bang!"),
        "200001P2": ("faye", "I came across a tribe of Amazon women who've been kind enough "
                     "to feed and shelter me"),
    }
    for name, (character, text) in expected.items():
        assert (lines[name].character, lines[name].text) == (character, text)
    # Narration over pictures names no speaker; the sound-effect files are not speech.
    assert "BLUEP011" not in lines and "88SSSSSS" not in lines


def test_real_package_clips_capped_per_speaker(real_archive):
    clips = fotaq.clips(max_per_speaker_s=5.0)
    per: dict[str, float] = {}
    for c in clips:
        per[c.speaker] = per.get(c.speaker, 0.0) + c.seconds
        assert c.source == "fotaq" and c.condition == "band-limited"
        assert c.licence.startswith("Flight-of-the-Amazon-Queen-License")
    assert len(per) >= 30 and max(per.values()) <= 5.0
    assert [c.name for c in clips] == sorted(c.name for c in clips)
    joe = next(c for c in clips if c.speaker == "fotaq/joe")
    assert joe.sex == "m" and 0.3 < joe.seconds < 5.0 and np.abs(joe.audio).max() > 0.05
