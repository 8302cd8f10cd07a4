from app.frame_rate_watch import HOLD_S, FrameRateWatch


def _feed(watch, samples):
    return [(t, said) for t, fps in samples if (said := watch.update(t, fps)) is not None]


def test_a_lasting_drop_is_said_once_and_its_end_too():
    watch = FrameRateWatch(60)
    steps = [i * 0.5 for i in range(40)]
    said = _feed(watch, [(t, 59 if t < 2 else 41 if t < 10 else 60) for t in steps])
    assert len(said) == 2
    (t_low, text), (t_back, end) = said
    assert t_low == 2 + HOLD_S and "41 fps, below the 60 fps asked for" in text
    assert t_back == 10 + HOLD_S and end == ""


def test_short_dips_hidden_windows_and_the_normal_wobble_say_nothing():
    watch = FrameRateWatch(60)
    # A 2-s dip (a voice's first sentence), 0 fps (a hidden window: nothing drawn), and
    # the 57-61 fps an idle machine measures.
    samples = [(i * 0.5, fps) for i, fps in enumerate([59, 40, 40, 40, 40, 58, 0, 0, 0, 0, 0, 0,
                                                       0, 0, 57, 61, 57, 58])]
    assert _feed(watch, samples) == []


def test_overruns_are_said_at_the_first_and_over_once_none_come_for_the_hold():
    from app.frame_rate_watch import DEGRADED_MESSAGE, DegradedWatch

    watch = DegradedWatch()
    # (time, the producers' overrun count) every 0.5 s: a stage slow from 1 s to 5 s
    # overruns each second as the producer tries its full path again, then keeps up.
    counts = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5]
    said = [(i * 0.5, s) for i, n in enumerate(counts)
            if (s := watch.update(i * 0.5, n)) is not None]
    assert said == [(1.0, DEGRADED_MESSAGE), (5.0 + HOLD_S, "")]  # the last at 5 s
    # New outputs, new producers counting from 0: their first overrun is news again.
    assert watch.update(20.0, 0) is None and watch.update(20.5, 1) == DEGRADED_MESSAGE
