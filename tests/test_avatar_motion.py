"""The avatar's motion and expressions, end to end: the real voice's mouth track through
the real presenter and producer (on a fake clock, driven pass by pass), each presented
frame drawn by the GL sprite renderer on a real Mesa context under Xvfb, and what moved
measured on the rendered pixels."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipeline.core.avatar_state import EXPRESSIONS, INDEX, AvatarState
from pipeline.core.expressions import ExpressionError
from pipeline.core.frames import MouthPose
from render.timing import avatar_motion
from render.timing.avatar_motion import AvatarMotion, MotionStrengths, head_turn, placement
from tests.harness.fake_clock import FakeClock
from tests.harness.paced_presenter import media, paced, tick

SIZE = 256                      # the default avatar drawn at 256×256 in a square view
P = 1 / 60
TEXT = "Hello there! I am Pixie, and I wave my arms when I talk about big, loud things."
SPEECH_START = 0.5              # media time the sentence starts at


@pytest.fixture(scope="module")
def speech():
    """(pose source, duration) of a sentence of the real voice, deterministic."""
    from pipeline.voice.speech_timeline import SpeechTimeline
    from pipeline.voice.streaming_tts import LATENCY_MODES, SentencePlan, StreamingTTS
    from pipeline.voice.viseme_track import VisemeTrack

    timeline, samples, rate = SpeechTimeline(), 0, 1
    for item in StreamingTTS(noise_scale=0.0, noise_w_scale=0.0).stream(TEXT, LATENCY_MODES["premium"]):
        if isinstance(item, SentencePlan):
            rate = item.sample_rate
            timeline.schedule(VisemeTrack(item.phonemes), SPEECH_START + samples / rate)
            samples += item.total_samples
    return timeline.frame_pose, samples / rate


@pytest.fixture(scope="module")
def rig():
    from pipeline.core.resources import DEFAULT_AVATAR_MANIFEST
    from render.rigs.sprite import load_sprite_rig

    return load_sprite_rig(DEFAULT_AVATAR_MANIFEST, size=SIZE)


@pytest.fixture(scope="module")
def target(qt_app):
    from render.gl.offscreen import OffscreenTarget

    with OffscreenTarget(SIZE, SIZE) as target:
        yield target


def _renderer(target, rig):
    from render.gl.sprite_renderer import SpriteGLRenderer

    target.make_current()
    r = SpriteGLRenderer()
    r.initialize()
    r.set_rig(rig)
    r.resize(SIZE, SIZE)
    return r


@pytest.fixture()
def renderer(target, rig):
    """The default avatar's renderer."""
    r = _renderer(target, rig)
    yield r
    r.release()


@pytest.fixture()
def soft(target):
    """A renderer of the drawn rig, whose shapes have soft edges and stay inside the
    canvas: the default avatar is cut off hard at the canvas's bottom edge, and that cut,
    moved by a fraction of a pixel, is rasterised whole rows on or off (the centroid of a
    6.4-px hop measured 6.12 px), where a soft edge moves its coverage exactly."""
    from tests.harness.drawn_rig import drawn_rig

    r = _renderer(target, drawn_rig(SIZE))
    yield r
    r.release()


def presented(pose_source, seconds: float, motion: AvatarMotion, *, idle: bool = False,
              during=None) -> list[tuple[float, AvatarState]]:
    """(stamp, state) of each frame the presenter shows until `seconds` of media time
    after the sentence's start, `during(media_time)` called before each tick."""
    clock = FakeClock()
    presenter = paced(clock)
    presenter.set_idle_motion(blinking=idle, breathing=idle)
    presenter.set_avatar_motion(motion)
    motion.media_now = lambda: media(clock.t)
    presenter.set_sources(pose_source, media, start=False)
    frames = []
    while media(clock.t) < SPEECH_START + seconds:
        if during is not None:
            during(media(clock.t))
        presenter.producer.fill()
        frame = tick(presenter, clock)
        state = AvatarState(frame.state.values.copy())
        frames.append((frame.stamp, state))
    presenter.shutdown()
    return frames


def draw(renderer, state: AvatarState) -> np.ndarray:
    renderer.draw_state(state)
    return renderer.read_pixels()


