"""A WebSocket client that completes the handshake and then never reads."""

from __future__ import annotations

import base64
import hashlib
import os
import socket


def raw_websocket(port: int, path: str = "/ws") -> socket.socket:
    """Connected to 127.0.0.1:`port` at `path`, handshake done, nothing read after it; its
    receive buffer kept small so the server feels it at once."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
               f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        reply += s.recv(1)  # byte by byte: nothing of the frames after it is read
    accept = base64.b64encode(hashlib.sha1(
        (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    assert reply.startswith(b"HTTP/1.1 101") and accept.encode() in reply
    return s
