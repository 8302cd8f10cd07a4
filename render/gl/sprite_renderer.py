"""Composites an avatar rig with OpenGL: base, then eyes, then mouth, each a textured
canvas-sized quad with a two-texture cross-fade (shaders/sprite.*).

Every GL object is made once (program, quad, one texture per rig image); a draw only
binds textures and sets a few uniforms. All methods need the caller's GL context to be
current (QOpenGLWidget makes it so around initializeGL/paintGL).
"""

from __future__ import annotations

import ctypes
from typing import Protocol

import numpy as np
from OpenGL import GL

from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from pipeline.core.visemes import OVR_VISEMES
from render.timing.idle_motion import breath_transform


class ShaderError(RuntimeError):
    """A shader failed to compile or link; the message carries the GLSL log."""


class Rig(Protocol):
    canvas_size: tuple[int, int]
    base: np.ndarray
    eyes_open: np.ndarray
    eyes_closed: np.ndarray
    mouths: dict[str, np.ndarray]
    viseme_to_mouth: dict[str, str]


def premultiplied(image: np.ndarray) -> np.ndarray:
    """RGBA8 straight alpha → RGBA8 premultiplied alpha (rounded)."""
    rgba = image.astype(np.uint16)
    out = np.empty_like(image)
    out[..., :3] = (rgba[..., :3] * rgba[..., 3:4] + 127) // 255
    out[..., 3] = image[..., 3]
    return out


def coverage_rect(*images: np.ndarray) -> tuple[float, float, float, float]:
    """Canvas-unit rectangle (x0, y0, x1, y1) holding every non-transparent pixel of
    the images, one pixel wider on each side for linear filtering; (0, 0, 0, 0) if none."""
    alpha = np.zeros(images[0].shape[:2], dtype=bool)
    for image in images:
        alpha |= image[..., 3] > 0
    rows, cols = np.nonzero(alpha.any(axis=1))[0], np.nonzero(alpha.any(axis=0))[0]
    if not len(rows):
        return (0.0, 0.0, 0.0, 0.0)
    h, w = alpha.shape
    return (max(cols[0] - 1, 0) / w, max(rows[0] - 1, 0) / h,
            min(cols[-1] + 2, w) / w, min(rows[-1] + 2, h) / h)


def upload_texture(image: np.ndarray) -> int:
    """A new RGBA8 texture (linear filtering, clamped) holding a straight-alpha RGBA8
    image as premultiplied alpha; the image's top row is texture row 0."""
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    h, w = image.shape[:2]
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_RGBA,
                    GL.GL_UNSIGNED_BYTE, np.ascontiguousarray(premultiplied(image)))
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_S, GL.GL_CLAMP_TO_EDGE)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_WRAP_T, GL.GL_CLAMP_TO_EDGE)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return tex


def rig_images(rig: Rig) -> dict[str, np.ndarray]:
    """The rig's images by name ("base", "eyes_open", "eyes_closed", "mouth:NAME"), checked:
    ValueError unless each is uint8 RGBA at the canvas size and every viseme's drawing
    exists."""
    w, h = rig.canvas_size
    images = {"base": rig.base, "eyes_open": rig.eyes_open, "eyes_closed": rig.eyes_closed}
    images.update({f"mouth:{name}": img for name, img in rig.mouths.items()})
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


def _compile(kind: int, path) -> int:
    shader = GL.glCreateShader(kind)
    GL.glShaderSource(shader, path.read_text())
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        text = _log_text(GL.glGetShaderInfoLog(shader))
        GL.glDeleteShader(shader)
        raise ShaderError(f"{path.name} failed to compile:\n{text}")
    return shader


def build_program(vertex_path, fragment_path) -> int:
    """Compile and link a program from two GLSL files; ShaderError with the log if not."""
    vs = _compile(GL.GL_VERTEX_SHADER, vertex_path)
    try:
        fs = _compile(GL.GL_FRAGMENT_SHADER, fragment_path)
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


