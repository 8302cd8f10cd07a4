"""CPU the running app costs at a given frame rate on software GL (Xvfb + Mesa llvmpipe),
idle and speaking, for the code of several commits in one run: by default the last one
before the presenter (the avatar a QOpenGLWidget, composed with the rest of the window
on every frame) against HEAD (the avatar in a QOpenGLWindow of its own).

Each commit's tree is taken out of git whole (`git archive`), so each variant is the app
as it was, with the packages of this venv. Each measurement is the real main window
(tests/harness/app_driver.py) in a process of its own, sharing one Xvfb and one JACK
dummy server, run by the Qt event loop (not a test pump) for `--seconds`: the process's
CPU (every thread, and by thread), Xvfb's (which receives every frame llvmpipe draws) and
jackd's, and what the rest of the machine used meanwhile, so a busy machine shows.
Variants run interleaved, round after round; the summary takes medians over rounds.
Microphone off (its analysis would cost the same in all); the voice is the one the app
ships.

A variant REV:FPS:window also has the avatar-only window for OBS open (1280x720, a GL
window of its own drawing every frame): against REV:FPS in the same run, what that
window costs.

Usage: python bench/app_cpu.py [--rounds 3] [--seconds 10] [--variants REV:FPS[:window],...]
                               [--out bench/results/app_cpu_MACHINE.json]
Last line of output: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.machine import describe, publish  # noqa: E402

# About 25 s of speech: longer than a measurement, so the voice speaks throughout.
TEXT = ("Hello everyone, welcome back to the stream. Today we are building a tiny robot out "
        "of paper and glue. My favourite food is pizza with mushrooms and fresh basil. Please "
        "remember to follow the channel if you enjoy the show. The weather outside is cold, so "
        "I made a big cup of cocoa. Five brave foxes jumped over the muddy puddle by the barn.")
WINDOW_SIZE = (720, 820)    # app/ui/main_window.py run_app's
SETTLE_S = 2.0              # the display clock's probe and the first paced ticks


def before_presenter() -> str:
    """The last commit without render/timing/presenter.py: the widget's."""
    added = _git("log", "--diff-filter=A", "--format=%H", "--", "render/timing/presenter.py").split()
    if not added:
        raise SystemExit("render/timing/presenter.py is not committed: name the commits in --variants")
    return _git("rev-parse", f"{added[-1]}^").strip()


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def extract_tree(commit: str, into: Path) -> None:
    """The tracked files of `commit` under `into`."""
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def _proc_cpu(stat_path: str) -> float:
    """utime + stime of a /proc stat file, in seconds."""
    with open(stat_path, encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy() -> float:
    with open("/proc/stat", encoding="ascii") as f:
        user, nice, system, _, _, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _threads() -> dict[int, tuple[str, float]]:
    """This process's threads: native id -> (name, CPU seconds). Python threads by their
    Python name; the others (llvmpipe's rasterisers, onnxruntime's pool) by their kernel
    name without its number, so a pool reads as one."""
    named = {t.native_id: t.name for t in threading.enumerate()}
    named[os.getpid()] = "gui"
    threads = {}
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        try:
            comm = (task / "comm").read_text().strip()
            cpu = _proc_cpu(str(task / "stat"))
        except OSError:
            continue  # ended meanwhile
        threads[tid] = (named.get(tid) or comm.rstrip("0123456789").rstrip("-:_ ") or comm, cpu)
    return threads


def _by_thread(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
               wall: float) -> dict[str, float]:
    cores: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        start = before.get(tid, (name, 0.0))[1]
        cores[name] = cores.get(name, 0.0) + (cpu - start) / wall
    return {name: round(c, 3) for name, c in sorted(cores.items(), key=lambda kv: -kv[1]) if c >= 0.005}


def _snapshot(pids: dict[str, int]) -> dict[str, float]:
    shot = {"wall": time.monotonic(), "process": time.process_time(),
            "gui_thread": _proc_cpu(f"/proc/self/task/{os.getpid()}/stat"), "machine": _machine_busy()}
    for name, pid in pids.items():
        shot[name] = _proc_cpu(f"/proc/{pid}/stat")
    return shot


def _run_event_loop(seconds: float) -> None:
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(round(seconds * 1e3), loop.quit)
    loop.exec()


def _measure(window, seconds: float, pids: dict[str, int]) -> dict:
    view = window.view
    draws, threads, before = view._draws, _threads(), _snapshot(pids)
    _run_event_loop(seconds)
    after, threads_after, stats = _snapshot(pids), _threads(), view.stats()
    wall = after["wall"] - before["wall"]
    cores = {k: (after[k] - before[k]) / wall for k in before if k != "wall"}
    ours = cores["process"] + sum(cores[name] for name in pids)
    by_thread = _by_thread(threads, threads_after, wall)
    return {
        "app_cores": round(cores["process"], 3),
        "gui_thread_cores": round(cores["gui_thread"], 3),
        "llvmpipe_cores": round(by_thread.get("llvmpipe", 0.0), 3),
        "app_cores_by_thread": by_thread,
        **{f"{name}_cores": round(cores[name], 3) for name in pids},
        "app_and_servers_cores": round(ours, 3),
        "other_processes_cores": round(max(0.0, cores["machine"] - ours), 3),
        "drawn_fps": round((view._draws - draws) / wall, 2),
        "tick_fps": round(stats["fps"], 2),
        "missed_ticks": stats["missed_ticks"],
        "late": stats["late"],
        "display_mode": stats["display_mode"],
        "load_1min": round(os.getloadavg()[0], 2),
    }


def child(tree: Path, fps: int, seconds: float, pids: dict[str, int], avatar_window: bool = False) -> dict:
    """The app of `tree` in this process: idle, then speaking (with the avatar window
    open too if `avatar_window`)."""
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    from PySide6.QtWidgets import QApplication

    app = QApplication(["app-cpu-bench"])
    from app.settings import Settings
    from render.gl.offscreen import gl_renderer
    from tests.harness.app_driver import open_window, pump, say

    renderer = gl_renderer()
    with tempfile.TemporaryDirectory() as config:
        extra = {"output_window": True, "output_size": "720p"} if avatar_window else {}
        window = open_window(Path(config), Settings(audio_output_device="system", mic_enabled=False,
                                                    target_fps=fps, software_gl_fps=fps, **extra),
                             size=WINDOW_SIZE)
        view = window.view
        try:
            window.refresh_status()
        except KeyError as exc:
            if exc.args != ("fallback",):
                raise
            # A tree between the presenter and the status line's new wording: its window
            # reads the 'fallback' count that the presenter split into held and
            # interpolated. Fed their sum, the status line says what it said before.
            stats = view.stats
            view.stats = lambda: {**stats(), "fallback": stats()["late"]}
        pump(SETTLE_S)
        idle = _measure(window, seconds, pids)
        say(window, TEXT)
        speaking = _measure(window, seconds, pids)
        speaking["spoke_throughout"] = window.finished is None
        window.stop()
        pump(0.2)
        kind = type(view)
        outputs = getattr(window, "outputs", None)
        shown = outputs is not None and outputs.avatar_window is not None
        if avatar_window and not shown:
            raise SystemExit("this tree's app opened no avatar window")
        result = {"fps": fps, "gl_renderer": renderer, "avatar_window": shown,
                  "view": f"{kind.__name__}({kind.__mro__[1].__name__})",
                  "view_file": sys.modules[kind.__module__].__file__,
                  "idle": idle, "speaking": speaking}
        window.close()
    app.processEvents()
    import shiboken6

    shiboken6.delete(app)
    return result


SUMMARY_KEYS = ("app_cores", "gui_thread_cores", "llvmpipe_cores", "xvfb_cores", "jackd_cores",
                "app_and_servers_cores", "other_processes_cores", "drawn_fps")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--variants",
                        help="comma-separated REV:FPS (default: the commit before the presenter "
                             "and HEAD, both at 60)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--fps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--pids", help=argparse.SUPPRESS)
    parser.add_argument("--window", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(child(args.child, args.fps, args.seconds, json.loads(args.pids),
                               args.window)))
        return 0

    from tests.harness.services import JackServer, Xvfb

    names = (args.variants or f"{before_presenter()}:60,HEAD:60").split(",")
    variants = []
    for name in names:
        rev, fps, *window = name.split(":")
        commit = _git("rev-parse", rev).strip()
        subject = _git("log", "-1", "--format=%s", commit).strip()
        variants.append({"name": f"{commit[:7]}:{fps}" + (":window" if window else ""),
                         "commit": commit, "fps": int(fps), "avatar_window": bool(window),
                         "subject": subject[:120]})
    machine = describe()
    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    jack = JackServer()
    pids = {"xvfb": xvfb.proc.pid, "jackd": jack.proc.pid}
    runs = []
    try:
        with tempfile.TemporaryDirectory() as trees:
            for commit in {v["commit"] for v in variants}:
                extract_tree(commit, Path(trees) / commit)
            for round_ in range(args.rounds):
                # Alternate the order, so a drift of the machine's speed favours none.
                for variant in (variants if round_ % 2 == 0 else variants[::-1]):
                    command = [sys.executable, "-X", "faulthandler", __file__,
                               "--child", str(Path(trees) / variant["commit"]),
                               "--fps", str(variant["fps"]), "--seconds", str(args.seconds),
                               "--pids", json.dumps(pids)] + (["--window"] if variant["avatar_window"] else [])
                    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
                    if done.returncode != 0:
                        sys.stderr.write(done.stderr[-4000:])
                        raise SystemExit(f"{variant['name']} (round {round_ + 1}) exited with "
                                         f"{done.returncode}")
                    run = {"variant": variant["name"], "round": round_ + 1,
                           **json.loads(done.stdout.strip().splitlines()[-1])}
                    runs.append(run)
                    print(json.dumps(run), file=sys.stderr)
    finally:
        jack.stop()
        xvfb.stop()

    summary = {}
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant["name"]]
        summary[variant["name"]] = {
            "view": mine[0]["view"],
            **{state: {key: round(statistics.median(r[state][key] for r in mine), 3)
                       for key in SUMMARY_KEYS}
               for state in ("idle", "speaking")}}
    publish({"machine": machine, "gl_renderer": runs[0]["gl_renderer"], "variants": variants,
             "seconds": args.seconds, "rounds": args.rounds, "window_size": list(WINDOW_SIZE),
             "median": summary, "runs": runs}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
