"""A user-space delay line: a base delay per receiver path, on a kernel without netem.

This kernel has no netem, fq or etf, so nothing in tc can hold a packet for a time. The
delay line is a TUN device (``dly0``) in the AP's or the eNB's namespace: a policy rule
sends everything arriving from the sender (``iif to-snd``) to ``dly0``; this process
reads each packet, holds it for the delay of its destination (the receiver's path) and
writes it back; the kernel then receives it on ``dly0`` and routes it as usual, into the
receiver's radio queue (HTB + FIFO on ``rx<i>``). Only the downlink is delayed, so the
round-trip time grows by the delay once. Packets to one destination keep their order
(one FIFO per delay value).

``--jitter MS`` adds to each packet's hold a uniform random extra of up to MS, without reordering: a packet
never leaves before the one ahead of it in its FIFO (a server with a random service time, as a radio or a
router's input processing is). It breaks the clockwork timing of a path with no other variation, where
a drop-tail queue picks its victims by phase rather than by rate (Floyd and Jacobson, "On Traffic Phase
Effects in Packet-Switched Gateways", 1992, add a random delay of up to one bottleneck service time).
Default 0: the fixed delay alone.

Run inside the namespace (the TUN device belongs to it)::

    python -m harness.emulation.delayline --dev dly0 --delay 10.10.1.2=15 --delay 10.10.2.2=40

Its cost, jitter and the rate it sustains are measured by ``bench/delayline.py``.

The same line compiled (``delayline.c``, built by ``make setup`` into ``build/mplab-delayline``) takes the same
arguments and prints the same lines; ``start`` runs it where it is built (``implementation="auto"``) and this
module otherwise. At a speed-up the Python line's own work was 5-8 CPU s of user time per emulated GB
(``bench/speedup_cpu.py``).
"""
from __future__ import annotations

import argparse
import collections
import errno
import fcntl
import ipaddress
import os
import random
import select
import signal
import struct
import sys
import time
from pathlib import Path

from harness.resources import package_path

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
#: Packets read per wake-up at most (bounds the time one burst keeps due packets waiting).
BURST = 64
DEV = "dly0"
TABLE = 200
#: SCHED_FIFO priority of the delay line (0: normal scheduling): at normal priority on a loaded machine
#: (load 7-11) packets left up to 90-300 ms late, mdev 1-2 ms; at 10, mdev 0.08 ms (bench/delayline.py).
RT_PRIORITY = 10
#: The compiled delay line (``make setup``: ``cc -O2 -o harness/emulation/build/mplab-delayline delayline.c``).
PROGRAM = package_path("harness", "emulation", "build", "mplab-delayline")
IMPLEMENTATIONS = ("auto", "c", "python")


