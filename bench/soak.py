"""Soak: the real app for a long while under everything a stream throws at it, and what
its frames, memory, files, threads and sockets did meanwhile.

The app runs as a user runs it: `lipsync-studio` with its window, in a process of its
own, on Xvfb (Mesa llvmpipe) and a JACK dummy server, with every output on: the main
window's view, the avatar window, the browser source (a real headless Chromium showing
its page, reloaded now and then), VMC (to a real receiver here), the API. Meanwhile:

- speech through the API's /control: random texts, spoken interrupting and queued, cut
  by another line, stopped, appended to; the latency mode switched mid-speech, the
  expression changed, the avatar switched between the bundled sprite and a photo
  avatar;
- between speeches, speech into the microphone through JACK (the audio the stream
  clients got back, resampled to the server's rate), which the mic's model lip-syncs;
- /stream clients one after another: a whole text with the mode switched after its
  first audio, text in pieces, a stream left after its first audio, and OpenAI's
  /v1/audio/speech.

Every `--sample-s` (30 s), between two of those actions and with no stream in flight
(so the counts of a quiet app are compared), a sample: the app's RSS, descriptors,
threads and sockets (/proc: see Proc for what is left out), its heaps and each output's
frame counts (the API's status: `heap`, `frames`), the VMC datagrams received, the
page's painted frames, and the CPU: the app's, the soak's whole process tree's, the rest
of the machine's, and how long the app's GUI thread waited for a CPU.

What the result calls what (every output that pulls frames counted: view, avatar
window, browser source, VMC):
- a missed tick: a tick with no frame, a due tick of an output's display clock that
  passed with nothing presented (a grid point it skipped);
- a stall: two or more missed ticks in a row, a gap between ticks over 2.5 periods (the
  display frozen past the brief's overrun limit of 2 ticks; render/timing/presenter.py
  STALL_PERIODS); a busy stall: one the output's ticking thread (the GUI thread, for the
  pixel outputs) was on a CPU through, its own work, whatever else the machine did;
- late frames: ticks whose frame was not made in time, shown as a stand-in, held (the
  last frame again) or interpolated (its neighbours' midpoint);
- the longest tick gap: between two ticks of one output (the presenters keep the
  longest of each minute, so the samples every 30 s see each once); over the whole run
  but its first minute (the app's start-up);
- stalls at avatar switches: counted apart too, from the switch to the end of the first
  speech on the new avatar (a switch loads the rig and uploads it into every output's
  GL on the GUI thread), with how long each switch took;
- growth: the least-squares slope (with a level for each avatar shown) over the samples
  after the warm-up (the first quarter of the run, at most 5 minutes: every kind of
  action is done at least once before it ends), per 10 minutes: RSS, Python's live
  blocks, malloc's bytes in use and those free inside its arenas;
  descriptors, threads and sockets at the warm-up's end and at the end.

Usage: python bench/soak.py --minutes 60 [--out bench/results/soak_60min_MACHINE.json]
                             [--machine-note "shared load"] [--app-log FILE]
The last line of output is one JSON object; a sample a line goes to stderr meanwhile.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import random
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from websockets.sync.client import connect  # noqa: E402

from bench.machine import describe, publish  # noqa: E402
from pipeline.audio.resample import resample  # noqa: E402
from tests.harness.api_client import check, http  # noqa: E402
from tests.harness.app_process import AppProcess, cli, free_port  # noqa: E402
from tests.harness.stall_watch import (  # noqa: E402
    machine_cpu_seconds,
    process_tree_cpu_seconds,
)
from tests.harness.vmc_receiver import Receiver  # noqa: E402

MIC = "lss-soak-mic"        # the JACK client that is the app's microphone
VOICE_RATE = 22050          # /stream's PCM (docs/api.md "start")
SAMPLE_S = 30.0
# Warm-up: the first quarter of the run, at most 5 minutes, and not before every kind of
# action was done once (lazy loads: the photo avatar's first draw, each latency mode's
# first synthesis, the page's first connection).
WARM_UP_SHARE = 0.25
WARM_UP_MAX_S = 300.0
# The presenters keep the longest tick gap of the last minute (render/timing/presenter.py
# GAP_SECONDS): gaps are read from samples at least this long after the app was ready,
# so none of its start-up is in them.
GAP_WINDOW_S = 60.0
QUIET_S = 1.5               # no speech event for this long, and the status says silent
# The server sends a stream's audio at most 8 s ahead of real time (docs/api.md) and its
# cues before: a minute with no message is a stream that stopped.
MESSAGE_TIMEOUT_S = 60.0
MIC_CLOSE_S = 10.0         # the microphone JACK client closing at the end (Soak.close)
# A soak still running this long after its planned end is stuck: it says where, and ends.
OVERRUN_S = 600.0
MODES = ("ultra", "balanced", "premium")
# A wide mix: numbers, money, times and abbreviations go through the normaliser too.
WORDS = ("hello chat welcome back to the stream today we are building a tiny robot out of "
         "paper and glue my favourite food is pizza with mushrooms and fresh basil please "
         "remember to follow the channel if you enjoy the show weather outside is cold so I "
         "made a big cup of cocoa five brave foxes jumped over muddy puddle by barn thanks "
         "for raid everyone who just joined let me read donation message from friend "
         "quickly before next round starts maybe we should try again after short break "
         "wow that was close").split()
EXTRAS = ("$5", "3.5 hours", "Dr. Smith", "#42", "10:30", "100%", "2nd", "e.g.", "NASA")
ACTIONS = ("speak", "queue", "interrupt", "stop", "append", "mic", "avatar", "reload")
WEIGHTS = (3, 1, 1, 1, 1, 2, 1, 0.5)


def random_text(rng: random.Random, sentences: tuple[int, int] = (1, 3)) -> str:
    """A few sentences of stream talk, with now and then a number or abbreviation."""
    out = []
    for _ in range(rng.randint(*sentences)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 16))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words)), rng.choice(EXTRAS))
        out.append(" ".join(words).capitalize() + rng.choice(".!?"))
    return " ".join(out)


class Control:
    """A /control connection: commands answered by id, speech events counted."""

    def __init__(self, base: str, token: str) -> None:
        self.ws = connect(f"{base.replace('http', 'ws', 1)}/control",
                          additional_headers={"Authorization": f"Bearer {token}"},
                          open_timeout=30, max_size=None).__enter__()
        self._ids = iter(range(1, 1 << 62))
        self._replies: dict[int, dict] = {}
        self._ready = threading.Condition()
        self.started = 0  # speeches started
        self.failed: list[str] = []
        self.last_event = time.monotonic()
        self._reader = threading.Thread(target=self._read, name="soak-control", daemon=True)
        self._reader.start()
        self.ask({"type": "subscribe", "events": ["speech_started", "speech_finished",
                                                  "speech_failed"]})

    def _read(self) -> None:
        for message in self.ws:
            data = check(json.loads(message))
            with self._ready:
                if data["type"] == "event":
                    self.last_event = time.monotonic()
                    if data["event"] == "speech_started":
                        self.started += 1
                    elif data["event"] == "speech_failed":
                        self.failed.append(data["message"])
                elif "id" in data:
                    self._replies[data["id"]] = data
                self._ready.notify_all()

    def ask(self, message: dict, timeout: float = 20.0) -> dict:
        """Send `message`; its reply (AssertionError for an error reply)."""
        ident = next(self._ids)
        self.ws.send(json.dumps({**message, "id": ident}))
        with self._ready:
            if not self._ready.wait_for(lambda: ident in self._replies, timeout):
                raise AssertionError(f"no reply to {message} within {timeout} s")
            reply = self._replies.pop(ident)
        assert reply["type"] != "error", f"{message} -> {reply}"
        return reply

    def quiet(self, timeout: float = 90.0) -> None:
        """Until no speech event came for QUIET_S and the app says it is silent. (A line
        cut before its first audio ends with no start: counting starts and ends cannot
        tell.)"""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if (time.monotonic() - self.last_event > QUIET_S
                    and not self.ask({"type": "status"})["speaking"]):
                return
            time.sleep(0.25)
        raise AssertionError(f"the app kept speaking for {timeout} s")

    def close(self) -> None:
        self.ws.close()
        self._reader.join(10)


class Streams(threading.Thread):
    """API clients, one after another: /stream in its ways, and /v1/audio/speech.
    `pause()` returns once none is in flight; `resume()` lets them go on."""

    def __init__(self, base: str, token: str, seed: int) -> None:
        super().__init__(name="soak-streams", daemon=True)
        self.base, self.token = base, token
        self.rng = random.Random(seed)
        self.done = {"whole": 0, "pieces": 0, "left": 0, "speech": 0}
        self.errors: list[str] = []
        self.audio: np.ndarray | None = None   # the newest whole stream's speech, float32
        self._go = threading.Event()
        self._idle = threading.Event()
        self._halt = threading.Event()
        self._go.set()

    def run(self) -> None:
        while not self._halt.is_set():
            self._idle.set()
            self._go.wait()
            if self._halt.is_set():
                return
            self._idle.clear()
            kind = self.rng.choice(("whole", "whole", "pieces", "left", "speech"))
            try:
                getattr(self, f"_{kind}")()
                self.done[kind] += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported, the soak goes on
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            self._halt.wait(self.rng.uniform(0.5, 3.0))

    def _open(self, **query):
        url = f"{self.base.replace('http', 'ws', 1)}/stream"
        return connect(url + ("?" + urlencode(query) if query else ""), open_timeout=30,
                       additional_headers={"Authorization": f"Bearer {self.token}"},
                       max_size=None)

    def _read(self, ws, switch: str | None = None, leave_after_first: bool = False) -> bytearray:
        audio = bytearray()
        while True:
            message = ws.recv(timeout=MESSAGE_TIMEOUT_S)
            if isinstance(message, bytes):
                if not audio and switch is not None:
                    ws.send(json.dumps({"type": "switch_mode", "mode": switch}))
                audio += message
                if leave_after_first:
                    return audio
                continue
            data = check(json.loads(message))
            assert data["type"] != "error", data
            if data["type"] == "end":
                return audio

    def _whole(self) -> None:
        with self._open(text=random_text(self.rng), mode=self.rng.choice(MODES)) as ws:
            audio = self._read(ws, switch=self.rng.choice(MODES))
        self.audio = np.frombuffer(bytes(audio), "<i2").astype(np.float32) / 32768

    def _pieces(self) -> None:
        text = random_text(self.rng, (2, 3))
        with self._open(mode=self.rng.choice(MODES)) as ws:
            cuts = sorted(self.rng.sample(range(1, len(text)), 4))
            for a, b in zip([0, *cuts], [*cuts, len(text)]):
                ws.send(json.dumps({"type": "text", "text": text[a:b]}))
            ws.send(json.dumps({"type": "end"}))
            self._read(ws)

    def _left(self) -> None:
        with self._open(text=random_text(self.rng, (2, 3))) as ws:
            self._read(ws, leave_after_first=True)

    def _speech(self) -> None:
        status, _, body = http(self.base, "/v1/audio/speech",
                               {"model": "tts-1", "input": random_text(self.rng),
                                "voice": "alloy", "response_format": "wav"}, self.token)
        assert status == 200 and body[:4] == b"RIFF", (status, body[:200])

    def pause(self, timeout: float = 60.0) -> None:
        self._go.clear()
        if not self._idle.wait(timeout):
            raise AssertionError(f"a stream client was still busy after {timeout} s")

    def resume(self) -> None:
        self._go.set()

    def stop(self) -> None:
        self._halt.set()
        self._go.set()
        self.join(60)


class Page:
    """The browser source's page in a real headless Chromium (tests/harness/browser.py),
    driven from a process of its own (`page_process`) through a line on its standard
    input and one back: Playwright's synchronous API once hung closing, after Chromium
    and its driver had exited, and a child process can always be ended."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-c",
             f"from bench.soak import page_process; page_process({url!r})"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
        self._answer("ready", 60)

    def _answer(self, expect: str | None, timeout: float) -> str:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline().strip() if ready else ""
        if not line or (expect is not None and line != expect):
            raise AssertionError(f"the page's process said {line!r} (exit {self.proc.poll()})")
        return line

    def _ask(self, command: str, timeout: float = 60) -> str:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self._answer(None, timeout)

    def painted(self) -> int:
        """Frames painted so far, by this page and the ones before each reload."""
        return int(self._ask("painted"))

    def reload(self) -> None:
        self._ask("reload")

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def page_process(url: str) -> None:
    """The page's process: open `url`, then answer "painted" and "reload" until "quit"."""
    from tests.harness.browser import chromium

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 640, "height": 360})
        page.goto(url)
        before = 0  # frames painted by the pages before a reload
        print("ready", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            painted = before + int(page.evaluate("window.lipsyncStats.frames"))
            if command == "reload":
                before = painted
                page.reload()
            print(painted, flush=True)


# Qt's global thread pool: up to a thread per core, each with an eventfd of its own, and
# each ends after 30 s idle (QThreadPool's expiry): seen come and go by twos here. A pool,
# not a leak: its threads and the eventfds (which only threads with an event loop hold)
# are left out of the counts compared, and reported apart.
QT_POOL_THREAD = "Thread (pooled)"
EVENTFD = "anon_inode:[eventfd]"


def _children(pid: int) -> bool:
    """Whether process `pid` has a child process now."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        return True
            except OSError:
                pass
    return False


def _counts(pid: int) -> dict[str, int]:
    threads, pooled = 0, 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as f:
                pooled += f.read().strip() == QT_POOL_THREAD
            threads += 1
        except OSError:
            pass  # ended meanwhile
    fds = sockets = eventfds = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        fds += 1
        sockets += link.startswith("socket:")
        eventfds += link == EVENTFD
    return {"fds": fds - eventfds, "threads": threads - pooled, "sockets": sockets,
            "eventfds": eventfds, "qt_pool_threads": pooled}


class Proc:
    """What /proc and the kernel say of the app and of the machine: the app's memory,
    descriptors, threads and sockets, and the cores used since the last sample by the
    app, by the soak's whole process tree (this process, the servers, the app, Chromium)
    and by everything else on the machine, and the share of the time the app's GUI thread
    (which draws every pixel output) was ready to run but waited for a CPU.

    Descriptors and threads are counted while the microphone's probe is not running:
    every 3 s of digital silence (pipeline/audio/input.py, presence_interval) it lists
    the devices in a child process, on a thread of its own, through two pipes (and the
    app's libjack opens the child's JACK semaphore while it is a client): counted only
    with no child process, twice alike in a row."""

    def __init__(self, app: AppProcess) -> None:
        self.app = app
        self._last = self._cpu()

    def _cpu(self) -> tuple[float, float, float, float, dict[str, float]]:
        pid = self.app.proc.pid
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:  # the GUI thread's
            waited = int(f.read().split()[1]) / 1e9  # on a run queue, ready to run
        return (time.monotonic(), self.app.cpu_seconds(), process_tree_cpu_seconds(os.getpid()),
                waited, machine_cpu_seconds())

    def quiet_counts(self, timeout: float = 10.0) -> dict[str, int]:
        pid = self.app.proc.pid
        end = time.monotonic() + timeout
        while True:
            if not _children(pid):
                first = _counts(pid)
                if not _children(pid) and _counts(pid) == first:
                    return first
            if time.monotonic() > end:
                raise AssertionError(f"the app's microphone probe ran for {timeout} s")
            time.sleep(0.05)

    def sample(self) -> dict:
        counts = self.quiet_counts()
        now, app, ours, waited, machine = self._cpu()
        then, app_then, ours_then, waited_then, machine_then = self._last
        self._last = (now, app, ours, waited, machine)
        wall = now - then
        busy = sum(machine[k] - machine_then[k] for k in machine if k not in ("idle", "iowait"))
        return {"rss_mb": round(self.app.rss_mb(), 2), **counts,
                "app_cores": round((app - app_then) / wall, 3),
                "soak_cores": round((ours - ours_then) / wall, 3),
                "other_cores": round(max(0.0, busy - (ours - ours_then)) / wall, 3),
                "gui_thread_waited_share": round((waited - waited_then) / wall, 4),
                "gui_thread_waited_s": round(waited, 3),
                "steal_cores": round((machine["steal"] - machine_then["steal"]) / wall, 3),
                "load_1min": round(os.getloadavg()[0], 2)}


def _photo_avatar(folder: Path) -> Path:
    """A photo avatar (the harness's drawn portrait, 478 landmarks of its own) saved as
    a user's import would be: its manifest."""
    from render.rigs.photo_manifest import save_photo_rig
    from tests.harness.drawn_portrait import drawn_portrait

    return save_photo_rig(drawn_portrait(), folder / "portrait")


class Soak:
    """The app and everything around it, driven by `step()` and measured by `sample()`."""

    def __init__(self, seed: int, workdir: Path) -> None:
        from tests.harness.jack_recorder import plug_in_microphone

        self.rng = random.Random(seed)
        self.counts = dict.fromkeys(ACTIONS, 0)
        self.failures: list[str] = []
        self.switch_ms: list[float] = []    # set_avatar asked → answered
        # (stalls, busy stalls) of every output during each kind of action, and between
        # them (samples, the pauses of the stream clients)
        self.stalls_by_action = {action: [0, 0] for action in (*ACTIONS, "between")}
        self._after: tuple[int, int] | None = None
        config = workdir / "config"
        config.mkdir()
        self.avatars = [None, str(_photo_avatar(workdir))]
        self.avatar = 0
        self.token = cli(config, "api", "token", "create", "soak").stdout.strip()
        assert len(self.token) >= 40, "no API token was made"
        self.mic = plug_in_microphone(MIC)
        self.mic_rate = self.mic.client.samplerate
        self.vmc = Receiver()
        api_port, page_port = free_port(), free_port()
        settings = {"audio_output_device": "system", "mic_enabled": True, "mic_device": MIC,
                    "api_enabled": True, "api_port": api_port,
                    "output_window": True, "output_size": "640x360",
                    "browser_source": True, "browser_source_port": page_port,
                    "vmc": True, "vmc_port": self.vmc.port,
                    "motion_bounce": 0.5, "motion_tilt": 0.5, "motion_shake": 0.5,
                    "motion_sway": 0.5}
        self.app = AppProcess(config, settings)
        self.base = f"http://127.0.0.1:{api_port}"
        self._wait_ready()
        self.ready = time.monotonic()
        self.control = Control(self.base, self.token)
        self.expressions = self.control.ask({"type": "status"})["avatar"]["expressions"]
        self.page = Page(f"http://127.0.0.1:{page_port}/")
        self.streams = Streams(self.base, self.token, seed + 1)
        self.streams.start()
        self.proc = Proc(self.app)
        self.vmc_received = 0
        self._vmc_last: float | None = None

    def _wait_ready(self, timeout: float = 120.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.app.proc.poll() is not None:
                raise AssertionError(f"the app exited ({self.app.proc.returncode}):\n"
                                     + "".join(self.app.output.lines()[-40:]))
            try:
                status, _, body = http(self.base, "/status", None, self.token)
            except OSError:
                status = 0
            if status == 200 and json.loads(body)["voice_ready"]:
                return
            time.sleep(0.5)
        raise AssertionError(f"the app was not ready within {timeout} s")

    # -- the actions ----------------------------------------------------------------------

    def step(self, action: str) -> None:
        """Do `action`; one that fails is noted and the soak goes on, unless the app is
        gone."""
        try:
            before = self.stalls()
            self._count_stalls("between", self._after, before)
            getattr(self, f"_{action}")()
            self.counts[action] += 1
            self._after = self.stalls()
            self._count_stalls(action, before, self._after)
        except (AssertionError, OSError, TimeoutError) as exc:
            if self.app.proc.poll() is not None:
                raise
            self.failures.append(f"{round(time.monotonic() - self.ready, 1)} s {action}: "
                                 f"{type(exc).__name__}: {exc}")

    def _mid_speech(self) -> None:
        """While it speaks: the latency mode and the expression change."""
        time.sleep(self.rng.uniform(0.3, 1.5))
        self.control.ask({"type": "set_latency_mode", "mode": self.rng.choice(MODES)})
        self.control.ask({"type": "set_expression",
                          "expression": self.rng.choice([*self.expressions, "neutral"])})

    def _speak(self) -> None:
        self.control.ask({"type": "speak", "text": random_text(self.rng), "mode": "interrupt"})
        self._mid_speech()
        self.control.quiet()

    def _queue(self) -> None:
        for _ in range(self.rng.randint(2, 3)):
            self.control.ask({"type": "speak", "text": random_text(self.rng, (1, 2)),
                              "mode": "queue"})
        self._mid_speech()
        self.control.quiet()

    def _interrupt(self) -> None:
        self.control.ask({"type": "speak", "text": random_text(self.rng, (2, 3))})
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.control.ask({"type": "speak", "text": random_text(self.rng), "mode": "interrupt"})
        self._mid_speech()
        self.control.quiet()

    def _stop(self) -> None:
        self.control.ask({"type": "speak", "text": random_text(self.rng, (2, 3))})
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.control.ask({"type": "stop"})
        self.control.quiet()

    def _append(self) -> None:
        self.control.ask({"type": "speak", "text": random_text(self.rng, (1, 1))})
        self.control.ask({"type": "append", "text": " " + random_text(self.rng, (1, 2))})
        self.control.quiet()

    def _mic(self) -> None:
        audio = self.streams.audio
        if audio is None:  # no whole stream yet: a second of a tone sweep stands in
            t = np.arange(VOICE_RATE) / VOICE_RATE
            audio = (0.3 * np.sin(2 * np.pi * (150 + 300 * t) * t)).astype(np.float32)
        played = resample(audio, VOICE_RATE, self.mic_rate)
        self.mic.play(played)
        time.sleep(len(played) / self.mic_rate + 0.3)

    def _avatar(self) -> None:
        """Switch avatars and speak on the new one (the new rig is loaded and uploaded
        into each output's GL on the GUI thread; the first frames of a photo rig in each
        context, with their expressions, cost more: measured stalls in its first speech
        after the first switch only)."""
        self.avatar = 1 - self.avatar
        asked = time.monotonic()
        self.control.ask({"type": "set_avatar", "avatar": self.avatars[self.avatar]})
        self.switch_ms.append(round((time.monotonic() - asked) * 1e3, 1))
        self.expressions = self.control.ask({"type": "status"})["avatar"]["expressions"]
        self._speak()

    def _count_stalls(self, what: str, before: tuple[int, int] | None,
                      after: tuple[int, int]) -> None:
        if before is not None:
            self.stalls_by_action[what] = [n + b - a for n, a, b in zip(
                self.stalls_by_action[what], before, after)]

    def stalls(self) -> tuple[int, int]:
        """(stalls, busy stalls) of every output so far."""
        frames = self.control.ask({"type": "status"})["frames"]
        return sum(f["stalls"] for f in frames), sum(f["busy_stalls"] for f in frames)

    def _reload(self) -> None:
        self.page.reload()

    # -- what it did ------------------------------------------------------------------------

    def sample(self, phase: str) -> dict:
        """Between actions, with no stream in flight."""
        self.streams.pause()
        try:
            status = self.control.ask({"type": "status"})
            datagrams = self.vmc.take()
            arrivals = [d.arrival for d in datagrams]
            if self._vmc_last is not None:
                arrivals.insert(0, self._vmc_last)
            if datagrams:
                self._vmc_last = datagrams[-1].arrival
            self.vmc_received += len(datagrams)
            sample = {
                "t_s": round(time.monotonic() - self.ready, 1), "phase": phase,
                "avatar": self.avatar,  # which of self.avatars is shown
                **self.proc.sample(),
                "python_blocks": status["heap"]["python_blocks"],
                "frozen_objects": status["heap"]["frozen_objects"],
                **{key: (round(status["heap"][key], 2) if status["heap"][key] is not None
                         else None) for key in ("malloc_mb", "malloc_free_mb")},
                "frames": {f["output"]: {k: v for k, v in f.items() if k != "output"}
                           for f in status["frames"]},
                "vmc_datagrams": self.vmc_received,
                "vmc_longest_gap_ms": (round(float(np.diff(arrivals).max()) * 1e3, 2)
                                       if len(arrivals) > 1 else None),
                "page_painted": self.page.painted(),
                "actions": dict(self.counts), "streams": dict(self.streams.done),
                "speeches": self.control.started,
            }
        finally:
            self.streams.resume()
        return sample

    def problems(self) -> dict:
        lines = self.app.output.lines()
        return {"avatar_switch_ms": self.switch_ms,
                "stalls_at_avatar_switches": self.stalls_by_action["avatar"][0],
                "busy_stalls_at_avatar_switches": self.stalls_by_action["avatar"][1],
                "stalls_by_action": self.stalls_by_action,
                "action_failures": self.failures, "stream_errors": self.streams.errors,
                "speech_failed": self.control.failed,
                "tracebacks": sum("Traceback" in line for line in lines),
                "app_log_tail": [line.rstrip() for line in lines[-20:]]}

    def close(self) -> int:
        """Everything closed; the app's exit status. The microphone goes first, while the
        app still runs, and gets MIC_CLOSE_S: closing its JACK client after the app was
        killed once waited on the JACK server until the soak's watchdog ended the run;
        one that does not close is left to the server's end."""
        for part in (self.streams.stop, self.control.close, self.page.close):
            try:
                part()
            except Exception as exc:  # noqa: BLE001 - the rest must still close
                print(f"closing: {type(exc).__name__}: {exc}", file=sys.stderr)
        closing = threading.Thread(target=self.mic.stop, name="soak-mic-close", daemon=True)
        closing.start()
        closing.join(MIC_CLOSE_S)
        if closing.is_alive():
            print(f"closing: the microphone's JACK client did not close in {MIC_CLOSE_S} s",
                  file=sys.stderr)
        status = self.app.stop()
        self.vmc.stop()
        return status


def _mean(samples: list[dict], key: str) -> float | None:
    return round(float(np.mean([s[key] for s in samples])), 3) if samples else None


def _slope_per_10min(samples: list[dict], key: str) -> float | None:
    """One least-squares slope with a level of its own for each avatar shown at the sample
    (its images, mesh and textures are held while it is shown, not grown): the 60-minute
    soak's RSS stood about 120 MB higher with the photo avatar than with the sprite one,
    and a plain line through both read whichever avatar the run ended on as growth."""
    points = [(s["t_s"], s[key], s.get("avatar", 0)) for s in samples if s.get(key) is not None]
    if len(points) < 2:
        return None
    t, y, avatar = np.array(points, float).T
    levels = [(avatar == shown).astype(float) for shown in np.unique(avatar)]
    if len(points) <= len(levels):
        return None
    fit, *_ = np.linalg.lstsq(np.column_stack([t, *levels]), y, rcond=None)
    return float(fit[0] * 600.0)


def summarise(samples: list[dict], warm_up_s: float) -> dict:
    """The result's figures from the samples (pure: tested on its own)."""
    first, last = samples[0], samples[-1]
    after = [s for s in samples if s["t_s"] >= warm_up_s]
    base = after[0] if after else last
    second_half = [s for s in after if s["t_s"] >= last["t_s"] / 2]
    outputs = sorted(last["frames"])

    def total(key: str, since: dict) -> int:
        return sum(last["frames"][o][key] - since["frames"].get(o, {}).get(key, 0)
                   for o in outputs)

    gaps = [f["longest_tick_gap_last_minute_ms"] for s in samples if s["t_s"] >= GAP_WINDOW_S
            for f in s["frames"].values()]
    vmc_gaps = [s["vmc_longest_gap_ms"] for s in samples if s["vmc_longest_gap_ms"] is not None]

    def rounded(value, digits=3):
        return None if value is None else round(value, digits)

    return {
        "stalls": total("stalls", first),
        "stalls_after_warm_up": total("stalls", base),
        "busy_stalls": total("busy_stalls", first),
        "missed_ticks": total("missed_ticks", first),
        "missed_ticks_after_warm_up": total("missed_ticks", base),
        "presented_frames": total("presented", first),
        "late_frames": total("late", first),
        "held_frames": total("held", first),
        "interpolated_frames": total("interpolated", first),
        "late_frames_after_warm_up": total("late", base),
        "max_tick_gap_ms": round(max(gaps), 2) if gaps else None,
        "vmc_max_arrival_gap_ms": round(max(vmc_gaps), 2) if vmc_gaps else None,
        "by_output": {o: {k: last["frames"][o][k] - first["frames"].get(o, {}).get(k, 0)
                          for k in ("presented", "late", "held", "interpolated", "missed_ticks",
                                    "stalls", "busy_stalls")}
                      for o in outputs},
        "app_cores_mean": _mean(samples[1:], "app_cores"),
        "soak_cores_mean": _mean(samples[1:], "soak_cores"),
        "other_cores_mean": _mean(samples[1:], "other_cores"),
        "gui_thread_waited_share": _mean(samples[1:], "gui_thread_waited_share"),
        "gui_thread_waited_s": round(last["gui_thread_waited_s"] - first["gui_thread_waited_s"], 3),
        "warm_up_s": round(warm_up_s, 1),
        "rss_growth_mb_per_10min": rounded(_slope_per_10min(after, "rss_mb")),
        "python_blocks_growth_per_10min": rounded(_slope_per_10min(after, "python_blocks"), 0),
        "malloc_growth_mb_per_10min": rounded(_slope_per_10min(after, "malloc_mb")),
        "malloc_free_growth_mb_per_10min": rounded(_slope_per_10min(after, "malloc_free_mb")),
        # The same over the run's second half: what fills up and levels off (allocator
        # arenas reaching the largest shapes a voice ran) shows above but not here; a
        # leak shows in both. The hour's soak at 6f00f4f: RSS +1.5 MB per 10 minutes
        # from its 5.5-minute warm-up's end, -0.8 over its second half; at cb827d5 +2.1
        # and +1.5, so what grows there does not level off within the hour.
        "rss_growth_mb_per_10min_second_half": rounded(_slope_per_10min(second_half, "rss_mb")),
        "malloc_growth_mb_per_10min_second_half": rounded(_slope_per_10min(second_half,
                                                                           "malloc_mb")),
        "rss_mb_start": base["rss_mb"], "rss_mb_end": last["rss_mb"],
        "python_blocks_start": base["python_blocks"], "python_blocks_end": last["python_blocks"],
        "fds_start": base["fds"], "fds_end": last["fds"],
        "fds_max": max(s["fds"] for s in after or [last]),
        "threads_start": base["threads"], "threads_end": last["threads"],
        "threads_max": max(s["threads"] for s in after or [last]),
        "sockets_start": base["sockets"], "sockets_end": last["sockets"],
        "sockets_max": max(s["sockets"] for s in after or [last]),
    }


def soak(minutes: float, *, sample_s: float = SAMPLE_S, seed: int = 0,
         progress=lambda sample: None, app_log: Path | None = None) -> dict:
    """Run the soak for `minutes` on the display and JACK server the environment names
    (DISPLAY, JACK_DEFAULT_SERVER); its result (no machine named). `app_log`: where to
    keep the app's whole output."""
    warm_up_s = min(WARM_UP_MAX_S, WARM_UP_SHARE * minutes * 60.0)
    faulthandler.dump_traceback_later(minutes * 60.0 + OVERRUN_S, exit=True)
    with tempfile.TemporaryDirectory(prefix="soak-") as workdir:
        run = Soak(seed, Path(workdir))
        samples: list[dict] = []
        try:
            samples.append(run.sample("warm-up"))
            progress(samples[-1])
            end = run.ready + minutes * 60.0
            next_sample = time.monotonic() + sample_s
            # Each action once first, in this order, then at random by WEIGHTS.
            pending = list(ACTIONS)
            while time.monotonic() < end or pending:
                action = pending.pop(0) if pending else run.rng.choices(ACTIONS, WEIGHTS)[0]
                run.step(action)
                if time.monotonic() >= next_sample or (time.monotonic() >= end and not pending):
                    warming = bool(pending) or time.monotonic() - run.ready < warm_up_s
                    if not warming and samples[-1]["phase"] == "warm-up":
                        warm_up_s = time.monotonic() - run.ready  # when it really ended
                    samples.append(run.sample("warm-up" if warming else "soak"))
                    progress(samples[-1])
                    next_sample = time.monotonic() + sample_s
        except BaseException:
            print("the app's log, last lines:\n" + "".join(run.app.output.lines()[-40:]),
                  file=sys.stderr)
            raise
        finally:
            problems = run.problems()
            exit_status = run.close()
            if app_log is not None:
                app_log.write_text("".join(run.app.output.lines()))
            faulthandler.cancel_dump_traceback_later()
    return {"minutes": round((samples[-1]["t_s"]) / 60.0, 2), "minutes_asked": minutes,
            **summarise(samples, warm_up_s),
            "actions": samples[-1]["actions"], "streams": samples[-1]["streams"],
            "speeches": samples[-1]["speeches"], "vmc_datagrams": samples[-1]["vmc_datagrams"],
            "page_painted": samples[-1]["page_painted"],
            **problems, "app_exit_status": exit_status, "samples": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=SAMPLE_S)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--machine-note", default="",
                        help="said after the machine's description (e.g. 'shared load')")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--app-log", type=Path, help="keep the app's whole output here")
    args = parser.parse_args()

    from tests.harness.services import JackServer, Xvfb

    machine = describe(args.machine_note)
    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    jack = JackServer()
    try:
        result = soak(args.minutes, sample_s=args.sample_s, seed=args.seed,
                      progress=lambda s: print(json.dumps(s), file=sys.stderr, flush=True),
                      app_log=args.app_log)
    finally:
        jack.stop()
        xvfb.stop()
    # One line in the file too: the committed result's last line is the whole result.
    publish({"machine": machine, **result}, args.out, indent=None)


if __name__ == "__main__":
    main()
