"""The microphone: a capture stream whose blocks carry the monotonic instant they were
captured, handed to one reader thread without locks, and kept alive across device loss.

The PortAudio callback mixes each block down to mono into a preallocated ring, notes
(first sample index, ADC time) in a second ring, and pokes the reader through a socket
pair; it allocates no buffers and takes no Python locks. The reader takes fixed hops
(10 ms) and applies the noise gate there, off the audio thread.

A watchdog thread notices a stream that stops calling back (unplugged, suspended, the
sound server gone) within ``stall_timeout`` and reopens: the same device first, then
the default, then again after a rescan (PortAudio lists devices only when it is
initialised), with backoff while there is none. Status changes go to ``on_status`` as
InputStatus records whose message is meant for the user. A sound server that went
(stopped, crashed, restarted) takes every device with it, and only a PortAudio started
afresh reaches its return (pipeline/audio/devices.py): with ``rescan`` the watchdog does
that itself; without, it says nothing and leaves it to its owner, who reopens all the
devices and tells the user once (Engine.follow_sound_server). A JACK server that stops
may tell so seconds after its last cycle (SERVER_NOTICE_WAIT): without ``rescan``, a JACK
stream that stops calling back is taken for lost only once that long has passed untold.

Devices are looked up through a newly initialised PortAudio in a child process (when
the owner's ``may_probe`` allows): this process's PortAudio lists devices only as they
were at initialisation, and re-initialising it would close every stream, the voice's
output too.
- A JACK device can go while its stream keeps calling back with silence (a client that
  quits): after a second of exact digital silence, and then every ``presence_interval``,
  the watchdog checks that it is still listed, and treats it as lost when it is not.
- A chosen microphone that is missing (unplugged before start, or lost later) is stood
  in for by the default one (or by none, retrying), and looked for every
  ``probe_interval``. When it is back, an "available" status tells the owner, who
  switches when closing its streams cuts nothing (see Engine).

The OS default: with ``device=None`` on PipeWire or PulseAudio, PortAudio's default
device is the sound server's, which itself follows the default the user picks, so a
change needs no reopening here.
"""

from __future__ import annotations

import math
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipeline.audio.devices import (
    SERVER_NOTICE_WAIT,
    AudioUnavailable,
    NotADevice,
    close_stream,
    device_info,
    list_devices,
    list_devices_now,
    lost_its_server,
    open_stream,
    sound_server_gone,
    sounddevice_module,
    start_stream,
    stream_running,
    streams_stuck,
)
from pipeline.core.clock import MediaClock
from pipeline.core.events import InputStatus
from pipeline.core.gil import AUDIO_SWITCH_INTERVAL_S, hand_over_within
from pipeline.lipsync.features import MAX_ABS_SAMPLE


def dbfs(amplitude: float) -> float:
    return 20.0 * math.log10(amplitude) if amplitude > 1e-10 else -200.0


@dataclass(frozen=True, slots=True)
class Level:
    """Input level before the gate, for the meter: decaying peak and ~300 ms RMS."""

    peak_db: float
    rms_db: float


@dataclass(frozen=True, slots=True)
class CapturedBlock:
    """One hop of mono audio. ``samples`` is the reader's buffer, valid until the next read."""

    samples: np.ndarray
    capture_time: float  # monotonic instant at which the first sample reached the ADC
    index: int  # position of the first sample in everything captured since start()
    sample_rate: int


