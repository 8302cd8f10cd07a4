"""Draws a photo rig with OpenGL, with the same interface as GLRenderer.

Per frame: the rig's vertex records for the pose and blink go up in one buffer upload;
the mouth frame, a texture of the rig's mouth rectangle (as many texels as it shows
pixels, at most one per picture pixel), gets the mouth/jaw skin mesh and the mouth
cavity warped into it; the rest of the rectangle holds the still picture, drawn once. It is a complete picture of that rectangle, so any
producer of mouth frames (a CUDA one) can stand in. Then the still picture is drawn,
the mouth frame over its rectangle (faded in at its edges) and the eye meshes on top:
five draws, each with a shader that does only its own part (llvmpipe runs both sides
of a branch: one shader for skin and cavity cost four times as much per pixel, one for
picture and mouth frame twice).

All methods need the caller's GL context to be current.
"""

from __future__ import annotations

import ctypes

import numpy as np
from OpenGL import GL

from pipeline.frames import MouthPose
from pipeline.resources import SHADERS_DIR
from render.gl_renderer import build_program, letterbox_fit, read_framebuffer, upload_texture
from render.idle_motion import breath_transform
from render.photo_rig import RECORD, STATIC, PhotoRig

_FLOAT = 4


class PhotoRenderer:
    """Draws a PhotoRig at a mouth pose, blink weight and breathing phase.

    `clear_color` is straight RGBA in 0..1; alpha 0 gives a transparent background."""

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        self.clear_color = clear_color
        self.shaders_dir = shaders_dir
        self.skin_program = self.cavity_program = self.picture_program = self.mouth_program = 0
        self._skin_u: dict[str, int] = {}
        self._cavity_u: dict[str, int] = {}
        self._picture_u: dict[str, int] = {}
        self._mouth_u: dict[str, int] = {}
        self._quad_vao = self._quad_vbo = self._rect_vao = self._rect_vbo = 0
        self._mesh_vao = self._dynamic_vbo = self._static_vbo = self._ebo = 0
        self._picture = 0
        self.mouth_texture = 0
        self._mouth_fbo = 0
        self._rig: PhotoRig | None = None
        self._draws: dict[str, tuple[int, int]] = {}
        self.canvas_size = (0, 0)
        self.mouth_size = (0, 0)
        self.viewport = (1, 1)
        self._fit = (1.0, 1.0)

    def initialize(self) -> None:
        """Compile the shaders and make the buffers. Once per GL context."""
        d = self.shaders_dir
        self.skin_program = build_program(d / "photo_skin.vert", d / "photo_skin.frag")
        self.cavity_program = build_program(d / "photo_cavity.vert", d / "photo_cavity.frag")
        self.picture_program = build_program(d / "sprite.vert", d / "photo_picture.frag")
        self.mouth_program = build_program(d / "sprite.vert", d / "photo_mouth.frag")
        uniforms = lambda program, *names: {n: GL.glGetUniformLocation(program, n) for n in names}  # noqa: E731
        self._skin_u = uniforms(self.skin_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                "u_opacity", "u_clear")
        self._cavity_u = uniforms(self.cavity_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                  "u_mouth_width", "u_teeth", "u_down")
        self._picture_u = uniforms(self.picture_program, "u_rect", "u_offset_y", "u_scale_y", "u_fit",
                                   "u_picture", "u_breath", "u_opacity", "u_clear")
        self._mouth_u = uniforms(self.mouth_program, "u_rect", "u_offset_y", "u_scale_y", "u_fit",
                                 "u_picture", "u_mouth", "u_mouth_rect", "u_canvas", "u_feather",
                                 "u_opacity", "u_clear")
        for program, u in ((self.skin_program, self._skin_u), (self.cavity_program, self._cavity_u),
                           (self.picture_program, self._picture_u), (self.mouth_program, self._mouth_u)):
            GL.glUseProgram(program)
            GL.glUniform1i(u["u_picture"], 0)
        GL.glUniform1i(self._mouth_u["u_mouth"], 1)
        GL.glUseProgram(self.picture_program)
        GL.glUniform4f(self._picture_u["u_rect"], 0.0, 0.0, 1.0, 1.0)
        GL.glUniform1f(self._picture_u["u_offset_y"], 0.0)
        GL.glUniform1f(self._picture_u["u_scale_y"], 1.0)
        GL.glUseProgram(0)

        quad = np.array([0, 0, 0, 1, 1, 0, 1, 1], dtype=np.float32)
        self._quad_vao = int(GL.glGenVertexArrays(1))
        self._quad_vbo = int(GL.glGenBuffers(1))
        GL.glBindVertexArray(self._quad_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._quad_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, quad.nbytes, quad, GL.GL_STATIC_DRAW)
        GL.glEnableVertexAttribArray(0)
        GL.glVertexAttribPointer(0, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))

        # The mouth rectangle in canvas pixels, as skin that lies still (position = source).
        self._rect_vao = int(GL.glGenVertexArrays(1))
        self._rect_vbo = int(GL.glGenBuffers(1))
        GL.glBindVertexArray(self._rect_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._rect_vbo)
        for location in (0, 1):
            GL.glEnableVertexAttribArray(location)
            GL.glVertexAttribPointer(location, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))

        self._mesh_vao = int(GL.glGenVertexArrays(1))
        self._dynamic_vbo, self._static_vbo, self._ebo = (int(b) for b in GL.glGenBuffers(3))
        GL.glBindVertexArray(self._mesh_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        # Record: four vec2 (position, two picture positions, depths), then teeth;
        # the skin shader reads only the first two.
        for location in range(5):
            GL.glEnableVertexAttribArray(location)
            GL.glVertexAttribPointer(location, 2 if location < 4 else 1, GL.GL_FLOAT, GL.GL_FALSE,
                                     RECORD * _FLOAT, ctypes.c_void_p(2 * location * _FLOAT))
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._static_vbo)
        GL.glEnableVertexAttribArray(5)
        GL.glVertexAttribPointer(5, STATIC, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))
        GL.glBindBuffer(GL.GL_ELEMENT_ARRAY_BUFFER, self._ebo)
        GL.glBindVertexArray(0)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    def set_rig(self, rig: PhotoRig) -> None:
        """Upload the rig's picture, mesh and mouth frame target (replacing any previous)."""
        w, h = rig.canvas_size
        if rig.image.dtype != np.uint8 or rig.image.shape != (h, w, 4):
            raise ValueError(f"rig image is {rig.image.dtype} {rig.image.shape}; expected uint8 {(h, w, 4)}")
        self._delete_rig_objects()
        self._picture = upload_texture(rig.image)
        # Mipmaps for a picture shown smaller than it is (_fit_mouth_frame picks the filter).
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glGenerateMipmap(GL.GL_TEXTURE_2D)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        x0, y0, x1, y1 = rig.mouth_rect
        corners = np.array([[x0, y0], [x0, y1], [x1, y0], [x1, y1]], dtype=np.float32)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._rect_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, corners.nbytes, corners, GL.GL_STATIC_DRAW)

        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, rig.rest.nbytes, rig.rest, GL.GL_STREAM_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._static_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, rig.static.nbytes, np.ascontiguousarray(rig.static), GL.GL_STATIC_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        groups = {"skin": rig.mouth_triangles, "cavity": rig.cavity_triangles, "eyes": rig.eye_triangles}
        indices = np.concatenate([t.ravel() for t in groups.values()]).astype(np.uint32)
        GL.glBindVertexArray(self._mesh_vao)
        GL.glBufferData(GL.GL_ELEMENT_ARRAY_BUFFER, indices.nbytes, indices, GL.GL_STATIC_DRAW)
        GL.glBindVertexArray(0)
        first = 0
        for name, triangles in groups.items():
            self._draws[name] = (first, triangles.size)
            first += triangles.size

        GL.glUseProgram(self.skin_program)
        GL.glUniform2f(self._skin_u["u_canvas"], w, h)
        GL.glUseProgram(self.cavity_program)
        GL.glUniform2f(self._cavity_u["u_canvas"], w, h)
        GL.glUniform1f(self._cavity_u["u_mouth_width"], rig.mouth_width)
        GL.glUniform1f(self._cavity_u["u_teeth"], rig.teeth_height)
        GL.glUniform2f(self._cavity_u["u_down"], rig.face_down[0] / w, rig.face_down[1] / h)
        x0, y0, x1, y1 = rig.mouth_rect
        GL.glUseProgram(self.mouth_program)
        GL.glUniform4f(self._mouth_u["u_rect"], x0 / w, y0 / h, x1 / w, y1 / h)
        GL.glUniform4f(self._mouth_u["u_mouth_rect"], x0 / w, y0 / h, x1 / w, y1 / h)
        GL.glUniform2f(self._mouth_u["u_canvas"], w, h)
        GL.glUniform1f(self._mouth_u["u_feather"], rig.frame_feather)
        GL.glUseProgram(0)
        self._rig = rig
        self.canvas_size = (w, h)
        self._fit = letterbox_fit(self.canvas_size, self.viewport)
        self._fit_mouth_frame()

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels; the canvas is letterboxed inside it."""
        self.viewport = (max(1, width), max(1, height))
        self._fit = letterbox_fit(self.canvas_size, self.viewport)
        if self._rig is not None:
            self._fit_mouth_frame()

    def _fit_mouth_frame(self) -> None:
        """Size the mouth frame to its rectangle as shown: one texel per canvas pixel, or
        per screen pixel when the canvas is shown smaller. Then the picture is sampled
        from the mipmap level nearest that scale; the scale is the same everywhere, so no
        level seam shows, at half the cost of trilinear filtering on llvmpipe. A new
        frame gets the still picture once: the mesh's outline never moves, so outside it
        the frame never changes."""
        scale = min(1.0, self._fit[0] * self.viewport[0] / self.canvas_size[0])
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER,
                           GL.GL_LINEAR if scale >= 1.0 else GL.GL_LINEAR_MIPMAP_NEAREST)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        x0, y0, x1, y1 = self._rig.mouth_rect
        size = (max(1, round((x1 - x0) * scale)), max(1, round((y1 - y0) * scale)))
        if self.mouth_texture and size == self.mouth_size:
            return
        self._delete_mouth_frame()
        self.mouth_size = size
        self.mouth_texture = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.mouth_texture)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, *size, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
        for param, value in ((GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR), (GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR),
                             (GL.GL_TEXTURE_WRAP_S, GL.GL_CLAMP_TO_EDGE), (GL.GL_TEXTURE_WRAP_T, GL.GL_CLAMP_TO_EDGE)):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, param, value)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        try:
            self._mouth_fbo = _framebuffer(self.mouth_texture, f"a {size[0]}x{size[1]} mouth frame")
            GL.glViewport(0, 0, *size)
            GL.glDisable(GL.GL_BLEND)
            GL.glUseProgram(self.skin_program)
            scale_xy, offset = self._mouth_transform()
            GL.glUniform2f(self._skin_u["u_scale"], *scale_xy)
            GL.glUniform2f(self._skin_u["u_offset"], *offset)
            GL.glUniform1f(self._skin_u["u_opacity"], 1.0)
            GL.glUniform4f(self._skin_u["u_clear"], 0.0, 0.0, 0.0, 0.0)
            GL.glActiveTexture(GL.GL_TEXTURE0)
            GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
            GL.glBindVertexArray(self._rect_vao)
            GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
            GL.glBindVertexArray(0)
            GL.glUseProgram(0)
        finally:
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)
            GL.glViewport(*viewport)

    def _mouth_transform(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """Scale and offset from canvas pixels to the mouth frame's clip space; row 0 of
        the frame is the rectangle's top row, as in every image texture here."""
        x0, y0, x1, y1 = self._rig.mouth_rect
        w, h = x1 - x0, y1 - y0
        return (2.0 / w, 2.0 / h), (-2.0 * x0 / w - 1.0, -2.0 * y0 / h - 1.0)

    # -- per frame ----------------------------------------------------------------

    def update(self, pose: MouthPose, blink: float) -> None:
        """Upload the vertex records for a pose and eyelid closure."""
        vertices = self._rig.vertices_at(pose, blink)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, vertices.nbytes, vertices)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    def render_mouth_frame(self) -> int:
        """Warp the mouth/jaw region at the uploaded pose into `mouth_texture` and return
        it. The caller's framebuffer binding and viewport are kept."""
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self._mouth_fbo)
        GL.glViewport(0, 0, *self.mouth_size)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        scale, offset = self._mouth_transform()
        self._draw_mesh("skin", scale, offset, 1.0, (0.0, 0.0, 0.0, 0.0))
        self._draw_mesh("cavity", scale, offset)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
        GL.glViewport(*viewport)
        return self.mouth_texture

    def composite(self, breath: float, opacity: float = 1.0) -> None:
        """Clear the bound framebuffer and draw the picture with the current mouth frame
        and the eyes, letterboxed, faded by `opacity`. Breathing moves the picture
        within its own outline (see photo_composite.frag)."""
        r, g, b, a = self.clear_color
        clear = (r * a, g * a, b * a, a)
        vw, vh = self.viewport
        GL.glViewport(0, 0, vw, vh)
        GL.glClearColor(*clear)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        offset_y, scale_y = breath_transform(breath)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.mouth_texture)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glBindVertexArray(self._quad_vao)
        # The picture stays put and breathes inside its outline (photo_picture.frag); the
        # mouth frame's quad moves with breathing like the eyes.
        u = self._picture_u
        GL.glUseProgram(self.picture_program)
        GL.glUniform2f(u["u_fit"], *self._fit)
        GL.glUniform2f(u["u_breath"], offset_y, scale_y)
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        u = self._mouth_u
        GL.glUseProgram(self.mouth_program)
        GL.glUniform2f(u["u_fit"], *self._fit)
        GL.glUniform1f(u["u_offset_y"], offset_y)
        GL.glUniform1f(u["u_scale_y"], scale_y)
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        # The eye meshes in canvas pixels through the same letterbox and breathing as
        # sprite.vert applies to the mouth quad.
        w, h = self.canvas_size
        fx, fy = self._fit
        self._draw_mesh("eyes", (2.0 * fx / w, -2.0 * scale_y * fy / h),
                        (-fx, (2.0 * scale_y + 2.0 * offset_y - 1.0) * fy), opacity, clear)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """Clear and draw the avatar into the bound framebuffer."""
        if self._rig is None:
            r, g, b, a = self.clear_color
            GL.glViewport(0, 0, *self.viewport)
            GL.glClearColor(r * a, g * a, b * a, a)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            return
        self.update(pose, blink)
        self.render_mouth_frame()
        self.composite(breath, opacity)

    def _draw_mesh(self, group: str, scale, offset, opacity: float = 1.0, clear=None) -> None:
        """One triangle group: "cavity" with its own shader, "skin" and "eyes" as skin
        faded by `opacity` over `clear`."""
        first, count = self._draws[group]
        cavity = group == "cavity"
        u = self._cavity_u if cavity else self._skin_u
        GL.glUseProgram(self.cavity_program if cavity else self.skin_program)
        GL.glUniform2f(u["u_scale"], *scale)
        GL.glUniform2f(u["u_offset"], *offset)
        if not cavity:
            GL.glUniform1f(u["u_opacity"], opacity)
            GL.glUniform4f(u["u_clear"], *clear)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glBindVertexArray(self._mesh_vao)
        GL.glDrawElements(GL.GL_TRIANGLES, count, GL.GL_UNSIGNED_INT, ctypes.c_void_p(first * 4))
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def read_pixels(self) -> np.ndarray:
        """The bound framebuffer as HxWx4 uint8 RGBA (premultiplied), top row first."""
        return read_framebuffer(*self.viewport)

    def read_mouth_frame(self) -> np.ndarray:
        """The current mouth frame as H×W×4 uint8 RGBA (premultiplied), top row first."""
        mw, mh = self.mouth_size
        previous = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self._mouth_fbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        data = GL.glReadPixels(0, 0, mw, mh, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, previous)
        # Row 0 is the rectangle's top row already.
        return np.frombuffer(data, dtype=np.uint8).reshape(mh, mw, 4).copy()

    # -- teardown -----------------------------------------------------------------

    def _delete_mouth_frame(self) -> None:
        if self._mouth_fbo:
            GL.glDeleteFramebuffers(1, [self._mouth_fbo])
        if self.mouth_texture:
            GL.glDeleteTextures(1, [self.mouth_texture])
        self._mouth_fbo = self.mouth_texture = 0
        self.mouth_size = (0, 0)

    def _delete_rig_objects(self) -> None:
        self._delete_mouth_frame()
        if self._picture:
            GL.glDeleteTextures(1, [self._picture])
        self._picture = 0
        self._rig = None

    def release(self) -> None:
        """Delete every GL object this renderer made (context must be current)."""
        self._delete_rig_objects()
        buffers = [b for b in (self._quad_vbo, self._rect_vbo, self._dynamic_vbo, self._static_vbo, self._ebo) if b]
        if buffers:
            GL.glDeleteBuffers(len(buffers), buffers)
        arrays = [a for a in (self._quad_vao, self._rect_vao, self._mesh_vao) if a]
        if arrays:
            GL.glDeleteVertexArrays(len(arrays), arrays)
        for program in (self.skin_program, self.cavity_program, self.picture_program, self.mouth_program):
            if program:
                GL.glDeleteProgram(program)
        self.skin_program = self.cavity_program = self.picture_program = self.mouth_program = 0
        self._quad_vao = self._quad_vbo = self._rect_vao = self._rect_vbo = self._mesh_vao = 0
        self._dynamic_vbo = self._static_vbo = self._ebo = 0


def _framebuffer(texture: int, what: str) -> int:
    """A framebuffer with `texture` as its colour attachment, left bound."""
    fbo = int(GL.glGenFramebuffers(1))
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
    GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, texture, 0)
    status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
    if status != GL.GL_FRAMEBUFFER_COMPLETE:
        GL.glDeleteFramebuffers(1, [fbo])
        raise RuntimeError(f"the GL driver refused {what} (status 0x{int(status):x})")
    return fbo
