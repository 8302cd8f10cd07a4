import os

from tests.harness.services import (
    TEST_SERVER_PREFIX,
    free_stale_test_servers,
    registered_jackd,
    stale_test_servers,
)


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


def test_a_test_server_that_died_registered_is_freed_for_the_servers_after_it():
    # As a server is left when it dies uncleanly (crashed test processes left some behind:
    # jack2 registers eight at most, and then no server starts).
    name = f"{TEST_SERVER_PREFIX}{os.getpid()}0"
    server = registered_jackd(name)
    server.kill()
    server.wait()
    assert name in stale_test_servers()
    free_stale_test_servers()
    assert name not in stale_test_servers()
    assert f":{name}:".encode() not in open("/dev/shm/jack-shm-registry", "rb").read()
