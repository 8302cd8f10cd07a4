"""The desktop app as a user meets it: a real window under Xvfb with Mesa GL, the real
voice, real PortAudio on the JACK test server, and what JACK hears recorded back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.messages import Severity
from app.settings import Settings, SettingsStore, validate
from pipeline.audio.resample import StreamResampler
from pipeline.core.sync_metrics import viseme_change_offsets
from pipeline.core.visemes import OVR_VISEMES
from pipeline.voice.streaming_tts import LATENCY_MODES, SentencePlan, StreamingTTS
from render.outputs.avatar_view import PRESENTED
from tests.harness.app_driver import (
    HARNESS_DEVICE,
    QUIET,
    open_window,
    pump,
    pump_until,
    say,
    wait_until_quiet,
)
from tests.harness.stall_watch import StallWatch, machine_cpu_seconds

pytestmark = [pytest.mark.display, pytest.mark.audio, pytest.mark.usefixtures("harness_device")]

REPO = Path(__file__).resolve().parent.parent
TEXT = "Papa made a map of five big boats. Wow, what a view!"


@pytest.fixture(scope="module")
def window(qt_app, jack_server, tmp_path_factory):
    w = open_window(tmp_path_factory.mktemp("config"), QUIET)
    # The same voice with its noise turned off, so the test can synthesize exactly what
    # the app plays and compare sample by sample; warmed up as the app's own voice is.
    voice = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
    voice.warm_up()
    w.engine.attach_voice(voice)
    yield w
    w.close()


def _grab(window) -> np.ndarray:
    image = window.view.grab().convertToFormat(window.view.grab().Format.Format_RGBA8888)
    array = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    return array[:, : image.width(), :3].astype(np.int16)


def _mouth_box(window, grab_shape) -> tuple[int, int, int, int]:
    """The rig's mouth area mapped into the view (letterboxed, centred), with a margin."""
    rig = window.view.rig
    alpha = np.zeros(rig.base.shape[:2], bool)
    for mouth in rig.mouths.values():
        alpha |= mouth[..., 3] > 0
    ys, xs = np.nonzero(alpha)
    ch, cw = alpha.shape
    vh, vw = grab_shape[:2]
    scale = min(vw / cw, vh / ch)
    ox, oy = (vw - cw * scale) / 2, (vh - ch * scale) / 2
    m = 6
    return (int(ox + xs.min() * scale) - m, int(oy + ys.min() * scale) - m,
            int(ox + (xs.max() + 1) * scale) + m, int(oy + (ys.max() + 1) * scale) + m)


def test_a_window_closed_while_its_voice_loads_stops_loading_it(qt_app, jack_server, tmp_path):
    """Closing sets the window's flag long before its loader has built the voice (three
    ONNX sessions: 2.1 s on the 2-core VM), so the warm-up stops at its first shape, where
    it would have run 26 shapes (4.4 s) and then the mode measurements: no shape reports
    progress but the one running when the close came (the warm-up looks at the flag
    between shapes), no voice attached, and the loader's own acoustic worker thread ends
    too. A loader
    left running took a core from the tests after it and allocated under one's
    tracemalloc measurement (CI, test_readback)."""
    from PySide6.QtCore import Qt

    from app.ui.main_window import MainWindow

    store = SettingsStore(tmp_path / "settings.json")
    store.save(QUIET)
    before = set(threading.enumerate())
    window = MainWindow(store, store.load())
    window.show()
    # Told on the loader's own thread as it reports, so that a report made before the
    # close and delivered after it (with the engines built by an earlier test of the
    # process the first shape is done within milliseconds) is told from one made after.
    after_close = []
    window.studio.voice_progress.connect(
        lambda fraction: after_close.append(fraction) if window.studio.closed.is_set() else None,
        Qt.ConnectionType.DirectConnection)
    # Found before the close: with the voice's engines built by an earlier test of the
    # process, the stopped warm-up can end before close() returns.
    loader = next(t for t in set(threading.enumerate()) - before if t.name == "voice-loader")
    window.close()
    loader.join(60)  # open_window's own wait for a whole load
    assert not loader.is_alive()
    pump(0.2)  # deliver anything the loader signalled
    assert window.engine.tts is None and len(after_close) <= 1, after_close
    workers = [t for t in set(threading.enumerate()) - before if t.name.startswith("tts-acoustic")]
    for worker in workers:
        worker.join(10)
    assert not any(worker.is_alive() for worker in workers), workers


