"""The sound devices as PortAudio (through sounddevice) knows them: listing them, also as
a newly started PortAudio would (it lists them once, at initialisation), opening and
closing streams, and starting PortAudio again to open devices connected since.

PortAudio is not thread-safe, its JACK host API least of all: opening, starting,
stopping and closing a stream each wait on one condition variable that all streams
share, signalled once per change, and terminating destroys it. Terminating PortAudio
while another thread closed one of its streams (the mic's watchdog, seeing its stream
stop) aborted the process in pa_jack.c (Terminate: the mutex that thread waited on was
destroyed; UpdateQueue: the stream was removed twice), segfaulted later in Pa_Terminate
on a stream already freed, or left the JACK thread failing every cycle and the close
waiting for good. So every such call goes through one lock here, and PortAudio is only
terminated with that lock held, after our streams are closed through sounddevice (which
then forgets their pointers, so that no stream of ours is left pointing at memory that
PortAudio freed). A close that never returns (its sound server died) keeps the lock;
whoever waits for it is told so (AudioUnavailable) instead of blocking.

A JACK server that stops or dies under open streams leaves PortAudio 19.6's JACK host
unable to let go of them: stopping one waits ten minutes for a process cycle that never
comes (RealStop does not look at its own "server is down" flag), and terminating asserts
(jack_deactivate fails on the dead client), so neither the streams nor PortAudio can be
closed. Such streams are abandoned instead, never called again (PortAudio's shutdown
handler marks them inactive, never stopped: lost_its_server), and the next
re-initialisation loads PortAudio afresh, from a copy of its library (dlopen of the same
file would give back the instance already loaded); the dead instance is left as it is.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

log = logging.getLogger(__name__)

Kind = Literal["input", "output"]
_CHANNELS = {"input": "max_input_channels", "output": "max_output_channels"}
_WHAT = {"input": "a microphone", "output": "an audio output"}


class AudioUnavailable(RuntimeError):
    """No usable sound device; the message is meant for the user."""


class NotADevice(AudioUnavailable):
    """The device chosen is a program's JACK connection, not a sound device."""


STUCK_MESSAGE = ("A sound device went away without letting go (its sound server stopped or "
                 "restarted): restart Lipsync Studio to use sound again.")
SERVER_GONE_MESSAGE = ("The sound server (JACK) stopped. Sound and the microphone come back by "
                       "themselves once it runs again.")

# Measured on the 2-core VM at load 4.5 (other test runs beside it), 20 rounds under JACK:
# opening a stream took up to 0.54 s, closing one 0.26 s, terminating PortAudio (with a
# stream open) 1.4 s and initialising it 1.2 s (medians 29, 68, 102 and 101 ms).
# A close still running after this long is taken to hang (its sound server is gone).
CLOSE_WAIT = 1.0
# The longest anyone waits for PortAudio while another thread uses it: above the longest
# use that ends, re-initialising with two streams open (2 x 0.26 + 1.4 + 1.2 s).
LOCK_WAIT = 5.0
# How long after a JACK stream's last callback its server may still tell that it stops.
# jackd 1.9.21 stops its driver first (the callbacks end at once) and tells its clients
# only once the request it is serving ends: a client opening then (any program listing
# the devices, the microphone's own presence probe among them) waits 5 s for a cycle the
# stopped driver never runs (DRIVER_OPEN_TIMEOUT). Measured on the 2-core VM with 3 CPU
# hogs, stopping the faults test's server (SIGTERM): the notice came 7-224 ms after the
# last callback in 48 stops, and 5.007-5.018 s after it in 4 others, each with the
# microphone's presence probe opening its client as the server stopped (gdb: jackd's
# main thread joining its request thread, which waited in ClientExternalOpen); a second
# more for a loaded machine to deliver it.
SERVER_NOTICE_WAIT = 6.0

# Held by whoever is in a PortAudio call that opens, starts, closes, lists or
# (re)initialises; a plain Lock rather than an RLock, so that a close that outlives its
# caller's wait can be left holding it (see _Closer).
_lock = threading.Lock()
# Our open streams: terminating closes them first. Holding them here also keeps each
# stream's CFFI callback alive for as long as PortAudio may call it.
_open: set = set()
# Closes that outlived CLOSE_WAIT (or wait behind one that did).
_stuck: list[threading.Thread] = []
# Our open streams on PortAudio's JACK host: the only ones whose server can go under them.
_jack: set = set()
# Streams whose sound server went (see the module's doc): never called again, and kept so
# that their callbacks stay valid for as long as the PortAudio holding them exists.
_abandoned: list = []
# A stream of this PortAudio lost its server: it cannot be used or terminated any more,
# only replaced (at the next portaudio_released).
_server_lost = False
_exit_handler_installed = False