def open_tun(name: str) -> int:
    """Attach to the TUN device ``name`` (created beforehand with ``ip tuntap``) and return its fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    os.set_blocking(fd, False)
    return fd


def destination(packet: bytes) -> str | None:
    """The IPv4 destination of a packet (None for anything else)."""
    if len(packet) >= 20 and packet[0] >> 4 == 4:
        return str(ipaddress.IPv4Address(packet[16:20]))
    return None


def setup_argvs(delays: dict[str, float], uplink_dev: str = "to-snd") -> list[list[str]]:
    """Commands (in the namespace) that steer the sender's packets through the delay line.

    Only destinations with a delay go through it; the others keep the direct route.
    """
    cmds = [["ip", "tuntap", "add", "dev", DEV, "mode", "tun"],
            ["ip", "link", "set", "dev", DEV, "up"],
            ["sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0"],
            ["sysctl", "-q", "-w", f"net.ipv4.conf.{DEV}.rp_filter=0"]]
    for dst in sorted(delays):
        cmds.append(["ip", "route", "replace", f"{dst}/32", "dev", DEV, "table", str(TABLE)])
    cmds.append(["ip", "rule", "add", "iif", uplink_dev, "lookup", str(TABLE), "priority", "900"])
    return cmds


def attached(link_json: str) -> bool:
    """Whether ``ip -j link show dly0`` says a process holds the TUN device (it has a carrier)."""
    import json

    try:
        return "LOWER_UP" in json.loads(link_json)[0].get("flags", [])
    except (ValueError, IndexError, KeyError, TypeError):
        return False


def start(host, delays: dict[str, float], uplink_dev: str = "to-snd", deadline_s: float = 15.0,
          rt_priority: int = RT_PRIORITY, jitter_ms: float = 0.0, implementation: str = "auto"):
    """Steer ``host``'s packets from ``uplink_dev`` through a delay line and start it there.

    Args:
        host: the namespace Host (AP, eNB, a router) the delay line lives in.
        delays: destination address -> one-way delay (ms).
        uplink_dev: the device the sender's packets arrive on.
        jitter_ms: each packet held up to this much longer (uniform, order kept; 0: none).
        implementation: ``c`` (the compiled line), ``python`` (this module), ``auto`` (C where it is built).

    Returns:
        The running process (a ``BackgroundProcess``), once it holds the TUN device.
    """
    from harness.hosts.ready import wait_until

    for argv in setup_argvs(delays, uplink_dev):
        host.run(argv)
    argv = delayline_argv(delays, rt_priority, jitter_ms=jitter_ms, implementation=implementation)
    proc = host.start(argv, label=f"delayline:{host.name}")
    try:
        wait_until(lambda: attached(host.run(["ip", "-j", "link", "show", DEV]).stdout), deadline_s,
                   f"delay line in {host.name} (attached to {DEV})", proc=proc)
    except BaseException:
        proc.stop()  # idempotent; the caller never got hold of it
        raise
    return proc


def delayline_argv(delays: dict[str, float], rt_priority: int = RT_PRIORITY,
                   python: str = sys.executable, jitter_ms: float = 0.0, implementation: str = "auto",
                   program: Path = PROGRAM) -> list[str]:
    """The argument list that starts the delay line (for a namespace Host's ``start``).

    ``implementation``: ``c`` (``program``; ``PreflightError`` if it is not built), ``python``, or ``auto`` (C
    where ``program`` is built).
    """
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"delay line implementation {implementation!r}: one of {', '.join(IMPLEMENTATIONS)}")
    compiled = implementation == "c" or (implementation == "auto" and os.access(program, os.X_OK))
    if compiled and not os.access(program, os.X_OK):
        from harness.errors import PreflightError

        raise PreflightError(f"the compiled delay line {program} is not built: run `make setup`")
    head = [str(program)] if compiled else [python, "-m", "harness.emulation.delayline"]
    argv = [*head, "--dev", DEV, "--rt-priority", str(rt_priority)]
    if jitter_ms > 0:
        argv += ["--jitter", f"{jitter_ms:g}"]
    for dst, ms in sorted(delays.items()):
        argv += ["--delay", f"{dst}={ms:g}"]
    return argv


class DelayLine:
    """Read, hold, write back. ``stats`` counts packets and the worst lateness seen.

    ``jitter_s``: each packet's hold grows by a uniform draw from [0, jitter_s) of ``rng``, but never so that
    it leaves before the packet ahead of it in its FIFO.
    """

    def __init__(self, fd: int, delays_s: dict[str, float], jitter_s: float = 0.0,
                 rng: random.Random | None = None) -> None:
        self.fd = fd
        self.delays_s = delays_s
        self.jitter_s = jitter_s
        self.rng = rng or random.Random()
        self.queues: dict[float, collections.deque] = collections.defaultdict(collections.deque)
        self.running = True
        self.stats = {"packets": 0, "passed_undelayed": 0, "dropped_write": 0, "late_max_ms": 0.0}

    def _read_burst(self, now: float) -> None:
        for _ in range(BURST):
            try:
                pkt = os.read(self.fd, 65535)
            except BlockingIOError:
                return
            d = self.delays_s.get(destination(pkt) or "", 0.0)
            if d <= 0:
                self._write(pkt)
                self.stats["passed_undelayed"] += 1
            else:
                self.hold(now, d, pkt)

    def hold(self, now: float, delay_s: float, pkt: bytes) -> float:
        """Queue ``pkt`` (arrived at ``now``) in the FIFO of ``delay_s``; return when it is due."""
        q = self.queues[delay_s]
        due = now + delay_s
        if self.jitter_s > 0:
            due += self.jitter_s * self.rng.random()
            if q:
                due = max(due, q[-1][0])   # behind the packet ahead: order is kept
        q.append((due, pkt))
        return due

    def _write(self, pkt: bytes) -> None:
        try:
            os.write(self.fd, pkt)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ENOBUFS):
                raise
            self.stats["dropped_write"] += 1

    def _release(self, now: float) -> float | None:
        """Write every due packet; return when the next one is due (None: nothing held)."""
        nxt = None
        for q in self.queues.values():
            while q and q[0][0] <= now:
                due, pkt = q.popleft()
                self._write(pkt)
                self.stats["packets"] += 1
                late = (now - due) * 1000
                if late > self.stats["late_max_ms"]:
                    self.stats["late_max_ms"] = late
            if q and (nxt is None or q[0][0] < nxt):
                nxt = q[0][0]
        return nxt

    def run(self) -> None:
        nxt = None
        while self.running:
            now = time.monotonic()
            # select() takes microseconds; poll() and epoll() round up to whole milliseconds.
            timeout = 0.5 if nxt is None else max(0.0, nxt - now)
            try:
                events, _, _ = select.select([self.fd], [], [], timeout)
            except InterruptedError:
                continue
            now = time.monotonic()
            if events:
                self._read_burst(now)
            nxt = self._release(now)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", default=DEV)
    ap.add_argument("--delay", action="append", default=[], help="destination=milliseconds")
    ap.add_argument("--rt-priority", type=int, default=0,
                    help="run under SCHED_FIFO at this priority (1-99; 0: normal scheduling)")
    ap.add_argument("--jitter", type=float, default=0.0,
                    help="hold each packet up to this many ms longer (uniform, order kept; default 0)")
    args = ap.parse_args(argv)
    if not 0 <= args.jitter < 1000:
        ap.error(f"--jitter must be 0 to 1000 ms, not {args.jitter:g}")
    if args.rt_priority > 0:
        # On a loaded machine a normal-priority Python process is descheduled for tens of ms at a time;
        # the line sleeps in select() between packets, so real-time priority costs others little.
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
    delays = {}
    for item in args.delay:
        dst, _, ms = item.partition("=")
        delays[str(ipaddress.IPv4Address(dst))] = float(ms) / 1000
    line = DelayLine(open_tun(args.dev), delays, jitter_s=args.jitter / 1000)

    def _stop(*_):
        line.running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print("delayline ready", flush=True)
    try:
        line.run()
    finally:
        print(f"delayline stats {line.stats}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