def test_speaking_moves_the_mouth_and_nothing_else(window):
    assert not any("draws on the CPU" in n for n in window.notices)  # 60 fps was asked for
    pump(0.3)
    rest = _grab(window)
    assert rest.std() > 20, "the avatar view is blank"
    say(window, TEXT)
    changed = np.zeros(rest.shape[:2], bool)
    for _ in range(12):
        pump(0.15)
        changed |= np.abs(_grab(window) - rest).max(axis=2) > 40
    wait_until_quiet(window)
    x0, y0, x1, y1 = _mouth_box(window, rest.shape)
    inside = changed[y0:y1, x0:x1].sum()
    outside = changed.sum() - inside
    assert inside > 200, f"the mouth region hardly changed while speaking ({inside} px)"
    assert outside == 0, f"{outside} pixels outside the mouth changed"


def _heard_sentences(window, captured: np.ndarray):
    """Each sentence of TEXT found in what JACK recorded, sample-exact: its plan and where
    it starts and ends in the recording. A speech that fell behind has pauses between
    sentences (a gap, not a glitch): each one is looked for after the one before."""
    rate = window.engine.output.sample_rate
    plans, sentences = [], []
    for item in window.engine.tts.stream(TEXT, LATENCY_MODES[window.settings.latency_mode]):
        if isinstance(item, SentencePlan):
            plans.append(item)
            sentences.append([])
            resampler = StreamResampler(item.sample_rate, rate)
        else:
            sentences[-1].append(resampler.process(item.samples, item.last))
    spans = []
    end = 0
    for parts in sentences:
        expected = np.concatenate(parts)
        start = (end + int(np.argmax(np.abs(captured[end:]) > 1e-4))
                 - int(np.argmax(np.abs(expected) > 1e-4)))
        assert start >= end
        heard = captured[start:start + len(expected)]
        assert len(heard) == len(expected), "the recording ended before the speech did"
        assert np.max(np.abs(heard - expected)) < 1e-5, "JACK did not receive the synthesized audio"
        spans.append((start, start + len(expected)))
        end = start + len(expected)
    pauses = sum(later[0] > earlier[1] for earlier, later in zip(spans, spans[1:]))
    assert pauses == window.finished.gaps  # and without one, a seamless stream
    return plans, spans


BUSY_KINDS = ("user", "nice", "system", "irq", "softirq")  # the CPU time of running processes


class OtherWork:
    """What the machine gave to work other than this process's while in use:

    - ``cores``: CPU time of other processes, the stall probes' included (the whole
      machine's, less this process's and the VM's steal), over the wall time, in cores;
    - ``watch``: whether the machine stopped under the app (StallWatch): the hypervisor's
      steal, and stalls of a JACK period or more."""

    def __enter__(self) -> OtherWork:
        self.watch = StallWatch().__enter__()
        self._start = self._now()
        return self

    def __exit__(self, *exc) -> None:
        wall, busy, own = (b - a for a, b in zip(self._start, self._now()))
        self.watch.__exit__(*exc)
        self.cores = (busy - own) / wall

    @property
    def busy(self) -> bool:
        """Whether the machine was not the app's for this while: shared with other work,
        or stopped under it."""
        return self.cores > SHARED_MACHINE_CORES or self.watch.stalled

    def __str__(self) -> str:
        return f"other processes took {self.cores:.2f} cores, {self.watch}"

    @staticmethod
    def _now() -> tuple[float, float, float]:
        machine = machine_cpu_seconds()
        own = os.times()
        return (time.monotonic(), sum(machine[kind] for kind in BUSY_KINDS),
                own.user + own.system)


