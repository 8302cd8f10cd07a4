"""A real headless Chromium (Debian's) driven by Playwright, for the browser-source page.

Playwright's own browser download does not work here, so the system Chromium is used,
with the flags that let it run in a container without a GPU (docs: shared recipes,
"A real browser").
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator

import numpy as np

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run")


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A launched headless Chromium (playwright.sync_api.Browser); closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()


def canvas_pixels(page) -> tuple[int, int, bytes]:
    """The page's canvas as it holds it now: width, height and straight RGBA bytes, read
    with getImageData (the canvas keeps premultiplied pixels and un-premultiplies them)."""
    width, height, data = page.evaluate(
        """() => {
            const c = document.getElementById("avatar");
            const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
            let s = "";
            for (let i = 0; i < d.length; i += 32768)
                s += String.fromCharCode.apply(null, d.subarray(i, i + 32768));
            return [c.width, c.height, btoa(s)];
        }""")
    return width, height, base64.b64decode(data)


def read_canvas(page) -> np.ndarray:
    """canvas_pixels as an H×W×4 array."""
    w, h, data = canvas_pixels(page)
    return np.frombuffer(data, np.uint8).reshape(h, w, 4)
