"""The speech of Flight of the Amazon Queen (Debian `flight-of-the-amazon-queen` 1.0.0-9),
each voice file paired with the sentence the game shows for it and the character who says it.

The game is one archive, `queen.1c`. Its voice files (`.SB`, MP3) carry no text; the text and
the speaker come from the game's own data, read the way ScummVM's Queen engine reads it
(engines/queen/{resource,logic,cutaway,talk,command,sound}.cpp):

- A sentence is spoken in segments split at `*XX` commands (talk.cpp `Talk::speak`). Every
  command counts a segment, even an empty one, and segment k (1-based) plays the voice file
  `<prefix><k in hex>`, spaces in the first 8 characters turned to '0' (sound.cpp).
- Cutaways (`NAME.CUT`): object i (1-based) reads the i-th sentence; a person object speaks it
  with the prefix NAME padded with '_' to 5 characters + `%02d` of i (cutaway.cpp
  `findCdCut`). Object 0 (and -1, "room fade") is Joe; a positive object is a person of the
  room, whose actor is found by room and bob slot in QUEEN.JAS (logic.cpp `findActor`).
- Dialogues (`NAME.DOG`): the person's line with id h has prefix `%2d%4xP` (talk key, h), Joe's
  `%2d%4xJ`; the openers use `SSSSJ`, `XXXXP`, `XXXXJ` (talk.cpp `Talk::talk`,
  `initialTalk`). The person is the object the dialogue is started on: a TALK TO command whose
  game-state entry names the .DOG (command.cpp `executeIfDialog`), or a cutaway's talk-to
  object.
- Joe's remarks: `JOE%04d` with Joe's responses 1..40, then the object descriptions
  (logic.cpp `makeJoeSpeak`).

A speaker is a character, not a voice actor: the credits (CREDIT1.CRD) name 13 voice artists
for the whole cast and do not say who voices whom, so several characters share a voice. A
clip is kept only when its text is plain English words and its speaker is one known
character; lines spoken over a picture (cutaway text objects: narration, comic strip, TV)
name no speaker and are left out.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.real_speech.clip import SAMPLE_RATE, Clip, read_audio

SOURCE = "fotaq"
PACKAGE = "flight-of-the-amazon-queen"
VERSION = "1.0.0-9"
ARCHIVE_PATH = "usr/share/scummvm/flight-of-the-amazon-queen/queen.1c"
DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "real_speech" / SOURCE
LICENCE = (
    "Flight-of-the-Amazon-Queen-License: free distribution and modification, (c) 1995 John "
    "Passfield and Steven Stamatiadis; Debian flight-of-the-amazon-queen 1.0.0-9"
)
# 16 kbit/s MPEG-2.5 layer III at 11025 Hz (measured on the .SB entries).
CONDITION = "band-limited"

# Every .CUT, .DOG and .JAS resource starts with a 20-byte AMOS bank header ("AmBk" ...
# "Datas   "), which the engine skips (loadFile(name, 20)).
BANK_HEADER = 20
JOE_RESPONSES = 40  # JOE_RESPONSE_MAX: Joe's fixed replies precede the object descriptions
VERBS = 12  # verb names in QUEEN2.JAS between the room names and Joe's responses
VERB_TALK_TO = 8  # the 8th verb name in QUEEN2.JAS is "talk to"
PERSON_IMAGES = (-3, -4)  # ObjectData.image of a person (left / right facing)

# Actor name (QUEEN2.JAS) -> (character, sex). One character per person of the cast: the
# game gives some several actors (in a head close-up "-H", at the end "-E", in the intro
# "X<n>_"), and the object names can mislead (a person slot is reused for "note", "smoke").
# Sex from the story (Joe, Rita, Faye, Princess Azura ...); "?" for creatures and for
# characters whose sex the game does not make plain.
CHARACTERS: dict[str, tuple[str, str]] = {
    **{a: ("joe", "m") for a in ("JOE", "JOE-H", "X2_JOE", "X4_JOE", "X10_JOE", "X11_JOE")},
    **{a: ("sparky", "m") for a in ("SPARKY", "SPARKY-F", "SPARKY-H", "X5_SPARKY")},
    **{a: ("faye", "f") for a in ("FAYE", "FAYE-H", "FAYE-E")},
    **{a: ("azura", "f") for a in ("PRINCESS1", "PRINCESS2", "AZURA-H", "AZURA-E")},
    **{a: ("rita", "f") for a in ("RITA", "RITA-H", "X2_RITA", "X3_RITA", "X4_RITA",
                                  "X10_RITA", "X11_RITA")},
    **{a: ("lola", "f") for a in ("LOLA", "LOLA_STAND", "LOLA_SHOWER")},
    **{a: ("frank", "m") for a in ("FRANK", "FRANK-H")},
    **{a: ("anderson", "m") for a in ("ANDERSON", "ANDSON-E")},
    **{a: ("hugh", "m") for a in ("HUGH", "X6_HUGH")},
    "APE": ("gorilla", "?"),
    "APE1": ("log-dinosaur", "?"),
    "APE2": ("log-dinosaur", "?"),
    "BUD": ("bud", "m"),
    "LOU": ("skip", "m"),  # the shopkeeper the game calls Skip
    "JIMMY": ("jimmy", "m"),
    "TAMMY": ("mary-lou", "f"),  # the game calls her Mary-Lou
    "AMGUARD": ("amazon-guard", "f"),
    "SHOWERAM": ("showering-amazon", "f"),
    "SKULL": ("amazon-lookout", "f"),
    "MAN1": ("bedraggled-prisoner", "m"),
    "MAN2": ("tired-prisoner", "m"),
    "PYGMY": ("tall-pygmy", "m"),
    "WITCH": ("witch-doctor", "m"),
    "CHIEF": ("chief", "m"),
    "WEDGEWOOD": ("wedgewood", "?"),  # a parrot
    "BOB": ("trader-bob", "m"),
    "NAOMI": ("naomi", "f"),
    "DOG": ("guard-dog", "?"),
    "SECRETARY": ("secretary", "?"),
    "CHEF": ("chef", "m"),
    "KLUNK": ("klunk", "m"),
    "JOHAN": ("john", "m"),
    "HENRY": ("henry", "m"),
    "DEATH": ("ferryman", "?"),
    "ORACLE": ("oracle", "?"),
    "ZOMBIE": ("zombie-woman", "f"),
    "MIKE": ("bellboy", "m"),
    "RICO": ("rico", "m"),
    "EDDY": ("eddy", "m"),
    "IAN": ("ian", "m"),
}

# Utterances that are not English words: animal noises, mumbling, sound effects and the
# jungle people's made-up language. Found by looking up every word of the kept lines in
# pocketsphinx's CMU dictionary (cmudict-en-us.dict) and reading the 172 it lacks; the rest
# of those are names (Floda, Ironstein), British spellings and slang, and stay.
# A clip with any of these words is left out.
NON_WORDS = frozenset(
    """aark ahem aroo aroof aroop bbrddr bleep brrg brtln budda changa chokana choonaga choop
    chunga chungola eep erm eurgh faark frrblrt frrdln frrmmn frzzzap garoop glub grbbl grmmnl
    grrrrr gsrh hekarwii hmph hubba hunga hvxivg jrgg kachunga manuputu mffrlt moop mrt nark
    nrrft nrt nvhhztv nya nyah oop ooop oot pootan pootani potoonie ptooie punga putana rh rrky
    rrrrr rry sbrrldlt shunga smrrldn squaark squark sqwawk srr sunga tawanga trgn tsk tusani
    tuwanga uck unga ungana ungh ungha ungola urgh urumpi utani wanga wareep warrk waroni
    warunga whrrt whunga woof wooof wrrl wrry yech zzzzzap""".split()
)
_ALLOWED = re.compile(r"[A-Za-z0-9 .,!?'\"\-:;]+")
_REPEATED = re.compile(r"([A-Za-z])\1\1")  # "Aaaargh", "ROOOOAR", "Hmmm": not dictionary words


@dataclass(frozen=True)
class Line:
    """One voice file of the game with the text and the character the game gives it."""

    name: str  # voice file name without ".SB"
    text: str  # plain English words, markup removed
    character: str
    sex: str
    origin: str  # the resource the text comes from ("C1A.CUT", "BOB1.DOG", "QUEEN2.JAS")


def read_archive(data: bytes) -> dict[str, memoryview]:
    """The resources of a rebuilt `queen.1c`: "QTBL", the JAS version (6 bytes), 3 bytes
    (flags; the last is the audio compression, 1 = MP3), a big-endian u16 count, then entries
    of name[12] (NUL padded), bundle u8, offset u32, size u32, offsets from the file's start."""
    if data[:4] != b"QTBL":
        raise ValueError("not a rebuilt FOTAQ archive (no QTBL tag)")
    (count,) = struct.unpack_from(">H", data, 13)
    view = memoryview(data)
    entries = {}
    for i in range(count):
        raw = data[15 + 21 * i : 15 + 21 * (i + 1)]
        name = raw[:12].rstrip(b"\0").decode("ascii")
        _bundle, offset, size = struct.unpack(">BII", raw[12:])
        if offset + size > len(data):
            raise ValueError(f"archive entry {name} runs past the end of the file")
        entries[name] = view[offset : offset + size]
    return entries