# Where the tests run alone, the other work is the test's own Xvfb and JACK servers: 0.03
# cores during a take (8 takes, steal included); 0.03-0.08 with the stall probes running
# too (8 takes). Other test runs on the same 2 cores took 0.7-1.2.
SHARED_MACHINE_CORES = 0.5


# The sync is judged on at most 4 takes (a sync that is off misses in every one, the
# test says why). A take that lost a JACK cycle or played late is not judged, and another
# is recorded, up to 8 in all: in a stretch of the development VM in which the
# hypervisor was busy (2.5 minutes, 11 runs of this test), one run had 2-31 xruns in
# each of 4 takes in a row.
JUDGED_TAKES = 4
TAKES = 8


def test_what_jack_hears_is_the_voice_and_the_mouth_opens_with_it(window, jack_server):
    from tests.harness.jack_recorder import JackRecorder

    tick_ms = 1000 * window.view.period
    assert tick_ms == pytest.approx(1000 / 60)
    # A take is recorded again when the machine did not keep up: a JACK xrun (a cycle
    # lost) shifts the recording by a period, a chunk synthesized too late to play in full
    # (an underrun) loses its late part, and the mouth strays from the sound when other
    # work takes the CPU. The sync bounds hold where the app has the machine to itself
    # (bench/results/av_sync_60fps.json, load 2.3: median 4.4 ms, P99 25.8 ms over 731
    # changes). On 2 cores shared with other test runs (load 2-4.8, 27 takes) the median
    # was 3.1-11.6 ms and the P90 7.4-32.5 ms, out of bounds in 11 takes: a sync that is
    # off misses in every take, one that only suffered from the load does not. The machine
    # can also stop under the app: in CI every one of 4 takes had 1-13 xruns while other
    # work, the VM's steal included, took 0.2-0.4 cores, and a stretch of the development
    # VM with 0.24-0.44 cores of steal in every take failed it too (StallWatch says why,
    # and how it is told). Where every take missed while the machine was shared or
    # stopped, the test cannot tell, and says so.
    misses, busy, judged, synced = [], [], 0, False
    for _ in range(TAKES):
        recorder = JackRecorder(max_seconds=12)
        with OtherWork() as others:
            recorder.start()
            log_start = len(window.view.presentation_log())
            say(window, TEXT)
            wait_until_quiet(window, margin=0.3)
            recorder.stop()
        busy.append(others.busy)
        if recorder.xruns or window.finished.underruns:
            misses.append(f"{recorder.xruns} xrun(s), {window.finished.underruns} underrun(s) "
                          f"({others})")
            continue
        judged += 1
        captured = recorder.audio[:, 0]
        rate = window.engine.output.sample_rate
        plans, spans = _heard_sentences(window, captured)

        # The mouth against the sound, judged by JACK's clock rather than the app's: each
        # viseme onset is placed at the instant JACK says that sample reached the DAC,
        # each viseme change on screen at its presentation instant.
        log = window.view.presentation_log()[log_start:]
        log = log[log["status"] == PRESENTED]
        cue_times, cue_visemes = [], []
        for plan, (start, _) in zip(plans, spans):
            for p in plan.phonemes:
                cue_times.append(recorder.heard_time(start + round(p.start * rate)))
                cue_visemes.append(OVR_VISEMES.index(p.viseme))
        report = viseme_change_offsets(log["predicted"], log["viseme"], np.array(cue_times),
                                       np.array(cue_visemes), 0.1)
        assert len(report.offsets_ms) > 20 and report.unmatched < len(report.offsets_ms) / 5
        p90 = np.percentile(np.abs(report.offsets_ms), 90)
        if report.median_abs_ms <= tick_ms / 2 and p90 <= tick_ms:
            synced = True
            break
        misses.append(f"A/V offset median {report.median_abs_ms:.1f} ms, P90 {p90:.1f} ms "
                      f"({others})")
        if judged == JUDGED_TAKES:
            break
    if not synced:
        missed = f"every take missed (tick {tick_ms:.1f} ms): " + "; ".join(misses)
        if all(busy):
            pytest.skip(f"{missed}: this machine of {os.cpu_count()} cores was busy with other "
                        "work or stalled in every take")
        pytest.fail(missed)

    # And the mouth opens when the sound is loud.
    hop = rate // 1000
    energy = np.sqrt(np.convolve(captured ** 2, np.ones(20 * hop) / (20 * hop), "same"))[::hop]
    energy_t = np.array([recorder.heard_time(i) for i in range(0, len(captured), hop)])
    grid = np.arange(energy_t[0] + 0.2, energy_t[-1] - 0.2, 0.001)
    r = np.corrcoef(np.interp(grid, log["predicted"], log["openness"]),
                    np.interp(grid, energy_t, energy))[0, 1]
    assert r > 0.4, f"mouth openness does not follow the audio energy (r={r:.2f})"


