"""Composites an avatar rig with OpenGL: base, then eyes, then the expression's overlays,
then the mouth, each a textured canvas-sized quad (shaders/sprite.*), the whole avatar
placed by the state's offset, roll and squash about the canvas's bottom centre.

An expression fade draws each layer as a cross-fade of two drawings (the fader never
weighs more than two expressions); the eyes also cross-fade open and shut, so the eyes
layer mixes four textures. The mouth is never cross-faded: a mid-blend frame shows the
dominant drawing (the one MouthPose.dominant names), since a half-transparent open mouth
over the closed one is two mouths at once (ghosting); drawings switch at the blend's
midpoint, as cartoon mouths and PNGtubers switch.

Every GL object is made once (program, quad, one texture per rig image); a draw only
binds textures and sets a few uniforms. All methods need the caller's GL context to be
current (QOpenGLWidget makes it so around initializeGL/paintGL).
"""

from __future__ import annotations

import ctypes
import math
import weakref
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from OpenGL import GL

from pipeline.core.avatar_state import AvatarState, still_state
from pipeline.core.expressions import NEUTRAL, expression_pair
from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from pipeline.core.visemes import OVR_VISEMES
from render.timing.idle_motion import breath_transform

_SAMPLERS = ("u_tex_a", "u_tex_b", "u_tex_c", "u_tex_d")


class ShaderError(RuntimeError):
    """A shader failed to compile or link; the message carries the GLSL log."""


class SpriteExpressionLike(Protocol):
    swaps: dict[str, np.ndarray]  # "base", "eyes_open" or "eyes_closed" → its drawing
    overlays: tuple[np.ndarray, ...]


class SpriteRigLike(Protocol):
    canvas_size: tuple[int, int]
    base: np.ndarray
    eyes_open: np.ndarray
    eyes_closed: np.ndarray
    mouths: dict[str, np.ndarray]
    viseme_to_mouth: dict[str, str]
    expressions: dict[str, SpriteExpressionLike]


SWAPPABLE = ("base", "eyes_open", "eyes_closed")
IDENTITY = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def placement_matrix(placement: tuple[float, float, float, float],
                     canvas_size: tuple[int, int]) -> np.ndarray:
    """The 2×3 affine map of canvas points (x right, y down, 0..1) for AvatarState's
    (offset_x, offset_y, roll, squash): squash and roll about the canvas's bottom centre
    in square pixels, then the offset. No placement is exactly IDENTITY, so a still
    avatar draws exactly as it did before it could move."""
    offset_x, offset_y, roll, squash = placement
    if not (offset_x or offset_y or roll or squash):
        return IDENTITY
    w, h = canvas_size
    c, s = math.cos(roll), math.sin(roll)
    to_pixels = np.array([[w, 0.0, -0.5 * w], [0.0, -h, h], [0.0, 0.0, 1.0]])  # y up
    move = np.array([[c * (1.0 + squash), -s * (1.0 - squash), offset_x * w],
                     [s * (1.0 + squash), c * (1.0 - squash), offset_y * h],
                     [0.0, 0.0, 1.0]])
    return (np.linalg.inv(to_pixels) @ move @ to_pixels)[:2]


def inverse_placement(matrix: np.ndarray) -> np.ndarray:
    """The 2×3 map undoing `matrix` (IDENTITY for IDENTITY, exactly)."""
    if matrix is IDENTITY:
        return IDENTITY
    full = np.vstack([matrix, [0.0, 0.0, 1.0]])
    return np.linalg.inv(full)[:2]


def premultiplied(image: np.ndarray) -> np.ndarray:
    """RGBA8 straight alpha → RGBA8 premultiplied alpha (rounded to nearest).

    Each image is premultiplied once while it lives: every output draws the same rig
    (the window's view, the avatar window, the browser source's and virtual camera's
    feeds), and each premultiplied the bundled avatar's 25 images again, 117 ms a time on
    the 2-core VM, on the GUI thread at every avatar switch (the soak's longest stalls).
    The result is read-only, shared by all."""
    return _once_per_image(_PREMULTIPLIED, image, _premultiply)