def segments(sentence: str) -> list[tuple[int, str]]:
    """(voice file index, text) of each spoken segment, as talk.cpp `Talk::speak` cuts it:
    every `*XX` command ends a segment and counts one index even when the segment is empty;
    `*XY` carries 11 more characters; a segment ended by `*GD`/`*GM` (Joe grabs) is not
    spoken."""
    out = []
    index = start = i = 0
    while i < len(sentence):
        if sentence[i] != "*":
            i += 1
            continue
        segment, code = sentence[start:i], sentence[i + 1 : i + 3]
        i += 3 + (11 if code == "XY" else 0)
        if code not in ("GD", "GM"):
            out.append((index + 1, segment))
        index += 1
        start = i
    if start < len(sentence):
        out.append((index + 1, sentence[start:]))
    return out


def clean_text(segment: str) -> str | None:
    """The words of one segment, or None when they are not plain English speech: a sound
    in brackets ("<gulp>", "(sigh)"), a sung line ("@@ ... @@"), a noise or made-up word."""
    text = " ".join(segment.replace("^_", "").split())  # "^_" is the game's (TM) glyph
    if not text or not _ALLOWED.fullmatch(text) or not re.search(r"[A-Za-z]", text):
        return None
    words = re.findall(r"[A-Za-z']+", text)
    if any(w.lower().strip("'") in NON_WORDS or _REPEATED.search(w) for w in words):
        return None
    return text


