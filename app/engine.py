"""Everything behind the window that is not UI: audio output, media clock, voice, speaker.

Kept apart from the window so the command line, tests and benchmarks drive the very
same objects the app does. What happens is published on ``Engine.events`` (an
EventBus): the speaker's events (pipeline.voice.speaker), the microphone's statuses
(InputStatus), each move of the mic's delay (DelayChange: the OBS sync offset to
enter) and what the engine itself must tell (DeviceNotice). The window, the
command line and (later) the API subscribe to the kinds they show.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from app.settings import Settings
from app.voices import choose_voice, speech_rate
from pipeline.audio.devices import (
    SERVER_GONE_MESSAGE,
    STUCK_MESSAGE,
    AudioUnavailable,
    Kind,
    list_devices,
    list_devices_now,
    reinitialize_portaudio,
    sound_server_gone,
    streams_stuck,
)
from pipeline.audio.input import AudioInput
from pipeline.audio.output import AudioOutput
from pipeline.core.clock import MediaClock
from pipeline.core.events import DeviceNotice, EventBus, InputStatus
from pipeline.core.modes import MODES_MS
from pipeline.infer.sessions import device_name
from pipeline.lipsync.mic import MicLipSync, ModelAnalyser, MouthMixer, VolumeGate
from pipeline.lipsync.model import LipShapeModel
from pipeline.voice.speaker import Speaker
from pipeline.voice.speech_timeline import SpeechTimeline
from pipeline.voice.streaming_tts import LATENCY_MODES, AudioChunk, StreamingTTS

log = logging.getLogger(__name__)

# What the settings panel's first-audio figures are measured with.
MEASURE_TEXT = "Thanks for watching the stream today, everyone."
# Media clock rate when there is no audio device: any rate works, the voice's is natural.
SILENT_RATE = 22050
# How often a sound server that went is looked for while it is away: after a second, then
# at twice the wait each time up to five (the mic's backoff), since each look is a child
# process listing the devices (list_devices_now: ~0.13 s of CPU, at the lowest priority).
SERVER_PROBE_S, SERVER_PROBE_MAX_S = 1.0, 5.0


class Engine:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.events = EventBus()
        self.mic: AudioInput | None = None
        self.mic_stage: MicLipSync | None = None
        self.mouth: MouthMixer | None = None
        self.timeline = SpeechTimeline()
        self.output: AudioOutput | None = None
        self.clock = MediaClock(SILENT_RATE)
        self.audio_problem: str | None = None
        self.tts: StreamingTTS | None = None
        self.speaker: Speaker | None = None
        # Set from the mic's watchdog thread, acted on by the owner's thread.
        self._chosen_mic_back = threading.Event()
        # The sound server went (follow_sound_server): looked for by a probe thread, which
        # sets _server_back once it lists the output again.
        self._sound_lost = False
        self._server_back = threading.Event()
        self._server_probe: threading.Thread | None = None
        self._next_server_probe = 0.0
        self._server_probe_wait = SERVER_PROBE_S

    def start_audio(self) -> str | None:
        """Open the configured output. Returns a message for the user when audio is off."""
        self._close_output()
        output = AudioOutput(self.settings.audio_output_device)
        try:
            output.start()
        except AudioUnavailable as exc:
            self._audio_off(str(exc))
        else:
            self.output = output
            self.clock = output.clock
            if self.audio_problem is not None:
                self.events.publish(DeviceNotice("output", None))
            self.audio_problem = None
            log.info("audio output: %s at %d Hz", output.device_name, output.sample_rate)
        self._make_speaker()
        return self.audio_problem

    def _audio_off(self, reason: str) -> None:
        """Go on silently: speech keeps its timing on a free-running clock."""
        self.output = None
        self.clock = MediaClock(SILENT_RATE)
        self.audio_problem = f"Audio is off: {reason}"
        log.warning("%s", self.audio_problem)
        self.events.publish(DeviceNotice("output", self.audio_problem))

    def start_mic(self) -> str | None:
        """Open the configured microphone and let it drive the mouth whenever the voice
        is silent. Returns a message for the user when the mic is off or failed."""
        self._close_mic()
        if not self.settings.mic_enabled:
            return None
        mic = AudioInput(
            self.settings.mic_device, gain_db=self.settings.mic_gain_db,
            gate_db=self.settings.mic_gate_db,
            on_status=self._mic_status,
            # Looking for a returned microphone costs a child process: not while the
            # voice needs the CPU (it cost underruns on 2 cores).
            may_probe=lambda: self.speaker is None or self.speaker.idle,
        )
        try:
            mic.start()
        except AudioUnavailable as exc:
            log.warning("microphone off: %s", exc)
            return f"Microphone is off: {exc}"
        self.mic = mic
        # Through the engine, not the clock object: the output (and its clock) can be
        # reopened while the mic runs.
        self.mic_stage = MicLipSync(mic, self._mic_analyser(), lambda media: self.clock.monotonic_at(media),
                                    on_delay_change=self.events.publish)
        self.mic_stage.start()
        self.mouth = MouthMixer(self.timeline, self.mic_stage)
        return None

    def _mic_status(self, status: InputStatus) -> None:
        if status.kind == "available":
            self._chosen_mic_back.set()
        self.events.publish(status)

    def _mic_notice(self, message: str) -> None:
        self.events.publish(DeviceNotice("microphone", message))

    def switch_to_returned_mic(self) -> bool:
        """Move to the chosen microphone once it is connected again and the voice is
        silent. Called on the owner's thread; True when it switched, and then the output
        and its clock are new too (whoever shows them must take the new ones).

        Only a re-initialised PortAudio can open a device that came after it started,
        and re-initialising closes the output stream as well, hence waiting for silence:
        the switch cuts no speech. Meanwhile the default microphone keeps the mouth going.
        While a stream of a sound server that went away cannot be closed, PortAudio cannot
        be re-initialised at all: then the mic is turned off and the user told to restart."""
        if not self._chosen_mic_back.is_set() or (self.speaker is not None and not self.speaker.idle):
            return False
        self._chosen_mic_back.clear()
        if streams_stuck():
            # Retrying could never reach the device: stop, and leave the user the message.
            self._close_mic()
            log.warning("%s", STUCK_MESSAGE)
            self._mic_notice(STUCK_MESSAGE)
            return False
        log.info("switching back to microphone %r", self.settings.mic_device)
        for problem in self._restart_portaudio():
            self._mic_notice(problem)
        return True

    def follow_sound_server(self) -> str | None:
        """Called on the owner's thread, as switch_to_returned_mic is. When the sound server
        went (a stream of ours lost it: stopped, crashed or restarted), the output and the
        mic go off, and speech goes on silently on a free-running clock; a child process
        looks for the server (SERVER_PROBE_S, backing off), and once it lists the output again,
        PortAudio starts afresh and both are reopened. Returns what to tell the user when
        either happens (the output, its clock and the mic are new then), else None."""
        if not self._sound_lost:
            if not sound_server_gone():
                return None
            log.warning("%s", SERVER_GONE_MESSAGE)
            self._sound_lost = True
            self._server_back.clear()
            self._next_server_probe = time.monotonic() + SERVER_PROBE_S
            self._server_probe_wait = SERVER_PROBE_S
            self._close_mic()
            self._close_output()
            self._audio_off(SERVER_GONE_MESSAGE)
            self._make_speaker()
            return self.audio_problem
        if not self._server_back.is_set():
            probing = self._server_probe is not None and self._server_probe.is_alive()
            if not probing and time.monotonic() >= self._next_server_probe:
                self._server_probe_wait = min(2 * self._server_probe_wait, SERVER_PROBE_MAX_S)
                self._next_server_probe = time.monotonic() + self._server_probe_wait
                self._server_probe = threading.Thread(target=self._look_for_server,
                                                      name="sound-server-probe", daemon=True)
                self._server_probe.start()
            return None
        self._sound_lost = False
        for problem in self._restart_portaudio():
            self._mic_notice(problem)
        if self.output is None:
            return self.audio_problem
        mic = f", the microphone '{self.mic.device_name}' on" if self.mic is not None else ""
        return (f"Sound is back: the sound server runs again (playing on "
                f"'{self.output.device_name}'{mic}).")

    def _look_for_server(self) -> None:
        names = list_devices_now("output")
        chosen = self.settings.audio_output_device
        # sounddevice matches a name by substring too; so does this.
        if names and (chosen is None or any(chosen.lower() in name.lower() for name in names)):
            self._server_back.set()

    def _restart_portaudio(self) -> list[str]:
        """Close every stream, re-initialise PortAudio so that it lists the devices
        connected since it started, and reopen output and mic. Returns a message for
        each device that is off."""
        self._close_mic()
        self._close_output()
        try:
            reinitialize_portaudio()
        except AudioUnavailable as exc:  # closing those two just got stuck
            self._audio_off(str(exc))
            self._make_speaker()
            return [self.audio_problem]
        return [p for p in (self.start_audio(), self.start_mic()) if p]

    def _mic_analyser(self):
        if self.settings.mic_lipsync == "volume":
            return VolumeGate()
        try:
            # On the CPU whatever the voice runs on: it costs ~0.2 ms a frame there, and
            # was not measured on a GPU (docs/gpu.md).
            model = LipShapeModel(lookahead_ms=MODES_MS[self.settings.latency_mode])
        except (OSError, ValueError) as exc:
            message = f"Lip-shape model not loaded ({exc}): the mic uses the volume gate instead."
            log.warning("%s", message)
            self._mic_notice(message)
            return VolumeGate()
        return ModelAnalyser(model)

    def mouth_source(self):
        """(pose source, its version) for the renderer: TTS with the mic between."""
        if self.mouth is not None:
            return self.mouth.frame_pose, self.mouth.version
        return self.timeline.frame_pose, self.timeline.version

    @staticmethod
    def load_voice(progress: Callable[[float], None] | None = None,
                   provider: str = "auto",
                   cancel: threading.Event | None = None,
                   voice: str | None = None,
                   speaker: int = 0,
                   batch_sizes: tuple[int, ...] = (1,)) -> StreamingTTS | None:
        """Load and warm up the voice `voice` (Settings.voice: None the bundled one, a
        catalogue name or an .onnx path; app.voices.choose_voice) with its `speaker`
        (Settings.voice_speaker, for a multi-speaker voice), every engine shape once so
        the first request is as fast as the rest, on the inference `provider`
        (Settings.inference_provider), its engines built at `batch_sizes` (on a GPU a
        graph each per shape; Studio.voice_batch_sizes): seconds of work, so call it off
        the UI thread.
        None, the voice closed, when `cancel` was set before the warm-up ended. VoiceError,
        in words for the user, for a voice that cannot be used: nothing was loaded, and
        the voice attached before stays.

        Synthesis runs at normal priority: streaming must keep ahead of playback, and a
        lowered priority (tried: nice 5 and 10) starved it into underruns on a busy
        machine, while the display copes with a late tick through its frame slots."""
        tts = StreamingTTS(provider=provider, voice=choose_voice(voice).files, speaker=speaker,
                           batch_sizes=batch_sizes)
        try:
            warm = tts.warm_up(progress, cancel)
        except BaseException:
            tts.close()  # its worker thread would outlive it
            raise
        if not warm:
            tts.close()
            return None
        return tts

    @staticmethod
    def inference_text(tts: StreamingTTS, mouth_frames: str | None = None) -> tuple[str, bool]:
        """One line saying where the voice's inference runs and, when that is not what
        was asked for, why, then where the mouth frames are made and why (`mouth_frames`:
        MouthPathPicker.summary(), None before any output draws); and whether a provider
        asked for by name was not had (worth a warning; "auto" settling for the CPU is
        not)."""
        choices = list(tts.providers.values())
        used = sorted({choice.used for choice in choices})
        labels = {"cpu": "CPU", "cuda": "CUDA", "tensorrt": "TensorRT"}
        text = "The voice runs on " + " and ".join(labels[name] for name in used)
        if used != ["cpu"]:
            engines = tts.engines.values()
            graphs = sum(engine.graphs for engine in engines)
            shapes = sum(len(engine.device_copies) for engine in engines)
            text += f" on {device_name() or 'the GPU'}, {graphs} of {shapes} shapes as CUDA graphs"
            if len(tts.batch_sizes) > 1:
                text += f", the API's streams run together in batches of up to {tts.batch_sizes[-1]}"
        reasons = sorted({choice.reason for choice in choices if choice.reason})
        requested = choices[0].requested if choices else "auto"
        if reasons:
            text += f" (asked for: {requested}; " + "; ".join(reasons) + ")"
        if mouth_frames is not None:
            text += f"; {mouth_frames}"
        return text + ".", bool(reasons) and requested != "auto"

    @staticmethod
    def measure_modes(tts: StreamingTTS, text: str = MEASURE_TEXT) -> dict[str, float]:
        """Time to first audio (ms) of each latency mode on this machine, for the
        settings panel: one short sentence each, right after warm-up."""
        measured = {}
        for name, mode in LATENCY_MODES.items():
            started = time.perf_counter()
            stream = tts.stream(text, mode)
            for item in stream:
                if isinstance(item, AudioChunk):
                    measured[name] = (time.perf_counter() - started) * 1000
                    break
            stream.close()
        return measured

    def attach_voice(self, tts: StreamingTTS) -> None:
        """Start speaking with a loaded voice (on the thread that owns the engine), at its
        own rate where the settings give it one; what the voice before was saying stops.
        The voice before is the caller's to close (StreamingTTS.close)."""
        self.tts = tts
        self._make_speaker()
        if self.mic_stage is not None:
            self.mic_stage.restart_measurement()

    def apply(self, settings: Settings) -> list[str]:
        """Take new settings, reopening a device only if its choice changed. Returns a
        message for each device that is off."""
        old = self.settings
        self.settings = settings
        # A device chosen from the panel's fresh list that this process's PortAudio has
        # not seen: it was connected since PortAudio started.
        if ((_unseen(settings.audio_output_device, old.audio_output_device, "output")
             or _unseen(settings.mic_device, old.mic_device, "input"))
                and not streams_stuck()):
            return self._restart_portaudio()
        problems = []
        if (settings.mic_enabled, settings.mic_device, settings.mic_gate_db, settings.mic_lipsync) != (
                old.mic_enabled, old.mic_device, old.mic_gate_db, old.mic_lipsync):
            problems.append(self.start_mic())
        elif self.mic is not None:
            self.mic.set_gain_db(settings.mic_gain_db)
            analyser = self.mic_stage.analyser
            if isinstance(analyser, ModelAnalyser):
                analyser.model.set_lookahead(MODES_MS[settings.latency_mode])
        if settings.audio_output_device != old.audio_output_device:
            problems.append(self.start_audio())
        elif self.speaker is not None:
            self.speaker.volume = settings.volume
            self.speaker.speech_rate = self._speech_rate()
            self.speaker.mode = LATENCY_MODES[settings.latency_mode]
        return [p for p in problems if p]

    def voice_ready_for_speech(self) -> bool:
        return self.speaker is not None

    def say(self, text: str) -> int | None:
        """Speak ``text``, interrupting what is being said; None until the voice is ready."""
        if self.speaker is None:
            return None
        return self.speaker.say(text)

    def append(self, text: str, final: bool = True) -> int | None:
        """Speak ``text`` after what is being said (Speaker.append); None until the voice
        is ready or while ``text`` is only held."""
        if self.speaker is None:
            return None
        return self.speaker.append(text, final)

    def stop(self) -> None:
        if self.speaker is not None:
            self.speaker.stop()

    def close(self) -> None:
        if self.speaker is not None:
            self.speaker.close()
            self.speaker = None
        self._close_mic()
        self._close_output()

    def _close_mic(self) -> None:
        if self.mic_stage is not None:
            self.mic_stage.stop()
            self.mic_stage = None
        if self.mic is not None:
            self.mic.close()
            self.mic = None
        self.mouth = None

    def _make_speaker(self) -> None:
        if self.tts is None:
            return
        if self.speaker is not None:
            self.speaker.close()
        self.timeline.clear()
        self.speaker = Speaker(
            self.tts, self.timeline, self.output, self.clock, self.events.publish,
            volume=self.settings.volume, speech_rate=self._speech_rate(),
            mode=LATENCY_MODES[self.settings.latency_mode],
        )

    def _speech_rate(self) -> float:
        return speech_rate(self.settings, self.tts.voice.name)

    def _close_output(self) -> None:
        if self.output is not None:
            self.output.close()
            self.output = None


def _unseen(device: str | None, before: str | None, kind: Kind) -> bool:
    return device is not None and device != before and device not in list_devices(kind)