def _premultiply(image: np.ndarray) -> np.ndarray:
    # Only the rectangle around the visible pixels is computed: outside it alpha is 0, so
    # every premultiplied channel is 0. A sprite layer covers a few percent of the canvas
    # (the bundled avatar's 25 images: 0.1-48%, median 0.6%), and the whole canvas took
    # 123 ms for them on the 2-vCPU VM.
    out = np.zeros_like(image)
    box = image_box(image)
    if box is not None:
        part = image[box]
        # round(c·a/255) for c·a ≤ 255², exactly, by shifts: (t + 128 + (t + 128) >> 8) >> 8.
        t = part[..., :3].astype(np.uint16) * part[..., 3:4]
        t += 128
        out[box][..., :3] = (t + (t >> 8)) >> 8
        out[box][..., 3] = part[..., 3]
    out.flags.writeable = False
    return out


def image_box(image: np.ndarray) -> tuple[slice, slice] | None:
    """visible_box of an RGBA image's alpha, found once while the image lives: each
    output's set_rig lays the rig out again (sprite_layout), and finding the boxes of the
    bundled avatar's 25 images took 4.6 ms of each, on the GUI thread at every avatar
    switch (2-vCPU VM)."""
    return _once_per_image(_BOXES, image, lambda im: visible_box(im[..., 3]))


def _once_per_image(cache: dict, image: np.ndarray, make):
    """make(image), made once while `image` lives and kept in `cache` (a rig's images are
    not written once read, so an image's identity stands for its pixels)."""
    key = id(image)
    done = cache.get(key)
    if done is not None and done[0]() is image:
        return done[1]
    value = make(image)
    cache[key] = (weakref.ref(image), value)
    weakref.finalize(image, cache.pop, key, None)
    return value


# id(straight image) → (a weak reference to it, what was made of it); an entry goes when
# its image does.
_PREMULTIPLIED: dict[int, tuple[weakref.ref, np.ndarray]] = {}
_BOXES: dict[int, tuple[weakref.ref, tuple[slice, slice] | None]] = {}


def premultiply_rig(rig: SpriteRigLike) -> None:
    """Premultiply every image of the rig ahead of its upload (premultiplied), on any
    thread: a rig read afresh at an avatar switch has new images, and premultiplying
    the bundled avatar's 25 took 80 ms of the GUI thread at each switch to it (2-vCPU
    VM, the window's view and the avatar window)."""
    for image in rig_images(rig).values():
        premultiplied(image)


def visible_box(alpha: np.ndarray) -> tuple[slice, slice] | None:
    """(rows, columns) of the smallest rectangle holding every nonzero pixel of `alpha`
    (an image's alpha, or a mask), None if there is none."""
    rows, cols = np.flatnonzero(alpha.any(axis=1)), np.flatnonzero(alpha.any(axis=0))
    if not rows.size:
        return None
    return slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1)


def coverage_rect(*images: np.ndarray) -> tuple[float, float, float, float]:
    """Canvas-unit rectangle (x0, y0, x1, y1) holding every non-transparent pixel of
    the images (all of one size), one pixel wider on each side for linear filtering;
    (0, 0, 0, 0) if none."""
    boxes = [box for box in map(image_box, images) if box is not None]
    if not boxes:
        return (0.0, 0.0, 0.0, 0.0)
    h, w = images[0].shape[:2]
    top, bottom = min(r.start for r, _ in boxes), max(r.stop for r, _ in boxes)
    left, right = min(c.start for _, c in boxes), max(c.stop for _, c in boxes)
    return (max(left - 1, 0) / w, max(top - 1, 0) / h,
            min(right + 1, w) / w, min(bottom + 1, h) / h)


def upload_texture(image: np.ndarray,
                   rect: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)) -> int:
    """A new RGBA8 texture (linear filtering, clamped) holding the part of a straight-alpha
    RGBA8 image under `rect` (image units, on pixel edges; all of it by default) as
    premultiplied alpha; its top row is texture row 0. An empty rect gives one transparent
    texel."""
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    h, w = image.shape[:2]
    x0, y0, x1, y1 = (round(v * n) for v, n in zip(rect, (w, h, w, h)))
    part = premultiplied(image)[y0:y1, x0:x1]
    if not part.size:
        part = np.zeros((1, 1, 4), np.uint8)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, part.shape[1], part.shape[0], 0, GL.GL_RGBA,
                    GL.GL_UNSIGNED_BYTE, np.ascontiguousarray(part))
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_S, GL.GL_CLAMP_TO_EDGE)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_T, GL.GL_CLAMP_TO_EDGE)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return tex


