"""Finding small, several and no faces in large pictures, with the real MediaPipe models
on pictures made from real faces (tests/harness/face_pictures.py), and the memory that
repeated imports of a 48-megapixel photo take."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pipeline.face.detection import FINEST_TILE_FACES, iou, tile_origins, tile_sides
from pipeline.face.landmarks import (
    MIN_FACE_PX,
    PortraitError,
    SeveralFacesError,
    animatable,
    find_face,
    load_portrait,
)
from tests.harness.face_pictures import (
    DEV,
    HELD_OUT,
    Placement,
    compose,
    matches,
    random_placements,
    source,
)

ROOT = Path(__file__).resolve().parent.parent


def _tiles(width: int, height: int):
    """Every tile (x0, y0, side) in picture pixels, as FaceDetector.find cuts them."""
    for side in tile_sides(width, height, MIN_FACE_PX):
        scale = 128 / side
        lw, lh = max(1, round(width * scale)), max(1, round(height * scale))
        for ty in tile_origins(lh, 128):
            for tx in tile_origins(lw, 128):
                yield tx / scale, ty / scale, side


@pytest.mark.parametrize("size", [(1920, 1080), (4096, 3072), (1080, 1920), (640, 480)])
def test_every_face_lies_whole_in_a_tile_where_the_detector_sees_it(size):
    """The pyramid's invariant, checked over faces of every width from MIN_FACE_PX to
    half the picture, at many places: some tile holds the face whole with the face at
    least a fifth of its side (the detector scored the astronaut 0.93 there and finds
    faces from 12 %), and no wider than half of it."""
    w, h = size
    tiles = list(_tiles(w, h))
    rng = np.random.default_rng(0)
    for width in np.geomspace(MIN_FACE_PX, max(size) / 2, 24):
        for _ in range(20):
            x0, y0 = rng.uniform(0, w - width), rng.uniform(0, h - width)
            fits = [side for tx, ty, side in tiles
                    if tx - 0.5 <= x0 and x0 + width <= tx + side + 0.5
                    and ty - 0.5 <= y0 and y0 + width <= ty + side + 0.5]
            # Half a tile at most, but for the whole picture, which holds any face.
            useful = [s for s in fits if width / s >= 1 / FINEST_TILE_FACES - 1e-9
                      and (width / s <= 0.5 or s == max(size))]
            assert useful, (size, width, x0, y0)


def _picture_file(tmp_path, name: str, pixels: np.ndarray) -> Path:
    path = tmp_path / name
    Image.fromarray(pixels).save(path, quality=92)
    return path


# Faces 3-12 % of the longer side: the import missed every one under ~11 % before. 3 % of
# 1920 is 58 px, under MIN_FACE_PX (test_a_face_too_small_to_animate_is_told_so): 3.5 %.
SMALL = [((1920, 1080), 0.035, "left"), ((1920, 1080), 0.05, "right"), ((1920, 1080), 0.08, "left"),
         ((1920, 1080), 0.10, "right"), ((4000, 3000), 0.03, "right"), ((4000, 3000), 0.06, "left"),
         ((4000, 3000), 0.12, "right")]


@pytest.mark.parametrize("size,fraction,side", SMALL)
def test_a_small_face_is_imported_with_its_landmarks_in_place(landmarker, tmp_path, size, fraction, side):
    """The astronaut pasted small into a large picture, found through load_portrait as
    the import does, with her mouth's landmarks where her pasted mouth is."""
    w, h = size
    width = fraction * max(size)
    cx = w * (0.25 if side == "left" else 0.75)
    placement = Placement("astronaut", width, (cx, h * 0.45), mirror=side == "right")
    pixels, (expected,) = compose(size, "grass", [placement], landmarker, seed=int(fraction * 100))
    image = load_portrait(_picture_file(tmp_path, "far.jpg", pixels))
    # The working size keeps these pictures as they are (under 4096 px).
    assert image.shape[:2] == (h, w)
    faces = landmarker.detect(image)
    assert len(faces) == 1, [f.box for f in faces]
    face = find_face(faces, "far.jpg")
    assert iou(face.box, expected) > 0.7, (face.box, expected)
    # The upper lip (13) carried from the astronaut's own picture to this one; its box
    # was measured with the lips and all, so the lips land within 3 % of the face width
    # (1.5 px at the face's own 100 px, as test_face_landmarks measures).
    src = source("astronaut", landmarker)
    scale = width / (src.box[2] - src.box[0])
    lip = np.array([223.0 - 120, 143.0 - 20])  # in the crop the harness pastes
    lip_x = (src.pixels.shape[1] - lip[0]) if placement.mirror else lip[0]
    sx0 = (src.pixels.shape[1] - src.box[2]) if placement.mirror else src.box[0]
    want = (expected[0] + (lip_x - sx0) * scale, expected[1] + (lip[1] - src.box[1]) * scale)
    assert np.hypot(*(face.points[13, :2] - want)) < 0.03 * width + 2, (face.points[13, :2], want)


