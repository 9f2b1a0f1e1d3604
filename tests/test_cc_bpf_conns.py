"""The coupling maps hold exactly the live connections, however a connection ends (mplab_cc.h).

Each coupled algorithm (LIA, OLIA, BALIA, wVegas) is built under a struct_ops name of its own (``mplab_<tag>``,
its map ``<tag>_conns``), so the test reads a map no other testbed on this machine fills. Two namespaces,
two paths, kernel MPTCP with a second subflow; both ends set the algorithm with TCP_CONGESTION. A
connection is ended each way: closed, reset (SO_LINGER 0), orphaned (the sender closes with data unsent
and the receiver is killed), a killed testbed (both processes killed, both namespaces deleted), one whose
first SYNs were retransmitted and that closes before its next ACK, and one whose second subflow never
connects (its SYNs unanswered): the way BALIA's map kept entries for good, since its .ssthresh claimed a
slot in SYN-SENT and the kernel calls .release only for a socket whose algorithm .init has run.
After each, the map must empty (orphans are given a few seconds: 1 orphan retry, 2 s FIN timeout).

The server acknowledges every segment at once (``quickack`` on its routes). With delayed ACKs wVegas took
5-8 s a connection to move its 8 MiB (54 s for the test in one CI run), the others under a second; with
quickack, 0.6 s. wVegas reads RTT growth as queueing, and on these microsecond paths a delayed ACK's wait
(up to 40 ms) is most of the RTT it measures. The connections, their data, their six endings and the
callbacks that run (.init, .cong_avoid on each ACK, .ssthresh on a retransmitted SYN, .release) are the same.

The test registers its own names and reads only its own map, so it runs beside other testbeds (the
workers step of `make test`), not alone: only ``mplab clean --machine-wide`` unregisters a struct_ops
nobody recorded, and only tests/test_cc_bpf.py (a `machine` test, never beside this one) runs that.
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from harness.cc import bpfcc
from harness.hosts.local import LocalHost
from harness.upkeep.clean import clean_prefix

#: The struct_ops names are this test's own (``mplab_<tag>``): not a `machine` test (see the docstring).
pytestmark = pytest.mark.root

ROOT = LocalHost("root")
needs_tools = pytest.mark.skipif(not (bpfcc.BUILD_DIR / "vmlinux.h").exists(),
                                 reason="BPF headers not generated: run `make bpf`")
PROGRAMS = ("init", "set_state", "cong_avoid", "ssthresh", "conns", "release", "undo_cwnd", "trace_next", "rounds", "seq")


def build_renamed(algorithm: str, tag: str, out: Path) -> Path:
    """``algorithm``'s object with its struct_ops named ``mplab_<tag>`` and its map ``<tag>_conns``."""
    src = (bpfcc.BPF_DIR / f"{algorithm}.bpf.c").read_text()
    src = re.sub(rf"\bmplab_{algorithm}\b", f"mplab_{tag}", src)
    src = re.sub(rf"\b{algorithm}_({'|'.join(PROGRAMS)})\b", rf"{tag}_\1", src)
    src = src.replace(f"({algorithm})", f"({tag})").replace(f"({algorithm},", f"({tag},")
    c = out / f"{tag}.bpf.c"
    c.write_text(src)
    obj = out / f"{tag}.bpf.o"
    subprocess.run(["clang", "-target", "bpf", "-O2", "-g", "-mcpu=v3", "-Wno-unused-variable",
                    f"-I{bpfcc.BUILD_DIR}", f"-I{bpfcc.BPF_DIR}", "-c", str(c), "-o", str(obj)],
                   check=True, capture_output=True, timeout=180)
    return obj


def map_entries(tag: str) -> list[dict]:
    """The entries of ``<tag>_conns`` (its one map: the name is this test's own)."""
    import json

    maps = bpfcc.maps_named(ROOT, f"{tag}_conns")
    assert len(maps) == 1, maps
    res = ROOT.run(["bpftool", "-j", "map", "dump", "id", str(maps[0]["id"])])
    return json.loads(res.stdout or "[]")


