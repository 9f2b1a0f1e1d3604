"""Does a lab switch answer as an OpenFlow 1.3 switch? A handshake without a controller framework.

Preflight of ``steering: openflow`` on a lab (and of ``mplab controller serve``): connect to
where the switch listens for its controller (``lab.switch.listen``; OVS: ``set-controller BR
ptcp:PORT``), exchange HELLOs offering OpenFlow 1.3 only (version 0x04 with a version bitmap),
ask for its features (``OFPT_FEATURES_REQUEST``: datapath id, tables) and its meter features
(``OFPMP_METER_FEATURES``: how many meters, which bands, kbit/s or not), then close. A switch
whose bridge does not enable OpenFlow13 answers its HELLO with a bitmap without 1.3 (OVS then
sends ``OFPET_HELLO_FAILED``); anything else on the port fails the parse. The meter features are
what ``controller.steering.caps`` needs for caps as meters (the same names the os-ken app
reports). One TCP socket, one deadline, nothing installed. The messages are os-ken's
(``os_ken.ofproto.ofproto_v1_3_parser``: built with ``serialize``, read with
``ofproto_parser.msg``), used as a library without its event loop; the HELLO alone is packed here,
because os-ken 4.x's ``OFPHello`` does not serialize its elements (it would offer every version
up to 1.3, and a 1.0-only switch would then settle on 1.0 instead of failing the handshake).
os-ken is imported on first use (0.4 s), not when preflight's module is.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass
from types import SimpleNamespace

from harness.errors import PreflightError
from harness.upkeep.preflight import Check

OFP13 = 0x04
OFPT_HELLO, OFPT_ERROR, OFPT_ECHO_REQUEST, OFPT_ECHO_REPLY = 0, 1, 2, 3
OFPT_FEATURES_REQUEST, OFPT_FEATURES_REPLY = 5, 6
OFPT_MULTIPART_REQUEST, OFPT_MULTIPART_REPLY = 18, 19
OFPHET_VERSIONBITMAP = 1
HEADER = struct.Struct("!BBHI")
#: OVS's HELLO_FAILED and BAD_VERSION, spelled out in the failure.
ERROR_NAMES = {(0, 0): "HELLO_FAILED/INCOMPATIBLE", (1, 0): "BAD_REQUEST/BAD_VERSION"}
BANDS = {1: "drop", 2: "dscp_remark"}
METER_FLAGS = {1: "kbps", 2: "pktps", 4: "burst", 8: "stats"}
FIX = ("on the switch: ovs-vsctl set bridge BR protocols=OpenFlow13 (OpenFlow10,OpenFlow13 is fine too) and "
       "ovs-vsctl set-controller BR ptcp:PORT; check lab.switch.listen and that nothing filters the port")


@dataclass(frozen=True)
class SwitchInfo:
    """What the switch said: its datapath, tables, and meter features (as the os-ken app reports them)."""

    datapath_id: int
    n_tables: int
    versions: tuple[int, ...]
    max_meter: int
    band_types: tuple[str, ...]
    capabilities: tuple[str, ...]

    def meter_features(self) -> dict:
        return {"max_meter": self.max_meter, "band_types": list(self.band_types),
                "capabilities": list(self.capabilities)}

    def describe(self) -> str:
        return (f"OpenFlow 1.3, datapath {self.datapath_id:016x}, {self.n_tables} tables; meters: max "
                f"{self.max_meter}, bands {list(self.band_types) or 'none'}, {list(self.capabilities) or 'none'}")


def _of13() -> SimpleNamespace:
    """os-ken's OpenFlow 1.3 modules, as the "datapath" its message classes build with (no connection)."""
    from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

    return SimpleNamespace(ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser)


def _bytes(msg, xid: int) -> bytes:
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def hello_bytes(xid: int) -> bytes:
    """HELLO version 1.3 with a version bitmap offering 1.3 only (packed here: see the module docstring)."""
    element = struct.pack("!HHI", OFPHET_VERSIONBITMAP, 8, 1 << OFP13)
    return HEADER.pack(OFP13, OFPT_HELLO, HEADER.size + len(element), xid) + element


def features_request_bytes(xid: int) -> bytes:
    dp = _of13()
    return _bytes(dp.ofproto_parser.OFPFeaturesRequest(dp), xid)


def meter_features_request_bytes(xid: int) -> bytes:
    dp = _of13()
    return _bytes(dp.ofproto_parser.OFPMeterFeaturesStatsRequest(dp, 0), xid)


def echo_reply_bytes(xid: int, data: bytes) -> bytes:
    dp = _of13()
    return _bytes(dp.ofproto_parser.OFPEchoReply(dp, data), xid)


def parse(buf: bytes):
    """One whole OpenFlow message (any version os-ken knows) as os-ken's message object.

    Raises:
        PreflightError: os-ken could not make sense of it.
    """
    from os_ken.ofproto import ofproto_parser

    version, mtype, length, xid = ofproto_parser.header(buf)
    try:
        msg = ofproto_parser.msg(_of13(), version, mtype, length, xid, bytearray(buf))
    except Exception as exc:  # noqa: BLE001 - os-ken raises assertion and struct errors on a bad buffer
        raise PreflightError(f"malformed OpenFlow message type {mtype} ({type(exc).__name__}: {exc})") from None
    if msg is None:  # os-ken logged the parse error and gave up
        raise PreflightError(f"malformed OpenFlow message type {mtype} (version {version}, {length} bytes)")
    return msg


