"""Text in pieces (an LLM's tokens) released a sentence at a time."""

from pipeline.text.incremental import MAX_HELD_CHARS, SentencePieces


def test_a_sentence_is_released_once_what_follows_its_end_has_arrived():
    pieces = SentencePieces()
    assert pieces.push("Pi is 3.") == ""  # "3." may go on as a number
    assert pieces.push("14 or so") == ""
    assert pieces.push("! And") == "Pi is 3.14 or so!"  # white space after the "!"
    assert pieces.push(" more") == ""
    assert pieces.held == "And more"
    assert pieces.flush() == "And more" and pieces.held == ""


def test_several_sentences_in_one_piece_come_out_together_and_quotes_stay_with_theirs():
    pieces = SentencePieces()
    assert pieces.push('He said "stop." Then? ') == 'He said "stop." Then?'
    assert pieces.push("Line one\nLine") == "Line one"
    assert pieces.held == "Line"


def test_a_run_on_text_is_released_at_its_last_word_gap_once_it_is_long():
    pieces = SentencePieces()
    text = " ".join(["word"] * 40)  # 199 characters, no sentence end
    assert pieces.push(text) == ""
    # Past the limit every whole word goes; the last may be cut mid-word, so it waits.
    assert pieces.push(" wor") == text and pieces.held == "wor"
    assert len(text) + 4 > MAX_HELD_CHARS


def test_clear_drops_what_is_held():
    pieces = SentencePieces()
    pieces.push("Never said")
    pieces.clear()
    assert pieces.flush() == ""


def test_a_long_sentence_starts_at_a_clause_short_ones_keep_theirs():
    from pipeline.text.incremental import CLAUSE_CHARS

    pieces = SentencePieces()
    # A short clause waits for its sentence: read alone it would end like one.
    assert pieces.push("Well, that is a question, ") == ""
    # Past CLAUSE_CHARS held, the last clause mark followed by white space releases.
    rest = "and the answer takes a while to give, because there is a lot to it; so"
    assert pieces.push(rest) == "Well, that is a question, and the answer takes a while to give, " \
        "because there is a lot to it;"
    assert pieces.held == "so" and len("Well, that is a question, " + rest) > CLAUSE_CHARS
    # A clause mark not yet followed by white space may still become "3,000".
    assert pieces.push(" it costs 3,") == ""


def test_a_sentence_released_leaves_no_long_run_on_behind_it():
    # Found by tests/test_fuzz_text.py ("$. $ $" with a limit of 1): the word-gap rule
    # looked only at text with no sentence end in it, so the 230 characters after "Hi. "
    # waited for the next piece.
    pieces = SentencePieces()
    run_on = " ".join(["word"] * 46)
    assert pieces.push("Hi. " + run_on + " wo") == "Hi. " + run_on
    assert pieces.held == "wo"
    tiny = SentencePieces(1)
    assert tiny.push("$. $ $") == "$. $" and tiny.held == "$"
