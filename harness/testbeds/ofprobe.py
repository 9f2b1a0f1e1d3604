"""Does a lab switch answer as an OpenFlow 1.3 switch? A handshake without a controller framework.

Preflight of ``steering: openflow`` on a lab (and of ``mplab controller serve``): connect to
where the switch listens for its controller (``lab.switch.listen``; OVS: ``set-controller BR
ptcp:PORT``), exchange HELLOs offering OpenFlow 1.3 only (version 0x04 with a version bitmap),
ask for its features (``OFPT_FEATURES_REQUEST``: datapath id, tables) and its meter features
(``OFPMP_METER_FEATURES``: how many meters, which bands, kbit/s or not), then close. A switch
whose bridge does not enable OpenFlow13 answers its HELLO with a bitmap without 1.3 (OVS then
sends ``OFPET_HELLO_FAILED``); anything else on the port fails the parse. The meter features are
what ``controller.steering.caps`` needs for caps as meters (the same names the os-ken app
reports). Plain struct packing on one TCP socket, with one deadline; nothing is installed.
"""
from __future__ import annotations

import os
import socket
import struct
import time
from dataclasses import dataclass

from harness.errors import PreflightError
from harness.testbeds.base import Check

OFP13 = 0x04
OFPT_HELLO, OFPT_ERROR, OFPT_ECHO_REQUEST, OFPT_ECHO_REPLY = 0, 1, 2, 3
OFPT_FEATURES_REQUEST, OFPT_FEATURES_REPLY = 5, 6
OFPT_MULTIPART_REQUEST, OFPT_MULTIPART_REPLY = 18, 19
OFPMP_METER_FEATURES = 11
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


def hello_bytes(xid: int) -> bytes:
    """HELLO version 1.3 with a version bitmap offering 1.3 only."""
    element = struct.pack("!HHI", OFPHET_VERSIONBITMAP, 8, 1 << OFP13)
    return HEADER.pack(OFP13, OFPT_HELLO, HEADER.size + len(element), xid) + element


def features_request_bytes(xid: int) -> bytes:
    return HEADER.pack(OFP13, OFPT_FEATURES_REQUEST, HEADER.size, xid)


def meter_features_request_bytes(xid: int) -> bytes:
    return HEADER.pack(OFP13, OFPT_MULTIPART_REQUEST, HEADER.size + 8, xid) + struct.pack(
        "!HH4x", OFPMP_METER_FEATURES, 0)


def hello_versions(version: int, body: bytes) -> tuple[int, ...]:
    """The versions a HELLO offers: its bitmap if it has one, else every version up to its header's."""
    off = 0
    while off + 4 <= len(body):
        etype, elen = struct.unpack_from("!HH", body, off)
        if elen < 4:
            break
        if etype == OFPHET_VERSIONBITMAP:
            bits = 0
            for i, (word,) in enumerate(struct.iter_unpack("!I", body[off + 4:off + elen][:(elen - 4) // 4 * 4])):
                bits |= word << (32 * i)
            return tuple(v for v in range(bits.bit_length()) if bits >> v & 1)
        off += (elen + 7) // 8 * 8  # elements are padded to 8 bytes
    return tuple(range(1, version + 1))


def parse_features_reply(body: bytes) -> tuple[int, int]:
    """(datapath id, number of tables) of an OFPT_FEATURES_REPLY body."""
    dpid, _buffers, n_tables = struct.unpack_from("!QIB", body)
    return dpid, n_tables


def parse_meter_features(body: bytes) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """(max meters, band types, capabilities) of an OFPMP_METER_FEATURES reply body (after the multipart header)."""
    max_meter, band_types, caps, _max_bands, _max_color = struct.unpack_from("!IIIBB", body, 8)
    return (max_meter, tuple(n for t, n in BANDS.items() if band_types & (1 << t)),
            tuple(n for b, n in METER_FLAGS.items() if caps & b))


class _Conn:
    def __init__(self, sock: socket.socket, deadline: float, where: str) -> None:
        self.sock, self.deadline, self.where = sock, deadline, where

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise PreflightError(f"switch {self.where}: no OpenFlow answer before the deadline")
            self.sock.settimeout(left)
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise PreflightError(f"switch {self.where} closed the connection"
                                     + (" mid-message" if buf else ""))
            buf += chunk
        return buf

    def read(self, want: int) -> tuple[int, bytes]:
        """The next message of type ``want`` (version, body); echo requests are answered on the way."""
        while True:
            head = self._recv(HEADER.size)
            version, mtype, length, xid = HEADER.unpack(head)
            if not 1 <= version <= 6 or length < HEADER.size:
                raise PreflightError(f"switch {self.where}: not OpenFlow (it sent {head!r})")
            body = self._recv(length - HEADER.size)
            if mtype == OFPT_ECHO_REQUEST:
                self.sock.sendall(HEADER.pack(version, OFPT_ECHO_REPLY, length, xid) + body)
            elif mtype == OFPT_ERROR:
                etype, code = struct.unpack_from("!HH", body)
                text = body[4:].decode("ascii", "replace").strip("\0 ")
                raise PreflightError(f"switch {self.where} refused OpenFlow 1.3: error "
                                     f"{ERROR_NAMES.get((etype, code), f'type {etype} code {code}')}"
                                     + (f" ({text[:120]})" if text.isprintable() and text else ""))
            elif mtype == want:
                return version, body


def probe_switch(listen: str, timeout_s: float = 5.0) -> SwitchInfo:
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
            conn = _Conn(sock, deadline, listen)
            sock.sendall(hello_bytes(xid))
            version, body = conn.read(OFPT_HELLO)
            versions = hello_versions(version, body)
            if OFP13 not in versions:
                names = [f"1.{v - 1}" for v in versions]
                raise PreflightError(f"switch {listen} speaks OpenFlow {names}, not 1.3")
            sock.sendall(features_request_bytes(xid + 1))
            dpid, n_tables = parse_features_reply(conn.read(OFPT_FEATURES_REPLY)[1])
            sock.sendall(meter_features_request_bytes(xid + 2))
            max_meter, bands, caps = parse_meter_features(conn.read(OFPT_MULTIPART_REPLY)[1])
        except (OSError, struct.error) as exc:
            raise PreflightError(f"switch {listen}: not an OpenFlow 1.3 answer ({type(exc).__name__}: {exc})") from None
    return SwitchInfo(dpid, n_tables, versions, max_meter, bands, caps)


def switch_check(listen: str, essential: bool = True, timeout_s: float = 5.0) -> tuple[Check, SwitchInfo | None]:
    """The preflight check of a lab switch, and what it said when it answered."""
    try:
        info = probe_switch(listen, timeout_s)
    except PreflightError as exc:
        return Check("switch", "OpenFlow 1.3", False, str(exc), FIX, essential=essential), None
    return Check("switch", "OpenFlow 1.3", True, f"{listen}: {info.describe()}", essential=essential), info