def test_status_line_shows_live_figures(window):
    say(window, "Status check.")
    pump(1.5)
    window.refresh_status()
    status = window.status.text()
    assert "first audio" in status and " ms" in status
    assert "A/V offset" in status and "presented" in status and "late" in status
    assert re.search(r"\d+ late \(\d+ held, \d+ interpolated\)", status)
    assert f"audio {HARNESS_DEVICE}" in status


def test_first_audio_is_labelled_with_the_mode_it_was_measured_in_and_what_it_measures(window):
    assert window.settings.latency_mode == "balanced"
    say(window, "Status check.")
    heard = window.first_audio.heard_ms
    wait_until_quiet(window)
    window.apply_settings(Settings(**{**QUIET.__dict__, "latency_mode": "ultra"}))
    try:
        window.refresh_status()
        status = window.status.text()
        # The figure is balanced's until something is said in ultra.
        assert "ultra" not in status, status
        assert f"heard first audio {heard:.0f} ms (balanced mode; synthesis first audio " \
               f"{window.first_audio.synthesis_ms:.0f} ms)" in status, status
        say(window, "Status check.")
        window.refresh_status()
        status = window.status.text()
        assert f"heard first audio {window.first_audio.heard_ms:.0f} ms (ultra mode;" in status, status
    finally:
        wait_until_quiet(window)
        window.apply_settings(QUIET)


def test_on_software_gl_the_avatar_is_drawn_at_its_own_frame_rate_and_the_user_told(
        qt_app, jack_server, tmp_path):
    from render.gl.offscreen import gl_renderer, renders_on_cpu

    renderer = gl_renderer()
    if not renders_on_cpu(renderer):
        pytest.skip(f"OpenGL on the test display draws on a GPU here ({renderer})")
    w = open_window(tmp_path, Settings(audio_output_device=HARNESS_DEVICE, mic_enabled=False,
                                       software_gl_fps=30))
    try:
        notice = next(n for n in w.notices if "draws on the CPU" in n)
        assert f"({renderer})" in notice and "shown at 30 fps, not 60" in notice
        assert w.view.period == pytest.approx(1 / 30)
        log_start = len(w.view.presentation_log())
        say(w, "Counting frames.")
        wait_until_quiet(w)
        # Frames are on the 30 fps grid: a busy machine skips grid points (fewer frames),
        # never adds any. Between two frames there is a whole period, give or take the
        # grid-to-swap latency estimate's glide (a tenth of each swap's change; at least
        # 0.86 period in 5 runs at load 4.1-5.3), against half of one on a 60 fps grid.
        predicted = w.view.presentation_log()[log_start:]["predicted"]
        assert len(predicted) > 10
        assert np.diff(predicted).min() > 0.75 * w.view.period, np.diff(predicted)
        # Over the last 120 ticks: more than 30 only by the first tick's lateness (at most
        # 29 ms at 30 fps in bench/results/av_sync.json): 119 / (119/30 s - 0.029 s) = 30.2.
        stats = w.view.stats()
        assert stats["fps"] < 31, stats
    finally:
        w.close()


