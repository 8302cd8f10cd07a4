"""The sound devices as PortAudio (through sounddevice) knows them: listing them, also as
a newly started PortAudio would (it lists them once, at initialisation), starting
PortAudio again to open devices connected since, and closing streams whose device or
sound server may be gone without ever blocking the app.
"""

from __future__ import annotations

import atexit
import json
import logging
import subprocess
import sys
import threading
from typing import Literal

log = logging.getLogger(__name__)

Kind = Literal["input", "output"]
_CHANNELS = {"input": "max_input_channels", "output": "max_output_channels"}


class AudioUnavailable(RuntimeError):
    """No usable sound device; the message is meant for the user."""


def sounddevice_module():
    try:
        import sounddevice
    except OSError as exc:
        raise AudioUnavailable(
            "Sound is unavailable: the PortAudio library is not installed "
            "(on Debian/Ubuntu: sudo apt install libportaudio2). "
            "The avatar will still animate without sound."
        ) from exc
    return sounddevice


def list_devices(kind: Kind) -> list[str]:
    """Names of the devices that can capture ("input") or play ("output") sound, as
    AudioInput / AudioOutput take them: as this process's PortAudio listed them when
    it was initialised."""
    try:
        sd = sounddevice_module()
    except AudioUnavailable:
        return []
    try:
        return [d["name"] for d in sd.query_devices() if d[_CHANNELS[kind]] > 0]
    except sd.PortAudioError:  # not initialised: another thread is re-initialising it
        return []


_LIST_DEVICES = ("import json, sounddevice as sd; print(json.dumps([{k: d[k] for k in "
                 "('name', 'max_input_channels', 'max_output_channels')} for d in sd.query_devices()]))")


def list_devices_now(kind: Kind, timeout: float = 5.0) -> list[str] | None:
    """list_devices() as a newly initialised PortAudio would answer, with any device
    connected since this process initialised its own; None when that cannot be found out.

    Runs PortAudio in a child process (~0.13 s, most of it Python starting) so that no
    stream of this process is disturbed; at the lowest priority, since on 2 cores its
    start-up otherwise took CPU from the voice's synthesis (underruns, measured). Through
    nice(1) rather than a preexec_fn, which would make Python fork this large process
    instead of vfork-ing it."""
    try:
        child = subprocess.run(["nice", "-n", "19", sys.executable, "-c", _LIST_DEVICES],
                               capture_output=True, text=True, timeout=timeout, check=True)
        devices = json.loads(child.stdout.strip().splitlines()[-1])
        return [str(d["name"]) for d in devices if d[_CHANNELS[kind]] > 0]
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError, KeyError):
        return None


STUCK_MESSAGE = ("A sound device went away without letting go (its sound server stopped or "
                 "restarted): restart Lipsync Studio to use sound again.")


def reinitialize_portaudio() -> None:
    """Make PortAudio enumerate devices again (it lists them once, at initialisation).

    This closes every PortAudio stream of the process, so the owner of other streams
    (the audio output) must reopen them afterwards. Raises AudioUnavailable, for the
    user, while a stream of a vanished sound server cannot be closed.
    """
    if streams_stuck():
        raise AudioUnavailable(STUCK_MESSAGE)
    sd = sounddevice_module()
    sd._terminate()
    sd._initialize()


# A healthy stream closes in ~20 ms.
CLOSE_WAIT = 1.0
# Closers still waiting on their stream (see close_stream).
_stuck: list[threading.Thread] = []


def close_stream(stream, name: str) -> None:
    """Abort and close a PortAudio stream on a daemon thread, waiting at most CLOSE_WAIT:
    closing a stream whose device is gone can block for good (PortAudio 19.6's JACK host
    waits for a process cycle that never comes once the server has died), and the app
    must still be able to go on, or quit."""
    closer = threading.Thread(target=_close_quietly, args=(stream,), name=name, daemon=True)
    closer.start()
    closer.join(CLOSE_WAIT)
    if closer.is_alive():
        _stuck.append(closer)
        # sounddevice's exit handler terminates PortAudio, which would wait for this
        # stream for ever: the app could not quit.
        log.warning("an audio stream did not close (its sound server is gone); PortAudio "
                    "is left as it is at exit")
        atexit.unregister(sounddevice_module()._exit_handler)


def streams_stuck() -> bool:
    """Whether a stream is still closing: until it is, terminating (or re-initialising)
    PortAudio would wait for it, for ever if its sound server has died."""
    _stuck[:] = [closer for closer in _stuck if closer.is_alive()]
    return bool(_stuck)


def _close_quietly(stream) -> None:
    try:
        stream.abort()
        stream.close()
    except Exception:  # noqa: BLE001 - the device is gone; nothing left to release
        pass