def _u16(b: bytes | memoryview, o: int) -> int:
    return struct.unpack_from(">H", b, o)[0]


def _s16(b: bytes | memoryview, o: int) -> int:
    return struct.unpack_from(">h", b, o)[0]


def _string(b: bytes | memoryview, o: int, align: int = 2) -> tuple[str, int]:
    """A length-prefixed string and the offset after it (talk.cpp `Talk::getString`): the
    end is rounded up to `align`, except after an empty string."""
    n = b[o]
    o += 1
    if n == 0:
        return "", o
    return bytes(b[o : o + n]).decode("latin-1"), (o + n + align - 1) & ~(align - 1)


@dataclass
class GameData:
    """What QUEEN.JAS / QUEEN2.JAS tell about objects, persons and Joe's remarks."""

    objects: list[tuple[int, int]]  # [obj] -> (room, image); [0] unused
    room_first: list[int]  # [room] -> last object number before the room's first
    joe_lines: list[str]  # Joe's responses then the object descriptions
    actors: list[tuple[int, int, str]]  # (room, bob slot, actor name)
    talk_dialogues: dict[str, set[int]]  # .DOG name -> objects a TALK TO command opens it on

    def person_characters(self, obj: int) -> set[str]:
        """The actor names that can be person object `obj` (logic.cpp `findActor`): actors
        of its room on its bob slot, the slot being its rank among the room's persons."""
        room, _ = self.objects[obj]
        slot = sum(
            1
            for i in range(self.room_first[room] + 1, obj + 1)
            if self.objects[i][1] in PERSON_IMAGES
        )
        return {name for r, bob, name in self.actors if r == room and bob == slot}


