"""What OBS Studio records of the app, and how its A/V sync is scored: the mouth in the
recording's video against the sound in the recording's own audio track, as a viewer of
the recording sees and hears them.

Three parts:
- Scoring (pure functions of arrays, and of the file): the recording decoded with PyAV
  (the Y plane of each video frame around the mouth, the audio track where its
  timestamps put it); each frame's mouth shape, fitted as a blend of two reference
  renders of the rig's mouth drawings; the audio the app played located in the
  recording's audio by cross-correlation; the viseme onsets moved onto the recording's
  clock and scored with pipeline.core.sync_metrics.viseme_change_offsets, as
  bench/av_sync.py scores the window.
- References: the rig's mouth drawings rendered offscreen at the capture's size
  (render/gl/offscreen.py, the rig's own renderer): the pictures a frame is fitted to;
  and the speech the app plays, made again by its voice without noise: the audio looked
  for in the recording, with its viseme onsets.
- Recording: a real OBS (tests/harness/obs.py) set up to capture the avatar window
  (app/obs/link.py's setup) and to hear the app's PortAudio output through its JACK
  input, recording while the app speaks.

Invariants:
- Video and audio times are the container's timestamps (PyAV's frame.time), on the one
  timeline a player shows them on; nothing is assumed about OBS's own clocks.
- A viseme's onset is placed in the recording by the audio it belongs to, never by a
  clock: each plan's audio (the app's voice made deterministic, synthesized again) is
  found in the recording's audio by cross-correlation, 50 ms piece by piece, and its
  onsets are where they lie in that audio. So the app's media clock, JACK's and OBS's
  timestamps are all under test, and a shift of the audio inside a plan (a JACK cycle
  the app's output missed) moves the onsets after it too.
- Mouth shapes, not visemes, are scored: several visemes share a drawing (DD, kk, SS and
  ih show "teeth"), and a change between two of them is invisible.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.core.sync_metrics import SyncReport, viseme_change_offsets

# -- Scoring ------------------------------------------------------------------------------

# BT.709 luma with limited range: OBS's default output colour (Settings → Advanced:
# colour space 709, range Partial), which the recording's Y plane holds.
LUMA_709 = np.array([0.2126, 0.7152, 0.0722])


def limited_range_luma(rgb: np.ndarray) -> np.ndarray:
    """Y (16..235) of 8-bit RGB pixels (..., 3), as OBS converts its output to NV12."""
    return 16.0 + (219.0 / 255.0) * (rgb[..., :3].astype(np.float64) @ LUMA_709)


@dataclass(frozen=True)
class Recording:
    """A recording decoded: video frame times (seconds) and each frame's luma in ``box``
    (y0, y1, x0, x1), the mono audio track from ``audio_start`` (seconds) at
    ``audio_rate``, and the video stream's nominal frame rate and size."""

    frame_times: np.ndarray  # (frames,) float64, ascending
    luma: np.ndarray  # (frames, y1 - y0, x1 - x0) uint8
    box: tuple[int, int, int, int]
    audio: np.ndarray  # float32 mono
    audio_rate: int
    audio_start: float
    fps: float
    size: tuple[int, int]


def read_recording(path: Path, box: tuple[int, int, int, int]) -> Recording:
    """Decode ``path`` (any container and codecs FFmpeg reads): every video frame's Y
    plane inside ``box``, and the first audio track as mono (the channels' mean), where
    the file's timestamps put it (a gap stays silent, an overlap is overwritten)."""
    import av

    y0, y1, x0, x1 = box
    times, crops = [], []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        fps = float(stream.average_rate or 0)
        size = (stream.codec_context.width, stream.codec_context.height)
        for frame in container.decode(stream):
            if not frame.format.name.startswith(("yuv", "nv")):
                raise ValueError(f"{path}: video frames are {frame.format.name}, not YUV")
            plane = frame.planes[0]
            y = np.frombuffer(plane, np.uint8).reshape(frame.height, plane.line_size)
            times.append(frame.time)
            crops.append(y[y0:y1, x0:x1].copy())
    pieces: list[tuple[float, np.ndarray]] = []
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        rate = stream.codec_context.sample_rate
        for frame in container.decode(stream):
            samples = frame.to_ndarray()
            if frame.format.is_planar:
                samples = samples.mean(axis=0)
            else:
                samples = samples.reshape(-1, frame.layout.nb_channels).mean(axis=1)
            pieces.append((frame.time, samples.astype(np.float32)))
    if not pieces or not times:
        raise ValueError(f"{path}: no video or no audio frames")
    # Audio frames follow each other sample for sample; their timestamps only say where
    # one does not (a gap or an overlap). Matroska keeps times in whole milliseconds, so a
    # frame is put right after the one before unless its timestamp says otherwise by more
    # than that rounding (placing each at its own rounded time jittered them by up to
    # 24 samples, which smeared the cross-correlation).
    start = pieces[0][0]
    tolerance = rate // 1000 + 1  # a millisecond and a sample
    positions, at = [], 0
    for t, s in pieces:
        stamped = round((t - start) * rate)
        if abs(stamped - at) > tolerance:
            at = stamped
        positions.append(at)
        at += len(s)
    audio = np.zeros(max(p + len(s) for p, (_, s) in zip(positions, pieces)), np.float32)
    for p, (_, s) in zip(positions, pieces):
        audio[p:p + len(s)] = s
    order = np.argsort(times, kind="stable")
    return Recording(np.asarray(times, np.float64)[order], np.stack(crops)[order], box,
                     audio, rate, start, fps, size)


