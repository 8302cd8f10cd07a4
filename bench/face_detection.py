"""How surely portrait import finds faces, and how long it takes.

Pictures from tests/harness/face_pictures.py (real faces pasted small, one or two, onto
real pictures; and pictures with no face), at 1920×1080 and 4000×3000, faces 3-5 %,
5-8 % and 8-12 % of the longer side. For each set (DEV, tuned on; HELD_OUT, faces and
backgrounds never tuned on): the share of faces found (a found landmark box over the
expected one at IoU ≥ 0.5), pictures where every face was found and nothing else,
faces found where there is none, and the time of FaceLandmarker.detect (P50/P max).

Usage: python bench/face_detection.py [--per-case 8] [--out bench/results/face_detection_FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.face.landmarks import FaceLandmarker  # noqa: E402
from tests.harness.face_pictures import (  # noqa: E402
    DEV,
    HELD_OUT,
    compose,
    matches,
    random_placements,
)

SIZES = ((1920, 1080), (4000, 3000))
FRACTIONS = ((0.03, 0.05), (0.05, 0.08), (0.08, 0.12))


def run_set(name, face_set, landmarker, per_case: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    cases, times = [], {size: [] for size in SIZES}
    for size in SIZES:
        for fraction in FRACTIONS:
            for count in (1, 2):
                found_faces = clean = 0
                misses = []
                for k in range(per_case):
                    backdrop = str(rng.choice(face_set.backgrounds))
                    places = random_placements(face_set.faces, size, count, fraction, rng)
                    picture, expected = compose(size, backdrop, places, landmarker,
                                                seed=int(rng.integers(1 << 30)),
                                                quality=int(rng.integers(70, 96)))
                    t = time.perf_counter()
                    faces = landmarker.detect(picture)
                    times[size].append(time.perf_counter() - t)
                    hit = matches([f.box for f in faces], expected)
                    found_faces += sum(h is not None for h in hit)
                    clean += all(h is not None for h in hit) and len(faces) == count
                    if not all(h is not None for h in hit) or len(faces) != count:
                        extra = [round(f.width) for i, f in enumerate(faces) if i not in hit]
                        misses.append({"background": backdrop, "found": len(faces), "extra_widths": extra,
                                       "faces": [(p.face, round(p.width), p.mirror, round(p.turn_deg, 1),
                                                  round(p.gain, 2)) for p in places],
                                       "hits": [h is not None for h in hit]})
                cases.append({"size": f"{size[0]}x{size[1]}", "fraction": fraction, "faces": count,
                              "pictures": per_case, "faces_found": found_faces / (per_case * count),
                              "pictures_exact": clean / per_case, "misses": misses})
        false, false_widths = 0, []
        for k in range(per_case * 2):
            backdrop = str(rng.choice(face_set.backgrounds))
            picture, _ = compose(size, backdrop, [], landmarker, seed=int(rng.integers(1 << 30)))
            t = time.perf_counter()
            faces = landmarker.detect(picture)
            times[size].append(time.perf_counter() - t)
            false += len(faces)
            false_widths += [round(f.width) for f in faces]
        cases.append({"size": f"{size[0]}x{size[1]}", "faces": 0, "pictures": per_case * 2,
                      "faces_found": false, "widths": false_widths})
    faces_total = sum(c["pictures"] * c["faces"] for c in cases if c["faces"])
    found_total = sum(c["faces_found"] * c["pictures"] * c["faces"] for c in cases if c["faces"])
    return {
        "set": name,
        "faces_found": round(found_total / faces_total, 4),
        "faces_total": faces_total,
        "false_faces_on_no_face_pictures": sum(c["faces_found"] for c in cases if not c["faces"]),
        "no_face_pictures": sum(c["pictures"] for c in cases if not c["faces"]),
        "detect_ms": {f"{s[0]}x{s[1]}": {"p50": round(1000 * float(np.median(v)), 1),
                                          "max": round(1000 * max(v), 1)} for s, v in times.items()},
        "cases": cases,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-case", type=int, default=8)
    parser.add_argument("--sets", default="DEV,HELD_OUT")
    parser.add_argument("--out")
    args = parser.parse_args()
    sets = {"DEV": DEV, "HELD_OUT": HELD_OUT}
    with FaceLandmarker() as landmarker:
        results = [run_set(n, sets[n], landmarker, args.per_case, seed=i)
                   for i, n in enumerate(args.sets.split(","))]
    for r in results:
        print(r["set"], "faces found", r["faces_found"], "of", r["faces_total"], "; false",
              r["false_faces_on_no_face_pictures"], "on", r["no_face_pictures"], "; ms", r["detect_ms"])
        for c in r["cases"]:
            if c["faces"]:
                print("  ", c["size"], c["fraction"], c["faces"], "found", round(c["faces_found"], 3),
                      "exact", c["pictures_exact"])
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps([{k: v for k, v in r.items() if k != "cases"} for r in results]))


if __name__ == "__main__":
    main()
