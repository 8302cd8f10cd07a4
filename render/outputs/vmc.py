"""Our lip sync on a VRM avatar in another app (VSeeFace, VirtualMotionCapture, Warudo,
VNyan), over the VMC protocol: OSC messages in UDP datagrams, one way, sender to
receiver (https://protocol.vmc.info; the receiver's side is its "Marionette" spec).

    output = VmcOutput(host, port=39539, names="vrm0", fps=60.0, offset_s=0.0)
    output.set_sources(pose_source, media_time_at, version)   # the output contract
    output.start()                                            # ticks from here on
    output.status(); output.close()

`host` and `port` are where the receiving app listens. The spec has apps that draw the
avatar ("marionettes") listen on 39539 and apps that track and send motion
("performers": VirtualMotionCapture, VSeeFace) on 39540. Blend shapes alone, as sent
here, are what the spec calls an assistant's data, routed through a performer (39540;
a marionette fed only them moves nothing but the face), or sent to a receiver that
keeps its own tracking and takes blend shapes besides (VSeeFace: its VMC receiver with
"Apply VSeeFace tracking" on and a secondary receiver's port; Warudo, VNyan: the port
set there). `names` picks the blend shape names the avatar carries (NAMES: "vrm0" or
"vrm1"). `fps` is how many frames a second go out. `offset_s` is the receiving app's
render delay, which we cannot measure: each frame is made for what is heard `offset_s`
after it is sent, so the avatar there and our sound meet (negative: for what was heard
before).

What goes out, once per tick of a PoseTicker (render/timing/pose_ticker.py) on a thread
of its own ("vmc"): one OSC bundle, timetag "immediately", of

    /VMC/Ext/Blend/Val (string){name} (float){weight}   × 12, in this order:
        the five vowels (VRM 0.x: A I U E O; VRM 1.0: aa ih ou ee oh), from
            pipeline.core.mouth_shapes.mouth_shape of the frame's pose,
        the blinks (Blink_L Blink_R; blinkLeft blinkRight), from the frame's state,
        the expressions (Joy Angry Sorrow Fun Surprised; happy angry sad relaxed
            surprised), the state's EXPRESSIONS;
    /VMC/Ext/Blend/Apply

Why so:

- Val then Apply: the spec's receivers (UniVRM's blend shape proxy) accumulate the
  values and show them all at Apply, so one frame is its Vals and one Apply.
- One bundle, one datagram (504 bytes with VRM 0.x names, 516 with VRM 1.0's, far
  under the 1472 a UDP datagram carries on Ethernet without being split): a frame
  arrives whole or not at all, never half of it applied over the last one's rest. The
  spec's own senders bundle their blend shapes the same way, to lighten the load.
- Every name, every frame, zeros included: the spec has senders send whether the
  receiver needs it or not, and receivers filter. Names are case sensitive (the
  Marionette spec, since UniVRM made them so).
- VRM 0.x names by default: the spec asks every sender to send them (the receivers in
  use are VRM 0.x ones; VRM 1.0 names are the option). VRM 0.x has no surprised
  preset: "Surprised" is the custom clip name in use for it (tools that map VRM 0.x
  names to 1.0 take it for `surprised`); an avatar without such a clip ignores it.
- Timetag "immediately": the ticker has timed the frame already; it is for showing as
  it arrives.

Cost: building a frame with python-osc's builders takes about 0.23 ms on the shared
2-core VM (each message and the bundle are parsed again as they are built), 1.4 % of a
core at 60 fps; the ticker learns it as part of the delivery delay it predicts with.

The host is resolved once, at open: python-osc's client sends to the address it was
given, and `sendto` with a host name looks it up again at every send (DNS on the ticker
thread, every frame). A name with both kinds of address is sent to over IPv4: uOSC (the
OSC library of EVMC4U, the spec's reference receiver) listens on IPv4 in older releases
and on both in newer ones (its DotNet Udp binds IPv6Any with IPv6Only off). An
unresolvable host raises OutputError at open, with one line for the user.

Sending never waits and never stops the ticker: python-osc's socket is non-blocking (a
full send buffer fails at once instead of waiting), and an OSError from a send (no route
to the host, a refused destination, no buffer space) is counted, kept as the status's
problem in plain words and logged once per cause; the next frame is tried as any other.
Whether anything listens cannot be known: the protocol is one way, nothing answers, so
no receiver is no error.

Invariants: every frame handed to the sink is one send, counted once, as `sent` or
`failed`; close() leaves no thread (the ticker's and its producer's are joined) and no
socket.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from pythonosc import osc_bundle_builder, osc_message_builder, udp_client
from pythonosc.osc_bundle import OscBundle

from pipeline.core.avatar_state import EXPRESSIONS, INDEX
from pipeline.core.mouth_shapes import VOWELS, VRM1_VOWELS, mouth_shape
from render.outputs.contract import OutputError, OutputStatus
from render.timing.frame_producer import MediaClock, PoseSource
from render.timing.pose_ticker import PoseTicker
from render.timing.presenter import AvatarFrame

log = logging.getLogger(__name__)

VMC_PORT = 39539
BLEND_VAL = "/VMC/Ext/Blend/Val"
BLEND_APPLY = "/VMC/Ext/Blend/Apply"

# A send failure stays the status's problem this long after the last one, so a status
# read now and then still sees a link that fails one frame in a few.
PROBLEM_HOLD_S = 2.0

_BLINK_LEFT, _BLINK_RIGHT = INDEX["blink_left"], INDEX["blink_right"]


@dataclass(frozen=True, slots=True)
class BlendNames:
    """The blend shape names of one VRM version: `vowels` in VOWELS order, `blinks`
    (left, right), `expressions` in pipeline.core.avatar_state.EXPRESSIONS order."""

    label: str
    vowels: tuple[str, ...]
    blinks: tuple[str, str]
    expressions: tuple[str, ...]

    @property
    def all(self) -> tuple[str, ...]:
        """Every name, in the order each frame sends them."""
        return (*self.vowels, *self.blinks, *self.expressions)


# The Marionette spec's VRM 0.x ↔ VRM 1.0 table, and "Surprised" (see the module's doc).
NAMES: dict[str, BlendNames] = {
    "vrm0": BlendNames("VRM 0.x", VOWELS, ("Blink_L", "Blink_R"),
                       ("Joy", "Angry", "Sorrow", "Fun", "Surprised")),
    "vrm1": BlendNames("VRM 1.0", VRM1_VOWELS, ("blinkLeft", "blinkRight"), EXPRESSIONS),
}

# What the user can do about the usual send errors, by errno; others say strerror.
_SEND_ERRORS = {
    errno.ENETUNREACH: "this computer has no route to that network",
    errno.EHOSTUNREACH: "that host cannot be reached",
    errno.EACCES: "the system refused to send there (a firewall rule, or a broadcast "
                  "address)",
    errno.EPERM: "the system refused to send there (a firewall rule)",
    errno.ENOBUFS: "the network cannot take frames this fast (no buffer space)",
    errno.EAGAIN: "the network cannot take frames this fast (the send buffer is full)",
}


def resolve(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """(family, numeric address) to send to `host`, IPv4 first; OutputError with one
    line for the user when the name does not resolve or the port is out of range."""
    if not 1 <= port <= 65535:
        raise OutputError(f"VMC output: port {port} is not a port (1 to 65535; VSeeFace "
                          f"listens on {VMC_PORT})")
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise OutputError(f"VMC output: the host {host!r} cannot be found ({exc.strerror}): "
                          "enter the receiving computer's name or address, 127.0.0.1 for "
                          "this one") from None
    family, _, _, _, address = min(found, key=lambda entry: entry[0] != socket.AF_INET)
    return family, address[0]


def frame_bundle(frame: AvatarFrame, names: BlendNames) -> OscBundle:
    """One frame as the VMC protocol sends it: a Blend/Val per name, then Blend/Apply."""
    state = frame.state.values
    weights = (*mouth_shape(frame.pose).vowels, state[_BLINK_LEFT], state[_BLINK_RIGHT],
               *frame.state.expressions)
    bundle = osc_bundle_builder.OscBundleBuilder(osc_bundle_builder.IMMEDIATELY)
    for name, weight in zip(names.all, weights):
        message = osc_message_builder.OscMessageBuilder(BLEND_VAL)
        message.add_arg(name, osc_message_builder.OscMessageBuilder.ARG_TYPE_STRING)
        # VRM weights are 0..1; one past float32's range would raise here, on the
        # ticker's thread, and stop the output (NaN becomes 0).
        message.add_arg(min(1.0, max(0.0, float(weight))),
                        osc_message_builder.OscMessageBuilder.ARG_TYPE_FLOAT)
        bundle.add_content(message.build())
    bundle.add_content(osc_message_builder.OscMessageBuilder(BLEND_APPLY).build())
    return bundle.build()


def explain_send_error(error: OSError) -> str:
    """A send's OSError in plain words, with the system's own."""
    own = error.strerror or str(error)
    words = _SEND_ERRORS.get(error.errno)
    return f"{words} ({own})" if words else own


class VmcOutput:
    """Sends the avatar's blend shapes to a VMC receiver at `fps` (see the module's doc
    for the arguments and what each frame holds). Opening resolves the host and opens
    the socket (OutputError when the host cannot be found); start() starts ticking."""

    name = "vmc"

    def __init__(self, host: str, port: int = VMC_PORT, *, names: str = "vrm0",
                 fps: float = 60.0, offset_s: float = 0.0) -> None:
        if names not in NAMES:
            raise ValueError(f"names is {names!r}; one of {sorted(NAMES)}")
        self.host, self.port, self.fps, self.offset_s = host, port, fps, offset_s
        self.names = NAMES[names]
        family, self.address = resolve(host, port)
        self._client = udp_client.UDPClient(self.address, port, family=family)
        self.ticker = PoseTicker(fps, latency_s=offset_s, name="vmc")
        self.ticker.sinks.append(self.send)
        self.sent = 0
        self.failed = 0
        self.last_error: str | None = None
        self._last_failure = -float("inf")
        self._failing_errno: int | None = None

    def start(self) -> None:
        self.ticker.start()

    def set_sources(self, pose_source: PoseSource | None, media_time_at: MediaClock | None,
                    source_version: Callable[[], int] | None = None) -> None:
        self.ticker.set_sources(pose_source, media_time_at, source_version)

    def set_rig(self, rig) -> None:
        """The receiving app draws its own avatar: nothing here uses a rig."""

    def set_idle_motion(self, blinking: bool = True, breathing: bool = True) -> None:
        self.ticker.set_idle_motion(blinking, breathing)

    def set_avatar_motion(self, motion) -> None:
        self.ticker.set_avatar_motion(motion)

    def send(self, frame: AvatarFrame) -> None:
        """The ticker's sink: send `frame` (on the ticker's thread). Never raises for a
        failed send: it is counted and kept for status()."""
        try:
            self._client.send(frame_bundle(frame, self.names))
        except OSError as exc:
            self.failed += 1
            self._last_failure = time.monotonic()
            self.last_error = explain_send_error(exc)
            if exc.errno != self._failing_errno:
                self._failing_errno = exc.errno
                log.warning("VMC frames to %s:%d are not going out: %s", self.address,
                            self.port, self.last_error)
            return
        self.sent += 1
        if self._failing_errno is not None:
            self._failing_errno = None
            log.info("VMC frames to %s:%d are going out again", self.address, self.port)

    def status(self) -> OutputStatus:
        where = (f"{self.address}:{self.port}" if self.host == self.address
                 else f"{self.host} ({self.address}):{self.port}")
        offset = (f", sent {abs(self.offset_s) * 1e3:g} ms "
                  f"{'early' if self.offset_s > 0 else 'late'}" if self.offset_s else "")
        detail = (f"VMC → {where}, {self.names.label} blend shapes "
                  f"{' '.join(self.names.vowels)}, {self.fps:g} fps{offset}")
        problem = None
        if self.send not in self.ticker.sinks:
            # The ticker drops a sink that raised (it logged why): a bug, not a send.
            problem = "VMC output stopped sending after an internal error (see the log)"
        elif time.monotonic() - self._last_failure < PROBLEM_HOLD_S:
            problem = (f"VMC frames to {where} are not going out: {self.last_error}; "
                       f"{self.failed} of {self.sent + self.failed} failed, still trying")
        figures = {"sent": self.sent, "failed": self.failed, "last_error": self.last_error,
                   "ticker": self.ticker.stats()}
        return OutputStatus(self.name, "trouble" if problem else "on", detail, problem,
                            figures)

    def close(self) -> None:
        """Stop ticking (its threads joined), then close the socket."""
        self.ticker.stop()
        self._client.close()
