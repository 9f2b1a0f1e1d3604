"""Traffic: iperf3 transfers of a fixed byte count, the sender sending (reverse mode).

``Iperf3.check()`` probes a host's iperf3 once (version, native ``-m``/``--mptcp``
from 3.19, else ``mptcpize``); ``server_argv`` and ``client_argv`` build the
commands; ``IperfServers`` keeps one fresh server per receiver on the sender;
``parse_iperf3`` turns the client's JSON into a typed ``Transfer``. Parsing
works on plain text so tests feed it captured output.
"""
from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.errors import PreflightError, TrafficError
from harness.hosts.local import BackgroundProcess, Host
from harness.hosts.ready import listening_ports, wait_until

log = logging.getLogger("mplab.traffic")

_VERSION = re.compile(r"iperf (\d+)\.(\d+)(?:\.(\d+))?")
#: iperf3's TCP block (``-l``) by default. With ``-n`` it sends whole blocks, so a byte count that is not a
#: multiple of the block moves up to a block more (iperf3 3.12, measured: ``-n 65536`` sent 131,072 bytes,
#: ``-n 60000000`` sent 60,030,976).
IPERF3_BLOCK = 131072
#: The smallest block ``block_bytes`` picks for a file larger than one default block (smaller writes cost
#: the sender CPU at every rate the testbeds run).
MIN_BLOCK = 8192