@dataclass(frozen=True)
class MouthFit:
    """Each frame's mouth: the dominant shape (index into the references' names; the
    second of the fitted pair when its weight is ≥ 0.5, as MouthPose.dominant), the blend
    weight, and the fit's RMS residual in luma levels."""

    shape: np.ndarray  # (frames,) int
    mix: np.ndarray  # (frames,) float, weight of the second shape of the pair
    residual: np.ndarray  # (frames,) float, luma levels


def fit_mouths(luma: np.ndarray, references: np.ndarray) -> MouthFit:
    """Fit each frame (F, H, W) as (1 − m)·A + m·B of two reference mouths (S, H, W),
    A = B allowed, m in [0, 1], least squares over the box.

    Why a blend: the renderer cross-fades the two textures of a MouthPose with its mix
    (render/gl/sprite_renderer.py), and the composite over the face is linear in the mix,
    so a frame near a viseme boundary is exactly such a blend (up to 8-bit rounding and
    the encoder's loss)."""
    x = luma.reshape(len(luma), -1).astype(np.float64)
    r = references.reshape(len(references), -1).astype(np.float64)
    pixels = x.shape[1]
    xx = np.einsum("fp,fp->f", x, x)
    xr = x @ r.T  # (F, S)
    rr = r @ r.T  # (S, S)
    count = len(r)
    best_err = np.full(len(x), np.inf)
    best_shape = np.zeros(len(x), int)
    best_mix = np.zeros(len(x))
    for a in range(count):
        # ||x − A||² for the shape alone.
        err = xx - 2 * xr[:, a] + rr[a, a]
        better = err < best_err
        best_err[better], best_shape[better], best_mix[better] = err[better], a, 0.0
        for b in range(a + 1, count):
            d2 = rr[a, a] - 2 * rr[a, b] + rr[b, b]  # ||B − A||²
            # <x − A, B − A> and the fitted weight, clipped to a real blend.
            proj = xr[:, b] - xr[:, a] - rr[a, b] + rr[a, a]
            m = np.clip(proj / d2, 0.0, 1.0)
            err = xx - 2 * xr[:, a] + rr[a, a] - 2 * m * proj + m * m * d2
            better = err < best_err
            best_err[better] = err[better]
            best_shape[better] = np.where(m[better] >= 0.5, b, a)
            best_mix[better] = m[better]
    residual = np.sqrt(np.maximum(best_err, 0.0) / pixels)
    return MouthFit(best_shape, best_mix, residual)


