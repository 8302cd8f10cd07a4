"""The audio output: a stream that always runs, playing an absolute-position timeline.

The stream never stops between utterances (silence when idle), so its sample counter is
the app's one media clock: every sample's media time is known when it is scheduled, and
mouth frames can be stamped before the sound plays.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from pipeline.audio.devices import (
    AudioUnavailable,
    close_stream,
    device_info,
    list_devices,
    open_stream,
    sounddevice_module,
    start_stream,
)
from pipeline.audio.timeline import AudioTimeline
from pipeline.core.clock import MediaClock
from pipeline.core.gil import AUDIO_SWITCH_INTERVAL_S, hand_over_within


class AudioOutput:
    # Speech is scheduled this many blocks past the read head, so the callback is never
    # reading the part of the ring the writer is changing: a callback reads the block
    # from the read head and moves the head only after, so one block clears it. Time for
    # the writer to come is the start lead's (pipeline/voice/start_lead.py), which grows
    # after any underrun. A second block here was 5.3 ms more of every first audio at
    # 256-sample blocks: heard P50 33.3-34.4 ms against 28.0-28.6 with one, one underrun
    # in 140 speeches either way (bench/results/heard_safety_blocks_h100.json).
    SAFETY_BLOCKS = 1
    # Until the first callback reports its size, assume a block this long.
    ASSUMED_BLOCK = 1024
    # How long start() waits for the first callback before calling the device dead.
    START_TIMEOUT = 2.0
    # Stop fades out over this long: short enough to feel instant, long enough not to click.
    FADE_SECONDS = 0.004
    # How long stop_speech() waits for the callback to fade before doing it itself.
    STOP_WAIT = 0.1

    def __init__(
        self,
        device: str | int | None = None,
        latency: str | float = "low",
        *,
        capacity_seconds: float = 60,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._device = device
        self._latency = latency
        self._capacity_seconds = capacity_seconds
        self._now = now
        self._stream = None
        self._timeline: AudioTimeline | None = None
        self._clock: MediaClock | None = None
        self._channels = 0
        self._fallback_latency = 0.0
        self.device_name = ""
        # Fade progress in samples while a Stop is being faded in the callback, else -1.
        self._fading = -1
        self._faded_at = -1
        self._fade_ramp = np.zeros(0, np.float32)
        self.callbacks = 0
        self.underflows = 0
        self.max_block = 0
        self.last_block = 0
        self.measured_output_latency = 0.0

    def start(self) -> None:
        """Open and start the stream; raises AudioUnavailable with a message for the user."""
        sd = sounddevice_module()
        try:
            info = device_info(self._device, "output")
        except (ValueError, sd.PortAudioError) as exc:
            raise AudioUnavailable(self._missing_device_message(str(exc))) from exc
        rate = int(info["default_samplerate"])
        self.device_name = info["name"]
        self._channels = min(2, int(info["max_output_channels"]))
        self._timeline = AudioTimeline(rate, self._capacity_seconds)
        count = max(2, round(self.FADE_SECONDS * rate))
        self._fade_ramp = (1.0 - np.arange(1, count + 1, dtype=np.float32) / count)
        self._clock = MediaClock(rate, now=self._now)
        try:
            self._stream = open_stream(
                "output", device=info["index"], samplerate=rate, channels=self._channels,
                dtype="float32", latency=self._latency, callback=self._callback,
            )
        except (sd.PortAudioError, ValueError) as exc:
            raise AudioUnavailable(
                f"Could not open the audio output '{self.device_name}': {exc}. "
                "Another program may be using it, or it does not support playback at "
                f"{rate} Hz. Choose another output in Settings."
            ) from exc
        self._fallback_latency = float(self._stream.latency)
        # At Python's default 5 ms switch interval a busy thread can hold the GIL past a
        # whole 5.3 ms JACK period; measured: hundreds of xruns in 3 s, none at 1 ms.
        hand_over_within(AUDIO_SWITCH_INTERVAL_S)
        try:
            start_stream(self._stream)
        except sd.PortAudioError as exc:
            self.close()
            raise AudioUnavailable(
                f"The audio output '{self.device_name}' could not be started: {exc}."
            ) from exc
        # Polled rather than signalled: the callback takes no locks.
        deadline = time.monotonic() + self.START_TIMEOUT
        while self.callbacks == 0 and time.monotonic() < deadline:
            time.sleep(0.002)
        if self.callbacks == 0:
            self.close()
            raise AudioUnavailable(
                f"The audio output '{self.device_name}' opened but is not playing "
                f"(no audio requested within {self.START_TIMEOUT:.0f} s). Check that the "
                "device is not suspended or in use, or choose another output in Settings."
            )

    def _missing_device_message(self, error: str) -> str:
        outputs = list_devices("output")
        if not outputs:
            return ("No audio output device was found. Connect speakers or headphones, or "
                    "check that the sound server (PipeWire, PulseAudio or JACK) is running. "
                    "The avatar will still animate without sound.")
        if self._device is None:
            return ("There is no default audio output. Choose one in Settings: "
                    + ", ".join(outputs) + ".")
        if error.startswith("Multiple"):
            return (f"'{self._device}' matches several audio outputs. Choose one of: "
                    + ", ".join(outputs) + ".")
        return (f"The audio output '{self._device}' was not found. Choose one of: "
                + ", ".join(outputs) + ".")

    def _callback(self, outdata: np.ndarray, frames: int, time_info, status) -> None:
        # Runs on the audio thread: float arithmetic and slice copies only.
        now = self._now()
        current = time_info.currentTime
        dac = time_info.outputBufferDacTime
        if dac == 0.0:
            dac = current + self._fallback_latency
        pos = self._timeline.read_pos
        # An underflow means the device played samples we never wrote: positions after
        # it reach the DAC later than the clock expects.
        underflow = status.output_underflow
        if underflow:
            self.underflows += 1
        self._clock.on_output_block(pos, dac + (now - current), discontinuity=underflow)
        self._timeline.read_into(pos, outdata[:, 0])
        if self._fading >= 0:
            self._fade_block(outdata[:, 0], pos + frames)
        for channel in range(1, self._channels):
            outdata[:, channel] = outdata[:, 0]
        self.last_block = frames
        if frames > self.max_block:
            self.max_block = frames
        self.measured_output_latency = dac - current
        self.callbacks += 1

    def _fade_block(self, out: np.ndarray, block_end: int) -> None:
        # Stop: the fade runs here, on the very next block the device takes, so the voice
        # ends within a block plus the fade however busy the other threads are.
        done = self._fading
        n = min(len(out), len(self._fade_ramp) - done)
        out[:n] *= self._fade_ramp[done:done + n]
        done += n
        if done < len(self._fade_ramp):
            self._fading = done
            return
        out[n:] = 0.0
        self._timeline.silence_from(block_end)
        self._faded_at = block_end - len(out) + n
        self._fading = -1

    def earliest_pos(self) -> int:
        """The first position that can still be written: the read head plus a margin, so
        the callback is never reading the part of the ring the writer is changing."""
        self._require_started()
        block = self.max_block or self.ASSUMED_BLOCK
        return self._timeline.read_pos + self.SAFETY_BLOCKS * block

    def write_at(self, pos: int, samples_at_device_rate: np.ndarray) -> int:
        """Put speech at exactly `pos`, where its mouth shapes are already scheduled.

        What arrives too late to play (before earliest_pos) is dropped rather than
        shifted, so sound and mouth stay in sync through an underrun. Returns how many
        samples were dropped.
        """
        late = min(len(samples_at_device_rate), max(0, self.earliest_pos() - pos))
        if late < len(samples_at_device_rate):
            self._timeline.write(pos + late, samples_at_device_rate[late:])
        return late

    def stop_speech(self) -> float:
        """Fade out from the block the device takes next and drop everything after;
        returns the media time at which sound ends. Waits (a few ms) until the callback
        has done it, so nothing written after this call is dropped by mistake."""
        self._require_started()
        self._faded_at = -1
        self._fading = 0
        deadline = time.monotonic() + self.STOP_WAIT
        while self._fading >= 0:
            if time.monotonic() > deadline:
                # The device stopped calling back: fade on the timeline directly.
                self._fading = -1
                fade = len(self._fade_ramp)
                return self._timeline.discard_from(self.earliest_pos(), fade) / self.sample_rate
            time.sleep(0.0005)
        return self._faded_at / self._timeline.sample_rate

    def _require_started(self) -> None:
        if self._timeline is None:
            raise RuntimeError("AudioOutput.start() has not been called")

    @property
    def sample_rate(self) -> int:
        self._require_started()
        return self._timeline.sample_rate

    @property
    def clock(self) -> MediaClock:
        self._require_started()
        return self._clock

    @property
    def read_pos(self) -> int:
        self._require_started()
        return self._timeline.read_pos

    @property
    def scheduled_end(self) -> int:
        self._require_started()
        return self._timeline.scheduled_end

    @property
    def channels(self) -> int:
        return self._channels

    @property
    def output_latency(self) -> float:
        """Seconds from a block being handed over to its first sample being heard, as
        the host reports it in callbacks (the stream's nominal latency before that)."""
        return self.measured_output_latency or self._fallback_latency

    def close(self) -> None:
        if self._stream is not None:
            close_stream(self._stream, "output-closer")
            self._stream = None
        if self._clock is not None:
            self._clock.start_free_running()

    def __enter__(self) -> AudioOutput:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()
