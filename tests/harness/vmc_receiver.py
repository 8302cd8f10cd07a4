"""A real VMC receiver for tests and benchmarks: python-osc's own UDP server on 127.0.0.1,
keeping every datagram with the instant the kernel received it."""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from pythonosc.dispatcher import Dispatcher
from pythonosc.osc_bundle import OscBundle
from pythonosc.osc_server import BlockingOSCUDPServer


@dataclass
class Datagram:
    arrival: float          # time.monotonic() when it reached the receiver's socket
    bundle: bool
    messages: list = field(default_factory=list)  # (address, args) in datagram order


# Linux's SO_TIMESTAMPNS (asm-generic/socket.h; Python 3.11's socket module lacks the
# name): the kernel stamps each datagram with the CLOCK_REALTIME it was received at.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
_TIMESPEC = struct.Struct("@qq")


class Receiver(BlockingOSCUDPServer):
    """A VMC receiver on a free port of 127.0.0.1: python-osc's server and dispatcher,
    on a thread of its own, keeping each datagram with its arrival time. The kernel's
    receive stamp is the arrival, not when this thread got to read it: the receiver
    may share a process (its GIL) and 2 cores with the sender, a real one would not."""

    def __init__(self) -> None:
        dispatcher = Dispatcher()
        dispatcher.set_default_handler(self._message)
        super().__init__(("127.0.0.1", 0), dispatcher)
        self.socket.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.datagrams: list[Datagram] = []
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,),
                                        name="vmc-receiver", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self.server_address[1]

    def get_request(self):
        data, ancillary, _, sender = self.socket.recvmsg(self.max_packet_size,
                                                         socket.CMSG_SPACE(_TIMESPEC.size))
        (level, kind, stamp), = ancillary
        assert (level, kind) == (socket.SOL_SOCKET, SO_TIMESTAMPNS)
        seconds, nanoseconds = _TIMESPEC.unpack(stamp)
        arrival = seconds + nanoseconds * 1e-9 - (time.time() - time.monotonic())
        self.datagrams.append(Datagram(arrival, OscBundle.dgram_is_bundle(data)))
        return (data, self.socket), sender

    def _message(self, address: str, *args) -> None:
        self.datagrams[-1].messages.append((address, args))

    def take(self) -> list[Datagram]:
        """The datagrams received so far, taken out of `datagrams` (for a long run that
        must not keep them all), but the newest: its messages may still be coming in."""
        n = len(self.datagrams) - 1
        taken = self.datagrams[:n]
        del self.datagrams[:n]
        return taken

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()