@pytest.mark.parametrize("text, expected", [
    ("", "Nothing to speak"),
    ("   \t ", "Nothing to speak"),
    ("Hi 😀😀 there", "Skipped 2 emoji"),
    ("你好 world", "Chinese"),
    ("\x00\x07\x1b", "Nothing to speak"),
])
def test_bad_text_gets_a_message_and_the_app_keeps_running(window, text, expected):
    told = len(window.notices)
    window.text.setText(text)
    window.speak()
    pump_until(lambda: any(expected in n for n in window.notices[told:]), 10,
               f"a message for {text!r}")
    assert window.isVisible()
    window.stop()


def _longest_stall(seconds: float) -> float:
    """The longest the event loop went without running, over `seconds` of pumping."""
    start = last = time.monotonic()
    longest = 0.0
    while last - start < seconds:
        pump(0.005)
        now = time.monotonic()
        longest = max(longest, now - last)
        last = now
    return longest


def test_20000_characters_stream_without_freezing_the_window(window):
    text = ("The quick brown fox jumps over the lazy dog near the quiet river bank. " * 290)[:20000]
    # What this machine's load does to the event loop by itself, for comparison.
    idle = _longest_stall(2)
    window.first_audio = None
    window.text.setText(text)
    window.speak()
    speaking = _longest_stall(4)
    window.stop()
    # Measured on 2 cores shared with other test runs (load 2-3.2, 8 runs): first audio
    # 188-258 ms; longest stall 37-57 ms while streaming, 27-67 ms idle. Preparing all of
    # the text on the event loop costs ~15 ms; synthesizing it all before the first
    # audio would take minutes.
    assert window.first_audio is not None and window.first_audio.heard_ms < 2000
    assert speaking < idle + 0.25, (
        f"the event loop stalled for {speaking * 1000:.0f} ms ({idle * 1000:.0f} ms idle)")


def test_a_malformed_avatar_manifest_is_explained_and_the_bundled_one_shown(window, tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"format": "lipsync-studio.sprite-rig", "version": 1,')
    told = len(window.notices)
    window.apply_settings(Settings(**{**QUIET.__dict__, "avatar_manifest": str(bad)}))
    pump(0.3)
    assert any("Avatar not loaded" in n and "bundled avatar" in n for n in window.notices[told:])
    assert _grab(window).std() > 20
    window.apply_settings(QUIET)


def _run(args, env_extra=None, timeout=120):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=REPO)


def test_without_any_audio_device_it_still_renders_and_says_audio_is_off(x_display, tmp_path):
    # A process of its own, whose PortAudio looks for a JACK server that is not there (not
    # the test server, nor a user's own): where the machine has no sound card or sound
    # server either, it finds no device at all.
    script = f"""
import json
from pipeline.audio.devices import list_devices
devices = list_devices("output") + list_devices("input")
if devices:
    print(json.dumps({{"devices": devices}}))
    raise SystemExit(0)
from tests.harness.app_driver import open_window, pump
from PySide6.QtWidgets import QApplication
app = QApplication([])
from pathlib import Path
w = open_window(Path({str(tmp_path)!r}))
w.text.setText("No sound here.")
w.speak()
presented = w.view.stats()["presented"]
pump(1.5)
print(json.dumps({{"notices": w.notices, "presented": w.view.stats()["presented"] - presented,
                  "period": w.view.period, "audio": w.engine.output is None}}))
"""
    result = _run(["-c", script], {"DISPLAY": x_display, "JACK_NO_START_SERVER": "1",
                                   "JACK_DEFAULT_SERVER": f"lss-no-server-{os.getpid()}"})
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if "devices" in report:
        pytest.skip("this machine has sound devices of its own, so a process without any "
                    f"cannot be had: {', '.join(report['devices'])}")
    assert report["audio"] is True
    assert any("Audio is off" in n for n in report["notices"])
    # The avatar goes on being drawn: 45 frames are due in 1.5 s at 30 fps, and 30-46 were
    # drawn in 4 runs on 2 cores shared with other test runs (load 4.2-4.7).
    due = 1.5 / report["period"]
    assert report["presented"] > due / 3, report


