"""Another program on the test display: a plain X window of a process of its own, which
the hotkey tests focus while they press keys (the game a streamer plays), and which can
reserve a key combination with XGrabKey as a desktop's shortcut daemon does.

Run as `python -m tests.harness.other_program [--grab KEYSYM MASK]`; it prints
"window 0x…" once mapped, then "key KEYCODE TIME" for each key press it receives (TIME:
the machine's monotonic clock, which every process shares, when it read the event), and
runs until its standard input closes.
"""

from __future__ import annotations

import os
import queue
import select
import subprocess
import sys
import threading
import time

import Xlib.display
import Xlib.X
import Xlib.XK


class OtherProgram:
    """The program, started; `window` is its window's id, `keys()` the key presses it has
    been sent so far (keycodes), `received` when it read each (time.monotonic)."""

    def __init__(self, display: str, grab: tuple[str, int] | None = None) -> None:
        args = [sys.executable, "-m", "tests.harness.other_program"]
        if grab is not None:
            args += ["--grab", grab[0], str(grab[1])]
        self.proc = subprocess.Popen(args, env=dict(os.environ, DISPLAY=display),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                                         os.path.abspath(__file__)))))
        # A thread reads its lines: select() on the pipe misses lines already buffered.
        self._lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()
        line = self._line(10)
        if not line.startswith("window "):
            raise RuntimeError(f"the other program did not start: {line!r}")
        self.window = int(line.split()[1], 16)
        self._keys: list[int] = []
        self.received: list[float] = []

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._lines.put(line.strip())

    def _line(self, timeout: float) -> str:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return ""

    def keys(self, settle: float = 0.3) -> list[int]:
        """The keycodes pressed in its window, after `settle` seconds without a new one."""
        while line := self._line(settle):
            _, code, at = line.split()
            self._keys.append(int(code))
            self.received.append(float(at))
        return list(self._keys)

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(5)


def _main(argv: list[str]) -> None:
    display = Xlib.display.Display()
    screen = display.screen()
    window = screen.root.create_window(
        0, 0, 320, 240, 0, screen.root_depth, Xlib.X.InputOutput, Xlib.X.CopyFromParent,
        background_pixel=screen.white_pixel,
        event_mask=Xlib.X.KeyPressMask | Xlib.X.StructureNotifyMask)
    window.set_wm_name("Another program")
    if argv[:1] == ["--grab"]:
        keycode = display.keysym_to_keycode(Xlib.XK.string_to_keysym(argv[1]))
        screen.root.grab_key(keycode, int(argv[2]), True, Xlib.X.GrabModeAsync,
                             Xlib.X.GrabModeAsync)
    window.map()
    while display.next_event().type != Xlib.X.MapNotify:
        pass
    print(f"window {window.id:#x}", flush=True)
    while True:
        while display.pending_events():
            event = display.next_event()
            if event.type == Xlib.X.KeyPress:
                print(f"key {event.detail} {time.monotonic():.6f}", flush=True)
        ready, _, _ = select.select([sys.stdin, display.fileno()], [], [], 1.0)
        if sys.stdin in ready and not sys.stdin.read(1):
            return


if __name__ == "__main__":
    _main(sys.argv[1:])
