"""`lipsync-studio obs setup`: configure a running OBS for the avatar, from a terminal.

Run while the app runs, it sets OBS up for that app (its record, running_app.py: the
avatar window, background, measured mic delay); otherwise from the saved settings. Prints
what it did, a line each; an error is one line on stderr, exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from app.obs.target import ENABLE_HINT

# The websocket client and keyring load when the command runs (about 0.2 s here), not
# whenever the command line is parsed.


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add `obs` (with its sub-command `setup`) to ``subparsers``; returns the `obs` parser."""
    obs = subparsers.add_parser(
        "obs", help="configure OBS Studio for the avatar (through obs-websocket 5)",
        description="Configure OBS Studio through its WebSocket server (OBS 28 or newer; "
        f"turn it on in the {ENABLE_HINT}).")
    commands = obs.add_subparsers(dest="obs_command", metavar="COMMAND", required=True)
    setup = commands.add_parser(
        "setup", help="add the avatar to an OBS scene, with its chroma key and the mic's sync offset",
        description="In the chosen OBS scene, create or update a capture of the avatar window "
        "(or a browser source showing the avatar page, where OBS has one), a chroma key filter "
        "when the background is a chroma colour, and the microphone's audio sync offset "
        "(the measured mic → mouth delay, while the app runs). Running it again updates "
        "what it made before; nothing is duplicated.")
    setup.add_argument("--host", metavar="H", help="where OBS runs (default: the saved setting, 127.0.0.1)")
    setup.add_argument("--port", metavar="P", type=int, help="obs-websocket's port (default: the saved setting, 4455)")
    setup.add_argument("--password", metavar="PW", help="obs-websocket's password; saved for next time (system keyring, "
                       "or a file only you can read)")
    setup.add_argument("--scene", metavar="NAME", help="the scene to add the avatar to (default: the saved setting, "
                       "else OBS's current program scene)")
    return obs


def run(args: argparse.Namespace) -> int:
    """Run `obs setup` for parsed ``args``: 0 when done, 1 with the message on stderr."""
    from app.obs.credentials import CredentialError
    from app.obs.connection import ObsError, PasswordError

    try:
        setup(args, lambda line: print(line, flush=True))
    except PasswordError as exc:
        how = ("pass --password PASSWORD once (it is saved)" if exc.missing
               else "pass the right one with --password")
        print(f"lipsync-studio: {exc.advice(how)}", file=sys.stderr)
        return 1
    except (ObsError, CredentialError) as exc:
        print(f"lipsync-studio: {exc}", file=sys.stderr)
        return 1
    return 0


def setup(args: argparse.Namespace, report) -> list[str]:
    """What `run` does, each line to ``report``; raises ObsError or CredentialError."""
    from app.obs.connection import ObsError
    from app.settings import SettingsStore

    store = SettingsStore()
    settings = store.load()
    for problem in store.problems:
        report(f"settings: {problem}")
    if args.port is not None and not 1 <= args.port <= 65535:
        raise ObsError(f"--port {args.port} is out of range: use 1 to 65535")
    return add_to_obs(settings, report, host=args.host, port=args.port,
                      password=args.password, scene=args.scene)


def add_to_obs(settings, report, *, host: str | None = None, port: int | None = None,
               password: str | None = None, scene: str | None = None) -> list[str]:
    """Set OBS up for the running app (or `settings` when none runs): what `obs setup`
    and the settings panel's "Add to OBS" do. None for host, port or scene takes the
    setting; a `password` given is saved once OBS accepts it, else the saved one is used.
    Raises ObsError or CredentialError."""
    from app.obs.credentials import load_password, save_password
    from app.obs.link import ObsLink
    from app.obs.running_app import read_running_app
    from app.obs.target import target_from

    running = read_running_app()
    target = target_from(settings, running, scene)
    if running is None:
        report("Lipsync Studio is not running: setting OBS up from the saved settings")
    else:
        report(f"setting OBS up for the running Lipsync Studio (pid {running['pid']})")
    link = ObsLink(host or settings.obs_host, settings.obs_port if port is None else port,
                   password if password is not None else load_password())
    try:
        link.connect()
        if password is not None:
            report(save_password(password))  # only once OBS took it
        return link.setup(target, report)
    finally:
        link.close()