class GLRenderer:
    """Draws a rig at a mouth pose, blink weight and breathing phase.

    `clear_color` is straight RGBA in 0..1; alpha 0 gives a transparent background
    for compositors (OBS) that read the alpha channel.
    """

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        self.clear_color = clear_color
        self.shaders_dir = shaders_dir
        self.program = 0
        self._vao = 0
        self._vbo = 0
        self._uniforms: dict[str, int] = {}
        self._textures: list[int] = []
        self._base = self._eyes_open = self._eyes_closed = 0
        self._viseme_tex: list[int] = []
        self._base_rect = self._eyes_rect = self._mouth_rect = (0.0, 0.0, 0.0, 0.0)
        self.canvas_size = (0, 0)
        self.viewport = (1, 1)
        self._fit = (1.0, 1.0)

    def initialize(self) -> None:
        """Compile the shaders and make the quad. Once per GL context."""
        self.program = build_program(self.shaders_dir / "sprite.vert",
                                     self.shaders_dir / "sprite.frag")
        self._uniforms = {name: GL.glGetUniformLocation(self.program, name) for name in
                          ("u_offset_y", "u_scale_y", "u_fit", "u_rect", "u_tex_a",
                           "u_tex_b", "u_mix", "u_alpha")}
        self._vao, self._vbo = unit_quad()
        GL.glUseProgram(self.program)
        GL.glUniform1i(self._uniforms["u_tex_a"], 0)
        GL.glUniform1i(self._uniforms["u_tex_b"], 1)
        GL.glUseProgram(0)

    def set_rig(self, rig: Rig) -> None:
        """Upload the rig's images as textures (replacing any previous rig's)."""
        w, h = rig.canvas_size
        images = rig_images(rig)
        self._delete_textures()
        textures = {name: upload_texture(img) for name, img in images.items()}
        self._textures = list(textures.values())
        self._base = textures["base"]
        self._eyes_open = textures["eyes_open"]
        self._eyes_closed = textures["eyes_closed"]
        # A viseme the rig does not draw shows the rest mouth (or any mouth at all).
        rest = rig.viseme_to_mouth.get("sil", next(iter(rig.mouths)))
        self._viseme_tex = [textures[f"mouth:{rig.viseme_to_mouth.get(v, rest)}"]
                            for v in OVR_VISEMES]
        self._base_rect = coverage_rect(rig.base)
        self._eyes_rect = coverage_rect(rig.eyes_open, rig.eyes_closed)
        self._mouth_rect = coverage_rect(*rig.mouths.values())
        self.canvas_size = (w, h)
        self._update_fit()

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels; the canvas is letterboxed inside it."""
        self.viewport = (max(1, width), max(1, height))
        self._update_fit()

    def _update_fit(self) -> None:
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """Clear and composite base → eyes → mouth into the bound framebuffer.
        `opacity` fades the whole avatar (all layers alike)."""
        r, g, b, a = self.clear_color
        GL.glViewport(0, 0, self.viewport[0], self.viewport[1])
        GL.glClearColor(r * a, g * a, b * a, a)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        if not self._viseme_tex:
            return
        u = self._uniforms
        offset_y, scale_y = breath_transform(breath)
        GL.glDisable(GL.GL_DEPTH_TEST)
        GL.glEnable(GL.GL_BLEND)
        GL.glBlendFunc(GL.GL_ONE, GL.GL_ONE_MINUS_SRC_ALPHA)
        GL.glUseProgram(self.program)
        GL.glBindVertexArray(self._vao)
        GL.glUniform2f(u["u_fit"], self._fit[0], self._fit[1])
        GL.glUniform1f(u["u_offset_y"], offset_y)
        GL.glUniform1f(u["u_scale_y"], scale_y)
        GL.glUniform1f(u["u_alpha"], opacity)
        self._layer(self._base_rect, self._base, self._base, 0.0)
        self._layer(self._eyes_rect, self._eyes_open, self._eyes_closed, blink)
        self._layer(self._mouth_rect, self._viseme_tex[pose.viseme_a],
                    self._viseme_tex[pose.viseme_b], pose.mix)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def _layer(self, rect: tuple[float, float, float, float], tex_a: int, tex_b: int,
               mix: float) -> None:
        GL.glUniform4f(self._uniforms["u_rect"], rect[0], rect[1], rect[2], rect[3])
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex_a)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex_b)
        GL.glUniform1f(self._uniforms["u_mix"], mix)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)

    def read_pixels(self) -> np.ndarray:
        """The bound framebuffer as HxWx4 uint8 RGBA (premultiplied), top row first."""
        return read_framebuffer(*self.viewport)

    def _delete_textures(self) -> None:
        if self._textures:
            GL.glDeleteTextures(len(self._textures), self._textures)
        self._textures = []
        self._viseme_tex = []

    def release(self) -> None:
        """Delete every GL object this renderer made (context must be current)."""
        self._delete_textures()
        if self._vbo:
            GL.glDeleteBuffers(1, [self._vbo])
        if self._vao:
            GL.glDeleteVertexArrays(1, [self._vao])
        if self.program:
            GL.glDeleteProgram(self.program)
        self.program = self._vao = self._vbo = 0
