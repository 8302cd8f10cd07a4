"""The engine's event bus: subscribers by kind, in order, on the publishing thread."""

import logging
import threading
from dataclasses import dataclass

from pipeline.core.events import DeviceNotice, EventBus


@dataclass(frozen=True)
class Ping:
    n: int


def test_subscribers_get_the_kinds_they_asked_for_in_order_until_they_unsubscribe():
    bus = EventBus()
    got = []
    every = bus.subscribe(lambda e: got.append(("all", e)))
    bus.subscribe(lambda e: got.append(("pings", e)), Ping)
    bus.subscribe(lambda e: got.append(("notices", e)), DeviceNotice)
    notice = DeviceNotice("output", "Audio is off")
    bus.publish(Ping(1))
    bus.publish(notice)
    every()
    bus.publish(Ping(2))
    assert got == [("all", Ping(1)), ("pings", Ping(1)), ("all", notice), ("notices", notice),
                   ("pings", Ping(2))]


def test_a_failing_subscriber_is_logged_and_the_others_still_hear(caplog):
    bus = EventBus()
    got = []

    def broken(event):
        raise RuntimeError("listener bug")

    bus.subscribe(broken)
    bus.subscribe(got.append)
    with caplog.at_level(logging.ERROR, logger="pipeline.core.events"):
        bus.publish(Ping(1))
    assert got == [Ping(1)]
    assert "a subscriber to Ping failed" in caplog.text and "listener bug" in caplog.text


def test_subscribing_while_another_thread_publishes_loses_nothing():
    # Publishing takes no lock: each publish sees a whole subscriber tuple, old or new.
    bus = EventBus()
    counts = [0] * 50
    stop = threading.Event()

    def publisher():
        while not stop.is_set():
            bus.publish(Ping(0))

    thread = threading.Thread(target=publisher)
    thread.start()
    try:
        for i in range(50):
            bus.subscribe(lambda e, i=i: counts.__setitem__(i, counts[i] + 1), Ping)
    finally:
        stop.set()
        thread.join()
    bus.publish(Ping(1))
    assert all(c >= 1 for c in counts)


def test_every_event_has_one_json_form_with_its_heard_time():
    import json
    import math

    from pipeline.core.events import (
        EVENT_KINDS,
        EVENT_NAMES,
        DelayChange,
        SpeechFinished,
        WordTimed,
        event_json,
    )

    assert set(EVENT_KINDS) == set(EVENT_NAMES.values()) and len(EVENT_KINDS) == len(EVENT_NAMES)
    # A media time also comes as the wall-clock instant it is heard (here: origin 1000 s).
    word = event_json(WordTimed(3, 0, "hɛloʊ", 2.5, 2.75), heard_at=lambda t: 1000.0 + t)
    assert word == {"type": "event", "event": "word", "request": 3, "index": 0,
                    "phonemes": "hɛloʊ", "start": 2.5, "end": 2.75,
                    "start_heard_at": 1002.5, "end_heard_at": 1002.75}
    finished = event_json(SpeechFinished(3, 4.0, False, 0, 0), heard_at=lambda t: 10 + t)
    assert finished["end_heard_at"] == 14.0 and finished["least_slack_s"] is None
    # NaN (a delay reset) is JSON's null, not an invalid NaN token.
    reset = event_json(DelayChange(1.0, 0.05, 0.03, math.nan))
    assert reset["worst_ms"] is None and "start_heard_at" not in reset
    json.loads(json.dumps(reset, allow_nan=False))