def wait_empty(tag: str, timeout_s: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        entries = map_entries(tag)
        if not entries or time.monotonic() > deadline:
            return entries
        time.sleep(0.2)


class TwoPaths:
    """Namespaces ``<prefix>c`` (client, two addresses) and ``<prefix>s`` (server), two veth links."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.c, self.s = f"{prefix}c", f"{prefix}s"

    def ns(self, name: str, *argv: str) -> None:
        ROOT.run(["ip", "netns", "exec", name, *argv])

    def up(self) -> TwoPaths:
        for n in (self.c, self.s):
            ROOT.run(["ip", "netns", "add", n])
            self.ns(n, "ip", "link", "set", "lo", "up")
            for key, value in (("net.ipv4.tcp_orphan_retries", "1"), ("net.ipv4.tcp_fin_timeout", "2"),
                               ("net.mptcp.enabled", "1")):
                self.ns(n, "sysctl", "-qw", f"{key}={value}")
            self.ns(n, "ip", "mptcp", "limits", "set", "subflow", "2", "add_addr_accepted", "2")
        for i in (1, 2):
            ROOT.run(["ip", "link", "add", f"p{i}c", "netns", self.c, "type", "veth", "peer", "name", f"p{i}s",
                      "netns", self.s])
            self.ns(self.c, "ip", "addr", "add", f"10.9{i}.0.1/24", "dev", f"p{i}c")
            self.ns(self.s, "ip", "addr", "add", f"10.9{i}.0.2/24", "dev", f"p{i}s")
            self.ns(self.c, "ip", "link", "set", f"p{i}c", "up")
            self.ns(self.s, "ip", "link", "set", f"p{i}s", "up")
            # No delayed ACKs from the server (see the module's docstring).
            self.ns(self.s, "ip", "route", "change", f"10.9{i}.0.0/24", "dev", f"p{i}s", "proto", "kernel",
                    "scope", "link", "src", f"10.9{i}.0.2", "quickack", "1")
        # The client opens a second subflow from its second address to the server's second address.
        self.ns(self.s, "ip", "mptcp", "endpoint", "add", "10.92.0.2", "dev", "p2s", "signal")
        return self

    def down(self) -> None:
        clean_prefix(self.prefix, ROOT)


SERVER = """
import socket, sys, time
IPPROTO_MPTCP, TCP_CONGESTION = 262, 13
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
s.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, sys.argv[1].encode())
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.91.0.2", 5201)); s.listen(4)
print("listening", flush=True)
conn, _ = s.accept()
mode = sys.argv[2]
if mode == "stall":  # never read: the client's data stays unsent
    time.sleep(3600)
while conn.recv(1 << 16):
    pass
conn.close()
"""

CLIENT = """
import socket, struct, sys, time
IPPROTO_MPTCP, TCP_CONGESTION = 262, 13
c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
c.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, sys.argv[1].encode())
c.connect(("10.91.0.2", 5201))
mode = sys.argv[2]
if mode != "synonly":
    time.sleep(2.5 if mode == "nojoin" else 0.5)  # the second subflow joins (or retransmits its SYN twice)
    c.setblocking(mode not in ("stall", "hold"))
    try:
        c.sendall(b"x" * (8 << 20)) if mode not in ("stall", "hold") else c.send(b"x" * (4 << 20))
    except BlockingIOError:
        pass
if mode == "reset":
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
if mode == "hold":
    print("holding", flush=True)
    time.sleep(3600)
c.close()
print("closed", flush=True)
"""


def _start(two: TwoPaths, where: str, code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", where, sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _connection(two: TwoPaths, cc: str, mode: str) -> None:
    """One connection ended the way ``mode`` says (close, reset, orphan, killed, synonly, nojoin)."""
    server = _start(two, two.s, SERVER, cc, "stall" if mode in ("orphan", "killed") else "read")
    try:
        assert server.stdout.readline().strip() == "listening", server.stderr.read()
        if mode in ("synonly", "nojoin"):
            # SYNs dropped: a retransmitted SYN calls .ssthresh before .init (tcp_enter_loss in SYN-SENT).
            # synonly: the first subflow's, for 1.5 s, then it connects and closes with no data to ACK;
            # nojoin: every SYN of the second path, so its subflow never connects (the kernel never calls
            # .release for it: BALIA's map kept its slot for good, cwnd 10 and srtt 0).
            where = ["oifname", "p2c"] if mode == "nojoin" else []
            two.ns(two.c, "nft", "add", "table", "inet", "mplabt")
            two.ns(two.c, "nft", "add", "chain", "inet", "mplabt", "o", "{ type filter hook output priority 0 ; }")
            two.ns(two.c, "nft", "add", "rule", "inet", "mplabt", "o", *where, "tcp", "flags", "syn", "drop")
        client = _start(two, two.c, CLIENT, cc, {"orphan": "stall", "killed": "hold"}.get(mode, mode))
        if mode == "synonly":
            time.sleep(1.5)
            two.ns(two.c, "nft", "delete", "table", "inet", "mplabt")
        if mode == "killed":
            assert client.stdout.readline().strip() == "holding", client.stderr.read()
            client.kill()
            server.kill()
            client.wait(10)
            server.wait(10)
            two.down()  # the testbed's namespaces deleted under its open connection
            return
        out, err = client.communicate(timeout=60)
        assert "closed" in out, err
        if mode == "orphan":
            server.kill()  # the receiver dies with the sender's data unsent: the sender's subflows are orphans
        server.wait(60)
    finally:
        for p in (server,):
            if p.poll() is None:
                p.kill()
                p.wait(10)


@needs_tools
@pytest.mark.parametrize("algorithm", ["balia", "lia", "olia", "wvegas"])
def test_the_coupling_map_empties_however_a_connection_ends(prefix, tmp_path, algorithm):
    tag = f"{algorithm[0]}{uuid.uuid4().hex[:5]}"
    obj = build_renamed(algorithm, tag, tmp_path)
    cc = f"mplab_{tag}"
    ROOT.run(bpfcc.register_argv(obj), timeout=60)
    left: dict[str, list[dict]] = {}
    try:
        for mode in ("nojoin", "synonly", "close", "reset", "orphan", "killed"):
            two = TwoPaths(prefix).up()
            try:
                _connection(two, cc, mode)
                left[mode] = wait_empty(tag)
            finally:
                two.down()
        assert left == {m: [] for m in left}, {m: e[:2] for m, e in left.items() if e}
    finally:
        ROOT.run(bpfcc.unregister_argv(cc), check=False)
