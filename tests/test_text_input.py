"""Text preparation: what reaches the English voice, what is skipped, and why."""

import time

import pytest

from pipeline.text.input import (
    MAX_PIECE_CHARS,
    MAX_TEXT_CHARS,
    TextInputError,
    prepare_text,
    split_sentences,
)
from pipeline.voice.streaming_tts import StreamingTTS


@pytest.mark.parametrize("raw", ["", "   ", "\n\t \r\n"])
def test_empty_input_is_refused_with_a_message(raw):
    with pytest.raises(TextInputError, match="empty"):
        prepare_text(raw)


def test_punctuation_only_is_refused():
    with pytest.raises(TextInputError, match="no letters or digits"):
        prepare_text("?!... ,;")


def test_only_emoji_is_refused():
    with pytest.raises(TextInputError, match="only emoji"):
        prepare_text("😀👍")


def test_only_chinese_is_refused_naming_the_script():
    with pytest.raises(TextInputError, match="English.*Chinese"):
        prepare_text("你好，世界。")


def test_whitespace_controls_become_word_gaps_without_a_notice():
    prepared = prepare_text("one\ntwo\tthree\r\nfour\x0bfive\x0csix")
    assert prepared.text == "one two three four five six"
    assert prepared.notices == []


def test_other_control_characters_are_skipped_and_said_so():
    # C0 (NUL, BEL, a lone ESC), DEL and C1 (NEL, SCI): word gaps, counted.
    prepared = prepare_text("one\x00two\x07three\x7ffour\x85five\x9asix\x1b")
    assert prepared.text == "one two three four five six"
    assert prepared.notices == ["Skipped 6 control characters"]


@pytest.mark.parametrize("raw, text, count", [
    # CSI: colours (SGR), cursor moves and erases, private modes, 8-bit CSI.
    ("\x1b[31mhello\x1b[0m", "hello", 2),
    ("\x1b[1;38;5;196mError:\x1b[0m disk \x1b[2Kfull\x1b[?25h", "Error: disk full", 4),
    ("\x9b1mbold\x9b0m text", "bold text", 2),
    # OSC: a window title ended by BEL, a hyperlink ended by ST (ESC \\).
    ("\x1b]0;build log\x07Build \x1b]8;;https://ci.example/1\x1b\\passed\x1b]8;;\x1b\\ today",
     "Build passed today", 3),
    # Single-character ESC sequences: save/restore cursor, a charset, reset.
    ("\x1b7saved\x1b8 \x1b(Bcharset\x1bc", "saved charset", 4),
])
def test_terminal_escape_sequences_are_skipped_whole_and_said_so(raw, text, count):
    prepared = prepare_text(raw)
    assert prepared.text == text
    assert prepared.notices == [f"Skipped {count} terminal escape sequences"]


def test_only_escape_sequences_and_controls_is_refused_naming_them():
    with pytest.raises(TextInputError, match="only terminal escape sequences and control"):
        prepare_text("\x1b[0m\x00\x1b[2J")


def test_coloured_terminal_text_sounds_like_the_plain_text():
    """Through the real voice, in the app's default mode: the escapes leave no sound of
    their own."""
    tts = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    coloured = list(tts.synthesize("\x1b[1;31mError:\x1b[0m the disk is \x1b[4mfull\x1b[0m."))
    plain = list(tts.synthesize("Error: the disk is full."))
    assert [p.phoneme for s in coloured for p in s.phonemes] == [
        p.phoneme for s in plain for p in s.phonemes]
    assert coloured[0].notices == ["Skipped 4 terminal escape sequences"]


def test_invisible_format_characters_do_not_split_words():
    assert prepare_text("co\u00adoperate\u200b").text == "cooperate"


def test_emoji_are_counted_as_whole_emoji():
    # A family (ZWJ sequence) and a flag (two regional indicators) are one emoji each.
    prepared = prepare_text("great 😀 job 👍🏽 👨‍👩‍👧 🇺🇸!")
    assert prepared.text == "great job!"
    assert prepared.notices == ["Skipped 4 emoji"]