def rig_images(rig: SpriteRigLike) -> dict[str, np.ndarray]:
    """The rig's images by name ("base", "eyes_open", "eyes_closed", "mouth:NAME", and of
    each expression "EXPRESSION:LAYER" for a swap, "EXPRESSION:overlayN"), checked:
    ValueError unless each is uint8 RGBA at the canvas size and every viseme's drawing
    exists."""
    w, h = rig.canvas_size
    images = {"base": rig.base, "eyes_open": rig.eyes_open, "eyes_closed": rig.eyes_closed}
    images.update({f"mouth:{name}": img for name, img in rig.mouths.items()})
    for expression, layers in rig.expressions.items():
        unknown = set(layers.swaps) - set(SWAPPABLE)
        if unknown:
            raise ValueError(f"expression {expression!r} swaps {sorted(unknown)}; "
                             f"only {', '.join(SWAPPABLE)} can be swapped")
        images.update({f"{expression}:{name}": img for name, img in layers.swaps.items()})
        images.update({f"{expression}:overlay{i}": img for i, img in enumerate(layers.overlays)})
    for name, img in images.items():
        if img.dtype != np.uint8 or img.shape != (h, w, 4):
            raise ValueError(f"rig image {name!r} is {img.dtype} {img.shape}; "
                             f"expected uint8 {(h, w, 4)} (canvas {w}x{h}, RGBA)")
    missing = set(rig.viseme_to_mouth.values()) - set(rig.mouths)
    if missing:
        raise ValueError(f"viseme_to_mouth names drawings the rig lacks: {sorted(missing)}")
    if not rig.mouths:
        raise ValueError("the rig has no mouth drawings")
    return images


@dataclass(frozen=True)
class ExpressionImages:
    """The names (rig_images' keys) of what one expression draws: its base and eyes (its
    own where it swaps them, else neutral's) and its overlays."""

    base: str
    eyes_open: str
    eyes_closed: str
    overlays: tuple[str, ...]


@dataclass(frozen=True)
class LayerDraw:
    """One layer of a frame: four images (rig_images' names) mixed as
    mix(mix(a, b, inner), mix(c, d, inner), outer), times `alpha`, over `rect`."""

    rect: tuple[float, float, float, float]
    images: tuple[str, str, str, str]
    inner: float
    outer: float
    alpha: float


@dataclass(frozen=True)
class SpriteLayout:
    """How a rig's frames are made of its images, whoever draws them (GL or CUDA):
    each expression's images, the image each viseme shows, each layer's rectangle."""

    expressions: dict[str, ExpressionImages]
    viseme_images: tuple[str, ...]
    base_rect: tuple[float, float, float, float]
    eyes_rect: tuple[float, float, float, float]
    mouth_rect: tuple[float, float, float, float]
    overlay_rects: dict[str, tuple[float, float, float, float]]
    aspect: float  # the canvas's width over its height

    def stored_rects(self) -> dict[str, tuple[float, float, float, float]]:
        """The canvas rectangle each image (by name) is kept over: its layer's. Every
        image a layer binds shares that layer's rectangle, and outside it the image is
        transparent, so a renderer may keep only that part of it."""
        rects = {}
        for images in self.expressions.values():
            rects[images.base] = self.base_rect
            rects[images.eyes_open] = rects[images.eyes_closed] = self.eyes_rect
            rects.update((o, self.overlay_rects[o]) for o in images.overlays)
        rects.update((name, self.mouth_rect) for name in self.viseme_images)
        return rects

    def base_rect_at(self, state: AvatarState) -> tuple[float, float, float, float]:
        """The base's rectangle, reaching below the canvas by as much as breathing in and
        the placement (a bounce, a tilt's corner) lift the canvas's bottom edge: a figure
        that stands on that edge, cut off by it, goes on below it (textures clamp, so its
        bottom row is repeated) instead of showing a gap under it, down to the canvas's
        bottom edge, below which nothing is drawn. Unlifted, the rectangle itself."""
        x0, y0, x1, y1 = self.base_rect
        if y1 < 1.0:
            return self.base_rect
        _, offset_y, roll, squash = state.placement()
        breath_offset, breath_scale = breath_transform(state.breath)
        lift = (max(0.0, offset_y) + abs(math.sin(roll)) * 0.5 * self.aspect) / (1.0 - squash)
        lift += max(0.0, breath_offset)
        if lift == 0.0:
            return self.base_rect
        return (x0, y0, x1, 1.0 + lift / breath_scale)

    def layers(self, state: AvatarState, opacity: float = 1.0) -> list[LayerDraw]:
        """The frame of `state`, bottom layer first: base, eyes, the overlays of the two
        expressions it shows, mouth (its dominant drawing alone)."""
        a, b, s = expression_pair(state.expressions)
        ea = self.expressions.get(a, self.expressions[NEUTRAL])
        eb = self.expressions.get(b, self.expressions[NEUTRAL])
        blink = state.eyes_closed
        base_fade = s if ea.base != eb.base else 0.0
        eyes_fade = s if (ea.eyes_open, ea.eyes_closed) != (eb.eyes_open, eb.eyes_closed) else 0.0
        draws = [
            LayerDraw(self.base_rect_at(state), (ea.base, ea.base, eb.base, eb.base), 0.0, base_fade,
                      opacity),
            LayerDraw(self.eyes_rect, (ea.eyes_open, ea.eyes_closed, eb.eyes_open, eb.eyes_closed),
                      blink, eyes_fade, opacity),
        ]
        for expression, weight in ((ea, 1.0 - s), (eb, s)) if ea is not eb else ((ea, 1.0),):
            if weight > 0.0:
                draws.extend(LayerDraw(self.overlay_rects[o], (o, o, o, o), 0.0, 0.0, opacity * weight)
                             for o in expression.overlays)
        mouth = self.viseme_images[state.mouth_pose().dominant]
        draws.append(LayerDraw(self.mouth_rect, (mouth, mouth, mouth, mouth), 0.0, 0.0, opacity))
        return draws


