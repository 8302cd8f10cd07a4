"""The status line's wording, from the figures alone (no window)."""

from app.ui.status_line import FirstAudio, status_line

STATS = {"presented": 854, "late": 219, "held": 200, "interpolated": 19, "degraded_shown": 0,
         "fps": 59.6, "display_mode": "deadline"}


def test_every_figure_is_named_with_what_it_measures():
    line = status_line(FirstAudio(41.4, 12.6, "balanced"), 1.55, STATS, ("system", 48000),
                       "mic delay 30 ms")
    assert line == ("heard first audio 41 ms (balanced mode; synthesis first audio 13 ms) · "
                    "A/V offset +1.6 ms · frames 854 presented / 219 late (200 held, 19 "
                    "interpolated) · 60 fps (deadline) · audio system 48 kHz · mic delay 30 ms")


def test_what_is_not_known_yet_or_off_says_so():
    line = status_line(None, None, {**STATS, "degraded_shown": 4}, None, None)
    assert line.startswith("heard first audio – · A/V offset – · ")
    assert "19 interpolated) / 4 degraded · " in line and line.endswith("audio off")
    switched = status_line(FirstAudio(80, 20, None), None, STATS, None, None)
    assert "(latency mode switched as it started; synthesis first audio 20 ms)" in switched