def alpha_centroid(image: np.ndarray) -> tuple[float, float]:
    """(x, y) in pixels, y down, of the rendered avatar's coverage."""
    a = image[..., 3].astype(np.float64)
    ys, xs = np.mgrid[0:a.shape[0], 0:a.shape[1]] + 0.5
    return float((a * xs).sum() / a.sum()), float((a * ys).sum() / a.sum())


def best_lag(x: np.ndarray, y: np.ndarray, lags=range(-3, 4)) -> int:
    """The frame shift of y against x with the highest correlation."""
    def corr(lag):
        a, b = (x[max(0, -lag): len(x) - max(0, lag)], y[max(0, lag): len(y) - max(0, -lag)])
        return np.corrcoef(a, b)[0, 1]
    return max(lags, key=corr)


# -- the motion itself ------------------------------------------------------------------

def test_no_strength_is_no_motion_at_all():
    for openness in (0.0, 0.4, 1.0):
        for t in (-3.0, 0.0, 0.51, 1234.5):
            assert placement(openness, t, MotionStrengths()) == (0.0, 0.0, 0.0, 0.0)


def test_the_head_looks_about_with_the_sway_and_nods_with_the_tilt():
    for openness in (0.0, 0.5, 1.0):
        assert head_turn(openness, 2.5, MotionStrengths(bounce=1.0, shake=1.0)) == (0.0, 0.0)
    looks = np.array([head_turn(0.0, t, MotionStrengths(sway=1.0)) for t in np.arange(0, 60, 0.1)])
    assert np.abs(looks[:, 0]).max() <= avatar_motion.HEAD_YAW_RADIANS
    assert np.abs(looks[:, 0]).max() > 0.5 * avatar_motion.HEAD_YAW_RADIANS
    assert np.abs(looks[:, 1]).max() <= avatar_motion.HEAD_PITCH_RADIANS
    # Slow: a sine's speed is at most its size × 2π × its rate, 1.8°/s for the yaw's two.
    top_speed = avatar_motion.HEAD_YAW_RADIANS * 0.5 * 2 * math.pi * sum(avatar_motion.HEAD_HZ)
    assert np.abs(np.diff(looks[:, 0])).max() <= top_speed * 0.1 < math.radians(0.2)
    assert head_turn(1.0, 2.5, MotionStrengths(tilt=1.0)) == (0.0, -avatar_motion.NOD_RADIANS)
    assert head_turn(0.0, 2.5, MotionStrengths(tilt=1.0)) == (0.0, 0.0)


def test_each_motion_has_its_own_strength():
    loud, t = 0.95, 0.3
    bounce = placement(loud, t, MotionStrengths(bounce=1.0))
    assert bounce[0] == 0.0 and bounce[2] == 0.0
    assert bounce[1] == pytest.approx(avatar_motion.BOUNCE_HEIGHT * loud)
    assert bounce[3] == pytest.approx(-avatar_motion.BOUNCE_STRETCH * loud)
    assert placement(loud, t, MotionStrengths(bounce=0.5))[1] == pytest.approx(bounce[1] / 2)
    tilt = placement(loud, t, MotionStrengths(tilt=1.0))
    assert tilt[2] != 0.0 and tilt[:2] == (0.0, 0.0)
    assert abs(tilt[2]) <= avatar_motion.TILT_RADIANS
    # Shake only on loud sound.
    assert placement(avatar_motion.SHAKE_THRESHOLD, t, MotionStrengths(shake=1.0)) == (0, 0, 0, 0)
    assert placement(loud, 0.01, MotionStrengths(shake=1.0))[0] != 0.0
    # Sway goes on in silence, within its size.
    sway = [placement(0.0, t, MotionStrengths(sway=1.0)) for t in np.arange(0.0, 10.0, 0.1)]
    assert max(abs(s[2]) for s in sway) <= avatar_motion.SWAY_RADIANS
    assert max(abs(s[2]) for s in sway) > 0.9 * avatar_motion.SWAY_RADIANS
    assert all(s[1] == 0.0 and s[3] == 0.0 for s in sway)