class AudioInput:
    # How much captured audio the ring holds for a reader that falls behind.
    RING_SECONDS = 2.0
    STAMPS = 1024
    # The gate stays open this long after the level drops below it, so word endings
    # and short pauses are not chopped.
    GATE_HOLD = 0.15
    METER_PEAK_DECAY_DB_PER_S = 20.0
    METER_RMS_SECONDS = 0.3
    # A device that is gone delivers exact zeros, a working microphone never does: only
    # then is a device listing worth its child process. Probing every 10 s regardless,
    # the mic benchmark's inference P99 went over 1 ms in 2 of 9 mode runs (none of 6
    # without).
    SILENT_BEFORE_PROBE = 1.0
    BACKOFF_FIRST = 0.25
    BACKOFF_MAX = 5.0

    def __init__(
        self,
        device: str | int | None = None,
        gain_db: float = 0.0,
        gate_db: float | None = -50.0,
        *,
        hop_seconds: float = 0.010,
        stall_timeout: float = 0.5,
        probe_interval: float = 3.0,
        presence_interval: float = 3.0,
        on_status: Callable[[InputStatus], None] | None = None,
        rescan: Callable[[], None] | None = None,
        may_probe: Callable[[], bool] = lambda: True,
    ) -> None:
        self.device = device
        self.gain_db = gain_db
        self.gate_db = gate_db
        self.hop_seconds = hop_seconds
        self.stall_timeout = stall_timeout
        self.probe_interval = probe_interval
        self.presence_interval = presence_interval
        # The owner's say: a probe's child process takes CPU a busy moment cannot spare.
        self._may_probe = may_probe
        self._on_status = on_status or (lambda status: None)
        # Rescanning closes every stream of the process, so only an owner that can
        # reopen its other streams passes it.
        self._rescan = rescan
        self.device_name = ""
        self.sample_rate = 0
        self.status: InputStatus | None = None
        self.callbacks = 0
        self.overflows = 0
        self.dropped = 0
        self.recoveries = 0
        self.invalid_hops = 0  # hops with NaN or infinite samples, delivered as silence
        self._invalid_told = False  # said once per stream: it would repeat 100 times a second
        self._stream = None
        self._generation = 0
        self._channels = 1
        self._ring = np.zeros(0, dtype=np.float32)
        self._stamp_index = np.zeros(self.STAMPS, dtype=np.int64)
        self._stamp_time = np.zeros(self.STAMPS, dtype=np.float64)
        self._blocks = 0
        self._written = 0
        self._read = 0
        self._last_callback = 0.0
        self._last_sound = 0.0  # last block that was not digital silence
        self._clock: MediaClock | None = None
        self._gain = 1.0
        self._peak = 0.0
        self._mean_square = 0.0
        self._hop = np.zeros(0, dtype=np.float32)
        self._gate_open_until = -math.inf
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._tried = False
        self._outlives_device = False
        # Capturing from the default while the chosen device is missing.
        self.standing_in = False
        # No device could be opened at the last attempt.
        self._retrying = False
        self._announced = False
        self._unlisted = None  # a stream whose device a probe found gone
        # Serialises the watchdog's reopening with a probe's announcement that the chosen
        # device is back; the callback never takes it.
        self._switching = threading.Lock()

    # -- opening -------------------------------------------------------------------

    def start(self) -> None:
        """Open the device and start capturing. A chosen device that is not connected is
        stood in for by the default one; raises AudioUnavailable (for the user) when
        neither can be used."""
        missing: AudioUnavailable | None = None  # why the chosen device is stood in for
        try:
            info = self._find(self.device)
        except AudioUnavailable as exc:
            if self.device is None:
                raise
            try:
                info = self._find(None)
            except AudioUnavailable:
                if isinstance(exc, NotADevice):
                    raise
                raise AudioUnavailable(self._missing_device_message(self.device, "")) from None
            missing = exc
        # At Python's default 5 ms switch interval a busy thread can hold the GIL past a
        # whole JACK period (measured on the output side); capture needs the same.
        hand_over_within(AUDIO_SWITCH_INTERVAL_S)
        self._open(info)
        self.standing_in = missing is not None
        if isinstance(missing, NotADevice):
            self._report("switched", f"{missing} Using '{self.device_name}' until then.",
                         self.device_name)
        elif missing is not None:
            self._report("switched", f"Microphone '{self.device}' is not connected — using "
                         f"'{self.device_name}' until it is", self.device_name)
        else:
            self._report("started", f"Microphone '{self.device_name}' is on", self.device_name)
        self._stop.clear()
        self._watchdog = threading.Thread(target=self._watch, name="mic-watchdog", daemon=True)
        self._watchdog.start()

    def _find(self, device: str | int | None) -> dict:
        sd = sounddevice_module()
        try:
            return device_info(device, "input")
        except (ValueError, sd.PortAudioError) as exc:
            raise AudioUnavailable(self._missing_device_message(device, str(exc))) from exc

    @staticmethod
    def _missing_device_message(device: str | int | None, error: str) -> str:
        inputs = list_devices("input")
        if not inputs:
            return ("No microphone was found. Connect one, or check that the sound server "
                    "(PipeWire, PulseAudio or JACK) is running.")
        if device is None:
            return "There is no default microphone. Choose one in Settings: " + ", ".join(inputs) + "."
        if error.startswith("Multiple"):
            return (f"'{device}' matches several microphones. Choose one of: "
                    + ", ".join(inputs) + ".")
        return f"The microphone '{device}' was not found. Choose one of: " + ", ".join(inputs) + "."

    def _open(self, info: dict) -> None:
        sd = sounddevice_module()
        rate = int(info["default_samplerate"])
        name = info["name"]
        if rate != self.sample_rate:
            self.sample_rate = rate
            self._ring = np.zeros(int(self.RING_SECONDS * rate), dtype=np.float32)
            self._hop = np.zeros(max(1, round(self.hop_seconds * rate)), dtype=np.float32)
            self._written = self._read = self._blocks = 0
        self._channels = min(2, int(info["max_input_channels"]))
        self._generation += 1
        generation = self._generation
        # Samples are contiguous, so a sample's ADC instant is one origin plus its index
        # over the rate, with the origin smoothed as the output clock's is: the raw
        # per-callback stamps jitter by the callback's lateness and JACK's frame-time
        # quantisation (measured: ±0.1 ms).
        self._clock = MediaClock(rate)
        self._gain = 10.0 ** (self.gain_db / 20.0) / self._channels
        self.callbacks = 0

        def callback(indata, frames, time_info, status):
            self._callback(generation, indata, frames, time_info, status)

        try:
            stream = open_stream(
                "input", device=info["index"], samplerate=rate, channels=self._channels,
                dtype="float32", latency="low", callback=callback,
            )
        except (sd.PortAudioError, ValueError) as exc:
            raise AudioUnavailable(
                f"Could not open the microphone '{name}': {exc}. Another program may be "
                "using it. Choose another microphone in Settings."
            ) from exc
        try:
            start_stream(stream)
        except sd.PortAudioError as exc:
            raise AudioUnavailable(f"The microphone '{name}' could not be started: {exc}.") from exc
        self._stream = stream
        self.device_name = name
        # Only a JACK client's stream outlives its device (it goes on calling back with
        # silence); an ALSA device's stream fails when unplugged, and a device this
        # process holds open may be left out of a fresh listing, so looking for it
        # there would call it gone while it works.
        self._outlives_device = "JACK" in info["host_api"]
        self.standing_in = False
        self._retrying = False
        self._announced = False
        self._invalid_told = False
        self._last_callback = time.monotonic()
        # Polled rather than signalled: the callback takes no locks.
        deadline = time.monotonic() + self.stall_timeout * 2
        while self.callbacks == 0 and time.monotonic() < deadline:
            time.sleep(0.002)
        if self.callbacks == 0:
            self._abandon()
            raise AudioUnavailable(
                f"The microphone '{name}' opened but delivers no sound (nothing within "
                f"{self.stall_timeout * 2:.1f} s). Check that it is not muted, suspended or "
                "used by another program, or choose another microphone in Settings."
            )

    # -- the audio thread ----------------------------------------------------------

    def _callback(self, generation: int, indata: np.ndarray, frames: int, time_info, status) -> None:
        # Runs on the audio thread: slice copies and float arithmetic into what exists.
        if generation != self._generation:
            return  # a stream being abandoned that still calls back
        now = time.monotonic()
        current = time_info.currentTime
        adc = time_info.inputBufferAdcTime or current
        clock = self._clock
        # A new stream or lost samples start a new mapping.
        clock.on_output_block(self._written, adc + (now - current),
                              discontinuity=self.callbacks == 0 or status.input_overflow)

        ring = self._ring
        size = len(ring)
        start = self._written % size
        first = min(frames, size - start)
        self._mix(indata, 0, first, ring[start:start + first])
        if first < frames:
            self._mix(indata, first, frames, ring[:frames - first])

        tail = ring[start:start + first]
        peak = max(float(tail.max()), -float(tail.min())) if first else 0.0
        square = float(np.dot(tail, tail))
        if first < frames:
            head = ring[:frames - first]
            peak = max(peak, float(head.max()), -float(head.min()))
            square += float(np.dot(head, head))
        seconds = frames / self.sample_rate
        self._peak = max(peak, self._peak * 10.0 ** (-self.METER_PEAK_DECAY_DB_PER_S * seconds / 20))
        alpha = 1.0 - math.exp(-seconds / self.METER_RMS_SECONDS)
        self._mean_square += alpha * (square / frames - self._mean_square)

        slot = self._blocks % self.STAMPS
        self._stamp_index[slot] = self._written
        self._stamp_time[slot] = clock.monotonic_at(self._written / self.sample_rate)
        self._blocks += 1
        self._written += frames
        if status.input_overflow:
            self.overflows += 1
        if peak > 0.0:
            self._last_sound = now
        self._last_callback = now
        self.callbacks += 1
        try:
            self._wake_w.send(b"\0")
        except BlockingIOError:
            pass  # the reader has wake-ups pending already

    def _mix(self, indata: np.ndarray, a: int, b: int, out: np.ndarray) -> None:
        np.copyto(out, indata[a:b, 0])
        for channel in range(1, self._channels):
            np.add(out, indata[a:b, channel], out=out)
        np.multiply(out, self._gain, out=out)

    # -- the reader ----------------------------------------------------------------

    def read(self, timeout: float) -> CapturedBlock | None:
        """The next hop of captured audio, gated; None if none arrived within ``timeout``.

        One reader thread only. A reader that falls more than the ring behind loses the
        oldest audio (counted in ``dropped``) rather than reading torn samples.
        """
        hop = len(self._hop)
        if hop == 0:
            raise RuntimeError("AudioInput.start() has not been called")
        deadline = time.monotonic() + timeout
        while self._written - self._read < hop:
            left = deadline - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return None
            select.select([self._wake_r], [], [], left)
            try:
                self._wake_r.recv(4096)
            except BlockingIOError:
                pass
        written = self._written
        size = len(self._ring)
        if written - self._read > size - hop:
            skip = written - hop - self._read
            self.dropped += skip
            self._read += skip
        start = self._read % size
        first = min(hop, size - start)
        self._hop[:first] = self._ring[start:start + first]
        self._hop[first:] = self._ring[:hop - first]
        capture = self._capture_time(self._read)
        block = CapturedBlock(self._hop, capture, self._read, self.sample_rate)
        self._read += hop
        self._bound()
        self._gate(capture)
        return block

    def _bound(self) -> None:
        """Invariant: a hop read holds finite samples within ±MAX_ABS_SAMPLE, what the
        lip-shape model accepts (it refuses anything else). Float audio keeps its headroom
        past 1.0 as captured (sound servers pass it on); beyond the bound (a float device
        or driver gone wrong) it is clipped. NaN or infinity (a broken driver) becomes
        silence, told once per stream."""
        hop = self._hop
        # max/min make no temporary array and propagate NaN.
        peak = max(float(np.max(hop)), -float(np.min(hop)))
        if peak <= MAX_ABS_SAMPLE:
            return
        if math.isfinite(peak):
            np.clip(hop, -MAX_ABS_SAMPLE, MAX_ABS_SAMPLE, out=hop)
            return
        hop[:] = 0.0
        self.invalid_hops += 1
        if not self._invalid_told:
            self._invalid_told = True
            self._report("invalid", f"Microphone '{self.device_name}' delivers invalid samples "
                         "(not a number or infinite): they are replaced by silence. Its "
                         "driver may be broken; try another microphone in Settings.",
                         self.device_name)

    def _capture_time(self, index: int) -> float:
        """Monotonic ADC instant of sample ``index``, from the block that holds it."""
        b = self._blocks - 1
        oldest = max(0, self._blocks - self.STAMPS)
        while b > oldest and self._stamp_index[b % self.STAMPS] > index:
            b -= 1
        slot = b % self.STAMPS
        return float(self._stamp_time[slot]) + (index - int(self._stamp_index[slot])) / self.sample_rate

    def _gate(self, capture: float) -> None:
        if self.gate_db is None:
            return
        hop = self._hop
        rms = math.sqrt(float(np.dot(hop, hop)) / len(hop))
        if dbfs(rms) >= self.gate_db:
            self._gate_open_until = capture + self.GATE_HOLD
        elif capture >= self._gate_open_until:
            hop[:] = 0.0

    # -- settings and meter --------------------------------------------------------

    def set_gain_db(self, gain_db: float) -> None:
        self.gain_db = gain_db
        self._gain = 10.0 ** (gain_db / 20.0) / self._channels

    def level(self) -> Level:
        """Safe from any thread: two floats the callback replaces whole."""
        return Level(dbfs(self._peak), dbfs(math.sqrt(self._mean_square)))

    # -- loss and recovery ---------------------------------------------------------

    def _watch(self) -> None:
        lost = ""
        delay = self.BACKOFF_FIRST
        next_try = 0.0
        next_probe = 0.0
        prober: threading.Thread | None = None
        while not self._stop.wait(0.05):
            if (not self._announced and time.monotonic() >= next_probe
                    and (prober is None or not prober.is_alive()) and self._may_probe()):
                probe, interval = None, 0.0
                if self._missing_chosen():
                    probe, interval = self._look_for_chosen, self.probe_interval
                elif (self._outlives_device
                      and time.monotonic() - self._last_sound > self.SILENT_BEFORE_PROBE):
                    probe, interval = self._check_listed, self.presence_interval
                if probe is not None:
                    # On a thread of its own: the child process takes a tenth of a second
                    # or more, and seconds while a sound server hangs (it waits for the
                    # server too), when this loop must still notice the stall.
                    prober = threading.Thread(target=probe, name="mic-probe", daemon=True)
                    prober.start()
                    next_probe = time.monotonic() + interval
            with self._switching:
                stream = self._stream
                now = time.monotonic()
                if stream is not None:
                    stalled = (now - self._last_callback > self.stall_timeout
                               or not stream_running(stream))
                    if stalled and self._rescan is None:
                        server_gone = lost_its_server(stream)
                        if server_gone:
                            # Every device of that server went with it: the owner reopens
                            # them all once it runs again, and says so (Engine).
                            self._abandon()
                            continue
                        if (server_gone is None
                                and now - self._last_callback < SERVER_NOTICE_WAIT):
                            # A JACK server that stops may say so seconds after its last
                            # cycle: until then, this silence is not the microphone's loss.
                            continue
                    if stalled or stream is self._unlisted:
                        lost = self.device_name
                        what = "stopped delivering sound" if stalled else "is no longer connected"
                        self._report("lost", f"Microphone '{lost}' {what} — reconnecting", lost)
                        self._abandon()
                        delay, next_try = self.BACKOFF_FIRST, now
                    continue
                if now < next_try or (self._rescan is None and sound_server_gone()):
                    continue
                if self._reopen():
                    self.recoveries += 1
                    if self.device_name == lost:
                        self._report("recovered", f"Microphone '{lost}' is back", lost)
                    else:
                        self._report("switched", f"Microphone '{lost}' disconnected — using "
                                     f"'{self.device_name}'", self.device_name)
                else:
                    self._retrying = True
                    self._report("retrying", f"No microphone — retrying in {delay:.1f} s", "")
                    next_try = time.monotonic() + delay
                    delay = min(delay * 2, self.BACKOFF_MAX)

    def _missing_chosen(self) -> bool:
        """Standing in for the chosen device, or without any device."""
        return self.standing_in or self._retrying

    def _check_listed(self) -> None:
        """Mark the current stream for the watchdog if its device is no longer listed: a
        stream can go on calling back with silence after its device has gone (a JACK
        client that quit)."""
        stream, name = self._stream, self.device_name
        names = list_devices_now("input")
        if names is not None and name not in names:
            self._unlisted = stream

    def _look_for_chosen(self) -> None:
        chosen = self.device
        if isinstance(chosen, int):
            return  # an index names no device that could come back
        names = list_devices_now("input")
        # sounddevice matches a name by substring too; so does this.
        if not names or (chosen is not None
                         and not any(chosen.lower() in name.lower() for name in names)):
            return
        with self._switching:
            # A probe that began while the voice was silent may end after it has started
            # (listing takes seconds on a busy machine): it announces nothing then, and the
            # first probe after the speech does, so nothing switches or says so mid-speech.
            if self._missing_chosen() and not self._stop.is_set() and self._may_probe():
                self._announced = True
                what = f"Microphone '{chosen}'" if chosen is not None else "A microphone"
                self._report("available", f"{what} is connected again", chosen or names[0])

    def _reopen(self) -> bool:
        """One attempt: the chosen device, else the default; after a rescan when possible."""
        # The first attempt skips the rescan, so other streams survive a short stall.
        if self._rescan is not None and self._tried and not streams_stuck():
            try:
                self._rescan()
            except AudioUnavailable:
                pass  # the attempt below fails too, and is retried
        self._tried = True
        for device in dict.fromkeys((self.device, None)):
            try:
                self._open(self._find(device))
            except AudioUnavailable:
                continue
            self.standing_in = device != self.device
            self._tried = False
            return True
        return False

    def _abandon(self) -> None:
        """Stop listening to the current stream and close it (see close_stream); PortAudio
        calls are not safe to overlap, so the next open waits for the close, up to a limit."""
        stream, self._stream = self._stream, None
        self._generation += 1
        if stream is not None:
            close_stream(stream, "mic-closer")

    def _report(self, kind: str, message: str, device: str) -> None:
        self.status = InputStatus(kind, message, device)
        self._on_status(self.status)

    def close(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"\0")
        except BlockingIOError:
            pass
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(5)
            self._watchdog = None
        self._abandon()

    def __enter__(self) -> AudioInput:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
