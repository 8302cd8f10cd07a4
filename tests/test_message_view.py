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