def sounddevice_module():
    try:
        import sounddevice
    except OSError as exc:
        raise AudioUnavailable(
            "Sound is unavailable: the PortAudio library is not installed "
            "(on Debian/Ubuntu: sudo apt install libportaudio2). "
            "The avatar will still animate without sound."
        ) from exc
    global _exit_handler_installed
    if not _exit_handler_installed:
        # sounddevice's own handler terminates PortAudio at exit whatever other threads
        # are doing with it (daemon threads still run while exit handlers do).
        atexit.unregister(sounddevice._exit_handler)
        atexit.register(_terminate_at_exit)
        _exit_handler_installed = True
    return sounddevice


def streams_stuck() -> bool:
    """Whether a stream is still closing after CLOSE_WAIT: until it is closed, PortAudio
    cannot be re-initialised (or used at all), for ever if its sound server has died."""
    return any(closer.is_alive() for closer in _stuck)


def _acquire() -> bool:
    """Take the lock, waiting at most LOCK_WAIT, and no longer once a close is known to
    hang: the lock stays with that close."""
    deadline = time.monotonic() + LOCK_WAIT
    while not _lock.acquire(timeout=0.05):
        if streams_stuck() or time.monotonic() > deadline:
            return False
    return True


@contextmanager
def _portaudio() -> Iterator[None]:
    if not _acquire():
        raise AudioUnavailable(STUCK_MESSAGE)
    try:
        yield
    finally:
        _lock.release()


# PortAudio's JACK host API lists every JACK client with ports as a device, the JACK
# connections of PortAudio programs too: this process's own once a stream is open (as a
# newly initialised PortAudio, or another program, sees it), named "PortAudio", or
# "PortAudio-01" and on when that name is taken. Sound sent there is heard by no one, and
# nothing is captured from there.
_PORTAUDIO_CLIENT = re.compile(r"PortAudio(-\d+)?")


def _is_portaudio_client(name: str, host_api: str) -> bool:
    return "JACK" in host_api and _PORTAUDIO_CLIENT.fullmatch(name) is not None


def _names(devices: list[dict], host_apis: list[str], kind: Kind) -> list[str]:
    return [d["name"] for d in devices
            if d[_CHANNELS[kind]] > 0 and not _is_portaudio_client(d["name"], host_apis[d["hostapi"]])]


def list_devices(kind: Kind) -> list[str]:
    """Names of the devices that can capture ("input") or play ("output") sound, as
    AudioInput / AudioOutput take them: as this process's PortAudio listed them when
    it was initialised. Empty while PortAudio cannot be reached."""
    try:
        sd = sounddevice_module()
    except AudioUnavailable:
        return []
    try:
        with _portaudio():
            return _names(list(sd.query_devices()), [a["name"] for a in sd.query_hostapis()], kind)
    except (AudioUnavailable, sd.PortAudioError):  # held up, or not initialised again
        return []


_LIST_DEVICES = ("import json, sounddevice as sd; print(json.dumps({"
                 "'devices': [{k: d[k] for k in ('name', 'hostapi', 'max_input_channels', "
                 "'max_output_channels')} for d in sd.query_devices()], "
                 "'host_apis': [a['name'] for a in sd.query_hostapis()]}))")


def list_devices_now(kind: Kind, timeout: float = 5.0) -> list[str] | None:
    """list_devices() as a newly initialised PortAudio would answer, with any device
    connected since this process initialised its own; None when that cannot be found out.

    Runs PortAudio in a child process (~0.13 s, most of it Python starting) so that no
    stream of this process is disturbed; at the lowest priority, since on 2 cores its
    start-up otherwise took CPU from the voice's synthesis (underruns, measured). Through
    nice(1) rather than a preexec_fn, which would make Python fork this large process
    instead of vfork-ing it."""
    listing = _listing_now(timeout)
    if listing is None:
        return None
    try:
        return [str(name) for name in _names(listing["devices"], listing["host_apis"], kind)]
    except (TypeError, KeyError, IndexError):  # not the child's JSON
        return None


