"""Our mouth for other apps' avatars (pipeline/core/mouth_shapes.py): each vowel viseme
is its own VRM vowel, closures show none, and a blend moves between them smoothly."""

from pipeline.core.frames import MouthPose
from pipeline.core.mouth_shapes import VOWELS, VRM1_VOWELS, mouth_shape
from pipeline.core.visemes import OPENNESS, VISEME_INDEX


def _full(viseme: str):
    i = VISEME_INDEX[viseme]
    return mouth_shape(MouthPose(i, i, 0.0, OPENNESS[viseme]))


def test_vowel_visemes_show_their_own_vowel_and_closures_none():
    for viseme, vowel in (("aa", "A"), ("ih", "I"), ("ou", "U"), ("E", "E"), ("oh", "O")):
        shape = _full(viseme)
        weights = shape.named()
        assert max(weights, key=weights.get) == vowel, viseme
    for closed in ("PP", "sil"):
        assert _full(closed).vowels == (0.0,) * 5 and _full(closed).open == 0.0
    assert _full("ou").form == -1.0 and _full("ih").form > 0.5  # round against wide
    assert list(_full("aa").named(VRM1_VOWELS)) == list(VRM1_VOWELS) and len(VOWELS) == 5


def test_a_blend_moves_smoothly_and_a_closing_mouth_shows_less_vowel():
    aa, pp = VISEME_INDEX["aa"], VISEME_INDEX["PP"]
    steps = [mouth_shape(MouthPose(aa, pp, mix, OPENNESS["aa"] * (1 - mix))) for mix in
             [i / 10 for i in range(11)]]
    a = [s.vowels[0] for s in steps]
    assert a == sorted(a, reverse=True) and a[0] == 1.0 and a[-1] == 0.0
    assert max(x - y for x, y in zip(a, a[1:])) <= 0.2  # no jump bigger than the mix's
    # Half open on an aa shows half the A (as our rigs draw it).
    assert abs(mouth_shape(MouthPose(aa, aa, 0.0, 0.5)).vowels[0] - 0.5) < 1e-9
