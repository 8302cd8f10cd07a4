"""A/V sync as viewers of a stream see it: a real OBS Studio records the app's avatar
window (captured as `obs setup` sets it up) and its voice (OBS's JACK input wired to the
app's PortAudio output) while the app says 20 sentences; every change of the mouth in the
recording's video is scored against the onset of its sound in the recording's own audio
track (tests/harness/recording_score.py says how).

Last line of output: one JSON object. Baseline in the same run: the avatar window itself,
scored the same way from its presentation log (the mouth shape each presented frame
showed, at the media time heard then) against the same onsets: what the app's status line
reports. The difference is what capturing, OBS's frame grid, encoding and OBS's audio
timestamps add. (The main window's own view is no other baseline: it is the same kind of
output, pulling frames from the same presenter code and media clock.)

Each run makes two takes: OBS as it comes (its preview on), then OBS restarted with its
preview off (what OBS's own advice is for a machine its rendering struggles on): the
figures at the top level are the first, "preview_off" the second.

Usage: python bench/obs_av_offset.py [--sentences 20] [--software-gl-fps N] [--keep DIR]
                                     [--out bench/results/obs_av_offset.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.av_sync import SENTENCES  # noqa: E402
from bench.machine import describe, publish  # noqa: E402

SIZE = (640, 360)
FPS = 30


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--software-gl-fps", type=int, default=None,
                        help="the app's frame rate on software GL (default: the setting's default)")
    parser.add_argument("--keep", type=Path, help="a folder to keep the recordings and takes in "
                        "(preview-on.mkv, preview-on.pickle, ...) to look at or score again")
    args = parser.parse_args()

    from tests.harness.services import JackServer, Xvfb

    xvfb = Xvfb()
    os.environ["DISPLAY"] = xvfb.display
    # Before OBS starts: its JACK input connects to the server JackServer names.
    jack_server = JackServer()
    from tests.harness.obs import Obs, WindowManager

    window_manager = WindowManager(xvfb.display)
    from PySide6.QtWidgets import QApplication

    app = QApplication(["obs-av-offset-bench"])
    import obsws_python

    from app.obs.link import ObsLink
    from app.obs.target import SetupTarget
    from app.settings import Settings
    from pipeline.voice.streaming_tts import LATENCY_MODES, StreamingTTS
    from tests.harness import recording_score as rs
    from tests.harness.app_driver import open_window, pump, pump_until

    load_before = os.getloadavg()
    texts = (SENTENCES * 2)[: args.sentences]
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        obs = Obs(xvfb.display, scratch / "obs-home")
        chosen = {} if args.software_gl_fps is None else {"software_gl_fps": args.software_gl_fps}
        settings = Settings(output_window=True, output_size=f"{SIZE[0]}x{SIZE[1]}", output_on_top=True,
                            output_background="chroma", blinking=False, breathing=False,
                            mic_enabled=False, audio_output_device="system", **chosen)
        window = open_window(scratch / "config", settings)
        avatar = window.outputs.avatar_window
        pump_until(lambda: avatar.draws > 5, 20, "the avatar window drawing")
        references = rs.render_mouth_references(avatar.rig, SIZE)
        # The app's voice without its noise, so that what it plays can be made again
        # sample for sample and found in the recording (tests/test_app.py does the same).
        voice = StreamingTTS(noise_scale=0.0, noise_w_scale=0.0)
        voice.warm_up()
        window.engine.attach_voice(voice)
        plans = rs.plans_of(voice, texts, LATENCY_MODES[settings.latency_mode],
                            window.engine.output.sample_rate)
        for preview in ("on", "off"):
            if preview == "off":
                rs.turn_preview_off(obs)
            client = obsws_python.ReqClient(host="127.0.0.1", port=obs.port, password=obs.password,
                                            timeout=10)
            link = ObsLink("127.0.0.1", obs.port, obs.password)
            setup_lines = link.setup(SetupTarget(background="chroma", chroma_colour=settings.chroma_colour,
                                                 size=SIZE))
            link.close()
            rs.set_up_obs_recording(client, SIZE, FPS, scratch / "recordings")
            wiring = rs.hear_app_in_obs(client)
            parameters = rs.recording_parameters(client)
            pump(1.0)  # the capture's first pictures
            log_from = len(obs.log())
            load_at_start = os.getloadavg()[0]
            take = rs.record_take(window, client, texts)
            client.disconnect()
            recording = rs.read_recording(take.path, references.box)
            # What OBS said about its audio timing and lagged frames, for the record.
            notes = [line.split(": ", 1)[-1].strip() for line in obs.log()[log_from:].splitlines()
                     if "audio buffering" in line or "lagged" in line or "missed due to" in line]
            if args.keep is not None:
                import pickle

                args.keep.mkdir(parents=True, exist_ok=True)
                (args.keep / f"preview-{preview}.mkv").write_bytes(take.path.read_bytes())
                (args.keep / f"preview-{preview}.pickle").write_bytes(pickle.dumps((take, references, plans)))
            results[preview] = {**evaluate(take, recording, references, plans),
                                "load_avg_1min_at_start_and_end": [round(load_at_start, 2),
                                                                   round(os.getloadavg()[0], 2)],
                                "obs_setup": setup_lines, "jack_wiring": wiring, "obs_recording": parameters,
                                "obs_log_notes": notes}
        window.close()
        app.processEvents()
        obs.stop()

    import shiboken6

    from pipeline.audio.devices import portaudio_released

    shiboken6.delete(app)
    with portaudio_released():
        jack_server.stop()
    window_manager.stop()
    xvfb.stop()

    result = {
        "bench": "obs_av_offset",
        "machine": describe("Xvfb + Mesa llvmpipe, JACK dummy 48 kHz/512"),
        "load_avg_1min_before": round(load_before[0], 2),
        "sentences": args.sentences,
        "app_software_gl_fps": settings.software_gl_fps,
        "obs": f"OBS Studio 29.0.2 (Debian), canvas and output {SIZE[0]}x{SIZE[1]} at {FPS} fps, "
               "the avatar window as `obs setup` captures it (on Xvfb: the screen-crop fallback, "
               "xshm_input, with the chroma key filter); recording settings: obs_recording",
        # OBS as it comes (its preview on) first, then with the preview off.
        **results["on"],
        "preview_off": results["off"],
    }
    publish(result, args.out)
    return 0


def evaluate(take, recording, references, plans) -> dict:
    """The take scored: the recording's offsets, the window's in the same run, OBS's frame
    rate and where the speech was found in the recording's audio."""
    from pipeline.core.sync_metrics import viseme_change_offsets
    from render.outputs.avatar_view import PRESENTED
    from tests.harness import recording_score as rs

    rate = recording.audio_rate
    found = rs.locate_plans(recording.audio, plans, rate)
    times, visemes = rs.onsets_in_recording(plans, found, recording)
    pieces = np.concatenate([where.piece_correlations for where in found if where is not None])
    shifts = np.concatenate([where.lags for where in found if where is not None])
    onsets, shapes = rs.shape_onsets(times, visemes, references.viseme_shapes)
    fit = rs.fit_mouths(recording.luma, references.luma)
    # A quarter of the least difference between two drawings: a frame fitted worse than
    # that is not the avatar's mouth (measured fits: 0.3 levels median, 0.55 P99).
    max_residual = references.min_distance() / 4
    ours = rs.score(recording.frame_times, fit, onsets, shapes, max_residual)
    # The window, from its own log: media time heard at each presented frame, against
    # the onsets as the app scheduled them.
    log = take.window_log[take.window_log["status"] == PRESENTED]
    media_onsets, media_shapes = rs.shape_onsets(take.onset_times, take.onset_visemes,
                                                 references.viseme_shapes)
    window = viseme_change_offsets(log["heard"], references.viseme_shapes[log["viseme"].astype(int)],
                                   media_onsets, media_shapes, 0.1)
    before, after = take.stats_before, take.stats_after
    frame_ms = 1000 / FPS
    report = ours.report
    steps = np.diff(recording.frame_times) * 1000
    return {
        "obs_av_offset_median_ms": round(report.median_abs_ms, 2),
        "obs_av_offset_p99_ms": round(report.p99_abs_ms, 2),
        "obs_av_offset_signed_median_ms": round(report.median_ms, 2),
        "obs_mouth_changes_seen": ours.changes,
        "obs_mouth_changes_scored": int(len(report.offsets_ms)),
        "obs_mouth_changes_unmatched": report.unmatched,
        "shape_onsets": int(len(onsets)),
        "frames_fitted": ours.frames_fitted,
        "frames_unfitted": ours.frames_unfitted,
        "fit_residual_median": round(float(np.median(fit.residual)), 2),
        "fit_residual_p99": round(float(np.percentile(fit.residual, 99)), 2),
        "fit_residual_limit": round(max_residual, 2),
        "obs_fps": round(float(after["activeFps"]), 2),
        "obs_render_skipped_frames": after["renderSkippedFrames"] - before["renderSkippedFrames"],
        "obs_render_total_frames": after["renderTotalFrames"] - before["renderTotalFrames"],
        "obs_output_skipped_frames": after["outputSkippedFrames"] - before["outputSkippedFrames"],
        "obs_output_total_frames": after["outputTotalFrames"] - before["outputTotalFrames"],
        "obs_average_frame_render_ms": round(float(after["averageFrameRenderTime"]), 2),
        # Frames OBS rendered anew (not repeated for lagging) per second of recording.
        "obs_new_frames_per_s": round(
            ((after["renderTotalFrames"] - before["renderTotalFrames"])
             - (after["renderSkippedFrames"] - before["renderSkippedFrames"]))
            / (recording.frame_times[-1] - recording.frame_times[0] + frame_ms / 1000), 2),
        "recording_frames": int(len(recording.frame_times)),
        "recording_fps_nominal": round(recording.fps, 3),
        "recording_frame_step_ms_p50_max": [round(float(np.median(steps)), 2), round(float(steps.max()), 2)],
        "plans": len(plans),
        # Plans whose audio is not in the recording (dropped by the app: too late to play),
        # and how well the 50 ms pieces of the others matched where they were found.
        "plans_not_found": sum(where is None for where in found),
        "piece_correlation_median": round(float(np.median(pieces)), 4),
        "pieces_matched": int((pieces >= rs.MATCHED).sum()),
        "pieces": int(len(pieces)),
        # Pieces lying away from their plan's place: the app's output missed JACK cycles.
        "pieces_shifted": int(((pieces >= rs.MATCHED) & (shifts != 0)).sum()),
        "jack_xruns": take.jack_xruns,
        "speeches_fell_behind": take.speeches_fell_behind,
        "frame_ms": round(frame_ms, 3),
        "baseline_avatar_window": {
            "offset_median_ms": round(window.median_abs_ms, 2),
            "offset_p99_ms": round(window.p99_abs_ms, 2),
            "offset_signed_median_ms": round(window.median_ms, 2),
            "changes_scored": int(len(window.offsets_ms)),
            "unmatched": window.unmatched,
        },
        "goals": {
            "median_le_half_frame": report.median_abs_ms <= frame_ms / 2,
            "p99_le_one_frame": report.p99_abs_ms <= frame_ms,
        },
    }


if __name__ == "__main__":
    sys.exit(main())