def block_bytes(nbytes: int) -> int | None:
    """The ``-l`` that makes iperf3 move exactly ``nbytes``: the file itself if it fits in one default block,
    else the largest divisor of ``nbytes`` no larger than the default block (``60000000``: 125,000 x 480).

    None when the default block divides ``nbytes`` already (every power-of-two size from 128 KiB: the paper's
    60 MiB) or when no divisor of at least ``MIN_BLOCK`` bytes does (a prime size, say); iperf3 then overshoots
    by less than a block, and the record's ``bytes`` says what moved.
    """
    if nbytes % IPERF3_BLOCK == 0:
        return None
    if nbytes <= IPERF3_BLOCK:
        return nbytes
    for blocks in range(-(-nbytes // IPERF3_BLOCK), nbytes // MIN_BLOCK + 1):
        if nbytes % blocks == 0:
            return nbytes // blocks
    return None


@dataclass(frozen=True)
class Iperf3:
    """What one host's iperf3 can do."""

    version: str
    native_mptcp: bool
    mptcpize: str | None

    @classmethod
    def check(cls, host: Host) -> Iperf3:
        """Probe ``host``'s iperf3 (no side effects); ``PreflightError`` if it is missing or cannot do MPTCP."""
        if host.which("iperf3") is None:
            raise PreflightError(f"[{host.name}] iperf3 not found: install it (Debian/Ubuntu: apt install iperf3)")
        out = host.run(["iperf3", "--version"], check=False).stdout
        m = _VERSION.search(out)
        if not m:
            raise PreflightError(f"[{host.name}] cannot read iperf3's version from {out[:80]!r}")
        version = ".".join(g for g in m.groups() if g is not None)
        # Feature test rather than version compare: 3.19 added -m/--mptcp.
        native = "--mptcp" in host.run(["iperf3", "--help"], check=False).stdout
        mptcpize = host.which("mptcpize")
        if not native and mptcpize is None:
            raise PreflightError(f"[{host.name}] iperf3 {version} has no --mptcp and mptcpize is missing: "
                                 "install mptcpize (apt install mptcpize) or iperf3 >= 3.19")
        return cls(version, native, mptcpize)

    def _mptcp(self, argv: list[str]) -> list[str]:
        if self.native_mptcp:
            return [argv[0], "-m", *argv[1:]]
        return ["mptcpize", "run", *argv]

    @property
    def mptcp_mode(self) -> str:
        """How MPTCP sockets are obtained: "iperf3 -m" or "mptcpize"."""
        return "iperf3 -m" if self.native_mptcp else "mptcpize"

    def server_argv(self, port: int, mptcp: bool = True, *, one_off: bool = False) -> list[str]:
        """A server (``one_off``: it serves one test and exits). An MPTCP listener also accepts plain TCP
        clients (fallback)."""
        argv = ["iperf3", "-s", "-p", str(port), "-J", *(["-1"] if one_off else [])]
        if mptcp and not self.native_mptcp:
            return self._mptcp(argv)
        return argv  # iperf3 >= 3.19 server follows the client's -m

    def client_argv(self, server: str, port: int, nbytes: int | None, *, bind: str | None, mptcp: bool,
                    cc: str | None, connect_timeout_ms: int = 5000, duration_s: int | None = None,
                    omit_s: int = 0) -> list[str]:
        """A reverse-mode client: the server sends ``nbytes`` to us (exactly: ``block_bytes``), or sends for
        ``duration_s`` seconds after ``omit_s`` seconds of warm-up (give exactly one of the two)."""
        if (nbytes is None) == (duration_s is None):
            raise ValueError("give either nbytes or duration_s")
        if nbytes is not None:
            block = block_bytes(nbytes)
            amount = ["-n", str(nbytes), *(["-l", str(block)] if block else [])]
        else:
            amount = ["-t", str(duration_s), "-O", str(omit_s)]
        argv = ["iperf3", "-c", server, "-p", str(port), "-R", *amount, "-J",
                "--get-server-output", "--connect-timeout", str(connect_timeout_ms)]
        if bind:
            argv += ["-B", bind]
        if cc:
            # The server applies -C to its data socket; on an MPTCP socket that covers every
            # subflow, including joins (a listener's own default would not reach them).
            argv += ["-C", cc]
        return self._mptcp(argv) if mptcp else argv


class IperfServers:
    """One iperf3 server per receiver on the sender, each on its own port, a fresh one for every test.

    ``fresh(names)`` comes right before the clients of a test start: it stops the servers of ``names``, waits
    until their ports have no listener, starts a one-off server (``-1``) on each, and waits until each listens.

    Why not one persistent server per port: after each test, iperf3 (3.12 here, and up to 3.21) closes its
    listener and opens a new one, and a client that connects before that is told the server is busy, refused,
    or reset when the old listener closes (``bench/iperf3_back_to_back.py``). Nothing on the sender shows when
    a persistent server is done with its last test: a client that exits with data unread, or is stopped, aborts
    its connection, and `ss` then shows no socket of the server's while the server still works on that test.
    A new process's listener is known to be new.
    """

    #: Deadline for the old servers' listeners to close and the new ones to listen; and for one `ss` call.
    LISTEN_S = 15.0
    POLL_TIMEOUT_S = 30.0

    def __init__(self, host: Host, iperf3: Iperf3, ports: Mapping[str, int]) -> None:
        self.host = host
        self.iperf3 = iperf3
        self.ports = dict(ports)
        self._procs: dict[str, BackgroundProcess] = {}

    def fresh(self, names: Sequence[str] | None = None) -> None:
        """A new one-off server, listening, for each of ``names`` (default: every receiver)."""
        names = list(self.ports) if names is None else list(names)
        for name in names:
            old = self._procs.pop(name, None)
            if old is not None:
                self._reap(old)
        ports = [self.ports[n] for n in names]
        self._wait(ports, listening=False)
        for name in names:
            self._procs[name] = self.host.start(self.iperf3.server_argv(self.ports[name], one_off=True),
                                                label=f"iperf3-server:{name}")
        self._wait(ports, listening=True)

    def pid(self, name: str) -> int | None:
        """The process id of ``name``'s current server on the sender (None if it has none)."""
        proc = self._procs.get(name)
        return getattr(proc, "pid", None)

    def stop(self) -> None:
        """Stop every server (best effort: teardown must go on)."""
        for proc in self._procs.values():
            try:
                self._reap(proc)
            except Exception as exc:  # noqa: BLE001 - teardown is best effort, it must go on
                log.warning("stopping %s: %s", proc.label, exc)
        self._procs.clear()

    @staticmethod
    def _reap(proc: BackgroundProcess) -> None:
        """Stop ``proc`` if it still runs (a one-off server that served its test has exited by itself)."""
        res = proc.stop(grace_s=1.0)
        log.debug("%s: exit %s", proc.label, res.returncode)

    def _wait(self, ports: list[int], *, listening: bool) -> None:
        left: set[int] = set()

        def done() -> bool:
            now = listening_ports(self.host, self.POLL_TIMEOUT_S)
            left.clear()
            left.update(p for p in ports if (p in now) != listening)
            return not left

        what = "iperf3 servers listening" if listening else "the previous iperf3 servers' listeners closed"
        wait_until(done, self.LISTEN_S, f"[{self.host.name}] {what} on {sorted(ports)}",
                   detail=lambda: f"still {'missing' if listening else 'open'}: {sorted(left)}")


@dataclass(frozen=True)
class StreamResult:
    """One stream of a transfer, as the receiver saw it."""

    bytes: int
    seconds: float
    throughput_mbit: float


@dataclass(frozen=True)
class Transfer:
    """A finished transfer."""

    bytes: int
    seconds: float
    throughput_mbit: float
    #: Retransmitted segments at the sender, from the server's own output (None if unavailable).
    retransmits: int | None
    sender_cc: str | None
    receiver_cc: str | None
    streams: tuple[StreamResult, ...]
    iperf3_version: str | None


def parse_iperf3(text: str, source: str = "iperf3") -> Transfer:
    """Parse a reverse-mode client's ``-J`` output.

    Raises ``TrafficError`` naming ``source`` if the output is not JSON, reports an
    error, or lacks the fields a finished transfer has.
    """
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        snippet = text.strip()[:120] or "(empty)"
        raise TrafficError(f"{source}: output is not JSON ({exc.msg} at {exc.pos}): {snippet!r}") from None
    if not isinstance(doc, dict):
        raise TrafficError(f"{source}: expected a JSON object")
    if doc.get("error"):
        raise TrafficError(f"{source}: iperf3 reported: {doc['error']}")
    try:
        end = doc["end"]
        recv = end["sum_received"]
        nbytes = int(recv["bytes"])
        seconds = float(recv["seconds"])
        bps = float(recv["bits_per_second"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TrafficError(f"{source}: missing or malformed field {exc} in iperf3 output") from None
    if seconds <= 0 or nbytes <= 0:
        raise TrafficError(f"{source}: transfer of {nbytes} bytes in {seconds} s is not a transfer")
    streams = []
    for s in end.get("streams", []):
        r = s.get("receiver") or {}
        if "bytes" in r and "seconds" in r:
            sec = float(r["seconds"])
            streams.append(StreamResult(int(r["bytes"]), sec, float(r.get("bits_per_second", 0)) / 1e6))
    retrans = None
    server = doc.get("server_output_json")
    if isinstance(server, dict):
        sent = (server.get("end") or {}).get("sum_sent") or {}
        if "retransmits" in sent:
            retrans = int(sent["retransmits"])
    version = None
    m = _VERSION.search(str((doc.get("start") or {}).get("version", "")))
    if m:
        version = ".".join(g for g in m.groups() if g is not None)
    return Transfer(nbytes, seconds, bps / 1e6, retrans, end.get("sender_tcp_congestion"),
                    end.get("receiver_tcp_congestion"), tuple(streams), version)
