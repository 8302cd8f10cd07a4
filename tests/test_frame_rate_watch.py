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