def jack_answers_now(timeout: float = 5.0) -> bool:
    """Whether a JACK server answers a newly initialised PortAudio, in a child process as
    list_devices_now: its host API lists a device."""
    listing = _listing_now(timeout)
    if listing is None:
        return False
    try:
        return any("JACK" in listing["host_apis"][d["hostapi"]] for d in listing["devices"])
    except (TypeError, KeyError, IndexError):  # not the child's JSON
        return False


def _listing_now(timeout: float) -> dict | None:
    """_LIST_DEVICES's JSON from a child process; None when it does not answer."""
    try:
        child = subprocess.run(["nice", "-n", "19", sys.executable, "-c", _LIST_DEVICES],
                               capture_output=True, text=True, timeout=timeout, check=True)
        return json.loads(child.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def device_info(device: str | int | None, kind: Kind) -> dict:
    """sounddevice's description of ``device`` (None: the default), with its host API's
    name as "host_api". Raises ValueError or PortAudioError as sounddevice does when there
    is no such device, and AudioUnavailable with a message for the user when ``device``
    is a PortAudio program's JACK connection (NotADevice) or PortAudio cannot be reached."""
    sd = sounddevice_module()
    # By name too, before PortAudio is asked: this process's own connection is listed
    # only by other processes, such as the settings panel's fresh listing.
    if isinstance(device, str) and _PORTAUDIO_CLIENT.fullmatch(device.strip()):
        raise NotADevice(_not_a_device_message(device.strip(), kind))
    with _portaudio():
        info = dict(sd.query_devices(device, kind))
        info["host_api"] = sd.query_hostapis(info["hostapi"])["name"]
    if _is_portaudio_client(info["name"], info["host_api"]):
        raise NotADevice(_not_a_device_message(info["name"], kind))
    return info


def _not_a_device_message(name: str, kind: Kind) -> str:
    choices = list_devices(kind)
    return (f"'{name}' is not {_WHAT[kind]}: it is the JACK connection of a program that "
            "uses PortAudio (Lipsync Studio's own, or another's). Choose "
            + ("one of: " + ", ".join(choices) if choices else "another device") + " in Settings.")


def open_stream(kind: Kind, **settings):
    """A new sounddevice stream, not started; raises as sounddevice does, or
    AudioUnavailable when PortAudio cannot be reached or its sound server went (until
    reinitialize_portaudio). Close it with close_stream()."""
    sd = sounddevice_module()
    with _portaudio():
        if _server_lost:
            raise AudioUnavailable(SERVER_GONE_MESSAGE)
        host = sd.query_hostapis(sd.query_devices(settings.get("device"), kind)["hostapi"])["name"]
        stream = (sd.InputStream if kind == "input" else sd.OutputStream)(**settings)
        _open.add(stream)
        if "JACK" in host:
            _jack.add(stream)
    return stream


def start_stream(stream) -> None:
    """Raises PortAudioError as sounddevice does (a stream closed by a re-initialisation
    in the meantime cannot start either), or AudioUnavailable; the stream is closed then."""
    try:
        with _portaudio():
            if _server_lost:
                raise AudioUnavailable(SERVER_GONE_MESSAGE)
            stream.start()
    except Exception:
        close_stream(stream, "start-failed-closer")
        raise


def _lost_server_holding_lock(stream) -> bool:
    """With the lock held: whether ``stream`` is a JACK stream whose server went. PortAudio's
    JACK host marks every stream inactive when its server shuts down (or dies), and only
    stopping one marks it stopped; both flags are read without a call to JACK."""
    if stream not in _jack or stream not in _open:
        return False
    try:
        return not stream.active and not stream.stopped
    except sounddevice_module().PortAudioError:
        return False


def _abandon_holding_lock(stream) -> None:
    global _server_lost
    _open.discard(stream)
    _jack.discard(stream)
    _abandoned.append(stream)
    if not _server_lost:
        log.warning("the sound server (JACK) went away under an open stream: its streams are "
                    "left as they are, and PortAudio is started afresh when sound comes back")
    _server_lost = True


def lost_its_server(stream) -> bool | None:
    """Whether ``stream``'s sound server went (it is abandoned, at close_stream if not yet):
    False for a stream that is no open JACK stream of ours (closed, by its owner or by
    re-initialising PortAudio, or on another host API), and None, not known yet, for one
    that is but was not told so: its server may tell late (SERVER_NOTICE_WAIT), and while
    PortAudio is held by another thread the stream's flags cannot be read at all."""
    if any(stream is gone for gone in _abandoned):
        return True
    if _acquire():
        try:
            if _lost_server_holding_lock(stream):
                return True
        finally:
            _lock.release()
    return None if stream in _jack else False


def sound_server_gone() -> bool:
    """Whether a stream of ours lost its sound server since PortAudio was last started:
    then only reinitialize_portaudio (which starts it afresh) opens devices again. Never
    waits: while another thread uses PortAudio, what is known already."""
    if _server_lost or not _lock.acquire(blocking=False):
        return _server_lost
    try:
        for stream in list(_jack):
            if _lost_server_holding_lock(stream):
                _abandon_holding_lock(stream)
        return _server_lost
    finally:
        _lock.release()


def stream_running(stream) -> bool:
    """Whether ``stream`` is open and running: not once it is closed, by its owner or by
    PortAudio being re-initialised, nor while PortAudio cannot be reached."""
    if stream not in _open or not _acquire():
        return False
    try:
        return stream in _open and stream.active
    except sounddevice_module().PortAudioError:
        return False
    finally:
        _lock.release()


class _Closer:
    """Aborts and closes one stream on a daemon thread, since closing a stream whose device
    is gone can block for good (PortAudio 19.6's JACK host waits for a process cycle that
    never comes once the server has died), and the app must still be able to go on, or
    quit. The lock is held for the close throughout: by the caller while it waits, at most
    CLOSE_WAIT; by the closer thread itself once the caller stops waiting (it releases
    the lock when the close returns, if ever)."""

    def __init__(self, stream, name: str, *, caller_holds_lock: bool) -> None:
        self._stream = stream
        self._waits_for_lock = not caller_holds_lock
        self._state = threading.Lock()
        self._done = False
        self._owns_lock = False
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        if self._waits_for_lock:
            _lock.acquire()
            self._owns_lock = True
        started = time.monotonic()
        try:
            self._stream.abort()
        except Exception:  # noqa: BLE001 - the device is gone; nothing left to release
            aborted = False
        else:
            aborted = True
        if (self._stream in _jack
                and (not aborted or time.monotonic() - started > CLOSE_WAIT)
                and not jack_answers_now()):
            # An abort that failed or outlasted CLOSE_WAIT on JACK (it waits for a process
            # cycle), and the server does not answer now: it stopped or died under the
            # stream. Closing it would unregister its ports from a server that is gone,
            # which PortAudio 19.6 asserts on (pa_jack.c CleanUpStream): the app aborted
            # once in the suite, the microphone's close returning 4 s after its server
            # began to stop. One whose server was only held up (and answers) is closed:
            # abandoned, its JACK client would still run at exit, which crashed Python.
            _abandon_holding_lock(self._stream)
        else:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - the device is gone; nothing left to release
                pass
        _open.discard(self._stream)
        _jack.discard(self._stream)
        with self._state:
            self._done = True
            release = self._owns_lock
        if release:
            _lock.release()

    def close(self) -> bool:
        """True when the stream closed within CLOSE_WAIT. A caller holding the lock still
        holds it then; otherwise the lock has passed to the closer thread."""
        try:
            self.thread.start()
        except RuntimeError:
            # Exit handlers can start no thread from Python 3.12 on: closed here, then,
            # unless that would wait behind a close that hangs.
            if self._waits_for_lock:
                return False
            self._run()
            return True
        if self._waits_for_lock:
            _stuck.append(self.thread)
            return False
        self.thread.join(CLOSE_WAIT)
        with self._state:
            if not self._done:
                self._owns_lock = True
                _stuck.append(self.thread)
            return self._done


def close_stream(stream, name: str) -> None:
    """Abort and close a stream from open_stream(), waiting at most LOCK_WAIT for
    PortAudio and CLOSE_WAIT for the close; one that takes longer goes on closing on a
    thread of its own (see _Closer). Never raises."""
    if stream not in _open:
        return  # closed already, by re-initialising PortAudio
    if not _acquire():
        # PortAudio is held by a close that hangs: this one waits behind it.
        _Closer(stream, name, caller_holds_lock=False).close()
        return
    if _lost_server_holding_lock(stream):
        _abandon_holding_lock(stream)  # closing it would hang: see the module's doc
        _lock.release()
        return
    if _Closer(stream, name, caller_holds_lock=True).close():
        _lock.release()
        return
    log.warning("an audio stream did not close (its sound server is gone); PortAudio "
                "is left as it is at exit")


def _close_all_holding_lock() -> bool:
    """With the lock held: close every stream of ours (abandon those whose server went).
    False when one does not close, and the lock has then passed to its closer."""
    for stream in list(_open):
        if _lost_server_holding_lock(stream):
            _abandon_holding_lock(stream)
            continue
        if not _Closer(stream, "portaudio-closer", caller_holds_lock=True).close():
            log.warning("an audio stream did not close (its sound server is gone); PortAudio "
                        "is left as it is")
            return False
    return True


@contextmanager
def portaudio_released() -> Iterator[None]:
    """PortAudio terminated for the duration of the block, every stream of ours closed
    first (their owners find them closed: stream_running() says False), and initialised
    again after it: for whoever stops a sound server PortAudio is connected to (its JACK
    host API asserts when the server goes first), and to re-initialise. Raises
    AudioUnavailable, for the user, while a stream cannot be closed (PortAudio is then
    left as it is) or when PortAudio cannot be initialised again."""
    sd = sounddevice_module()
    if not _acquire():
        raise AudioUnavailable(STUCK_MESSAGE)
    if not _close_all_holding_lock():
        raise AudioUnavailable(STUCK_MESSAGE)
    try:
        if _server_lost:
            _load_afresh(sd)  # the old PortAudio is left as it is: see the module's doc
        elif sd._initialized:  # not after a failed initialisation
            sd._terminate()
        try:
            yield
        finally:
            try:
                sd._initialize()
            except sd.PortAudioError as exc:
                raise AudioUnavailable(
                    f"Sound is unavailable: PortAudio could not be started again ({exc}). "
                    "Restart Lipsync Studio to use sound again.") from exc
    finally:
        _lock.release()


def _library_file() -> str | None:
    """The PortAudio library file sounddevice loaded (from this process's memory map)."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.split(maxsplit=5)[-1].strip()
                if "libportaudio" in os.path.basename(path) and path.startswith("/") \
                        and os.path.exists(path):
                    return path
    except OSError:
        pass
    return None


def _load_afresh(sd) -> None:
    """With the lock held: sounddevice on a PortAudio of its own, loaded from a copy of the
    library (removed again once loaded: the mapping stays), not yet initialised."""
    global _server_lost
    library = _library_file()
    if library is None:
        raise AudioUnavailable(STUCK_MESSAGE)
    folder = tempfile.mkdtemp(prefix="lipsync-portaudio-")
    try:
        copy = os.path.join(folder, os.path.basename(library))
        shutil.copyfile(library, copy)
        fresh = sd._ffi.dlopen(copy)
        # Kept loaded: cffi unloads a library it no longer holds, and the abandoned streams
        # and JACK client run its code (JACK calls back into it when the client is freed).
        _abandoned.append(sd._lib)
        sd._lib = fresh
    except OSError as exc:
        raise AudioUnavailable(f"{STUCK_MESSAGE} ({exc})") from exc
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    sd._initialized = 0
    _server_lost = False
    log.info("PortAudio started afresh after its sound server went away")


def reinitialize_portaudio() -> None:
    """Make PortAudio enumerate devices again (it lists them once, at initialisation).

    This closes every stream of ours, so the owner of other streams (the audio output)
    must reopen them afterwards. Raises AudioUnavailable, for the user, while a stream of
    a vanished sound server cannot be closed.
    """
    with portaudio_released():
        pass


def _terminate_at_exit() -> None:
    sd = sounddevice_module()
    if not _acquire():
        log.warning("an audio stream did not close (its sound server is gone); PortAudio "
                    "is left as it is at exit")
        return
    if not _close_all_holding_lock():
        return
    try:
        while sd._initialized > 0 and not _server_lost:  # a PortAudio that lost it asserts
            sd._terminate()
    finally:
        _lock.release()
