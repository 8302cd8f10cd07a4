"""JACK clients that stand in for the speaker and the microphone in tests.

`JackRecorder` connects to the output ports of the app's PortAudio stream and records
what it plays, together with the monotonic instant at which each recorded sample would
reach the DAC: JACK's own cycle time of the block plus the playback latency of the
physical output port, converted from JACK's clock to time.monotonic()'s.

JACK's clock is not assumed to be CLOCK_MONOTONIC: jack2 1.9.21 on Linux reads
CLOCK_MONOTONIC_RAW, which NTP slewing moves away from CLOCK_MONOTONIC (hundreds of
milliseconds apart since boot, and at a slightly different rate). `measure_jack_clock`
finds which clock it is and the offset, by bracketing jack_get_time() between reads of
the candidates; the recorder measures the offset before and after recording and
interpolates between the two.

`JackPlayer` plays an array or WAV file into input ports (the app's microphone).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import jack
import numpy as np

_lib = ctypes.CDLL("libjack.so.0")
_lib.jack_get_time.restype = ctypes.c_uint64
_lib.jack_get_cycle_times.argtypes = [
    ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_float),
]
_lib.jack_get_cycle_times.restype = ctypes.c_int


class _LatencyRange(ctypes.Structure):
    _fields_ = [("min", ctypes.c_uint32), ("max", ctypes.c_uint32)]


_lib.jack_port_get_latency_range.argtypes = [
    ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_LatencyRange),
]
_JACK_PLAYBACK_LATENCY = 1

_CANDIDATE_CLOCKS = {
    "CLOCK_MONOTONIC": time.CLOCK_MONOTONIC,
    "CLOCK_MONOTONIC_RAW": time.CLOCK_MONOTONIC_RAW,
    "CLOCK_REALTIME": time.CLOCK_REALTIME,
}


def _address(cffi_ptr) -> int:
    return int(jack._ffi.cast("uintptr_t", cffi_ptr))


def jack_time() -> float:
    """jack_get_time() in seconds."""
    return _lib.jack_get_time() * 1e-6


def _bracketed_offset(clock_id: int, tries: int = 50) -> tuple[float, float]:
    """(jack - clock) offset in seconds and its uncertainty, from the tightest bracket."""
    best = (0.0, float("inf"))
    for _ in range(tries):
        a = time.clock_gettime(clock_id)
        j = jack_time()
        b = time.clock_gettime(clock_id)
        if b - a < best[1]:
            best = (j - (a + b) / 2, b - a)
    return best


@dataclass(frozen=True)
class JackClockFacts:
    clock: str  # the candidate clock jack_get_time() reads
    offset_to_monotonic: float  # jack_time - time.monotonic(), seconds
    offsets: dict[str, float]  # jack_time - candidate, seconds


def measure_jack_clock() -> JackClockFacts:
    offsets = {name: _bracketed_offset(cid)[0] for name, cid in _CANDIDATE_CLOCKS.items()}
    clock = min(offsets, key=lambda name: abs(offsets[name]))
    return JackClockFacts(clock, offsets["CLOCK_MONOTONIC"], offsets)


class JackRecorder:
    """Records the ports matching `source` (a regex on full port names), one channel each."""

    def __init__(self, source: str = r"^PortAudio[^:]*:out_", max_seconds: float = 10,
                 name: str = "lss-recorder") -> None:
        self.client = jack.Client(name, no_start_server=True)
        self.rate = self.client.samplerate
        self._source = source
        self._cycle = (ctypes.c_uint32(), ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_float())
        self._cycle_refs = tuple(ctypes.byref(v) for v in self._cycle)
        self._client_addr = _address(self.client._ptr)
        capacity = int(max_seconds * self.rate)
        max_blocks = capacity // self.client.blocksize + 2
        self._data: np.ndarray | None = None
        self._capacity = capacity
        self._block_index = np.zeros(max_blocks, dtype=np.int64)  # first recorded sample
        self._block_frame = np.zeros(max_blocks, dtype=np.int64)  # JACK frame time
        self._block_usecs = np.zeros(max_blocks, dtype=np.float64)  # JACK time, µs
        self._block_next_usecs = np.zeros(max_blocks, dtype=np.float64)
        self._block_cycle_frames = np.zeros(max_blocks, dtype=np.int64)
        self._blocks = 0
        self._n = 0
        self._recording = False
        self._closed = False
        self._ports: list[jack.OwnPort] = []
        self.client.set_process_callback(self._process)
        self.playback_latency_frames = 0
        self.xruns = 0
        self.client.set_xrun_callback(self._on_xrun)

    def _on_xrun(self, delay: float) -> None:
        self.xruns += 1

    def _process(self, frames: int) -> None:
        if not self._recording or self._data is None:
            return
        n = min(frames, self._capacity - self._n)
        if n <= 0 or self._blocks >= len(self._block_index):
            return
        _lib.jack_get_cycle_times(self._client_addr, *self._cycle_refs)
        b = self._blocks
        self._block_index[b] = self._n
        self._block_frame[b] = self._cycle[0].value
        self._block_usecs[b] = self._cycle[1].value
        self._block_next_usecs[b] = self._cycle[2].value
        self._block_cycle_frames[b] = frames
        for ch, port in enumerate(self._ports):
            self._data[self._n:self._n + n, ch] = port.get_array()[:n]
        self._n += n
        self._blocks = b + 1

    def start(self) -> None:
        sources = self.client.get_ports(self._source, is_output=True, is_audio=True)
        if not sources:
            raise RuntimeError(f"no JACK output ports match {self._source!r}")
        self._data = np.zeros((self._capacity, len(sources)), dtype=np.float32)
        self._ports = [self.client.inports.register(f"in_{i}") for i in range(len(sources))]
        physical = self.client.get_ports(is_audio=True, is_input=True, is_physical=True)
        latency = _LatencyRange()
        _lib.jack_port_get_latency_range(
            _address(physical[0]._ptr), _JACK_PLAYBACK_LATENCY, ctypes.byref(latency))
        self.playback_latency_frames = latency.max
        self._offset_before = (time.monotonic(), _bracketed_offset(time.CLOCK_MONOTONIC)[0])
        self.client.activate()
        for src, dst in zip(sources, self._ports):
            self.client.connect(src, dst)
        self._recording = True

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._recording = False
        self._offset_after = (time.monotonic(), _bracketed_offset(time.CLOCK_MONOTONIC)[0])
        self.client.deactivate()
        self.client.close()

    @property
    def audio(self) -> np.ndarray:
        """What was recorded, shape (samples, channels)."""
        return self._data[:self._n]

    def _jack_to_monotonic(self, t_jack: float) -> float:
        (m0, o0), (m1, o1) = self._offset_before, self._offset_after
        # Interpolate the offset over the recording: the two clocks run at different rates.
        guess = t_jack - o0
        offset = o0 if m1 == m0 else o0 + (o1 - o0) * (guess - m0) / (m1 - m0)
        return t_jack - offset

    def heard_time(self, index: int) -> float:
        """Monotonic instant at which recorded sample `index` reaches the DAC (after stop())."""
        b = int(np.searchsorted(self._block_index[:self._blocks], index, side="right")) - 1
        if b < 0 or index >= self._n:
            raise IndexError(f"sample {index} was not recorded")
        per_frame = (self._block_next_usecs[b] - self._block_usecs[b]) / self._block_cycle_frames[b]
        usecs = self._block_usecs[b] + (index - self._block_index[b]
                                        + self.playback_latency_frames) * per_frame
        return self._jack_to_monotonic(usecs * 1e-6)

    @property
    def block_frame_times(self) -> np.ndarray:
        """JACK frame time of each recorded block (consecutive unless cycles were lost)."""
        return self._block_frame[:self._blocks]


class JackPlayer:
    """Plays mono audio (an array, or a 16-bit PCM WAV at the server rate) into ports."""

    def __init__(self, audio: np.ndarray | str | Path, destination: str = r"^PortAudio[^:]*:in_",
                 name: str = "lss-player") -> None:
        self.client = jack.Client(name, no_start_server=True)
        if isinstance(audio, (str, Path)):
            audio = read_wav_mono(Path(audio), self.client.samplerate)
        self._audio = np.asarray(audio, dtype=np.float32)
        self._destination = destination
        self._pos = 0
        self._playing = False
        self._closed = False
        self._port = self.client.outports.register("out")
        self.client.set_process_callback(self._process)
        # JACK tells every client of a cycle the server missed: what this player put out
        # in it may be lost, so a take with one says nothing about the code under test.
        self.xruns = 0
        self.client.set_xrun_callback(self._on_xrun)

    def _on_xrun(self, delay: float) -> None:
        self.xruns += 1

    def _process(self, frames: int) -> None:
        out = self._port.get_array()
        # Silent until connected, so the file starts where the listener can hear it.
        n = max(0, min(frames, len(self._audio) - self._pos)) if self._playing else 0
        out[:n] = self._audio[self._pos:self._pos + n]
        out[n:] = 0.0
        self._pos += n

    @property
    def done(self) -> bool:
        return self._pos >= len(self._audio)

    def start(self) -> None:
        self.client.activate()
        for dst in self.client.get_ports(self._destination, is_input=True, is_audio=True):
            self.client.connect(self._port, dst)
        self.play()

    def play(self, audio: np.ndarray | None = None) -> None:
        """(Re)start the audio from its beginning; `audio` (mono, at the server's rate)
        replaces what it plays."""
        self._playing = False
        if audio is not None:
            self._audio = np.asarray(audio, dtype=np.float32)
        self._pos = 0
        self._playing = True

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.client.deactivate()
        self.client.close()


_JACK_CAPTURE_LATENCY = 0


def capture_latency_frames(client: jack.Client) -> int:
    """Latency JACK reports for the physical capture ports: what PortAudio subtracts
    from the cycle time to get the ADC time."""
    port = client.get_ports(is_audio=True, is_output=True, is_physical=True)[0]
    latency = _LatencyRange()
    _lib.jack_port_get_latency_range(_address(port._ptr), _JACK_CAPTURE_LATENCY,
                                     ctypes.byref(latency))
    return latency.max


@contextmanager
def recorded_player(audio: np.ndarray) -> Iterator[tuple[JackPlayer, JackRecorder]]:
    """`audio` played as the microphone, with a recorder on the player's own output:
    the recording says when each sample entered JACK. Both stop on leaving."""
    player = JackPlayer(audio)
    # Active before the recorder connects to its port, so both see the first sample.
    player.client.activate()
    recorder = JackRecorder(source=rf"^{player.client.name}:out")
    recorder.start()
    player.start()
    try:
        yield player, recorder
    finally:
        recorder.stop()
        player.stop()


def plug_in_microphone(name: str, audio: np.ndarray | None = None) -> JackPlayer:
    """A JACK client with an output port is, to PortAudio, a capture device named after
    it: a microphone plugged in, silent until its ``play()``."""
    device = JackPlayer(np.zeros(16, np.float32) if audio is None else audio,
                        destination="^$", name=name)
    device.client.activate()
    return device


def plug_in_speaker(name: str) -> jack.Client:
    """A JACK client with an input port ("in") is, to PortAudio, a playback device named
    after it: a speaker plugged in. Close the client to unplug it."""
    device = jack.Client(name, no_start_server=True)
    device.inports.register("in")
    device.activate()
    return device


def read_wav_mono(path: Path, rate: int) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        if w.getframerate() != rate or w.getsampwidth() != 2:
            raise ValueError(f"{path}: need 16-bit PCM at {rate} Hz")
        raw = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        data = raw.reshape(-1, w.getnchannels())[:, 0]
    return data.astype(np.float32) / 32768.0


_RECORD = """
import json, sys
import numpy as np
from tests.harness.jack_recorder import JackRecorder
recorder = JackRecorder(sys.argv[1], max_seconds=float(sys.argv[2]))
recorder.start()
sources = [port.name for port in recorder.client.get_ports(sys.argv[1], is_output=True)]
print("recording", flush=True)
sys.stdin.readline()
recorder.stop()
print(json.dumps({"peak": float(np.abs(recorder.audio).max()) if len(recorder.audio) else 0.0,
                  "samples": len(recorder.audio), "sources": sources}))
"""


class RecorderProcess:
    """A JackRecorder in a process of its own, on the server `environment` names
    (JackServer.environment): for a server the test kills, which a JACK client of the
    test's own process must not be on (libjack keeps one server's state per process).
    Recording once the constructor returns, until `peak()` (at most `max_seconds`)."""

    def __init__(self, environment: dict[str, str], max_seconds: float = 30.0,
                 source: str = r"^PortAudio[^:]*:out_") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _RECORD, source, str(max_seconds)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **environment}, cwd=Path(__file__).resolve().parent.parent.parent)
        line = self.proc.stdout.readline()
        if line.strip() != "recording":
            self.proc.kill()
            raise RuntimeError(f"the recorder did not start: {line}"
                               f"{self.proc.stderr.read()[-2000:]}")

    def peak(self) -> float:
        """Stop; the loudest sample heard (full scale 1.0). `heard` says more: how many
        samples, from which ports."""
        out, err = self.proc.communicate("stop\n", timeout=30)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the recorder failed: {err[-2000:]}")
        self.heard = json.loads(out.strip().splitlines()[-1])
        return self.heard["peak"]