def hello_versions(msg) -> tuple[int, ...]:
    """The versions a parsed HELLO offers: its bitmap if it has one, else every version up to its header's."""
    # os-ken's parsed HELLO has ``elements`` only when the peer sent any (a foreign class we do not declare).
    for element in getattr(msg, "elements", None) or []:
        if element.type == OFPHET_VERSIONBITMAP:
            return tuple(sorted(element.versions))
    return tuple(range(1, msg.version + 1))


def parse_features_reply(msg) -> tuple[int, int]:
    """(datapath id, number of tables) of a parsed OFPT_FEATURES_REPLY."""
    return msg.datapath_id, msg.n_tables


def parse_meter_features(msg) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """(max meters, band types, capabilities) of a parsed OFPMP_METER_FEATURES reply."""
    (f,) = msg.body
    return (f.max_meter, tuple(n for t, n in BANDS.items() if f.band_types & (1 << t)),
            tuple(n for b, n in METER_FLAGS.items() if f.capabilities & b))


class _Conn:
    def __init__(self, sock: socket.socket, deadline: float, where: str, timeout_s: float) -> None:
        self.sock, self.deadline, self.where, self.timeout_s = sock, deadline, where, timeout_s

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            left = self.deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                self.sock.settimeout(left)
                chunk = self.sock.recv(n - len(buf))
            except TimeoutError:  # a slow switch, not a foreign protocol: say how long it had
                raise PreflightError(f"switch {self.where}: no OpenFlow answer within {self.timeout_s:g} s "
                                     "(lab.switch.answer_timeout_s)") from None
            if not chunk:
                raise PreflightError(f"switch {self.where} closed the connection"
                                     + (" mid-message" if buf else ""))
            buf += chunk
        return buf

    def read(self, want: int):
        """The next message of type ``want``, parsed by os-ken; echo requests are answered on the way."""
        while True:
            head = self._recv(HEADER.size)
            version, mtype, length, xid = HEADER.unpack(head)
            # Framing stays here: os-ken would take any 8 bytes as a header and log a traceback for them.
            if not 1 <= version <= 6 or length < HEADER.size:
                raise PreflightError(f"switch {self.where}: not OpenFlow (it sent {head!r})")
            buf = head + self._recv(length - HEADER.size)
            if mtype not in (want, OFPT_ECHO_REQUEST, OFPT_ERROR):
                continue
            try:
                msg = parse(buf)
            except PreflightError as exc:
                raise PreflightError(f"switch {self.where}: {exc}") from None
            if mtype == OFPT_ECHO_REQUEST:
                self.sock.sendall(echo_reply_bytes(xid, bytes(msg.data or b"")))
            elif mtype == OFPT_ERROR:
                text = bytes(msg.data or b"").decode("ascii", "replace").strip("\0 ")
                raise PreflightError(f"switch {self.where} refused OpenFlow 1.3: error "
                                     f"{ERROR_NAMES.get((msg.type, msg.code), f'type {msg.type} code {msg.code}')}"
                                     + (f" ({text[:120]})" if text.isprintable() and text else ""))
            else:
                return msg


def probe_switch(listen: str, timeout_s: float = 15.0) -> SwitchInfo:
    """Handshake with the switch listening at ``listen`` (host:port); ``PreflightError`` saying what went wrong."""
    host, _, port = listen.rpartition(":")
    deadline = time.monotonic() + timeout_s
    xid = int.from_bytes(os.urandom(3), "big") << 8
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        raise PreflightError(f"switch {listen}: cannot connect ({exc})") from None
    with sock:
        try:
            conn = _Conn(sock, deadline, listen, timeout_s)
            sock.sendall(hello_bytes(xid))
            versions = hello_versions(conn.read(OFPT_HELLO))
            if OFP13 not in versions:
                names = [f"1.{v - 1}" for v in versions]
                raise PreflightError(f"switch {listen} speaks OpenFlow {names}, not 1.3")
            sock.sendall(features_request_bytes(xid + 1))
            dpid, n_tables = parse_features_reply(conn.read(OFPT_FEATURES_REPLY))
            sock.sendall(meter_features_request_bytes(xid + 2))
            max_meter, bands, caps = parse_meter_features(conn.read(OFPT_MULTIPART_REPLY))
        except (OSError, struct.error, AttributeError, ValueError) as exc:
            raise PreflightError(f"switch {listen}: not an OpenFlow 1.3 answer ({type(exc).__name__}: {exc})") from None
    return SwitchInfo(dpid, n_tables, versions, max_meter, bands, caps)


def switch_check(listen: str, essential: bool = True, timeout_s: float = 15.0) -> tuple[Check, SwitchInfo | None]:
    """The preflight check of a lab switch, and what it said when it answered."""
    try:
        info = probe_switch(listen, timeout_s)
    except PreflightError as exc:
        return Check("switch", "OpenFlow 1.3", False, str(exc), FIX, essential=essential), None
    return Check("switch", "OpenFlow 1.3", True, f"{listen}: {info.describe()}", essential=essential), info