def read_game_data(jas: bytes | memoryview, jas2: bytes | memoryview) -> GameData:
    """Parse QUEEN.JAS as logic.cpp `Logic::readQueenJas` does, as far as the actors, and the
    string list QUEEN2.JAS. Raises ValueError when the tables do not end at the JAS version."""
    b = jas[BANK_HEADER:]
    n_rooms, n_names, n_objects, n_desc = struct.unpack_from(">4H", b, 0)
    p = 8
    objects = [(0, 0)]
    for _ in range(n_objects):  # name, x, y, description, entry, room, state, image
        room, _state, image = struct.unpack_from(">HHh", b, p + 10)
        objects.append((room, image))
        p += 16
    room_first = [0] + [_u16(b, p + 2 * i) for i in range(n_rooms + 1)]
    p += 2 * (n_rooms + 1) + 2 * n_rooms  # room data, then one sfx per room

    def table(p: int, size: int, zero_reads_one: bool = False) -> tuple[list[bytes], int]:
        # The command tables read one record even when their count is 0 (command.cpp).
        n = _u16(b, p)
        p += 2
        records = [bytes(b[p + size * i : p + size * (i + 1)]) for i in range(n)]
        return records, p + size * (1 if zero_reads_one and n == 0 else n)

    _, p = table(p, 10)  # items
    _, p = table(p, 10)  # graphics
    for _room in range(n_rooms):  # grid: object max, area count, areas of 16 bytes
        p += 4 + 16 * _s16(b, p + 2)
    p += 8 * n_objects  # object boxes
    _, p = table(p, 6)  # walk-off points
    _, p = table(p, 8)  # object description cycles
    commands, p = table(p, 20, True)
    for size in (6, 6, 6):  # command areas, objects, inventory
        _, p = table(p, size, True)
    game_states, p = table(p, 8, True)
    p += 2  # entry object
    _, p = table(p, 4)  # furniture
    n_actors, n_anims, n_actor_names, _n_files = struct.unpack_from(">4H", b, p)
    p += 8
    raw_actors = [struct.unpack_from(">3h", b, p + 24 * i) for i in range(n_actors)]
    p += 24 * n_actors
    n_graphic_anims = _u16(b, p)
    p += 2 + 6 * max(n_graphic_anims, 1)
    if bytes(b[p : p + 2]) not in (b"CE", b"PE"):  # the JAS version, e.g. "CEM10"
        raise ValueError("QUEEN.JAS tables do not end at its version string")

    lines = bytes(jas2).decode("latin-1").split("\r\n")
    joe_start = n_desc + n_names + n_rooms + VERBS
    actor_names = lines[joe_start + JOE_RESPONSES + n_anims :][:n_actor_names]
    descriptions = lines[:n_desc]
    talk: dict[str, set[int]] = defaultdict(set)
    for record in game_states:
        command, _slot, _value, speak = struct.unpack(">hhhH", record)
        if 0 < speak <= n_desc and descriptions[speak - 1].upper().endswith(".DOG"):
            verb, noun = struct.unpack_from(">Hh", commands[command - 1], 0)
            if verb == VERB_TALK_TO and noun > 0:
                talk[descriptions[speak - 1].upper()].add(noun)
    return GameData(
        objects=objects,
        room_first=room_first,
        joe_lines=lines[joe_start : joe_start + JOE_RESPONSES] + descriptions,
        actors=[(r, bob, actor_names[n - 1]) for r, bob, n in raw_actors],
        talk_dialogues=dict(talk),
    )


@dataclass(frozen=True)
class _CutObject:
    index: int
    number: int
    kind: str  # "person", "text" (spoken over a picture), "other"
    sentence: str


