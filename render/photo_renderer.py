"""Draws a photo rig with OpenGL, with the same interface as GLRenderer.

Per frame: the rig's vertex records for the pose and blink go up in one buffer upload;
the mouth frame, a texture the size of the rig's mouth rectangle, gets the still
picture's rectangle (a blit, no shading) and the mouth/jaw mesh warped over it, so it
is a complete picture of that rectangle and any producer of mouth frames (a CUDA one)
can stand in; then the still picture is drawn with the mouth frame swapped into its
rectangle, and the eye meshes on top. Two shaded draws per pass, three in all.

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
        self.warp_program = 0
        self.composite_program = 0
        self._warp_u: dict[str, int] = {}
        self._comp_u: dict[str, int] = {}
        self._quad_vao = self._quad_vbo = 0
        self._mesh_vao = self._dynamic_vbo = self._static_vbo = self._ebo = 0
        self._picture = 0
        self.mouth_texture = 0
        self._mouth_fbo = 0
        self._picture_fbo = 0
        self._rig: PhotoRig | None = None
        self._mouth_count = self._eye_count = 0
        self.canvas_size = (0, 0)
        self.mouth_size = (0, 0)
        self.viewport = (1, 1)
        self._fit = (1.0, 1.0)

    def initialize(self) -> None:
        """Compile the shaders and make the buffers. Once per GL context."""
        d = self.shaders_dir
        self.warp_program = build_program(d / "photo_warp.vert", d / "photo_warp.frag")
        self.composite_program = build_program(d / "sprite.vert", d / "photo_composite.frag")
        self._warp_u = {n: GL.glGetUniformLocation(self.warp_program, n) for n in (
            "u_canvas", "u_scale", "u_offset", "u_picture", "u_mouth_width", "u_teeth", "u_down",
            "u_opacity", "u_clear")}
        self._comp_u = {n: GL.glGetUniformLocation(self.composite_program, n) for n in (
            "u_rect", "u_offset_y", "u_scale_y", "u_fit", "u_picture", "u_mouth", "u_mouth_rect",
            "u_mouth_inner", "u_breath", "u_opacity", "u_clear")}
        GL.glUseProgram(self.warp_program)
        GL.glUniform1i(self._warp_u["u_picture"], 0)
        GL.glUseProgram(self.composite_program)
        GL.glUniform1i(self._comp_u["u_picture"], 0)
        GL.glUniform1i(self._comp_u["u_mouth"], 1)
        GL.glUniform4f(self._comp_u["u_rect"], 0.0, 0.0, 1.0, 1.0)
        GL.glUniform1f(self._comp_u["u_offset_y"], 0.0)
        GL.glUniform1f(self._comp_u["u_scale_y"], 1.0)
        GL.glUseProgram(0)

        quad = np.array([0, 0, 0, 1, 1, 0, 1, 1], dtype=np.float32)
        self._quad_vao = int(GL.glGenVertexArrays(1))
        self._quad_vbo = int(GL.glGenBuffers(1))
        GL.glBindVertexArray(self._quad_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._quad_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, quad.nbytes, quad, GL.GL_STATIC_DRAW)
        GL.glEnableVertexAttribArray(0)
        GL.glVertexAttribPointer(0, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))

        self._mesh_vao = int(GL.glGenVertexArrays(1))
        self._dynamic_vbo, self._static_vbo, self._ebo = (int(b) for b in GL.glGenBuffers(3))
        GL.glBindVertexArray(self._mesh_vao)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        # Record: four vec2 (position, two picture positions, depths), then teeth.
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
        x0, y0, x1, y1 = rig.mouth_rect
        self.mouth_size = (x1 - x0, y1 - y0)
        self.mouth_texture = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.mouth_texture)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, *self.mouth_size, 0, GL.GL_RGBA,
                        GL.GL_UNSIGNED_BYTE, None)
        for param, value in ((GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR), (GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR),
                             (GL.GL_TEXTURE_WRAP_S, GL.GL_CLAMP_TO_EDGE), (GL.GL_TEXTURE_WRAP_T, GL.GL_CLAMP_TO_EDGE)):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, param, value)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        previous = GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING)
        self._mouth_fbo, self._picture_fbo = (int(f) for f in GL.glGenFramebuffers(2))
        for fbo, tex, what in ((self._mouth_fbo, self.mouth_texture, f"a {self.mouth_size} mouth frame"),
                               (self._picture_fbo, self._picture, f"a {w}x{h} picture as a blit source")):
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
            status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
            if status != GL.GL_FRAMEBUFFER_COMPLETE:
                GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, int(previous))
                raise RuntimeError(f"the GL driver refused {what} (status 0x{int(status):x})")
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, int(previous))

        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, rig.rest.nbytes, rig.rest, GL.GL_STREAM_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._static_vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, rig.static.nbytes, np.ascontiguousarray(rig.static), GL.GL_STATIC_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        indices = np.concatenate([rig.mouth_triangles.ravel(), rig.eye_triangles.ravel()]).astype(np.uint32)
        GL.glBindVertexArray(self._mesh_vao)
        GL.glBufferData(GL.GL_ELEMENT_ARRAY_BUFFER, indices.nbytes, indices, GL.GL_STATIC_DRAW)
        GL.glBindVertexArray(0)
        self._mouth_count = rig.mouth_triangles.size
        self._eye_count = rig.eye_triangles.size

        GL.glUseProgram(self.warp_program)
        GL.glUniform2f(self._warp_u["u_canvas"], w, h)
        GL.glUniform1f(self._warp_u["u_mouth_width"], rig.mouth_width)
        GL.glUniform1f(self._warp_u["u_teeth"], rig.teeth_height)
        GL.glUniform2f(self._warp_u["u_down"], rig.face_down[0] / w, rig.face_down[1] / h)
        GL.glUseProgram(self.composite_program)
        GL.glUniform4f(self._comp_u["u_mouth_rect"], x0 / w, y0 / h, x1 / w, y1 / h)
        GL.glUniform4f(self._comp_u["u_mouth_inner"], (x0 + 1) / w, (y0 + 1) / h, (x1 - 1) / w, (y1 - 1) / h)
        GL.glUseProgram(0)
        self._rig = rig
        self.canvas_size = (w, h)
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    def resize(self, width: int, height: int) -> None:
        """Set the target size in device pixels; the canvas is letterboxed inside it."""
        self.viewport = (max(1, width), max(1, height))
        self._fit = letterbox_fit(self.canvas_size, self.viewport)

    # -- per frame ----------------------------------------------------------------

    def update(self, pose: MouthPose, blink: float) -> None:
        """Upload the vertex records for a pose and eyelid closure."""
        vertices = self._rig.vertices_at(pose, blink)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, vertices.nbytes, vertices)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    def render_mouth_frame(self) -> int:
        """Warp the mouth/jaw region at the uploaded pose into `mouth_texture` and return
        it. The caller's framebuffer binding is kept."""
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        x0, y0, x1, y1 = self._rig.mouth_rect
        mw, mh = self.mouth_size
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self._mouth_fbo)
        # Framebuffer row 0 is texture row 0 on both sides: the picture's top row.
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self._picture_fbo)
        GL.glBlitFramebuffer(x0, y0, x1, y1, 0, 0, mw, mh, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)
        GL.glViewport(0, 0, mw, mh)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        # Row 0 of the frame is the rectangle's top row, as in every image texture here.
        self._draw_mesh((2.0 / mw, 2.0 / mh), (-2.0 * x0 / mw - 1.0, -2.0 * y0 / mh - 1.0),
                        1.0, (0.0, 0.0, 0.0, 0.0), 0, self._mouth_count)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
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
        u = self._comp_u
        GL.glUseProgram(self.composite_program)
        GL.glUniform2f(u["u_fit"], *self._fit)
        GL.glUniform2f(u["u_breath"], offset_y, scale_y)
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.mouth_texture)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glBindVertexArray(self._quad_vao)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        # The eye meshes in canvas pixels through the same letterbox and breathing as
        # sprite.vert applies to the quad.
        w, h = self.canvas_size
        fx, fy = self._fit
        self._draw_mesh((2.0 * fx / w, -2.0 * scale_y * fy / h),
                        (-fx, (2.0 * scale_y + 2.0 * offset_y - 1.0) * fy),
                        opacity, clear, self._mouth_count, self._eye_count)

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

    def _draw_mesh(self, scale, offset, opacity: float, clear, first: int, count: int) -> None:
        u = self._warp_u
        GL.glUseProgram(self.warp_program)
        GL.glUniform2f(u["u_scale"], *scale)
        GL.glUniform2f(u["u_offset"], *offset)
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

    def _delete_rig_objects(self) -> None:
        fbos = [f for f in (self._mouth_fbo, self._picture_fbo) if f]
        if fbos:
            GL.glDeleteFramebuffers(len(fbos), fbos)
        textures = [t for t in (self._picture, self.mouth_texture) if t]
        if textures:
            GL.glDeleteTextures(len(textures), textures)
        self._mouth_fbo = self._picture_fbo = self._picture = self.mouth_texture = 0
        self._rig = None

    def release(self) -> None:
        """Delete every GL object this renderer made (context must be current)."""
        self._delete_rig_objects()
        buffers = [b for b in (self._quad_vbo, self._dynamic_vbo, self._static_vbo, self._ebo) if b]
        if buffers:
            GL.glDeleteBuffers(len(buffers), buffers)
        arrays = [a for a in (self._quad_vao, self._mesh_vao) if a]
        if arrays:
            GL.glDeleteVertexArrays(len(arrays), arrays)
        for program in (self.warp_program, self.composite_program):
            if program:
                GL.glDeleteProgram(program)
        self.warp_program = self.composite_program = 0
        self._quad_vao = self._quad_vbo = self._mesh_vao = 0
        self._dynamic_vbo = self._static_vbo = self._ebo = 0
