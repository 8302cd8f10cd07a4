"""The message board on its own: conditions, events, expiry and history, on a clock the
test moves."""

import pytest

from app.messages import EVENT_SECONDS, Ended, MessageBoard, Severity


class Clock:
    """A monotonic and a wall clock that move together, by hand."""

    def __init__(self) -> None:
        self.t = 100.0

    def monotonic(self) -> float:
        return self.t

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def board(clock):
    return MessageBoard(clock=clock.monotonic, wall_clock=clock.wall)


def texts(messages):
    return [m.text for m in messages]


def test_a_condition_stays_until_it_ends(board, clock):
    board.post("Audio is off: no device", Severity.ERROR, key="audio")
    clock.t += 10 * EVENT_SECONDS
    board.expire()
    assert texts(board.shown()) == ["Audio is off: no device"]
    assert board.clear("audio")
    assert board.shown() == []
    assert not board.clear("audio")
    (gone,) = board.history()
    assert gone.ended is Ended.CLEARED and gone.ended_at == clock.wall()


def test_a_new_message_about_a_condition_replaces_the_old_one(board, clock):
    lost = board.post("Microphone 'usb' stopped delivering sound — reconnecting", key="mic")
    clock.t += 1
    board.post("Microphone 'usb' is back", Severity.INFO, key="mic", seconds=5)
    assert texts(board.shown()) == ["Microphone 'usb' is back"]
    assert lost.ended is Ended.REPLACED
    # Good news about a condition goes by itself.
    clock.t += 5
    assert board.expire()
    assert board.shown() == []
    assert texts(board.history()) == ["Microphone 'usb' stopped delivering sound — reconnecting",
                                      "Microphone 'usb' is back"]


def test_conditions_are_independent(board):
    board.post("Audio is off", Severity.ERROR, key="audio")
    board.post("Microphone is off", key="mic")
    board.clear("mic")
    assert texts(board.shown()) == ["Audio is off"]


def test_an_event_expires_after_its_time(board, clock):
    board.post("Nothing to speak: type some text first.")
    clock.t += EVENT_SECONDS - 0.1
    assert not board.expire()
    assert len(board.shown()) == 1
    clock.t += 0.1
    assert board.expire()
    assert board.shown() == []
    assert board.history()[0].ended is Ended.EXPIRED


def test_a_condition_reported_again_is_one_message_living_longer(board, clock):
    first = board.post("Microphone 'usb' is on", Severity.INFO, key="mic", seconds=5)
    clock.t += 4
    again = board.post("Microphone 'usb' is on", Severity.INFO, key="mic", seconds=5)
    assert again is first and len(board.history()) == 1
    clock.t += 2
    board.expire()
    assert board.shown() == [first]
    # Found out to be worse (or better) than first said: still the one message.
    v = board.version
    assert board.post("Microphone 'usb' is on", Severity.WARNING, key="mic") is first
    assert first.severity is Severity.WARNING and board.version > v
    clock.t += 100
    board.expire()
    assert board.shown() == [first]


def test_an_event_that_happens_again_is_a_new_message_replacing_its_copy(board, clock):
    first = board.post("Nothing to speak: type some text first.")
    clock.t += 1
    again = board.post("Nothing to speak: type some text first.")
    assert again is not first and board.shown() == [again]
    assert first.ended is Ended.REPLACED and len(board.history()) == 2


def test_events_with_other_texts_are_all_shown_newest_first(board, clock):
    board.post("one")
    clock.t += 1
    board.post("two", Severity.INFO)
    assert texts(board.shown()) == ["two", "one"]
    assert [m.severity for m in board.shown()] == [Severity.INFO, Severity.WARNING]
    assert [m.posted_at for m in board.history()] == [1_700_000_100.0, 1_700_000_101.0]


def test_version_changes_only_when_something_does(board, clock):
    v = board.version
    board.expire()
    board.clear("nothing")
    assert board.version == v
    board.post("one")
    assert board.version > v
    v = board.version
    clock.t += EVENT_SECONDS
    board.expire()
    assert board.version > v
