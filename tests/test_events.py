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