def test_two_people_in_a_1920x1080_picture_are_both_offered(landmarker):
    """The issue's picture: two people side by side, which said "No face found… well
    lit and not covered" before."""
    places = [Placement("astronaut", 150, (560, 480)), Placement("lfw4", 140, (1380, 520), mirror=True)]
    pixels, expected = compose((1920, 1080), "brick", places, landmarker, seed=3)
    faces = landmarker.detect(pixels)
    assert len(faces) == 2
    assert matches([f.box for f in faces], expected) == [0, 1]  # left to right, as numbered
    with pytest.raises(SeveralFacesError) as err:
        find_face(faces, "couple.jpg")
    lines = err.value.message.splitlines()
    assert lines[0] == "couple.jpg shows 2 faces; pick the one to animate (numbered from 0, left to right):"
    for n, line in enumerate(lines[1:]):
        x0, y0, x1, y1 = faces[n].box
        assert line == f"  face {n}: {x1 - x0:.0f}×{y1 - y0:.0f} px at x {x0:.0f}-{x1:.0f}, y {y0:.0f}-{y1:.0f}"
    assert find_face(faces, "couple.jpg", face_index=1) is faces[1]


@pytest.mark.parametrize("backdrop", ["non_faces", "chelsea", "text", "noise", "gravel", "flat"])
def test_a_picture_with_no_face_still_says_so(landmarker, backdrop):
    """Hundreds of tiles are looked at: a cat, a wall of 100 LFW pictures that are not
    faces, print, noise must still give no face."""
    pixels, _ = compose((1920, 1080), backdrop, [], landmarker, seed=7)
    faces = landmarker.detect(pixels)
    assert faces == [], [f.box for f in faces]
    with pytest.raises(PortraitError, match=r"^No face found in empty\.jpg\."):
        find_face(faces, "empty.jpg")


def test_a_face_too_small_to_animate_is_told_so(landmarker):
    """A face 52 px wide (under MIN_FACE_PX) in a 1920×1080 picture: found, so the user
    hears it is too small instead of "no face"."""
    pixels, (expected,) = compose((1920, 1080), "flat", [Placement("astronaut", 52, (700, 400))],
                                  landmarker, seed=1)
    faces = landmarker.detect(pixels)
    assert matches([f.box for f in faces], [expected]) == [0]
    with pytest.raises(PortraitError, match=rf"only 5\d px wide, too small to animate: need at least {MIN_FACE_PX} px"):
        find_face(faces, "crowd.jpg")