def test_the_frame_path_writes_motion_made_from_each_frames_own_mouth(speech):
    pose_source, duration = speech
    strengths = MotionStrengths(bounce=0.7, tilt=0.5, shake=0.4, sway=0.3)
    frames = presented(pose_source, 1.0, AvatarMotion(strengths=strengths))
    assert len(frames) >= 59
    for stamp, state in frames:
        assert state.placement() == placement(state.openness, stamp, strengths)
        yaw, pitch = state.values[INDEX["yaw"]], state.values[INDEX["pitch"]]
        assert (yaw, pitch) == head_turn(state.openness, stamp, strengths)
    assert max(state.openness for _, state in frames) > 0.5


# -- drawn: in step with the sound ----------------------------------------------------------

def test_the_bounce_lifts_the_drawn_avatar_in_step_with_the_mouth(soft, speech):
    renderer = soft
    pose_source, duration = speech
    frames = presented(pose_source, min(duration, 3.0), AvatarMotion(strengths=MotionStrengths(bounce=1.0)))
    still = alpha_centroid(draw(renderer, AvatarState()))
    openness = np.array([state.openness for _, state in frames])
    lift = np.array([still[1] - alpha_centroid(draw(renderer, state))[1] for _, state in frames])
    # An affine map moves the coverage's centroid by the same map: up by the hop, and by
    # the stretch about the bottom edge times the centroid's height above it.
    per_openness = SIZE * (avatar_motion.BOUNCE_HEIGHT + avatar_motion.BOUNCE_STRETCH * (1 - still[1] / SIZE))
    slope, intercept = np.polyfit(openness, lift, 1)
    print(f"\nbounce: {slope:.2f} px per unit openness (model {per_openness:.2f}), "
          f"at rest {intercept:+.3f} px, worst {np.abs(lift - per_openness * openness).max():.3f} px off")
    # Soft edges make the centroid sub-pixel exact: measured at most 0.026 px off the
    # model over the sentence (llvmpipe's 8-bit filter weights); a quarter of a hop of 0.4 px.
    assert np.abs(lift - per_openness * openness).max() < 0.1
    assert openness.max() > 0.5 and np.ptp(lift) > 0.5 * per_openness
    assert best_lag(openness, lift) == 0


def test_the_tilt_turns_the_drawn_avatar_about_its_bottom_centre_with_emphasis(soft, speech):
    renderer = soft
    pose_source, duration = speech
    frames = presented(pose_source, min(duration, 3.0), AvatarMotion(strengths=MotionStrengths(tilt=1.0)))
    cx, cy = alpha_centroid(draw(renderer, AvatarState()))
    pivot = (SIZE / 2, SIZE)
    still = math.atan2(pivot[1] - cy, cx - pivot[0])
    turned = []
    for _, state in frames:
        x, y = alpha_centroid(draw(renderer, state))
        turned.append(math.atan2(pivot[1] - y, x - pivot[0]) - still)  # counter-clockwise +
    turned = np.array(turned)
    roll = np.array([state.values[INDEX["roll"]] for _, state in frames])
    emphasis = np.array([state.openness ** 2 for _, state in frames])
    print(f"\ntilt: up to {math.degrees(np.abs(turned).max()):.2f}°, drawn within "
          f"{math.degrees(np.abs(turned - roll).max()):.3f}° of the state's roll")
    # Rotation about the pivot moves the centroid on a circle about it: the drawn angle is
    # the state's, measured within 0.001° over the sentence; 0.05° is 0.1 px at the
    # centroid's ~120 px from the pivot.
    assert np.abs(turned - roll).max() < math.radians(0.05)
    assert np.abs(turned).max() > math.radians(1.0)
    # Silence does not tilt; emphasis (open vowels) does, frame for frame.
    assert np.abs(turned[emphasis < 0.01]).max() < math.radians(0.1)
    assert best_lag(emphasis, np.abs(turned)) == 0


def test_the_shake_moves_the_drawn_avatar_only_on_loud_sound(soft, speech):
    renderer = soft
    pose_source, duration = speech
    frames = presented(pose_source, min(duration, 3.0), AvatarMotion(strengths=MotionStrengths(shake=1.0)))
    still = alpha_centroid(draw(renderer, AvatarState()))[0]
    loud = np.array([state.openness > avatar_motion.SHAKE_THRESHOLD for _, state in frames])
    moved = np.array([alpha_centroid(draw(renderer, state))[0] - still for _, state in frames])
    assert loud.any() and (~loud).any()
    assert (moved[~loud] == 0.0).all()
    assert np.abs(moved[loud]).max() > 0.3


