"""Our mouth as other apps' avatars understand it: five vowel weights (VRM's A I U E O,
Live2D's and VTube Studio's vowel parameters), how open the mouth is, and its form
(wide against round).

Avatar apps (VTube Studio, VSeeFace, Warudo, VNyan, Live2D and VRM animations) do not
know the 15 OVR visemes: a VRM model carries five mouth blend shapes, one per Japanese
vowel, and a Live2D model two mouth parameters, open and form. Each viseme is given here
as the mix of those that shows it best. Consonants borrow from the vowel nearest their
lip shape (SS's spread lips are I, CH's pushed-out lips U); closures (PP) and rest show
none, so the lips meet. The table is the usual OVR → VRM mapping of lip-sync plug-ins
(one vowel per vowel viseme, consonants at a fraction), with the fractions matched to
pipeline.core.visemes.OPENNESS, so every app opens the mouth as far as our own rigs do.

Pure functions of a MouthPose: the same pose gives the same weights on every output, and
the VMC and VTube Studio senders and the animation exporters share them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.core.frames import MouthPose
from pipeline.core.visemes import OPENNESS, OVR_VISEMES

VOWELS = ("A", "I", "U", "E", "O")
# VRM 1.0 names the same five expressions in lower case, after the sound.
VRM1_VOWELS = ("aa", "ih", "ou", "ee", "oh")

# Per viseme: (A, I, U, E, O) weights at full articulation, and the form (-1 round and
# pushed out .. 1 wide, Live2D's ParamMouthForm direction).
_TABLE: dict[str, tuple[tuple[float, float, float, float, float], float]] = {
    "sil": ((0.0, 0.0, 0.0, 0.0, 0.0), 0.0),
    "PP": ((0.0, 0.0, 0.0, 0.0, 0.0), 0.0),
    "FF": ((0.0, 0.2, 0.0, 0.1, 0.0), 0.3),
    "TH": ((0.1, 0.0, 0.0, 0.3, 0.0), 0.3),
    "DD": ((0.1, 0.1, 0.0, 0.3, 0.0), 0.3),
    "kk": ((0.3, 0.0, 0.0, 0.2, 0.0), 0.1),
    "CH": ((0.0, 0.1, 0.4, 0.0, 0.1), -0.5),
    "SS": ((0.0, 0.4, 0.0, 0.1, 0.0), 0.6),
    "nn": ((0.1, 0.1, 0.0, 0.3, 0.0), 0.3),
    "RR": ((0.0, 0.0, 0.2, 0.0, 0.3), -0.5),
    "aa": ((1.0, 0.0, 0.0, 0.0, 0.0), 0.1),
    "E": ((0.1, 0.0, 0.0, 0.8, 0.0), 0.6),
    "ih": ((0.0, 0.6, 0.0, 0.1, 0.0), 0.8),
    "oh": ((0.0, 0.0, 0.1, 0.0, 0.8), -0.7),
    "ou": ((0.0, 0.0, 0.5, 0.0, 0.1), -1.0),
}
_ROWS = [_TABLE[name] for name in OVR_VISEMES]
_NOMINAL = [OPENNESS[name] for name in OVR_VISEMES]


@dataclass(frozen=True, slots=True)
class MouthShape:
    """A mouth for another app: `vowels` in VOWELS order (0..1 each), `open` 0 shut ..
    1 widest, `form` -1 round .. 1 wide."""

    vowels: tuple[float, float, float, float, float]
    open: float
    form: float

    def named(self, names: tuple[str, ...] = VOWELS) -> dict[str, float]:
        """The vowel weights by name (VOWELS or VRM1_VOWELS)."""
        return dict(zip(names, self.vowels))


def mouth_shape(pose: MouthPose) -> MouthShape:
    """The shape showing `pose`: the two visemes' rows blended by its mix, scaled by how
    open the pose is against how open those visemes are at full articulation (a mouth
    closing into a PP shows less of the vowel before it, as our rigs draw it)."""
    (va, fa), (vb, fb) = _ROWS[pose.viseme_a], _ROWS[pose.viseme_b]
    b = min(1.0, max(0.0, pose.mix))
    a = 1.0 - b
    nominal = a * _NOMINAL[pose.viseme_a] + b * _NOMINAL[pose.viseme_b]
    openness = min(1.0, max(0.0, pose.openness))
    scale = min(1.0, openness / nominal) if nominal > 0 else 0.0
    vowels = tuple(min(1.0, scale * (a * x + b * y)) for x, y in zip(va, vb))
    return MouthShape(vowels, openness, a * fa + b * fb)