# -- messages ---------------------------------------------------------------------------

def _labels_showing(window, text: str):
    from PySide6.QtWidgets import QLabel

    return [label for label in window.findChildren(QLabel)
            if text in label.text() and label.isVisible()]


def _assert_readable(window, text: str) -> None:
    """`text` is on screen in full: in a visible label, wrapped, as tall as its wrapped
    text needs, and not hidden by the window's edge or a scroll area (once scrolled to)."""
    from PySide6.QtWidgets import QScrollArea

    labels = _labels_showing(window, text)
    assert labels, f"no visible label shows {text!r}"
    label = labels[0]
    parent = label.parentWidget()
    while parent is not None and not isinstance(parent, QScrollArea):
        parent = parent.parentWidget()
    assert label.wordWrap(), f"{text!r} is not wrapped"

    def tall_enough() -> bool:
        return label.height() >= label.heightForWidth(label.width())

    # Laid out again until it holds: a message coming meanwhile (the mic's delay notice
    # came during one full run) has the area laid out on the event loop's next pass, and
    # till then a label kept its old height (26 px for a text needing 28). One still too
    # short after 2 s (40 passes) is cut.
    deadline = time.monotonic() + 2.0
    while not tall_enough():
        assert time.monotonic() < deadline, (
            f"{text!r} is cut: its label is {label.height()} px tall, its text needs "
            f"{label.heightForWidth(label.width())}")
        pump(0.05)

    def scrolled_to_in_full() -> bool:
        if parent is not None:
            parent.ensureWidgetVisible(label, 0, 0)
            pump(0.05)
        return label.visibleRegion().boundingRect() == label.rect()

    # Scrolled to again until it holds: a message coming meanwhile scrolls the area to
    # the newest, at the top (app/ui/message_view.py), which left this one out of view in
    # 2 of 3 full runs (once in CI). One that stays hidden for 2 s (40 tries) is hidden.
    deadline = time.monotonic() + 2.0
    while not scrolled_to_in_full():
        assert time.monotonic() < deadline, f"{text!r} is partly hidden"


def test_a_long_message_is_shown_in_full(window, tmp_path):
    folder = tmp_path / ("a folder with a rather long name, as people give them " * 4).strip()
    folder.mkdir()
    bad = folder / "manifest.json"
    bad.write_text('{"format": "lipsync-studio.sprite-rig", "version": 1,')
    try:
        window.apply_settings(Settings(**{**QUIET.__dict__, "avatar_manifest": str(bad)}))
        pump(0.3)
        message = next(n for n in reversed(window.notices) if "Avatar not loaded" in n)
        assert len(message) > 300  # wraps to several lines in this window
        _assert_readable(window, message)
    finally:
        window.apply_settings(QUIET)


FIVE_BAD_VALUES = {"speech_rate": 9.0, "volume": "loud", "blinking": "yes", "background": "reddish",
                   "target_fps": 1000}
MISSING_OUTPUT = "lss-no-such-output"
MISSING_MIC = "lss-no-such-mic"