def sprite_layout(rig: SpriteRigLike) -> SpriteLayout:
    """The rig's layout; the rig's images are checked first (rig_images)."""
    images = rig_images(rig)
    expressions = {NEUTRAL: ExpressionImages("base", "eyes_open", "eyes_closed", ())}
    for name, layers in rig.expressions.items():
        own = {layer: f"{name}:{layer}" if layer in layers.swaps else layer for layer in SWAPPABLE}
        expressions[name] = ExpressionImages(
            own["base"], own["eyes_open"], own["eyes_closed"],
            tuple(f"{name}:overlay{i}" for i in range(len(layers.overlays))))
    # A viseme the rig does not draw shows the rest mouth (or any mouth at all).
    rest = rig.viseme_to_mouth.get("sil", next(iter(rig.mouths)))
    return SpriteLayout(
        expressions=expressions,
        viseme_images=tuple(f"mouth:{rig.viseme_to_mouth.get(v, rest)}" for v in OVR_VISEMES),
        base_rect=coverage_rect(*(images[e.base] for e in expressions.values())),
        eyes_rect=coverage_rect(*(images[n] for e in expressions.values()
                                  for n in (e.eyes_open, e.eyes_closed))),
        mouth_rect=coverage_rect(*rig.mouths.values()),
        overlay_rects={o: coverage_rect(images[o]) for e in expressions.values() for o in e.overlays},
        aspect=rig.canvas_size[0] / rig.canvas_size[1],
    )


def letterbox_fit(canvas_size: tuple[int, int], viewport: tuple[int, int]) -> tuple[float, float]:
    """Fraction of the viewport the canvas covers on each axis when it keeps its aspect
    ratio, centred (1, 1 with no canvas)."""
    cw, ch = canvas_size
    vw, vh = viewport
    if not cw or not ch:
        return (1.0, 1.0)
    canvas_aspect, view_aspect = cw / ch, vw / vh
    if view_aspect > canvas_aspect:
        return (canvas_aspect / view_aspect, 1.0)
    return (1.0, view_aspect / canvas_aspect)