def test_mixed_chinese_and_english_keeps_the_english():
    prepared = prepare_text("Hello 你好世界 world，how are you？")
    assert prepared.text == "Hello world, how are you?"
    assert prepared.notices == [
        "Skipped 4 Chinese characters: the voice speaks English"
    ]


def test_kanji_beside_kana_are_counted_as_japanese():
    prepared = prepare_text("こんにちは世界 hello")
    assert prepared.text == "hello"
    assert prepared.notices == ["Skipped 7 Japanese characters: the voice speaks English"]


def test_korean_and_cyrillic_each_get_a_notice():
    prepared = prepare_text("안녕 hi Привет")
    assert prepared.text == "hi"
    assert set(prepared.notices) == {
        "Skipped 2 Korean characters: the voice speaks English",
        "Skipped 6 Cyrillic characters: the voice speaks English",
    }


def test_digits_of_other_scripts_are_skipped_with_their_script():
    with pytest.raises(TextInputError, match="Arabic"):
        prepare_text("٣٤")


def test_latin_accents_digits_and_symbols_are_kept():
    prepared = prepare_text("Café order #A7X92: 3.5 hours, 20% off")
    # The order code is spelled out by the normalizer; accents and digits survive, and
    # "%" is said as a word.
    assert prepared.text == "Café order number A7 X 9 2: 3.5 hours, 20 percent off"
    assert prepared.notices == []


def test_full_width_forms_are_normalised():
    assert prepare_text("ＡＢＣ １２３").text == "ABC 123"


def test_raw_phoneme_syntax_cannot_be_injected():
    assert "[[" not in prepare_text("say [[ h ə l ˈ oʊ ]] now").text


def test_text_over_the_limit_is_refused_with_the_limit_named():
    with pytest.raises(TextInputError, match="100,000"):
        prepare_text("a" * (MAX_TEXT_CHARS + 1))


def test_text_at_the_limit_is_prepared_quickly():
    t0 = time.perf_counter()
    prepared = prepare_text("word " * (MAX_TEXT_CHARS // 5))
    assert time.perf_counter() - t0 < 2.0
    assert len(prepared.text) == MAX_TEXT_CHARS - 1


def test_split_sentences_keeps_every_word_in_order():
    text = "Hello there. How are you? I am fine... Thanks! 3.5 is a number."
    assert list(split_sentences(text)) == [
        "Hello there.", "How are you?", "I am fine...", "Thanks!", "3.5 is a number.",
    ]


def test_long_sentences_are_cut_at_clauses_then_words_then_hard():
    clause = "word " * 30 + "end, "
    pieces = list(split_sentences(clause * 3 + "x" * 600))
    assert all(len(p) <= MAX_PIECE_CHARS for p in pieces)
    assert pieces[0].endswith(",")
    assert "".join(pieces).replace(" ", "") == (clause * 3 + "x" * 600).replace(" ", "")
    assert sum(1 for p in pieces if set(p) == {"x"}) == 3


def test_split_sentences_is_lazy():
    pieces = split_sentences("First sentence. " + "More words here. " * 5000)
    assert iter(pieces) is pieces
    assert next(pieces) == "First sentence."


def test_a_voice_of_another_language_reads_its_own_script_and_numbers():
    # espeak reads numbers and signs in the voice's language: only English is rewritten.
    german = prepare_text("Das kostet 10% mehr", "de")
    assert german.text == "Das kostet 10% mehr" and german.notices == []
    russian = prepare_text("Привет, мир! Hello", "ru")
    assert russian.text == "Привет, мир! Hello" and russian.notices == []
    # Another script than the voice's is still skipped, named by the voice's language.
    assert prepare_text("Hallo 你好", "de").notices == [
        "Skipped 2 Chinese characters: the voice speaks German"]
    assert prepare_text("你好，世界。", "cmn").text == "你好, 世界."
    with pytest.raises(TextInputError, match="the voice speaks German, and the text has only Korean"):
        prepare_text("안녕", "de")


def test_the_typed_text_behind_each_sentence_is_kept_beside_what_is_said():
    prepared = prepare_text("It costs $5 today. Mail ann@x.com now!")
    assert "".join(spoken for _, spoken in prepared.spans) == prepared.text
    assert "".join(typed for typed, _ in prepared.spans) == "It costs $5 today. Mail ann@x.com now!"