@pytest.fixture
def troubled_window(qt_app, jack_server, tmp_path):
    """A window started with five bad values in its settings file, and an audio output
    and a microphone that are not there."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({**FIVE_BAD_VALUES, "audio_output_device": MISSING_OUTPUT,
                                "mic_device": MISSING_MIC}))
    w = open_window(tmp_path)
    yield w
    w.close()


def _standing_in_message() -> str:
    """What the window says while the default microphone stands in for MISSING_MIC (the
    machine's own default where it has one)."""
    import sounddevice as sd

    default = sd.query_devices(kind="input")["name"]
    return f"Microphone '{MISSING_MIC}' is not connected — using '{default}' until it is"


def test_every_start_up_problem_is_readable_and_in_the_history(troubled_window):
    w = troubled_window
    _, problems = validate(json.loads(w.store.path.read_text()))
    assert len(problems) == 5
    audio_off = next(n for n in w.notices if n.startswith("Audio is off"))
    standing_in = _standing_in_message()
    for text in (*problems, audio_off, standing_in):
        _assert_readable(w, text)

    w.history_button.click()
    pump(0.1)
    table = w.history.table
    assert w.history.isVisible()
    rows = [[table.item(r, c).text() for c in range(table.columnCount())]
            for r in range(table.rowCount())]
    for text in (*problems, audio_off, standing_in):
        row = next(row for row in rows if text in row[2])
        assert re.fullmatch(r"\d\d:\d\d:\d\d", row[0]), row
        assert row[1] in ("info", "warning", "error") and row[3] == "shown now", row
    assert next(row for row in rows if audio_off in row[2])[1] == "error"
    w.history.close()


def test_messages_about_a_condition_go_when_it_ends(troubled_window):
    w = troubled_window
    standing_in = _standing_in_message()
    assert _labels_showing(w, "Audio is off") and _labels_showing(w, standing_in)
    w.apply_settings(Settings(**{**QUIET.__dict__, "mic_enabled": True,
                                 "mic_device": HARNESS_DEVICE}))
    pump(0.3)
    assert w.engine.output is not None
    assert not _labels_showing(w, "Audio is off"), "audio is back, the message stayed"
    assert not _labels_showing(w, standing_in), "the microphone is there, the message stayed"
    _assert_readable(w, f"Microphone '{HARNESS_DEVICE}' is on")
    on = next(m for m in w.messages.shown() if m.text == f"Microphone '{HARNESS_DEVICE}' is on")
    assert on.severity is Severity.INFO and on.expires_at is not None  # good news goes
    # Saving the settings replaced the bad values in the file.
    for problem in validate(FIVE_BAD_VALUES)[1]:
        assert not _labels_showing(w, problem)
    # All of it is still in the history.
    assert any(n.startswith("Audio is off") for n in w.notices) and standing_in in w.notices


def test_a_gpu_asked_for_and_not_had_is_told_in_one_line(qt_app, jack_server, tmp_path):
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this onnxruntime has a CUDA provider")
    w = open_window(tmp_path, replace(QUIET, inference_provider="cuda"))
    try:
        told = [n for n in w.notices if n.startswith("The voice runs on CPU (asked for: cuda;")]
        assert len(told) == 1 and "\n" not in told[0] and "no CUDA provider" in told[0]
        assert w.inference == told[0]
        say(w, "Hello.")  # and the voice speaks, on the CPU
        wait_until_quiet(w)
    finally:
        w.close()


# -- the settings panel beside the window ---------------------------------------------

def test_with_the_settings_open_stop_and_speaking_keep_working_and_edits_apply(window):
    from PySide6.QtCore import Qt, QTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QDialog

    # A modal panel would hold open_settings in its own event loop: closed after 3 s so
    # that this test fails rather than hangs (as it did with the panel of OK and Cancel).
    QTimer.singleShot(3000, lambda: [w.reject() for w in QApplication.topLevelWidgets()
                                     if isinstance(w, QDialog) and w.isModal()])
    panel = window.open_settings()
    try:
        assert panel.isVisible() and not panel.isModal()
        say(window, TEXT)
        speaker = window.engine.speaker
        assert not speaker.idle
        QTest.mouseClick(window.stop_button, Qt.MouseButton.LeftButton)  # a real click
        pump_until(lambda: window.finished is not None and speaker.idle, 5, "Stop")
        assert window.finished.cancelled
        # Speaking goes on, and an edit in the panel reaches the speaking voice at once.
        say(window, TEXT)
        panel.volume.setValue(0.5)
        assert window.engine.speaker.volume == 0.5 and window.settings.volume == 0.5
        assert window.store.load().volume == 0.5  # and is saved
        wait_until_quiet(window)
        assert panel.isVisible()
    finally:
        panel.close()
        window.apply_settings(QUIET)
    assert panel.volume.value() == QUIET.volume  # the panel shows what applies