# The most faces found where there is none, over the twelve pictures below, that each set
# may show. bench/face_detection.py (bench/results/face_detection_vm_2core_epyc.json), 128
# pictures a set: DEV 2 (one, 75 px, in a picture with no face); HELD_OUT 17 (each
# ≥ 64 px, so offered), all on four of its backgrounds: the Pompeii coins (heads in
# relief), a cell's blob, the rocket and noise, which the detector scores as faces from
# every tile. At those rates twelve pictures show 0.19 and 1.6 on average, and more than
# 1 and 4 with 1.6 % and 2.3 % probability (Poisson); here they showed 0 and 2.
EXTRA_FACES = {"dev": 1, "held_out": 4}


@pytest.mark.parametrize("name,face_set", [("dev", DEV), ("held_out", HELD_OUT)], ids=["dev", "held_out"])
def test_detection_rate_on_varied_pictures(landmarker, name, face_set):
    """Twelve 1920×1080 pictures of one or two faces (5-12 % of the longer side) from
    LFW's faces tinted to several skin tones, turned, mirrored, lit brighter or darker,
    on busy backgrounds. HELD_OUT's faces and backgrounds were never tuned on. The
    landmarker alone, as import ran it before, found 1 of the 18 in each set.
    bench/face_detection.py measured 97.9-98.6 % of such faces found in both sets: at
    18 faces, 16 is what a 97 % finder reaches with 98 % probability. Extra faces count
    as find_face offers them (animatable)."""
    rng = np.random.default_rng(23)
    found = total = extra = 0
    for k in range(12):
        places = random_placements(face_set.faces, (1920, 1080), 1 + k % 2, (0.05, 0.12), rng)
        pixels, expected = compose((1920, 1080), face_set.backgrounds[k % len(face_set.backgrounds)],
                                   places, landmarker, seed=k, quality=int(rng.integers(70, 96)))
        faces = animatable(landmarker.detect(pixels))
        hits = matches([f.box for f in faces], expected)
        found += sum(h is not None for h in hits)
        total += len(expected)
        extra += len(faces) - sum(h is not None for h in hits)
    assert total == 18
    assert found >= 16, found
    assert extra <= EXTRA_FACES[name], extra


def test_six_imports_of_a_48_megapixel_photo_keep_memory_bounded(tmp_path):
    """import_portrait six times in a process of its own, each on a new thread as the
    window's importer runs it, one landmarker kept between them as the window keeps it.
    VmRSS after each import and VmHWM (the peak, which starts afresh at exec; ru_maxrss
    would keep pytest's own) from /proc/self/status."""
    from skimage import data

    path = tmp_path / "photo48.jpg"
    Image.fromarray(data.astronaut()).resize((8000, 6000), Image.Resampling.BILINEAR).save(path, quality=85)
    code = (
        "import threading\n"
        "from render.rigs.photo import import_portrait\n"
        "from pipeline.face.landmarks import FaceLandmarker\n"
        "def status():\n"
        "    f = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open('/proc/self/status')\n"
        "         if l.startswith(('VmRSS', 'VmHWM'))}\n"
        "    return f['VmRSS'], f['VmHWM']\n"
        "landmarker = FaceLandmarker()\n"
        "print(*status())\n"
        "for _ in range(6):\n"
        f"    t = threading.Thread(target=import_portrait, args=({str(path)!r},),\n"
        "                         kwargs={'landmarker': landmarker})\n"
        "    t.start(); t.join()\n"
        "    print(*status(), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [tuple(map(int, line.split())) for line in done.stdout.split("\n") if line]
    assert len(rows) == 7, done.stdout
    rss = [r for r, _ in rows]
    peak = rows[-1][1]
    # Measured here, RSS after each import: 117-118 MB, flat (before: 188-190 MB after
    # the first, 324-564 MB after the next five, as each import's thread left its freed
    # buffers in its own malloc arena). A buffer left behind would be at least one of
    # Pillow's 16 MB image blocks; the working picture is 50 MB.
    assert max(rss[1:]) - rss[1] < 16, rss
    # The peak is one import's working set over the model: 389-405 MB measured over
    # the RSS before the first import (before: 622-661 MB, leftovers under the next).
    assert peak - rss[0] < 450, (rss, peak)
