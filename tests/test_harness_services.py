def test_jack_server_is_seen_by_portaudio(jack_server):
    import sounddevice as sd

    apis = [a["name"] for a in sd.query_hostapis()]
    assert "JACK Audio Connection Kit" in apis
    names = [d["name"] for d in sd.query_devices()]
    assert any("system" in n for n in names), names


def test_xvfb_gives_a_gl_context(qt_app):
    from PySide6.QtGui import QOffscreenSurface, QOpenGLContext

    ctx = QOpenGLContext()
    assert ctx.create()
    surface = QOffscreenSurface()
    surface.create()
    assert ctx.makeCurrent(surface)
    from OpenGL import GL

    version = GL.glGetString(GL.GL_VERSION).decode()
    assert version.split(".")[0].isdigit()
    ctx.doneCurrent()