def read_cutaway(cut: bytes | memoryview, game: GameData) -> tuple[list[_CutObject], str, int]:
    """The objects of a .CUT in order with their sentences (cutaway.cpp `load`, `run`), the
    dialogue file it leads to and that dialogue's person object. Raises ValueError when the
    object records do not end where the game-state block starts."""
    b = cut[BANK_HEADER:]
    count = abs(_s16(b, 2))
    game_state_at, sentence_at, banks_at = _u16(b, 6), _u16(b, 8), _u16(b, 10)
    _, sentence_at = _string(b, sentence_at)  # the entry string (Joe's facing)
    objects = []
    p = 12
    for i in range(count):
        o = struct.unpack_from(">17h", b, p)
        p += 34
        p += 2 + 2 * _s16(b, p)  # persons turned on
        sentence, sentence_at = _string(b, sentence_at)
        number, anim_list, execute, from_object = o[0], o[4], o[5], o[12]
        number = 0 if number == -1 else number  # "room fade" is Joe
        kind = "anim"  # cutaway.cpp `getObjectType`
        if number > 0 and not anim_list and game.objects[number][1] in PERSON_IMAGES:
            kind = "person"
        elif number == 0 and not anim_list:
            kind = "person"
        if from_object > 0:
            kind = "other"
        if number in (-2, -3, -4):
            kind = "text"
        if kind == "anim" and not execute:
            kind = "other"
        if kind == "anim":  # frames of 9 words after a header word, up to a -2 header
            while _s16(b, p) != -2:
                p += 20
            p += 2
            kind = "other"
        objects.append(_CutObject(i + 1, number, kind, sentence))
    # Measured on all 301 cutaways: the records end 2 bytes (3 of them: 4) before the
    # game-state block; anything else means the records were misread.
    if not 0 < game_state_at - p <= 4:
        raise ValueError(f"cutaway records end at {p}, game states start at {game_state_at}")
    n_banks = _u16(b, banks_at)
    p = banks_at + 2
    for _ in range(n_banks):
        _, p = _string(b, p)
    talk_file, p = _string(b, p)
    return objects, talk_file.upper(), _s16(b, p)


def _dialogue_lines(dog: bytes | memoryview) -> list[tuple[str, str, bool]]:
    """(voice prefix, sentence, is Joe) of every line of a .DOG, as
    talk.cpp `Talk::load`, `findDialogueString` and `initialTalk` read them."""
    b = dog[BANK_HEADER:]
    levels, _unique, key, joe_max, person_max = struct.unpack_from(">5h", b, 0)
    person1_at, _cutaway_at, person2_at = struct.unpack_from(">3H", b, 22)
    joe_at = 32 + abs(levels) * 96

    def strings(p: int, count: int) -> dict[int, str]:
        found: dict[int, str] = {}
        for _ in range(count):
            ident = _s16(b, p + 2)
            text, p = _string(b, p + 4, 4)
            found.setdefault(ident, text)  # the engine takes the first match
        return found

    lines = [(f"{key:02d}{i:04X}J", s, True) for i, s in strings(joe_at, joe_max).items()]
    lines += [(f"{key:02d}{i:04X}P", s, False) for i, s in strings(person1_at, person_max).items()]
    if not _u16(b, joe_at + 2):
        lines.append((f"{key:02d}SSSSJ", _string(b, joe_at + 4)[0], True))
    person2, p = _string(b, person2_at)
    lines.append((f"{key:02d}XXXXP", person2, False))
    lines.append((f"{key:02d}XXXXJ", _string(b, p)[0], True))
    return [(pre, s, joe) for pre, s, joe in lines if s and s != "0"]  # "0": no line


def _character(actors: set[str], hint: str = "") -> tuple[str, str] | None:
    """The one character these actor names can be; with several, the one whose actor name
    starts with `hint` (a .DOG name's letters: DEATH1.DOG -> DEATH); None when unknown."""
    found = {CHARACTERS[a] for a in actors if a in CHARACTERS}
    if len(found) > 1 and hint:
        found = {CHARACTERS[a] for a in actors if a in CHARACTERS and a.startswith(hint)}
    if len(found) != 1 or not actors <= CHARACTERS.keys():
        return None
    return found.pop()


