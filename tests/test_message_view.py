"""The message area on a real Qt display: what each label shows follows its message."""

from app.messages import MessageBoard, Severity


def test_a_condition_told_again_as_good_news_loses_its_warning_sign(qt_app):
    from app.ui.message_view import MARKS, MessageArea

    board = MessageBoard()
    area = MessageArea()
    # As the studio tells a microphone that opened: first under the microphone's key as
    # any status is, then again in the same words as the good news it is.
    board.post("Microphone 'system' is on", Severity.WARNING, key="microphone")
    area.show_messages(board.shown())
    board.post("Microphone 'system' is on", Severity.INFO, key="microphone", seconds=25)
    area.show_messages(board.shown())
    (label,) = area.labels.values()
    assert label.text() == f"{MARKS[Severity.INFO]} Microphone 'system' is on"
    assert MARKS[Severity.WARNING] not in label.text()
    assert label.toolTip().startswith("info")
    area.deleteLater()


def test_a_new_message_scrolls_to_the_top_and_one_going_leaves_the_reader_in_place(qt_app):
    from app.ui.message_view import MessageArea
    from tests.harness.app_driver import pump

    board = MessageBoard()
    area = MessageArea()
    area.resize(300, area.height())
    area.show()
    for i in range(12):  # more lines than the area shows: it scrolls
        board.post(f"message {i} " + "that wraps over a line or two " * 3, key=i)
    area.show_messages(board.shown())
    pump(0.1)  # the layout placed
    bar = area.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum())  # the reader scrolled down to the oldest
    board.clear(0)  # the oldest, which the reader is at, goes
    area.show_messages(board.shown())
    pump(0.1)
    assert bar.value() > 0, "a message going scrolled the reader back to the top"
    board.post("news", key="new")
    area.show_messages(board.shown())
    assert bar.value() == 0, "the newest message, at the top, was not shown"
    area.deleteLater()
