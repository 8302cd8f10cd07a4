"""render/rigs/photo_manifest.py: a photo rig saved and read back, and every way a saved
one can be broken explained in words for the user (the astronaut imported with the real
MediaPipe model; tests/test_photo_rig.py shows a loaded rig draws what the saved one did)."""

from __future__ import annotations

import json

import pytest

BAD_MANIFESTS = [
    (lambda m: m.pop("landmarks"), r"missing key\(s\) 'landmarks'"),
    (lambda m: m.update(format="lipsync-studio.sprite-rig"), r'"format" is .*expected .lipsync-studio\.photo-rig'),
    (lambda m: m.update(version=2), r"format version 2 is not supported"),
    (lambda m: m.update(colour="red"), r"unknown key\(s\) 'colour'"),
    (lambda m: m.update(landmarks=m["landmarks"][:400]), r'"landmarks" must be 478 \[x, y, z\] triples'),
    (lambda m: m.update(landmarks=[[1e6, 0, 0]] * 478), r'"landmarks" lie far outside the 512×512 picture'),
    (lambda m: m.update(landmarks=[[100, 100, 0]] * 478), r"the landmarks are broken \(corners coincide\)"),
    (lambda m: m.update(canvas=[400, 512]), r"the picture is 512×512, but the manifest's canvas is 400×512"),
    (lambda m: m.update(image="../elsewhere.png"), r'"image" points outside the avatar folder'),
    (lambda m: m.update(image="missing.png"), r"The picture missing\.png was not found"),
    (lambda m: m.update(articulation=5), r'"articulation" must be a number from 0\.25 to 2\.0'),
    (lambda m: m.update(name=""), r'"name" must be a non-empty text'),
]


@pytest.mark.parametrize("spoil, message", BAD_MANIFESTS)
def test_bad_saved_rigs_are_explained(astronaut_rig, tmp_path, spoil, message):
    from render.rigs.manifest import RigError
    from render.rigs.photo_manifest import load_photo_rig, save_photo_rig

    manifest = save_photo_rig(astronaut_rig, tmp_path / "avatar")
    data = json.loads(manifest.read_text())
    spoil(data)
    manifest.write_text(json.dumps(data))
    with pytest.raises(RigError, match=message):
        load_photo_rig(manifest)


def test_unreadable_manifests(tmp_path):
    from render.rigs.manifest import RigError
    from render.rigs.photo_manifest import load_photo_rig

    with pytest.raises(RigError, match="manifest not found"):
        load_photo_rig(tmp_path)
    (tmp_path / "manifest.json").write_text("{nope")
    with pytest.raises(RigError, match=r"not valid JSON: .* at line 1, column 2"):
        load_photo_rig(tmp_path)