@pytest.mark.parametrize("place", [(0.0, 0.025, 0.0, -0.03), (0.0, 0.0, 0.1, 0.0),
                                   (0.004, 0.02, -0.1, -0.02)], ids=["hop", "lean", "both"])
def test_a_figure_standing_on_the_canvas_edge_shows_no_gap_under_it_when_it_moves(renderer, place):
    """Pixie's hoodie is cut off by the canvas's bottom edge: lifted by a breath in (1 px
    at 256: a gap flickered under her at every breath before), a 6-px hop or a 6° lean's
    corner, it goes on below it, so the bottom row stays covered."""
    state = AvatarState()
    state.breath = 1.0                                  # inhaled: the body is scaled too
    still = draw(renderer, state)
    state.set_placement(*place)
    moved = draw(renderer, state)
    middle = slice(SIZE // 4, 3 * SIZE // 4)            # the hoodie, whichever way it leans
    assert (still[-1, middle, 3] == 255).all()
    assert (moved[-1, middle, 3] == 255).all()


def test_nothing_is_drawn_below_the_canvas_in_a_view_taller_than_it(rig):
    """In a tall view the canvas is letterboxed: the body reaching below the canvas as it
    moves ends at the canvas's bottom edge, flat, as the still figure does."""
    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer

    with OffscreenTarget(SIZE, 2 * SIZE):
        r = SpriteGLRenderer()
        r.initialize()
        r.set_rig(rig)
        r.resize(SIZE, 2 * SIZE)
        state = AvatarState()
        still = draw(r, state)
        state.set_placement(0.004, 0.02, -0.1, -0.02)
        moved = draw(r, state)
        r.release()
    floor = SIZE // 2 + SIZE                            # the canvas's bottom edge, centred
    middle = slice(SIZE // 4, 3 * SIZE // 4)
    for frame in (still, moved):
        assert not frame[floor:, :, 3].any()
        assert (frame[floor - 1, middle, 3] == 255).all()


def test_no_strength_draws_todays_frames_exactly(target):
    """Frames of the renderer with no motion at all (the golden file holds the frames this
    SpriteGLRenderer draws of the same states without AvatarMotion, on this machine's
    llvmpipe). Its first version came from commit bcfc5e1's renderer, before motion
    existed; keeping only each layer's rectangle in its textures moved 14 pixels of one
    of the frames by 1 of 255 (rounding of the texture coordinates), so it was drawn
    again then."""
    from pathlib import Path

    from render.gl.offscreen import OffscreenTarget
    from render.gl.sprite_renderer import SpriteGLRenderer
    from tests.harness.drawn_rig import drawn_rig

    golden = np.load(Path(__file__).parent / "data" / "sprite_frames_still.npz")
    motion = AvatarMotion(strengths=MotionStrengths())
    with OffscreenTarget(200, 150):
        r = SpriteGLRenderer()
        r.initialize()
        r.set_rig(drawn_rig(128))
        r.resize(200, 150)
        for frame, (a, b, mix, openness, blink, breath) in zip(golden["frames"], golden["states"]):
            state = AvatarState()
            state.set_mouth(MouthPose(int(a), int(b), mix, openness))
            state.set_blink(blink)
            state.breath = breath
            motion.apply(state, 1.7)
            r.draw_state(state)
            assert np.array_equal(r.read_pixels(), frame)
        r.release()


# -- expressions ----------------------------------------------------------------------------

def _pixel_box(rect, size: int) -> tuple[slice, slice]:
    x0, y0, x1, y1 = rect
    return slice(math.floor(y0 * size), math.ceil(y1 * size)), slice(math.floor(x0 * size), math.ceil(x1 * size))


@pytest.mark.parametrize("blink", [0.0, 1.0])
def test_an_expression_changes_the_pixels_of_its_layers_and_nothing_else(renderer, rig, blink):
    from render.gl.sprite_renderer import coverage_rect

    rest = AvatarState()
    rest.set_blink(blink)
    neutral = draw(renderer, rest)
    for name, expression in rig.expressions.items():
        state = AvatarState(rest.values.copy())
        state.expressions[EXPRESSIONS.index(name)] = 1.0
        changed = np.any(draw(renderer, state) != neutral, axis=2)
        allowed = np.zeros_like(changed)
        for image in (*expression.swaps.values(), *expression.overlays,
                      *(getattr(rig, layer) for layer in expression.swaps)):
            allowed[_pixel_box(coverage_rect(image), SIZE)] = True
        assert changed.sum() > 150, name          # a look of its own, not a speck
        assert not (changed & ~allowed).any(), name


def test_a_chosen_expression_cross_fades_over_the_set_time(renderer, rig, speech):
    pose_source, _ = speech
    motion = AvatarMotion(fade_seconds=0.15)
    motion.set_offered(tuple(rig.expressions))
    chosen = SPEECH_START + 0.2

    def choose(now: float) -> None:
        if now >= chosen and motion.version == 0:
            motion.set_expression("surprised")

    frames = presented(pose_source, 0.6, motion, during=choose)
    surprised = EXPRESSIONS.index("surprised")
    weight = np.array([state.expressions[surprised] for _, state in frames])
    stamps = np.array([stamp for stamp, _ in frames])
    # Frames made ahead before the choice were made again: none shows it undone.
    assert (np.diff(weight) >= 0).all() and weight[0] == 0.0 and weight[-1] == 1.0
    fading = stamps[(weight > 0) & (weight < 1)]
    assert 0.15 - 2 * P <= np.ptp(fading) <= 0.15       # 150 ms of frames, 60 a second
    assert chosen - P <= fading.min() <= chosen + 3 * P  # from the next frames on
    # Drawn: the eyes go from neutral's to surprised's a step a frame, never back.
    from render.gl.sprite_renderer import coverage_rect

    eyes = _pixel_box(coverage_rect(rig.eyes_open, *rig.expressions["surprised"].swaps.values()), SIZE)
    neutral = draw(renderer, AvatarState())[eyes].astype(int)
    change = np.array([np.abs(draw(renderer, state)[eyes].astype(int) - neutral).sum()
                       for _, state in frames])
    assert (change[weight == 0] == 0).all() and (np.diff(change[weight > 0]) > 0).sum() >= 7
    assert (np.diff(change) >= 0).all()
    with pytest.raises(ExpressionError, match="its expressions are: neutral, happy, angry, sad, surprised"):
        motion.set_expression("relaxed")


# -- the mouth: one drawing per frame -------------------------------------------------------

def test_no_frame_of_real_speech_shows_two_mouths(renderer, speech):
    pose_source, duration = speech
    frames = presented(pose_source, min(duration, 3.0), AvatarMotion())
    blends = 0
    for _, state in frames:
        pose = state.mouth_pose()
        if pose.viseme_a == pose.viseme_b or pose.mix in (0.0, 1.0):
            continue
        blends += 1
        shown = draw(renderer, state)
        alone = AvatarState(state.values.copy())
        alone.set_mouth(MouthPose(pose.dominant, pose.dominant, 0.0, pose.openness))
        # The frame is its dominant drawing's frame, pixel for pixel: no other mouth in it.
        assert np.array_equal(shown, draw(renderer, alone))
    assert blends > 20


def test_hiding_fades_from_where_it_is_and_back():
    from pipeline.core.avatar_state import AvatarState
    from render.timing.avatar_motion import HIDE_FADE_S, AvatarMotion

    now = [10.0]
    motion = AvatarMotion(lambda: now[0])
    state = AvatarState()

    def hidden_at(t):
        motion.apply(state, t)
        return state.hidden

    assert hidden_at(10.0) == 0.0 and not motion.hidden
    version = motion.version
    motion.set_hidden(True)
    assert motion.hidden and motion.version > version  # frames made ahead are made again
    assert hidden_at(10.0) == 0.0 and hidden_at(10.0 + HIDE_FADE_S / 2) == pytest.approx(0.5)
    assert hidden_at(10.0 + HIDE_FADE_S) == 1.0 and hidden_at(99.0) == 1.0
    # Shown again halfway through the fade: back from where it was, not from fully hidden.
    now[0] = 10.0 + HIDE_FADE_S / 2
    motion.set_hidden(False)
    assert hidden_at(now[0]) == pytest.approx(0.5)
    assert hidden_at(now[0] + HIDE_FADE_S) == 0.0