def catalogue(archive: Mapping[str, bytes | memoryview]) -> list[Line]:
    """Every voice file whose text and speaker the game's data establish, sorted by name."""
    game = read_game_data(archive["QUEEN.JAS"], archive["QUEEN2.JAS"])
    voices = {n[:-3] for n in archive if n.endswith(".SB")}
    found: dict[str, Line] = {}

    def add(prefix: str, sentence: str, who: tuple[str, str], origin: str) -> None:
        for k, segment in segments(sentence):
            name = f"{prefix}{k:X}".upper()
            text = clean_text(segment)
            if name in voices and text is not None and name not in found:
                found[name] = Line(name, text, who[0], who[1], origin)

    joe = CHARACTERS["JOE"]
    dialogue_people = {k: set(v) for k, v in game.talk_dialogues.items()}
    for cut in sorted(n for n in archive if n.endswith(".CUT")):
        objects, talk_file, talk_to = read_cutaway(archive[cut], game)
        if talk_file.endswith(".DOG") and talk_to > 0:
            dialogue_people.setdefault(talk_file, set()).add(talk_to)
        base = cut[:-4].ljust(5, "_")[:5]
        for obj in objects:
            if obj.kind != "person" or obj.sentence == "*" or obj.sentence.startswith("#"):
                continue  # "*": no line; "#": starts the credits
            who = joe if obj.number == 0 else _character(game.person_characters(obj.number))
            if who is not None:
                add(f"{base}{obj.index:02d}", obj.sentence, who, cut)
    for dog in sorted(n for n in archive if n.endswith(".DOG")):
        lines = _dialogue_lines(archive[dog])
        people = dialogue_people.get(dog, set())
        actors = set().union(*(game.person_characters(o) for o in people)) if people else set()
        person = _character(actors, re.sub(r"\d+$", "", dog[:-4])) if actors else None
        for prefix, sentence, is_joe in lines:
            who = joe if is_joe else person
            if who is not None:
                add(prefix, sentence, who, dog)
    for i, sentence in enumerate(game.joe_lines):
        add(f"JOE{i + 1:04d}", sentence, joe, "QUEEN2.JAS")
    return [found[n] for n in sorted(found)]


def fetch(cache: Path = DEFAULT_CACHE) -> Path:
    """The cached queen.1c, fetched with apt-get download and dpkg-deb -x when missing."""
    target = cache / "queen.1c"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        got = subprocess.run(
            ["apt-get", "download", f"{PACKAGE}={VERSION}"],
            cwd=tmp, capture_output=True, text=True,
        )
        debs = list(Path(tmp).glob(f"{PACKAGE}_*.deb"))
        if got.returncode != 0 or not debs:
            why = got.stderr.strip().splitlines()[-1] if got.stderr.strip() else got.returncode
            raise RuntimeError(f"apt-get download {PACKAGE}={VERSION} failed: {why}")
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(Path(tmp) / "x")], check=True)
        shutil.move(str(Path(tmp) / "x" / ARCHIVE_PATH), str(target))
    return target


def decode(mp3: bytes | memoryview) -> np.ndarray:
    """One .SB voice file (MP3, 11025 Hz mono) as 16 kHz mono float32 in [-1, 1]."""
    return read_audio(io.BytesIO(bytes(mp3)))


def clips(cache: Path = DEFAULT_CACHE, max_per_speaker_s: float | None = None) -> list[Clip]:
    """The game's speech as Clips, sorted by voice file name; with `max_per_speaker_s`, each
    speaker keeps its first clips (in that order) up to that many seconds."""
    archive = read_archive(fetch(cache).read_bytes())
    out = []
    seconds: dict[str, float] = defaultdict(float)
    for line in catalogue(archive):
        speaker = f"{SOURCE}/{line.character}"
        if max_per_speaker_s is not None and seconds[speaker] >= max_per_speaker_s:
            continue
        audio = decode(archive[f"{line.name}.SB"])
        if max_per_speaker_s is not None and seconds[speaker] + len(audio) / SAMPLE_RATE > (
            max_per_speaker_s
        ):
            seconds[speaker] = max_per_speaker_s
            continue
        seconds[speaker] += len(audio) / SAMPLE_RATE
        out.append(Clip(
            name=f"{SOURCE}/{line.name}", source=SOURCE, speaker=speaker, sex=line.sex,
            condition=CONDITION, audio=audio.astype(np.float32), text=line.text,
            licence=LICENCE,
        ))
    return out