def shape_onsets(onset_times: np.ndarray, onset_visemes: np.ndarray,
                 viseme_shapes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The speech's onsets as mouth-shape onsets: each viseme onset (media times and OVR
    indices, in any order, duplicates allowed) mapped through ``viseme_shapes`` (shape
    index per OVR viseme), keeping only those that change the shape on screen."""
    order = np.argsort(onset_times, kind="stable")
    times, visemes = np.unique(np.stack([onset_times[order], onset_visemes[order]]), axis=1)
    shapes = viseme_shapes[visemes.astype(int)]
    keep = np.concatenate([[True], shapes[1:] != shapes[:-1]])
    return times[keep], shapes[keep]


def normalised_xcorr_peak(signal: np.ndarray, template: np.ndarray, first: int,
                          last: int) -> tuple[int, float]:
    """The lag in [first, last] (samples, clipped to where ``template`` fits) at which
    ``template`` best matches ``signal[lag:]``, and the normalised correlation there
    (1: the same waveform up to gain and a constant)."""
    n = len(template)
    first, last = max(first, 0), min(last, len(signal) - n)
    if last < first:
        raise ValueError("the template does not fit in the signal at any lag asked for")
    window = signal[first:last + n].astype(np.float64)
    t = template.astype(np.float64) - template.mean()
    size = 1 << int(np.ceil(np.log2(len(window) + n)))
    spectrum = np.fft.rfft(window, size) * np.conj(np.fft.rfft(t, size))
    corr = np.fft.irfft(spectrum, size)[:last - first + 1]
    # Each lag's window energy about its own mean, from running sums.
    sums = np.concatenate([[0.0], np.cumsum(window)])
    squares = np.concatenate([[0.0], np.cumsum(window * window)])
    total = sums[n:] - sums[:-n]
    energy = squares[n:] - squares[:-n] - total * total / n
    reference = np.dot(t, t)
    # Windows a thousand times quieter than the template (silence, where the running
    # sums' rounding would make anything of the ratio) match nothing.
    loud = energy > 1e-3 * reference
    normalised = np.where(loud, corr / np.sqrt(np.where(loud, energy, 1.0) * reference), 0.0)
    best = int(np.argmax(normalised))
    return first + best, float(normalised[best])


@dataclass(frozen=True)
class PlanAudio:
    """One plan of the speech (a sentence, or a window of a long one) as the app plays it:
    its audio at the output's rate, and its viseme onsets (seconds from its first sample,
    OVR indices): the cues of the VisemeTrack the app schedules for it."""

    audio: np.ndarray
    onsets: np.ndarray
    visemes: np.ndarray


@dataclass(frozen=True)
class PlanInRecording:
    """Where a plan's audio lies in the recording's audio: ``start`` (samples) where the
    whole plan matches best, with normalised correlation ``correlation`` (1: the same
    waveform; OBS's AAC at 160 kbps gave 0.997 and above), and, piece by piece
    (``centres``, samples from the plan's start), each piece's own place (``lags``,
    samples from ``start``) and match. A JACK cycle the app's output missed delays what
    follows by a period, so the pieces after it lie later than the plan's start says."""

    start: int
    correlation: float
    centres: np.ndarray
    lags: np.ndarray
    piece_correlations: np.ndarray


# Pieces of 50 ms: long enough for voiced speech to match in one place only, short
# enough that a plan with a missed JACK cycle inside is mostly pieces wholly on one side.
PIECE_S = 0.05
# How far a piece may lie from the plan's place: a few JACK periods (10.7 ms each) lost.
PIECE_SEARCH_S = 0.06
# A piece (or plan) matching worse than this is not taken to be where it lies (a piece
# of near-silence, or audio the app dropped): AAC's own loss leaves 0.97 and more.
MATCHED = 0.9


def locate_plans(recorded: np.ndarray, plans: list[PlanAudio], rate: int,
                 search_s: float = 30.0) -> list[PlanInRecording | None]:
    """Find each plan's audio in ``recorded`` (the recording's audio at ``rate``), in
    order: each within ``search_s`` after where the one before ended (the app says them
    one after the other; a plan that fell behind starts later, never earlier). None for
    a plan that is not there: fewer than a third of its pieces match at the best place
    for the whole (the app dropped its audio, too late to play; the whole's best place
    is then wherever noise put it, and no piece of speech matches there)."""
    found: list[PlanInRecording | None] = []
    at = 0
    piece, span = int(PIECE_S * rate), int(PIECE_SEARCH_S * rate)
    for plan in plans:
        last = min(at + int(search_s * rate), len(recorded) - len(plan.audio))
        if last < at:
            found.append(None)
            continue
        start, peak = normalised_xcorr_peak(recorded, plan.audio, at, last)
        centres, lags, peaks = [], [], []
        for offset in range(0, len(plan.audio) - piece + 1, piece):
            lag, match = normalised_xcorr_peak(recorded, plan.audio[offset:offset + piece],
                                               start + offset - span, start + offset + span)
            centres.append(offset + piece / 2)
            lags.append(lag - start - offset)
            peaks.append(match)
        peaks_array = np.asarray(peaks)
        if not len(peaks) or np.mean(peaks_array >= MATCHED) < 1 / 3:
            found.append(None)
            continue
        found.append(PlanInRecording(start, peak, np.asarray(centres), np.asarray(lags), peaks_array))
        at = start + len(plan.audio)
    return found


def onsets_in_recording(plans: list[PlanAudio], found: list[PlanInRecording | None],
                        recording: Recording) -> tuple[np.ndarray, np.ndarray]:
    """The viseme onsets of the plans found, on the recording's clock (seconds), each
    placed by the nearest piece of its plan that matched, and their visemes."""
    times, visemes = [], []
    rate = recording.audio_rate
    for plan, where in zip(plans, found):
        if where is None:
            continue
        good = where.piece_correlations >= MATCHED
        samples = plan.onsets * rate
        if good.any():
            centres, lags = where.centres[good], where.lags[good]
            nearest = np.abs(samples[:, None] - centres[None, :]).argmin(axis=1)
            samples = samples + lags[nearest]
        times.append(recording.audio_start + (where.start + samples) / rate)
        visemes.append(plan.visemes)
    if not times:
        raise ValueError("none of the speech's plans is in the recording's audio")
    return np.concatenate(times), np.concatenate(visemes)


@dataclass(frozen=True)
class Score:
    """The recording's A/V sync: ``report`` over the mouth-shape changes seen in the
    video, with the frames used (fitted within ``max_residual``) and those left out."""

    report: SyncReport
    changes: int
    frames_fitted: int
    frames_unfitted: int


def score(frame_times: np.ndarray, fit: MouthFit, onset_times: np.ndarray,
          onset_shapes: np.ndarray, max_residual: float, window: float = 0.1) -> Score:
    """Offsets of each mouth-shape change in the video (the time of the first frame
    showing the new shape: when a viewer first sees it) against the nearest onset of that
    shape within ``window`` (both on the recording's clock). Frames whose fit is worse
    than ``max_residual`` luma levels RMS (the picture is not the avatar's mouth) are
    left out of the sequence."""
    good = fit.residual <= max_residual
    shown = fit.shape[good]
    report = viseme_change_offsets(frame_times[good], shown, onset_times, onset_shapes, window)
    changes = int(np.count_nonzero(shown[1:] != shown[:-1]))
    return Score(report, changes, int(good.sum()), int((~good).sum()))


# -- References -----------------------------------------------------------------------------

@dataclass(frozen=True)
class MouthReferences:
    """The rig's mouth drawings as the capture shows them: ``names`` (one per drawing),
    their luma inside ``box`` (y0, y1, x0, x1: the pixels where any two differ), and the
    shape index of each OVR viseme."""

    names: tuple[str, ...]
    luma: np.ndarray  # (shapes, y1 - y0, x1 - x0) float64
    box: tuple[int, int, int, int]
    viseme_shapes: np.ndarray  # (15,) int

    def min_distance(self) -> float:
        """The smallest RMS luma difference between two drawings inside the box."""
        flat = self.luma.reshape(len(self.luma), -1)
        return min(float(np.sqrt(np.mean((flat[a] - flat[b]) ** 2)))
                   for a in range(len(flat)) for b in range(a + 1, len(flat)))


def render_mouth_references(rig, size: tuple[int, int]) -> MouthReferences:
    """Render each mouth drawing of ``rig`` (a sprite rig, as the bundled avatar: its
    mouths are drawings cross-faded, which fit_mouths relies on; a photo rig's mouth warps
    with its openness instead) at ``size`` (the avatar window's, which the capture shows
    1:1), eyes open, no breathing (the app's idle motion off), with the rig's own renderer
    into an offscreen framebuffer (a QGuiApplication must exist)."""
    from pipeline.core.frames import MouthPose
    from pipeline.core.visemes import OPENNESS, OVR_VISEMES, VISEME_INDEX
    from render.gl.offscreen import OffscreenTarget
    from render.rigs.loader import renderer_for

    width, height = size
    names: list[str] = []
    pictures: list[np.ndarray] = []
    with OffscreenTarget(width, height) as target:
        renderer = renderer_for(rig, (0.0, 0.0, 0.0, 1.0))
        renderer.initialize()
        renderer.set_rig(rig)
        renderer.resize(width, height)
        try:
            for viseme in OVR_VISEMES:
                name = rig.viseme_to_mouth[viseme]
                if name in names:
                    continue
                index = VISEME_INDEX[viseme]
                target.bind()
                renderer.draw(MouthPose(index, index, 1.0, OPENNESS[viseme]), 0.0, 0.0)
                names.append(name)
                pictures.append(target.read_pixels())
        finally:
            renderer.release()
    stack = np.stack(pictures)
    differs = (stack != stack[:1]).any(axis=-1).any(axis=0)
    rows, cols = np.nonzero(differs)
    box = (int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1)
    y0, y1, x0, x1 = box
    shapes = np.array([names.index(rig.viseme_to_mouth[v]) for v in OVR_VISEMES])
    return MouthReferences(tuple(names), limited_range_luma(stack[:, y0:y1, x0:x1]), box, shapes)


def plans_of(voice, texts: list[str], mode, rate: int) -> list[PlanAudio]:
    """What the app plays for ``texts``, each said in turn, made again by ``voice`` (the
    app's own, made deterministic: StreamingTTS without noise, as tests/test_app.py
    compares the app's output sample for sample): per plan, its audio resampled to
    ``rate`` as the speaker does, and the onsets of its track."""
    from pipeline.audio.resample import StreamResampler
    from pipeline.core.visemes import VISEME_INDEX
    from pipeline.voice.streaming_tts import SentencePlan
    from pipeline.voice.viseme_track import VisemeTrack

    plans: list[PlanAudio] = []
    for text in texts:
        current, parts, resampler = None, [], None
        for item in [*voice.stream(text, mode), None]:
            if isinstance(item, SentencePlan) or item is None:
                if current is not None:
                    cues = VisemeTrack(current.phonemes).cues()
                    plans.append(PlanAudio(np.concatenate(parts), np.array([c.start for c in cues]),
                                           np.array([VISEME_INDEX[c.value] for c in cues])))
                if item is not None:
                    current, parts = item, []
                    resampler = (StreamResampler(item.sample_rate, rate)
                                 if item.sample_rate != rate else None)
                continue
            parts.append(item.samples if resampler is None else resampler.process(item.samples, item.last))
    return plans


# -- Recording ------------------------------------------------------------------------------

JACK_INPUT = "Lipsync Studio audio"


def set_up_obs_recording(client, size: tuple[int, int], fps: int, folder: Path) -> None:
    """OBS's canvas and output at ``size`` and ``fps``, recording Matroska files (H.264 +
    AAC, OBS's simple output as it comes, x264 'veryfast') into ``folder``."""
    width, height = size
    folder.mkdir(parents=True, exist_ok=True)  # OBS refuses a folder that is not there
    client.send("SetVideoSettings", {"baseWidth": width, "baseHeight": height, "outputWidth": width,
                                     "outputHeight": height, "fpsNumerator": fps, "fpsDenominator": 1})
    for category, name, value in (("Output", "Mode", "Simple"), ("SimpleOutput", "RecFormat", "mkv"),
                                  ("SimpleOutput", "RecQuality", "Stream"),
                                  ("SimpleOutput", "FilePath", str(folder))):
        client.send("SetProfileParameter", {"parameterCategory": category, "parameterName": name,
                                            "parameterValue": value})


RECORDING_PARAMETERS = (("Output", "Mode"), ("SimpleOutput", "RecFormat"), ("SimpleOutput", "RecQuality"),
                        ("SimpleOutput", "StreamEncoder"), ("SimpleOutput", "Preset"),
                        ("SimpleOutput", "VBitrate"), ("SimpleOutput", "ABitrate"),
                        ("Video", "ColorSpace"), ("Video", "ColorRange"))


def recording_parameters(client) -> dict[str, str]:
    """OBS's own word on how it records (profile parameters, 'Category.Name': value)."""
    return {f"{category}.{name}": client.send("GetProfileParameter", {
        "parameterCategory": category, "parameterName": name}, raw=True)["parameterValue"]
        for category, name in RECORDING_PARAMETERS}


def hear_app_in_obs(client, scene: str = "Scene") -> list[tuple[str, str]]:
    """A JACK input in OBS (``JACK_INPUT``, two channels) wired to the app's PortAudio
    output ports; returns the connections made (source, destination)."""
    import re

    import jack

    names = [i["inputName"] for i in client.send("GetInputList", raw=True)["inputs"]]
    if JACK_INPUT not in names:
        client.send("CreateInput", {"sceneName": scene, "inputName": JACK_INPUT,
                                    "inputKind": "jack_output_capture",
                                    "inputSettings": {"channels": 2, "startjack": False}})
    wiring = jack.Client("lss-obs-wiring", no_start_server=True)
    try:
        # OBS names its JACK client after the source and registers in_1, in_2 when the
        # source is created (or, after a restart, once it is loaded): waited for.
        deadline = time.monotonic() + 10
        while not (ours := wiring.get_ports(f"^{re.escape(JACK_INPUT)}:in_", is_input=True, is_audio=True)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"OBS's JACK input registered no ports; ports: "
                                   f"{[p.name for p in wiring.get_ports()]}")
            time.sleep(0.05)
        app_out = wiring.get_ports(r"^PortAudio[^:]*:out_", is_output=True, is_audio=True)
        if not app_out:
            raise RuntimeError("the app has no PortAudio output ports in JACK")
        made = []
        for source, destination in zip(app_out, ours):
            if destination.name not in [p.name for p in wiring.get_all_connections(source)]:
                wiring.connect(source, destination)
            made.append((source.name, destination.name))
        return made
    finally:
        wiring.close()


@dataclass(frozen=True)
class Take:
    """One recording made while the app spoke: the file, the speech's viseme onsets as
    the app scheduled them (media time), OBS's GetStats before and after, the avatar
    window's presentation log over the take, the JACK cycles the server missed and the
    speeches that fell behind playback ([index, gaps, underruns])."""

    path: Path
    onset_times: np.ndarray
    onset_visemes: np.ndarray
    stats_before: dict
    stats_after: dict
    window_log: np.ndarray
    jack_xruns: int
    speeches_fell_behind: list


def record_take(window, client, texts: list[str], *, margin_s: float = 0.4) -> Take:
    """Record in OBS while the app (its main window, ``window``) says each of ``texts`` in
    turn, one speech after the other has been heard (plus ``margin_s``). Returns once OBS
    has finished the file."""
    import jack

    from tests.harness.app_driver import pump_until, say, wait_until_quiet

    engine = window.engine
    avatar = window.outputs.avatar_window
    # A JACK client only to hear of cycles the server missed: in one, the app's output,
    # OBS's input and the clock all skip a period, and the take says little.
    xruns = []
    watcher = jack.Client("lss-obs-take", no_start_server=True)
    watcher.set_xrun_callback(lambda delay: xruns.append(delay))
    watcher.activate()
    onsets: list[tuple[np.ndarray, np.ndarray]] = []
    fell_behind = []
    log_start = len(avatar.presenter.presentation_log())
    stats_before = client.send("GetStats", raw=True)
    client.send("StartRecord")
    try:
        # OBS opens the file and starts its encoders before the first bytes go out (its
        # outputDuration is no guide: obs-websocket 5.1 reported ~1900 s after 1 s here).
        pump_until(lambda: client.send("GetRecordStatus", raw=True)["outputBytes"] > 0, 20,
                   "OBS recording")
        for i, text in enumerate(texts):
            say(window, text)
            wait_until_quiet(window, margin=margin_s)
            if window.finished.gaps or window.finished.underruns:
                fell_behind.append([i, window.finished.gaps, window.finished.underruns])
            # The timeline keeps only the last seconds of speech: collected after each.
            onsets.append(engine.timeline.onsets())
    finally:
        path = Path(client.send("StopRecord", raw=True)["outputPath"])
        pump_until(lambda: not client.send("GetRecordStatus", raw=True)["outputActive"], 20,
                   "OBS finishing the file")
        stats_after = client.send("GetStats", raw=True)
        watcher.deactivate()
        watcher.close()
    return Take(path, np.concatenate([t for t, _ in onsets]), np.concatenate([v for _, v in onsets]),
                stats_before, stats_after, avatar.presenter.presentation_log()[log_start:].copy(),
                len(xruns), fell_behind)


def turn_preview_off(obs) -> None:
    """Restart ``obs`` (tests/harness/obs.py's Obs) with its preview off (the main
    window's right-click → Enable Preview, kept in global.ini), the advice for machines
    OBS's rendering struggles on: here its preview took 20 ms of each 33 ms frame
    (averageFrameRenderTime 25 ms with it, 5 ms without, OBS alone with a screen
    capture)."""
    obs.stop()
    with open(obs.config / "global.ini", "a", encoding="utf-8") as ini:
        ini.write("\n[BasicWindow]\nPreviewEnabled=false\n")
    obs.start()