def read_framebuffer(width: int, height: int) -> np.ndarray:
    """The bound framebuffer's width×height pixels as H×W×4 uint8 RGBA, top row first."""
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    data = GL.glReadPixels(0, 0, width, height, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
    return np.frombuffer(data, dtype=np.uint8).reshape(height, width, 4)[::-1].copy()


def unit_quad() -> tuple[int, int]:
    """(vao, vbo) of the unit square as a 4-vertex triangle strip in attribute 0, the
    quad every textured layer is drawn with (its shader places it)."""
    quad = np.array([0, 0, 0, 1, 1, 0, 1, 1], dtype=np.float32)
    vao = int(GL.glGenVertexArrays(1))
    vbo = int(GL.glGenBuffers(1))
    GL.glBindVertexArray(vao)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, quad.nbytes, quad, GL.GL_STATIC_DRAW)
    GL.glEnableVertexAttribArray(0)
    GL.glVertexAttribPointer(0, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))
    GL.glBindVertexArray(0)
    return vao, vbo


def _log_text(info) -> str:
    """A GLSL info log as text (PyOpenGL returns bytes or str by version)."""
    return (info.decode(errors="replace") if isinstance(info, bytes) else str(info)).strip()


def _compile(kind: int, path, defines: tuple[str, ...] = ()) -> int:
    shader = GL.glCreateShader(kind)
    version, _, rest = path.read_text().partition("\n")
    GL.glShaderSource(shader, "\n".join((version, *(f"#define {d}" for d in defines), rest)))
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        text = _log_text(GL.glGetShaderInfoLog(shader))
        GL.glDeleteShader(shader)
        raise ShaderError(f"{path.name} failed to compile:\n{text}")
    return shader


def build_program(vertex_path, fragment_path, defines: tuple[str, ...] = ()) -> int:
    """Compile and link a program from two GLSL files, each with `defines` #defined after
    its #version line; ShaderError with the log if not."""
    vs = _compile(GL.GL_VERTEX_SHADER, vertex_path, defines)
    try:
        fs = _compile(GL.GL_FRAGMENT_SHADER, fragment_path, defines)
    except ShaderError:
        GL.glDeleteShader(vs)
        raise
    program = GL.glCreateProgram()
    GL.glAttachShader(program, vs)
    GL.glAttachShader(program, fs)
    GL.glLinkProgram(program)
    GL.glDeleteShader(vs)
    GL.glDeleteShader(fs)
    if not GL.glGetProgramiv(program, GL.GL_LINK_STATUS):
        text = _log_text(GL.glGetProgramInfoLog(program))
        GL.glDeleteProgram(program)
        raise ShaderError(f"{vertex_path.name} + {fragment_path.name} failed to link:\n{text}")
    return program


