"""The app's memory over repeated imports of large photos, in the real window.

Issue 23 found six imports of a 48 MP photo growing the app from 1.26 to 2.92 GB. Here the
real main window (Xvfb, no sound card needed) imports N different 8000×6000 JPEGs, a real
face pasted at another place in each, and VmRSS is read after each import has settled.
There is no other tool to compare with in the same run: the figure to compare is the
first import's (models and threads made once) against the rest (what each import keeps).

Usage: python bench/import_memory.py [--imports 8] [--out bench/results/import_memory_FILE.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, publish  # noqa: E402


def _rss_mb() -> int:
    return int(next(line for line in open("/proc/self/status")
                    if line.startswith("VmRSS")).split()[1]) // 1024


def _pictures(folder: Path, count: int) -> list[Path]:
    from PIL import Image
    from skimage import data

    face = np.asarray(Image.fromarray(data.astronaut()).resize((1500, 1500)))
    paths = []
    for k in range(count):
        canvas = (np.random.default_rng(k).random((6000, 8000, 3)) * 60 + 80).astype(np.uint8)
        x = 1500 + 400 * k
        canvas[1500:3000, x:x + 1500] = face
        path = folder / f"photo{k}.jpg"
        Image.fromarray(canvas).save(path, quality=85)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--imports", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.harness.services import Xvfb

    server = Xvfb()
    os.environ["DISPLAY"] = server.display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    folder = Path(tempfile.mkdtemp(prefix="import-memory-"))
    os.environ["LIPSYNC_STUDIO_CONFIG_DIR"] = str(folder / "config")
    from PySide6.QtWidgets import QApplication

    from app.settings import Settings
    from tests.harness.app_driver import open_window, pump, pump_until

    app = QApplication([])
    pictures = _pictures(folder, args.imports)
    window = open_window(folder / "config", Settings(mic_enabled=False))
    pump(2)
    start = _rss_mb()
    after = []
    for picture in pictures:
        window.import_portrait(picture)
        pump_until(lambda: not window.importer.busy, 120, "the import")
        pump(3)  # its thumbnail and the new rig's first frames
        after.append(_rss_mb())
    window.close()
    app.processEvents()
    import shiboken6

    shiboken6.delete(app)  # Qt's X connection goes before the X server does
    server.stop()
    publish({
        "machine": describe("real main window under Xvfb, llvmpipe"),
        "picture": "8000x6000 JPEG, a real face (skimage astronaut) at 1500 px",
        "imports": args.imports,
        "rss_mb_before": start,
        "rss_mb_after_each": after,
        "first_import_mb": after[0] - start,
        "later_imports_spread_mb": max(after[1:]) - min(after[1:]) if len(after) > 1 else 0,
        "growth_first_to_last_mb": after[-1] - after[0],
    }, args.out)


if __name__ == "__main__":
    main()
