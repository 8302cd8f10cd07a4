"""Draws a photo rig with OpenGL, with the same interface as GLRenderer.

Per frame: the rig's vertex records for the pose and blink go up in one buffer upload;
the mouth frame, a texture the size of the rig's mouth rectangle, gets the still
picture's rectangle once (a blit, when the rig is set: the mesh's outline never moves,
so the rest of the rectangle never changes) and, per frame, the mouth/jaw skin mesh and
the mouth cavity warped over it. It is a complete picture of that rectangle, so any
producer of mouth frames (a CUDA one) can stand in. Then the still picture is drawn, the mouth frame over its rectangle and
the eye meshes on top: five draws, each with a shader that does only its own part
(llvmpipe runs both sides of a branch: one shader for skin and cavity cost four times
as much per pixel, one for picture and mouth frame twice).

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
        self.skin_program = self.cavity_program = self.composite_program = 0
        self._skin_u: dict[str, int] = {}
        self._cavity_u: dict[str, int] = {}
        self._comp_u: dict[str, int] = {}
        self._quad_vao = self._quad_vbo = 0
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
        self.composite_program = build_program(d / "sprite.vert", d / "photo_composite.frag")
        uniforms = lambda program, *names: {n: GL.glGetUniformLocation(program, n) for n in names}  # noqa: E731
        self._skin_u = uniforms(self.skin_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                "u_opacity", "u_clear")
        self._cavity_u = uniforms(self.cavity_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                  "u_mouth_width", "u_teeth", "u_down")
        self._comp_u = uniforms(self.composite_program, "u_rect", "u_offset_y", "u_scale_y", "u_fit",
                                "u_image", "u_image_rect", "u_breath", "u_opacity", "u_clear")
        for program, u in ((self.skin_program, self._skin_u), (self.cavity_program, self._cavity_u)):
            GL.glUseProgram(program)
            GL.glUniform1i(u["u_picture"], 0)
        GL.glUseProgram(self.composite_program)
        GL.glUniform1i(self._comp_u["u_image"], 0)
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
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        source = 0
        try:
            self._mouth_fbo = _framebuffer(self.mouth_texture, f"a {self.mouth_size} mouth frame")
            source = _framebuffer(self._picture, f"a {w}x{h} picture as a copy source")
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, source)
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self._mouth_fbo)
            # Framebuffer row 0 is texture row 0 on both sides: the picture's top row.
            GL.glBlitFramebuffer(x0, y0, x1, y1, 0, 0, *self.mouth_size, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        finally:
            if source:
                GL.glDeleteFramebuffers(1, [source])
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)

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
        x0, y0, _, _ = self._rig.mouth_rect
        mw, mh = self.mouth_size
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self._mouth_fbo)
        GL.glViewport(0, 0, mw, mh)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        # Row 0 of the frame is the rectangle's top row, as in every image texture here.
        scale, offset = (2.0 / mw, 2.0 / mh), (-2.0 * x0 / mw - 1.0, -2.0 * y0 / mh - 1.0)
        self._draw_mesh("skin", scale, offset, 1.0, (0.0, 0.0, 0.0, 0.0))
        self._draw_mesh("cavity", scale, offset)
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
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindVertexArray(self._quad_vao)
        w, h = self.canvas_size
        x0, y0, x1, y1 = self._rig.mouth_rect
        mouth = (x0 / w, y0 / h, x1 / w, y1 / h)
        inner = ((x0 + 1) / w, (y0 + 1) / h, (x1 - 1) / w, (y1 - 1) / h)
        for texture, quad, shows, breath_in_quad in ((self._picture, (0.0, 0.0, 1.0, 1.0), (0.0, 0.0, 1.0, 1.0), False),
                                                     (self.mouth_texture, inner, mouth, True)):
            GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
            GL.glUniform4f(u["u_rect"], *quad)
            GL.glUniform4f(u["u_image_rect"], *shows)
            GL.glUniform1f(u["u_offset_y"], offset_y if breath_in_quad else 0.0)
            GL.glUniform1f(u["u_scale_y"], scale_y if breath_in_quad else 1.0)
            GL.glUniform2f(u["u_breath"], *((0.0, 1.0) if breath_in_quad else (offset_y, scale_y)))
            GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        # The eye meshes in canvas pixels through the same letterbox and breathing as
        # sprite.vert applies to the mouth quad.
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

    def _delete_rig_objects(self) -> None:
        if self._mouth_fbo:
            GL.glDeleteFramebuffers(1, [self._mouth_fbo])
        textures = [t for t in (self._picture, self.mouth_texture) if t]
        if textures:
            GL.glDeleteTextures(len(textures), textures)
        self._mouth_fbo = self._picture = self.mouth_texture = 0
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
        for program in (self.skin_program, self.cavity_program, self.composite_program):
            if program:
                GL.glDeleteProgram(program)
        self.skin_program = self.cavity_program = self.composite_program = 0
        self._quad_vao = self._quad_vbo = self._mesh_vao = 0
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