class SpriteGLRenderer:
    """Draws a rig at an avatar state: mouth, blink, breathing, expression, placement.

    `clear_color` is straight RGBA in 0..1; alpha 0 gives a transparent background
    for compositors (OBS) that read the alpha channel.
    """

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        self.clear_color = clear_color
        self.shaders_dir = shaders_dir
        self.program = 0
        self._fade_program = 0
        self._vao = 0
        self._vbo = 0
        self._uniforms: dict[int, dict[str, int]] = {}  # by program
        self._textures: dict[str, int] = {}
        self._stored: dict[str, tuple[float, float, float, float]] = {}  # by image name
        self._layout: SpriteLayout | None = None
        self._state = AvatarState()  # draw()'s scratch
        self.canvas_size = (0, 0)
        self.viewport = (1, 1)
        self._fit = (1.0, 1.0)

    def initialize(self) -> None:
        """Compile the shaders and make the quad. Once per GL context."""
        # Two programs: llvmpipe samples both sides of a uniform branch, so one program
        # with the expression fade's second pair behind an `if` drew a still frame of
        # the bundled avatar at 512 px in 2.31 ms; apart, 1.96 ms, as before expressions
        # (1.89 ms); an expression fade's frame 2.34 ms (best P50 of 4 runs, 2-vCPU VM).
        self.program = self._build(())
        self._fade_program = self._build(("FADE",))
        self._vao, self._vbo = unit_quad()

    def _build(self, defines: tuple[str, ...]) -> int:
        program = build_program(self.shaders_dir / "sprite.vert", self.shaders_dir / "sprite.frag",
                                defines)
        self._uniforms[program] = {name: GL.glGetUniformLocation(program, name) for name in
                                   ("u_offset_y", "u_scale_y", "u_fit", "u_rect", "u_stored", "u_place_x",
                                    "u_place_y", *_SAMPLERS, "u_mix", "u_alpha")}
        GL.glUseProgram(program)
        for unit, sampler in enumerate(_SAMPLERS):
            GL.glUniform1i(self._uniforms[program][sampler], unit)
        GL.glUseProgram(0)
        return program

    def set_rig(self, rig: SpriteRigLike) -> None:
        """Upload the rig's images that its layers draw as textures (replacing any previous
        rig's), each only over its layer's rectangle (SpriteLayout.stored_rects).

        The whole canvas of each was uploaded before, on the GUI thread once per output at
        every avatar switch: 26 MB of textures per output for the bundled avatar's 25
        images at 512 px, where the rectangles hold 7.2% of those pixels. set_rig and the
        first frame, 11.91 -> 5.21 ms P50 (bench/avatar_switch.py, 2-vCPU VM, llvmpipe:
        bench/results/avatar_switch_vm_2core_epyc.json)."""
        layout = sprite_layout(rig)
        images = rig_images(rig)
        self._delete_textures()
        self._stored = layout.stored_rects()
        self._textures = {name: upload_texture(images[name], rect)
                          for name, rect in self._stored.items()}
        self._layout = layout
        self.canvas_size = rig.canvas_size
        self._update_fit()

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels; the canvas is letterboxed inside it."""
        self.viewport = (max(1, width), max(1, height))
        self._update_fit()

    def _update_fit(self) -> None:
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """draw_state for a neutral, unmoved avatar at this mouth, blink and breath."""
        self.draw_state(still_state(pose, blink, breath, self._state), opacity)

    def draw_state(self, state: AvatarState, opacity: float = 1.0) -> None:
        """Clear and composite the avatar at `state` into the bound framebuffer.
        `opacity` fades the whole avatar (all layers alike)."""
        r, g, b, a = self.clear_color
        GL.glViewport(0, 0, self.viewport[0], self.viewport[1])
        GL.glClearColor(r * a, g * a, b * a, a)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        if self._layout is None:
            return
        offset_y, scale_y = breath_transform(state.breath)
        place = placement_matrix(state.placement(), self.canvas_size)
        GL.glDisable(GL.GL_DEPTH_TEST)
        GL.glEnable(GL.GL_BLEND)
        GL.glEnable(GL.GL_CLIP_DISTANCE0)
        GL.glBlendFunc(GL.GL_ONE, GL.GL_ONE_MINUS_SRC_ALPHA)
        GL.glBindVertexArray(self._vao)
        textures = self._textures
        current = 0
        for layer in self._layout.layers(state, opacity):
            program = self._fade_program if layer.outer > 0.0 else self.program
            u = self._uniforms[program]
            if program != current:
                current = program
                GL.glUseProgram(program)
                GL.glUniform2f(u["u_fit"], self._fit[0], self._fit[1])
                GL.glUniform1f(u["u_offset_y"], offset_y)
                GL.glUniform1f(u["u_scale_y"], scale_y)
                GL.glUniform3f(u["u_place_x"], *place[0])
                GL.glUniform3f(u["u_place_y"], *place[1])
            GL.glUniform4f(u["u_rect"], *layer.rect)
            GL.glUniform4f(u["u_stored"], *self._stored[layer.images[0]])
            for unit, name in enumerate(layer.images if program == self._fade_program
                                        else layer.images[:2]):
                GL.glActiveTexture(GL.GL_TEXTURE0 + unit)
                GL.glBindTexture(GL.GL_TEXTURE_2D, textures[name])
            GL.glUniform2f(u["u_mix"], layer.inner, layer.outer)
            GL.glUniform1f(u["u_alpha"], layer.alpha)
            GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glDisable(GL.GL_CLIP_DISTANCE0)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def read_pixels(self) -> np.ndarray:
        """The bound framebuffer as HxWx4 uint8 RGBA (premultiplied), top row first."""
        return read_framebuffer(*self.viewport)

    def _delete_textures(self) -> None:
        if self._textures:
            GL.glDeleteTextures(len(self._textures), list(self._textures.values()))
        self._textures = {}
        self._stored = {}
        self._layout = None

    def release(self) -> None:
        """Delete every GL object this renderer made (context must be current)."""
        self._delete_textures()
        if self._vbo:
            GL.glDeleteBuffers(1, [self._vbo])
        if self._vao:
            GL.glDeleteVertexArrays(1, [self._vao])
        for program in (self.program, self._fade_program):
            if program:
                GL.glDeleteProgram(program)
        self.program = self._fade_program = self._vao = self._vbo = 0
        self._uniforms = {}
