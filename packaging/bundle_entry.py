"""The bundle's program (packaging/lipsync-studio.spec): `lipsync-studio` as the installed
script runs it, app.cli:main.

Two things differ in a bundle, and are put right here, before the app starts:
- PyInstaller's bootloader points LD_LIBRARY_PATH at the bundle's libraries, for this
  process (the dynamic loader read it at start-up). The programs the app runs (xwininfo
  for "Add to OBS") must load the machine's own libraries: they get the variable as the
  user had it, which the bootloader kept in LD_LIBRARY_PATH_ORIG.
- The app runs itself as `sys.executable -c CODE` (pipeline/audio/devices.py lists the
  sound devices in a PortAudio of their own that way). In the bundle sys.executable is
  this program, not Python, so `-c CODE` is run here as Python would run it.
"""

import os
import sys

if sys.platform.startswith("linux"):
    original = os.environ.pop("LD_LIBRARY_PATH_ORIG", None)
    if original is None:
        os.environ.pop("LD_LIBRARY_PATH", None)
    else:
        os.environ["LD_LIBRARY_PATH"] = original

if len(sys.argv) >= 3 and sys.argv[1] == "-c":
    code = sys.argv[2]
    sys.argv = ["-c", *sys.argv[3:]]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__"})
else:
    from app.cli import main

    sys.exit(main())
