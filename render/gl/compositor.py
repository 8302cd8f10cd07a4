"""The chroma-key background: the avatar is drawn into a texture of our own, then each
pixel becomes exactly the key or exactly an avatar colour by shaders/chroma.* (no blend
of the two for a keyer to leave as a fringe; the shader says why).

Transparent and solid backgrounds need no second pass (the renderers clear to them), so
only the chroma mode pays for one: a full-viewport quad, one texture read per pixel, and
the eight neighbours' where the avatar covers less than half of it.
"""

from __future__ import annotations

from OpenGL import GL

from pipeline.core.resources import SHADERS_DIR
from render.gl.sprite_renderer import build_program, unit_quad


class ChromaCompositor:
    """begin() redirects drawing into an offscreen texture of the viewport's size;
    finish() composites it into the target framebuffer. The context must be current
    for both; GL objects are made on first use and kept while the size holds."""

    def __init__(self) -> None:
        self._program = self._vao = self._vbo = 0
        self._fbo = self._texture = 0
        self._size = (0, 0)
        self._uniforms: dict[str, int] = {}

    def begin(self, width: int, height: int) -> None:
        if not self._program:
            self._program = build_program(SHADERS_DIR / "chroma.vert", SHADERS_DIR / "chroma.frag")
            self._uniforms = {name: GL.glGetUniformLocation(self._program, name)
                              for name in ("u_avatar", "u_key")}
            self._vao, self._vbo = unit_quad()
            self._fbo = int(GL.glGenFramebuffers(1))
        if self._size != (width, height):
            self._make_texture(width, height)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self._fbo)

    def _make_texture(self, width: int, height: int) -> None:
        if self._texture:
            GL.glDeleteTextures(1, [self._texture])
        self._texture = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, width, height, 0, GL.GL_RGBA,
                        GL.GL_UNSIGNED_BYTE, None)
        # No mipmaps: a filter that needs none, or the texture is incomplete and the
        # shader's texelFetch reads zeros.
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self._fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                  GL.GL_TEXTURE_2D, self._texture, 0)
        self._size = (width, height)

    def finish(self, target_fbo: int, key: tuple[float, float, float, float]) -> None:
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, target_fbo)
        GL.glViewport(0, 0, *self._size)
        GL.glDisable(GL.GL_BLEND)
        GL.glUseProgram(self._program)
        GL.glUniform1i(self._uniforms["u_avatar"], 0)
        GL.glUniform3f(self._uniforms["u_key"], key[0], key[1], key[2])
        GL.glActiveTexture(GL.GL_TEXTURE0)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self._texture)
        GL.glBindVertexArray(self._vao)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)

    def release(self) -> None:
        """Delete what was made (context current)."""
        if self._texture:
            GL.glDeleteTextures(1, [self._texture])
        if self._fbo:
            GL.glDeleteFramebuffers(1, [self._fbo])
        if self._vbo:
            GL.glDeleteBuffers(1, [self._vbo])
        if self._vao:
            GL.glDeleteVertexArrays(1, [self._vao])
        if self._program:
            GL.glDeleteProgram(self._program)
        self._program = self._vao = self._vbo = self._fbo = self._texture = 0
        self._size = (0, 0)
