"""Draws a photo rig with OpenGL, with the same interface as SpriteGLRenderer.

Per frame: the rig's vertex records for the pose and blink go up in one buffer upload
(none when they did not change); the mouth frame, a texture of the rig's mouth
rectangle (as many texels as it shows pixels), gets the
mouth/jaw skin mesh and the mouth cavity warped into it, unless it holds that pose
already; the rest of the rectangle holds the still picture, drawn once. It is a
complete picture of that rectangle, so any producer of mouth frames (a CUDA one) can
stand in. Then the picture goes into the bound framebuffer, the mouth frame over its
rectangle (faded in at its edges) and, while they blink, the eye meshes on top. Each
draw has a shader that does only its own part (llvmpipe runs both sides of a branch).

The picture never changes; breathing only moves its rows. So it is drawn as shown,
once per view size, into PHASES "phase stills", each shifted by a fraction of a row
(and with margins for the rows breathing brings in), and a frame copies each band of
rows from the still whose shift is nearest (within 1/(2·PHASES) of a row) with 1:1
framebuffer blits, which llvmpipe does as memcpy: a 1080² picture costs about 0.5 ms
instead of the 8-15 ms of sampling it. Faded frames (opacity below 1), multisampled
targets and views too large for the stills' memory budget draw the picture instead.

Head pose and expressions come last (render/rigs/photo_face.py): the part of the frame
the face warp covers is copied into a texture (a blit, memcpy on llvmpipe) and drawn
back through the warped grid, so the mouth frame and the eyes move with the face
whoever made them. A state at rest skips the pass: the frame is exactly as without it.

All methods need the caller's GL context to be current.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np
from OpenGL import GL

from pipeline.core.avatar_state import AvatarState, still_state
from pipeline.core.frames import MouthPose
from pipeline.core.resources import SHADERS_DIR
from render.gl.sprite_renderer import (
    build_program,
    letterbox_fit,
    premultiplied,
    read_framebuffer,
    unit_quad,
    upload_texture,
)
from render.rigs.photo import RECORD, STATIC, PhotoRig
from render.rigs.photo_face import mouth_and_lids
from render.timing.idle_motion import breath_transform

_FLOAT = 4
# Phase stills: a row is shown within 1/16 of its place.
PHASES = 8
STILLS_BUDGET_BYTES = 128 << 20


def premultiply_picture(rig: PhotoRig) -> None:
    """Premultiply the rig's picture ahead of its upload (premultiplied), on any thread:
    the first output to show a photo rig read afresh did it on the GUI thread, 5-9 ms for a
    512 px picture and 30-37 ms for a 1024 px one (2-vCPU VM)."""
    premultiplied(rig.image)


class PhotoRenderer:
    """Draws a PhotoRig at a mouth pose, blink weight and breathing phase, and with an
    AvatarState its head pose and expressions.

    `clear_color` is straight RGBA in 0..1; alpha 0 gives a transparent background.
    The head's angles are drawn as the state has them (the frame path scales them by
    settings.motion_head_turn: render/timing/avatar_motion.py), within the rig's limits."""

    def __init__(self, clear_color: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
                 shaders_dir=SHADERS_DIR) -> None:
        self.clear_color = clear_color
        self.shaders_dir = shaders_dir
        self.skin_program = self.warp_program = self.cavity_program = 0
        self.picture_program = self.mouth_program = self.face_program = 0
        self._state = AvatarState()  # draw()'s scratch
        self._face_u: dict[str, int] = {}
        self._face_vao = self._face_vbo = self._face_src_vbo = self._face_ebo = 0
        self._face_copy: tuple[int, int, tuple[int, int]] | None = None   # texture, framebuffer, size
        self._skin_u: dict[str, int] = {}
        self._warp_u: dict[str, int] = {}
        self._cavity_u: dict[str, int] = {}
        self._picture_u: dict[str, int] = {}
        self._mouth_u: dict[str, int] = {}
        self._quad_vao = self._quad_vbo = self._rect_vao = self._rect_vbo = 0
        self._mesh_vao = self._dynamic_vbo = self._static_vbo = self._ebo = 0
        self._picture = 0
        self._stills: _Stills | None = None
        self.mouth_texture = 0
        self._mouth_fbo = 0
        self._rig: PhotoRig | None = None
        self._draws: dict[str, tuple[int, int]] = {}
        self._pose: MouthPose | None = None
        self._blink = 0.0
        self._uploaded: tuple[MouthPose, float] | None = None
        self._frame_pose: MouthPose | None = None
        self.canvas_size = (0, 0)
        self.mouth_size = (0, 0)
        self.viewport = (1, 1)
        self._fit = (1.0, 1.0)

    def initialize(self) -> None:
        """Compile the shaders and make the buffers. Once per GL context."""
        d = self.shaders_dir
        self.skin_program = build_program(d / "photo_skin.vert", d / "photo_skin.frag")
        self.warp_program = build_program(d / "photo_skin.vert", d / "photo_warp.frag")
        self.cavity_program = build_program(d / "photo_cavity.vert", d / "photo_cavity.frag")
        self.picture_program = build_program(d / "photo_picture.vert", d / "photo_skin.frag")
        self.mouth_program = build_program(d / "sprite.vert", d / "photo_mouth.frag")
        self.face_program = build_program(d / "photo_face.vert", d / "photo_face.frag")
        uniforms = lambda program, *names: {n: GL.glGetUniformLocation(program, n) for n in names}  # noqa: E731
        self._skin_u = uniforms(self.skin_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                "u_opacity", "u_clear")
        self._warp_u = uniforms(self.warp_program, "u_canvas", "u_scale", "u_offset", "u_picture")
        self._cavity_u = uniforms(self.cavity_program, "u_canvas", "u_scale", "u_offset", "u_picture",
                                  "u_mouth_width", "u_teeth", "u_down", "u_edge", "u_throat", "u_tongue",
                                  "u_teeth_colour", "u_shading")
        self._picture_u = uniforms(self.picture_program, "u_quad", "u_tex", "u_picture", "u_opacity",
                                   "u_clear")
        self._mouth_u = uniforms(self.mouth_program, "u_rect", "u_offset_y", "u_scale_y", "u_fit",
                                 "u_picture", "u_mouth", "u_mouth_rect", "u_canvas", "u_feather",
                                 "u_opacity", "u_clear", "u_place_x", "u_place_y", "u_stored")
        self._face_u = uniforms(self.face_program, "u_scale", "u_offset", "u_viewport", "u_copy", "u_frame")
        GL.glUseProgram(self.face_program)
        GL.glUniform1i(self._face_u["u_frame"], 0)
        for program, u in ((self.skin_program, self._skin_u), (self.warp_program, self._warp_u),
                           (self.cavity_program, self._cavity_u), (self.picture_program, self._picture_u),
                           (self.mouth_program, self._mouth_u)):
            GL.glUseProgram(program)
            GL.glUniform1i(u["u_picture"], 0)
        GL.glUniform1i(self._mouth_u["u_mouth"], 1)
        # sprite.vert's placement, the identity: the photo's head moves in the face warp,
        # its background stays.
        GL.glUniform3f(self._mouth_u["u_place_x"], 1.0, 0.0, 0.0)
        GL.glUniform3f(self._mouth_u["u_place_y"], 0.0, 1.0, 0.0)
        # Its textures are whole canvases (sprite.vert's texture coordinates then are canvas
        # units, as photo_mouth.frag reads them).
        GL.glUniform4f(self._mouth_u["u_stored"], 0.0, 0.0, 1.0, 1.0)
        GL.glUseProgram(0)

        self._quad_vao, self._quad_vbo = unit_quad()

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

        # The face warp: positions (per frame) and where each vertex samples the frame.
        self._face_vao = int(GL.glGenVertexArrays(1))
        self._face_vbo, self._face_src_vbo, self._face_ebo = (int(b) for b in GL.glGenBuffers(3))
        GL.glBindVertexArray(self._face_vao)
        for location, vbo in ((0, self._face_vbo), (1, self._face_src_vbo)):
            GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
            GL.glEnableVertexAttribArray(location)
            GL.glVertexAttribPointer(location, 2, GL.GL_FLOAT, GL.GL_FALSE, 0, ctypes.c_void_p(0))
        GL.glBindBuffer(GL.GL_ELEMENT_ARRAY_BUFFER, self._face_ebo)
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
        face = rig.face
        for vbo in (self._face_vbo, self._face_src_vbo):
            GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
            GL.glBufferData(GL.GL_ARRAY_BUFFER, face.rest.nbytes, face.rest,
                            GL.GL_STREAM_DRAW if vbo == self._face_vbo else GL.GL_STATIC_DRAW)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        GL.glBindVertexArray(self._face_vao)
        GL.glBufferData(GL.GL_ELEMENT_ARRAY_BUFFER, face.triangles.nbytes, face.triangles, GL.GL_STATIC_DRAW)
        GL.glBindVertexArray(0)

        for program, u in ((self.skin_program, self._skin_u), (self.warp_program, self._warp_u)):
            GL.glUseProgram(program)
            GL.glUniform2f(u["u_canvas"], w, h)
        GL.glUseProgram(self.cavity_program)
        GL.glUniform2f(self._cavity_u["u_canvas"], w, h)
        GL.glUniform1f(self._cavity_u["u_mouth_width"], rig.mouth_width)
        GL.glUniform1f(self._cavity_u["u_teeth"], rig.teeth_height)
        GL.glUniform2f(self._cavity_u["u_down"], rig.face_down[0] / w, rig.face_down[1] / h)
        colours = rig.colours
        for name, colour in (("u_edge", colours.edge), ("u_throat", colours.throat),
                             ("u_tongue", colours.tongue), ("u_teeth_colour", colours.teeth)):
            GL.glUniform3f(self._cavity_u[name], *colour)
        GL.glUniform1f(self._cavity_u["u_shading"], colours.shading)
        x0, y0, x1, y1 = rig.mouth_rect
        GL.glUseProgram(self.mouth_program)
        GL.glUniform4f(self._mouth_u["u_rect"], x0 / w, y0 / h, x1 / w, y1 / h)
        GL.glUniform4f(self._mouth_u["u_mouth_rect"], x0 / w, y0 / h, x1 / w, y1 / h)
        GL.glUniform2f(self._mouth_u["u_canvas"], w, h)
        GL.glUniform1f(self._mouth_u["u_feather"], rig.frame_feather)
        GL.glUseProgram(0)
        self._rig = rig
        self._uploaded = self._frame_pose = None
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
        """Size the mouth frame to its rectangle as shown: one texel per screen pixel.
        Shown larger than it is (a small face), the opening's teeth and edges are then
        drawn as sharp as the screen shows them, and the picture is resampled once, not
        twice. Shown smaller, the picture is sampled from the mipmap level nearest that
        scale; the scale is the same everywhere, so no
        level seam shows, at half the cost of trilinear filtering on llvmpipe. A new
        frame gets the still picture once: the mesh's outline never moves, so outside it
        the frame never changes. The phase stills go: the next frame makes them anew
        for this view."""
        self._delete_stills()
        scale = self.frame_scale()
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
        self.mouth_texture = _texture(*size)
        self._frame_pose = None
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        try:
            self._mouth_fbo = _framebuffer(self.mouth_texture, f"a {size[0]}x{size[1]} mouth frame")
            GL.glViewport(0, 0, *size)
            GL.glDisable(GL.GL_BLEND)
            GL.glUseProgram(self.warp_program)
            scale_xy, offset = mouth_frame_transform(self._rig.mouth_rect)
            GL.glUniform2f(self._warp_u["u_scale"], *scale_xy)
            GL.glUniform2f(self._warp_u["u_offset"], *offset)
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

    def frame_scale(self) -> float:
        """Mouth frame texels per canvas pixel: screen pixels per canvas pixel (below 1,
        the picture is sampled from its mipmaps). The frame is never larger than the
        part of the view it covers."""
        return self._fit[0] * self.viewport[0] / self.canvas_size[0]

    # -- per frame ----------------------------------------------------------------

    def update(self, pose: MouthPose, blink: float) -> None:
        """Upload the vertex records for a pose and eyelid closure (unless they are up
        already)."""
        self._pose, self._blink = pose, blink
        if self._uploaded == (pose, blink):
            return
        vertices = self._rig.vertices_at(pose, blink)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._dynamic_vbo)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, vertices.nbytes, vertices)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        self._uploaded = (pose, blink)

    def render_mouth_frame(self) -> int:
        """Warp the mouth/jaw region at the uploaded pose into `mouth_texture` (unless it
        holds that pose already) and return it. The caller's framebuffer binding and
        viewport are kept."""
        if self._frame_pose == self._pose:
            return self.mouth_texture
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        viewport = [int(v) for v in GL.glGetIntegerv(GL.GL_VIEWPORT)]
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self._mouth_fbo)
        GL.glViewport(0, 0, *self.mouth_size)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        scale, offset = mouth_frame_transform(self._rig.mouth_rect)
        self._draw_mesh("skin", scale, offset)
        self._draw_mesh("cavity", scale, offset)
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
        GL.glViewport(*viewport)
        self._frame_pose = self._pose
        return self.mouth_texture

    def composite(self, breath: float, opacity: float = 1.0) -> None:
        """Fill the bound framebuffer with the picture, letterboxed over the clear colour,
        with the current mouth frame and the eyes, faded by `opacity`. Breathing moves
        the picture within its own outline."""
        r, g, b, a = self.clear_color
        clear = (r * a, g * a, b * a, a)
        vw, vh = self.viewport
        GL.glViewport(0, 0, vw, vh)
        GL.glDisable(GL.GL_BLEND)
        GL.glDisable(GL.GL_DEPTH_TEST)
        offset_y, scale_y = breath_transform(breath)
        if opacity != 1.0 or not self._copy_picture(offset_y, scale_y, clear):
            GL.glClearColor(*clear)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            fx, fy = self._fit
            self._draw_picture((-fx, fy, fx, -fy), (0.0, 1.0 - (1.0 - offset_y) / scale_y,
                                                    1.0, 1.0 + offset_y / scale_y), opacity, clear)
        GL.glActiveTexture(GL.GL_TEXTURE1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.mouth_texture)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glBindVertexArray(self._quad_vao)
        # The mouth frame's quad moves with breathing like the eyes.
        u = self._mouth_u
        GL.glUseProgram(self.mouth_program)
        GL.glUniform2f(u["u_fit"], *self._fit)
        GL.glUniform1f(u["u_offset_y"], offset_y)
        GL.glUniform1f(u["u_scale_y"], scale_y)
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)
        if self._blink > 0.0:
            # Open eyes show as the picture does. Closing ones: the eye meshes in canvas
            # pixels through the same letterbox and breathing as sprite.vert applies to
            # the mouth quad.
            self._draw_mesh("eyes", *self._canvas_transform(breath), opacity, clear)

    def _draw_picture(self, quad, tex, opacity: float, clear) -> None:
        """The picture over `quad` (clip space: x0, y0, x1, y1), sampled over `tex`
        (s0, t0, s1, t1 at the same corners), composed over `clear`."""
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glBindVertexArray(self._quad_vao)
        u = self._picture_u
        GL.glUseProgram(self.picture_program)
        GL.glUniform4f(u["u_quad"], *quad)
        GL.glUniform4f(u["u_tex"], *tex)
        GL.glUniform1f(u["u_opacity"], opacity)
        GL.glUniform4f(u["u_clear"], *clear)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    # -- phase stills -------------------------------------------------------------

    def _canvas_pixels(self) -> tuple[int, int, int, int]:
        """The window pixels (x0, y0, x1, y1; y up) whose centres the letterboxed canvas
        covers."""
        (vw, vh), (fx, fy) = self.viewport, self._fit
        span = lambda size, f: (min(max(math.ceil((1.0 - f) / 2 * size - 0.5), 0), size - 1),  # noqa: E731
                                 min(max(math.ceil((1.0 + f) / 2 * size - 0.5), 1), size))
        (x0, x1), (y0, y1) = span(vw, fx), span(vh, fy)
        return x0, y0, max(x1, x0 + 1), max(y1, y0 + 1)

    def _canvas_y(self, y: float) -> float:
        """The canvas row (units, down) shown at window height y (pixels, up) at rest."""
        return (1.0 - (2.0 * y / self.viewport[1] - 1.0) / self._fit[1]) / 2.0

    def _rest_y(self, canvas_y: float) -> float:
        """The window height (pixels, up) where canvas row `canvas_y` lies at rest."""
        return ((1.0 - 2.0 * canvas_y) * self._fit[1] + 1.0) / 2.0 * self.viewport[1]

    def _make_stills(self, clear) -> _Stills | None:
        """The phase stills for this view and clear colour (None where they would take
        more than STILLS_BUDGET_BYTES): still k holds, at row r, the picture as shown
        at window row y0 - margin + r, k/PHASES of a row higher, over the clear colour;
        the bars around the canvas are a block of clear colour."""
        vw, vh = self.viewport
        x0, y0, x1, y1 = self._canvas_pixels()
        # Breathing moves a row by at most this much (breath in -1..1).
        reach = max(abs(self._rest_y(1.0 - (1.0 - self._canvas_y(y) - o) / s) - y)
                    for y in (y0, y1) for o, s in (breath_transform(-1.0), breath_transform(1.0)))
        margin = math.ceil(reach) + 2
        width, rows = x1 - x0, y1 - y0 + 2 * margin
        if PHASES * width * rows * 4 > STILLS_BUDGET_BYTES:
            return None
        bars = [(0, 0, x0, vh), (x1, 0, vw, vh), (x0, 0, x1, y0), (x0, y1, x1, vh)]
        bars = [bar for bar in bars if bar[2] > bar[0] and bar[3] > bar[1]]
        stills = _Stills(clear=clear, rect=(x0, y0, x1, y1), margin=margin, bars=bars)
        left, right = ((2.0 * x / vw - 1.0) / self._fit[0] / 2.0 + 0.5 for x in (x0, x1))
        try:
            for k in range(PHASES):
                texture = _texture(width, rows)
                stills.targets.append((texture, _framebuffer(texture, f"a {width}x{rows} still")))
                GL.glViewport(0, 0, width, rows)
                bottom, top = (self._canvas_y(y + k / PHASES) for y in (y0 - margin, y1 + margin))
                self._draw_picture((-1.0, -1.0, 1.0, 1.0), (left, bottom, right, top), 1.0, clear)
            if bars:
                size = (max(x1 - x0 for x0, _, x1, _ in bars), max(y1 - y0 for _, y0, _, y1 in bars))
                texture = _texture(*size)
                stills.bars_target = (texture, _framebuffer(texture, "the letterbox bars"))
                GL.glClearColor(*clear)
                GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        except BaseException:
            stills.delete()
            raise
        return stills

    def _copy_picture(self, offset_y: float, scale_y: float, clear) -> bool:
        """Copy the picture, breathing, and the bars into the bound draw framebuffer from
        the phase stills. False where they cannot serve: the caller draws it."""
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        if int(GL.glGetIntegerv(GL.GL_SAMPLE_BUFFERS)):
            return False
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        try:
            if self._stills is not None and self._stills.clear != clear:
                self._delete_stills()
            if self._stills is None:
                self._stills = self._make_stills(clear) or _Stills(clear=clear, rect=None)
            stills = self._stills
            if stills.rect is None:
                return False
            x0, y0, x1, y1 = stills.rect
            # Window row y shows the canvas row breathing brought there, which lies
            # `shift` rows higher at rest: shift is affine in y, so bands of rows share
            # their nearest phase.
            ends = [self._rest_y(1.0 - (1.0 - self._canvas_y(y + 0.5) - offset_y) / scale_y) - (y + 0.5)
                    for y in (y0, y1 - 1)]
            shifts = np.linspace(ends[0], ends[1], y1 - y0) if y1 - y0 > 1 else np.array(ends[:1])
            steps = np.rint(shifts * PHASES).astype(np.int64)
            if np.abs(steps).max() >= (stills.margin - 1) * PHASES:
                return False
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            starts = np.concatenate(([0], np.flatnonzero(np.diff(steps)) + 1, [len(steps)]))
            for start, end in zip(starts[:-1], starts[1:]):
                whole, phase = divmod(int(steps[start]), PHASES)
                source = start + whole + stills.margin
                GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, stills.targets[phase][1])
                GL.glBlitFramebuffer(0, source, x1 - x0, source + end - start,
                                     x0, y0 + start, x1, y0 + end, GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
            if stills.bars:
                GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, stills.bars_target[1])
                for bx0, by0, bx1, by1 in stills.bars:
                    GL.glBlitFramebuffer(0, 0, bx1 - bx0, by1 - by0, bx0, by0, bx1, by1,
                                         GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
            return True
        finally:
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)
            GL.glViewport(0, 0, *self.viewport)

    def draw(self, pose: MouthPose, blink: float, breath: float, opacity: float = 1.0) -> None:
        """draw_state for a neutral, unmoved avatar at this mouth, blink and breath."""
        self.draw_state(still_state(pose, blink, breath, self._state), opacity)

    def draw_state(self, state: AvatarState, opacity: float = 1.0) -> None:
        """Clear and draw the avatar at `state` into the bound framebuffer: mouth,
        eyelids (the more closed eye), breathing, and the face warp's head pose, brows
        and expressions. The state's squash is the sprite rigs' alone: a photo's body
        cannot squash without its background."""
        if self._rig is None:
            r, g, b, a = self.clear_color
            GL.glViewport(0, 0, *self.viewport)
            GL.glClearColor(r * a, g * a, b * a, a)
            GL.glClear(GL.GL_COLOR_BUFFER_BIT)
            return
        pose, blink = mouth_and_lids(state.mouth_pose(), state.eyes_closed, state)
        self.update(pose, blink)
        self.render_mouth_frame()
        self.composite(state.breath, opacity)
        self.warp_face(state, state.breath)

    def warp_face(self, state: AvatarState, breath: float) -> None:
        """Move the face of the frame in the bound framebuffer (drawn by composite at
        `breath`) to the state's head pose and expressions; nothing at rest."""
        face = self._rig.face
        coefficients = face.coefficients(state)
        if not coefficients.any():
            return
        positions = face.positions(coefficients)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self._face_vbo)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, positions.nbytes, positions)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        scale, offset = self._canvas_transform(breath)
        vw, vh = self.viewport
        # The window pixels the grid covers at rest (the warp never moves a vertex out
        # of them), one more on each side for the linear filter's neighbours.
        x0, y0, x1, y1 = face.rect
        xs = sorted(((x * scale[0] + offset[0]) * 0.5 + 0.5) * vw for x in (x0, x1))
        ys = sorted(((y * scale[1] + offset[1]) * 0.5 + 0.5) * vh for y in (y0, y1))
        left, bottom = max(math.floor(xs[0]) - 1, 0), max(math.floor(ys[0]) - 1, 0)
        right, top = min(math.ceil(xs[1]) + 1, vw), min(math.ceil(ys[1]) + 1, vh)
        if right <= left or top <= bottom:
            return
        texture, fbo, size = self._face_copy_target(right - left, top - bottom)
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        try:
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, fbo)
            GL.glBlitFramebuffer(left, bottom, right, top, 0, 0, right - left, top - bottom,
                                 GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
        finally:
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)
        GL.glViewport(0, 0, vw, vh)
        GL.glDisable(GL.GL_BLEND)
        u = self._face_u
        GL.glUseProgram(self.face_program)
        GL.glUniform2f(u["u_scale"], *scale)
        GL.glUniform2f(u["u_offset"], *offset)
        GL.glUniform2f(u["u_viewport"], vw, vh)
        GL.glUniform4f(u["u_copy"], left, bottom, *size)
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
        GL.glBindVertexArray(self._face_vao)
        GL.glDrawElements(GL.GL_TRIANGLES, 3 * face.triangles_moved(coefficients), GL.GL_UNSIGNED_INT,
                          ctypes.c_void_p(0))
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def _face_copy_target(self, width: int, height: int) -> tuple[int, int, tuple[int, int]]:
        """The texture (and its framebuffer) the face's part of the frame is copied into,
        at least width×height: made anew only when a larger one is needed."""
        if self._face_copy is not None:
            size = self._face_copy[2]
            if size[0] >= width and size[1] >= height:
                return self._face_copy
            self._delete_face_copy()
        draw_target = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        read_target = int(GL.glGetIntegerv(GL.GL_READ_FRAMEBUFFER_BINDING))
        texture = _texture(width, height)
        try:
            fbo = _framebuffer(texture, f"a {width}x{height} copy of the face")
        except BaseException:
            GL.glDeleteTextures(1, [texture])
            raise
        finally:
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, draw_target)
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, read_target)
        self._face_copy = (texture, fbo, (width, height))
        return self._face_copy

    def _canvas_transform(self, breath: float) -> tuple[tuple[float, float], tuple[float, float]]:
        """Scale and offset from canvas pixels to clip space on the letterboxed,
        breathing canvas, as sprite.vert places the mouth quad."""
        offset_y, scale_y = breath_transform(breath)
        w, h = self.canvas_size
        fx, fy = self._fit
        return (2.0 * fx / w, -2.0 * scale_y * fy / h), (-fx, (2.0 * scale_y + 2.0 * offset_y - 1.0) * fy)

    def _draw_mesh(self, group: str, scale, offset, opacity: float = 1.0, clear=None) -> None:
        """One triangle group: "skin" and "cavity" into the mouth frame, each with its
        own shader, "eyes" as skin faded by `opacity` over `clear`."""
        first, count = self._draws[group]
        program, u = {"skin": (self.warp_program, self._warp_u), "cavity": (self.cavity_program, self._cavity_u),
                      "eyes": (self.skin_program, self._skin_u)}[group]
        GL.glUseProgram(program)
        GL.glUniform2f(u["u_scale"], *scale)
        GL.glUniform2f(u["u_offset"], *offset)
        if group == "eyes":
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

    def read_picture_levels(self) -> list[np.ndarray]:
        """The picture texture's mipmap levels as H×W×4 uint8 RGBA (premultiplied), level 0
        first, top row first: what the mouth frame samples."""
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._picture)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        levels, (w, h) = [], self.canvas_size
        while True:
            data = GL.glGetTexImage(GL.GL_TEXTURE_2D, len(levels), GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
            levels.append(np.frombuffer(data, dtype=np.uint8).reshape(h, w, 4).copy())
            if w == h == 1:
                break
            w, h = max(1, w // 2), max(1, h // 2)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        return levels

    # -- teardown -----------------------------------------------------------------

    def _delete_mouth_frame(self) -> None:
        if self._mouth_fbo:
            GL.glDeleteFramebuffers(1, [self._mouth_fbo])
        if self.mouth_texture:
            GL.glDeleteTextures(1, [self.mouth_texture])
        self._mouth_fbo = self.mouth_texture = 0
        self.mouth_size = (0, 0)

    def _delete_stills(self) -> None:
        if self._stills is not None:
            self._stills.delete()
        self._stills = None

    def _delete_face_copy(self) -> None:
        if self._face_copy is not None:
            texture, fbo, _ = self._face_copy
            GL.glDeleteFramebuffers(1, [fbo])
            GL.glDeleteTextures(1, [texture])
        self._face_copy = None

    def _delete_rig_objects(self) -> None:
        self._delete_stills()
        self._delete_face_copy()
        self._delete_mouth_frame()
        if self._picture:
            GL.glDeleteTextures(1, [self._picture])
        self._picture = 0
        self._rig = None

    def release(self) -> None:
        """Delete every GL object this renderer made (context must be current)."""
        self._delete_rig_objects()
        buffers = [b for b in (self._quad_vbo, self._rect_vbo, self._dynamic_vbo, self._static_vbo, self._ebo,
                               self._face_vbo, self._face_src_vbo, self._face_ebo) if b]
        if buffers:
            GL.glDeleteBuffers(len(buffers), buffers)
        arrays = [a for a in (self._quad_vao, self._rect_vao, self._mesh_vao, self._face_vao) if a]
        if arrays:
            GL.glDeleteVertexArrays(len(arrays), arrays)
        for program in (self.skin_program, self.warp_program, self.cavity_program, self.picture_program,
                        self.mouth_program, self.face_program):
            if program:
                GL.glDeleteProgram(program)
        self.skin_program = self.warp_program = self.cavity_program = 0
        self.picture_program = self.mouth_program = self.face_program = 0
        self._quad_vao = self._quad_vbo = self._rect_vao = self._rect_vbo = self._mesh_vao = 0
        self._dynamic_vbo = self._static_vbo = self._ebo = 0
        self._face_vao = self._face_vbo = self._face_src_vbo = self._face_ebo = 0


def mouth_frame_transform(mouth_rect: tuple[int, int, int, int]
                          ) -> tuple[tuple[float, float], tuple[float, float]]:
    """Scale and offset from canvas pixels to the mouth frame's clip space; row 0 of the
    frame is the rectangle's top row, as in every image texture here."""
    x0, y0, x1, y1 = mouth_rect
    w, h = x1 - x0, y1 - y0
    return (2.0 / w, 2.0 / h), (-2.0 * x0 / w - 1.0, -2.0 * y0 / h - 1.0)


@dataclass
class _Stills:
    """PhotoRenderer's phase stills for one view size and clear colour; rect None where
    the view has none (too large)."""

    clear: tuple[float, float, float, float]
    rect: tuple[int, int, int, int] | None       # window pixels the canvas covers
    margin: int = 0                              # rows above and below rect
    bars: list[tuple[int, int, int, int]] = field(default_factory=list)
    targets: list[tuple[int, int]] = field(default_factory=list)     # (texture, framebuffer)
    bars_target: tuple[int, int] | None = None

    def delete(self) -> None:
        for texture, fbo in self.targets + ([self.bars_target] if self.bars_target else []):
            GL.glDeleteFramebuffers(1, [fbo])
            GL.glDeleteTextures(1, [texture])
        self.targets, self.bars_target = [], None


def _texture(width: int, height: int) -> int:
    """An empty RGBA8 texture, linear filtering, clamped, no mipmaps."""
    texture = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, width, height, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
    for param, value in ((GL.GL_TEXTURE_MIN_FILTER, GL.GL_LINEAR), (GL.GL_TEXTURE_MAG_FILTER, GL.GL_LINEAR),
                         (GL.GL_TEXTURE_WRAP_S, GL.GL_CLAMP_TO_EDGE), (GL.GL_TEXTURE_WRAP_T, GL.GL_CLAMP_TO_EDGE)):
        GL.glTexParameteri(GL.GL_TEXTURE_2D, param, value)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return texture


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
