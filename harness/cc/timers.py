"""The kernel's TCP timers scaled per socket, for an emulated testbed that runs S times faster than real time.

At a speed-up S the testbed's round trips shrink by S, but two of the kernel's TCP timers do not: the
delayed-ACK timer (40 ms in a bulk transfer: ``TCP_ATO_MIN``/``TCP_DELACK_MIN``) and the minimum
retransmission timeout (200 ms, ``TCP_RTO_MIN``). This kernel lets a BPF ``sock_ops`` program set both per
socket (``TCP_BPF_DELACK_MAX``, ``TCP_BPF_RTO_MIN``), so:

- each testbed at S > 1 gets a cgroup (v2) of its own, ``<cgroup2 mount>/<prefix>tcp``; the processes its
  namespace hosts start (iperf3 servers and clients, and the testbed's helpers) join it before they run
  (``NamespaceHost.cgroup``);
- ``harness/cc/bpf/timers.bpf.c`` is attached to it and sets, on every TCP socket established there, the
  delayed-ACK ceiling to 40 ms / S and the minimum RTO to 200 ms / S. MPTCP subflows are kernel sockets,
  but the kernel gives each the cgroup of its MPTCP socket (``mptcp_attach_cgroup``; a server's subflows
  are clones of its listener's), so they get the same values: ``seen`` reads them back from the sockets.

The kernel keeps both in jiffies and refuses less than two (``TCP_TIMEOUT_MIN``), so a value is rounded up
to whole jiffies of this kernel's ``CONFIG_HZ`` and never below two: with HZ = 250, S = 8 gets a
delayed-ACK ceiling of 8 ms (not 5) and a minimum RTO of 28 ms (not 25); S = 16, 8 ms (not 2.5) and 16 ms
(not 12.5). ``TimerValues`` says what was asked and what the kernel holds; every record's ``tcp_timers``
names the program (its object's digest) and the values applied.

What this leaves as it is: the SYN's timeout (1 s, no transfer runs on it), the delayed-ACK timer's growth
above 40 ms on sparse traffic (capped at 40 ms / S here), and everything the issue lists as not scalable
this way (Cubic's clock, pacing and TSQ, the MPTCP path manager's timers).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import gzip
import json
import logging
import math
import os
import platform
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from harness import machine
from harness.cc import libbpf
from harness.cc.bpfcc import BTF, BUILD_DIR, file_digest
from harness.errors import MplabError, PreflightError
from harness.hosts.local import Host

log = logging.getLogger("mplab.cc.timers")

#: The delayed-ACK timer of a bulk transfer at real time (``TCP_ATO_MIN`` = ``TCP_DELACK_MIN`` = HZ/25).
REAL_DELACK_S = 0.040
#: The minimum retransmission timeout at real time (``TCP_RTO_MIN`` = HZ/5).
REAL_RTO_MIN_S = 0.200
#: The kernel refuses a timer shorter than this many jiffies (``TCP_TIMEOUT_MIN``).
MIN_JIFFIES = 2
OBJECT = BUILD_DIR / "timers.bpf.o"
PROGRAM = "mplab_timers"
CONFIG_MAP = "mplab_timers_cfg"
#: The read-back map's name as the kernel lists it (map names are cut to 15 characters).
SEEN_MAP = "mplab_timers_se"
#: The cgroup directory of a testbed: ``<prefix>`` + this (a dash-free role, as its namespaces have).
ROLE = "tcp"
#: ``enum bpf_attach_type``: BPF_CGROUP_SOCK_OPS; ``BPF_F_ALLOW_MULTI`` (a parent's programs keep running).
BPF_CGROUP_SOCK_OPS = 3
BPF_F_ALLOW_MULTI = 2


def kernel_hz(release: str | None = None) -> int | None:
    """This kernel's ``CONFIG_HZ`` from /proc/config.gz or /boot/config-<release> (None: neither says)."""
    release = release or platform.release()
    for path, opener in ((Path("/proc/config.gz"), gzip.open), (Path(f"/boot/config-{release}"), open)):
        try:
            with opener(path, "rt") as f:
                for line in f:
                    if line.startswith("CONFIG_HZ="):
                        return int(line.split("=", 1)[1])
        except (OSError, ValueError):
            continue
    return None


@dataclass(frozen=True)
class TimerValues:
    """The timers one testbed's sockets get: asked (real time / S) and applied (whole jiffies, >= 2)."""

    speedup: float
    hz: int
    delack_asked_us: float
    rto_min_asked_us: float
    delack_max_us: int
    rto_min_us: int

    @classmethod
    def for_speedup(cls, speedup: float, hz: int) -> TimerValues:
        """The values for factor ``speedup`` on a kernel of ``hz`` jiffies a second."""
        def applied(us: float) -> int:
            jiffies = max(MIN_JIFFIES, math.ceil(us * hz / 1e6 - 1e-9))
            return round(jiffies * 1e6 / hz)

        delack, rto = REAL_DELACK_S * 1e6 / speedup, REAL_RTO_MIN_S * 1e6 / speedup
        return cls(speedup, hz, delack, rto, applied(delack), applied(rto))

    def describe(self, digest: str | None) -> str:
        """The records' ``tcp_timers``: the program (and its object's digest), the values applied."""
        prog = f"bpf:{PROGRAM}@sha256:{digest}" if digest else f"bpf:{PROGRAM}"
        return f"{prog} delack_max={self.delack_max_us / 1000:g}ms rto_min={self.rto_min_us / 1000:g}ms"


def cgroup2_mount(mounts: str | None = None) -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``, or ``.../unified`` on a hybrid system)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            return None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "cgroup2":
            return Path(fields[1])
    return None


def cgroup_path(prefix: str, mount: Path) -> Path:
    """The cgroup of the testbed with namespace prefix ``prefix``."""
    return mount / f"{prefix}{ROLE}"


def attach(cgroup: Path, values: TimerValues, obj: Path = OBJECT) -> None:
    """Load ``obj``, write ``values`` into its configuration and attach it to ``cgroup`` (sock_ops).

    The attachment holds the program (and the program its maps) after this returns: nothing is pinned, and
    removing the cgroup releases them.
    """
    lib = libbpf.library()
    handle = libbpf.load(lib, obj)
    try:
        prog = lib.bpf_object__find_program_by_name(handle, PROGRAM.encode())
        cfg = lib.bpf_object__find_map_by_name(handle, CONFIG_MAP.encode())
        if not prog or not cfg:
            raise PreflightError(f"{obj} has no program {PROGRAM} or map {CONFIG_MAP}: rebuild it (`make bpf`)")
        key, value = ctypes.c_uint32(0), (ctypes.c_uint32 * 2)(values.delack_max_us, values.rto_min_us)
        if lib.bpf_map_update_elem(lib.bpf_map__fd(cfg), ctypes.byref(key), ctypes.byref(value), 0):
            raise MplabError(f"cannot configure {PROGRAM}: {os.strerror(ctypes.get_errno())}")
        fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if lib.bpf_prog_attach(lib.bpf_program__fd(prog), fd, BPF_CGROUP_SOCK_OPS, BPF_F_ALLOW_MULTI):
                raise MplabError(f"cannot attach {PROGRAM} to {cgroup}: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(fd)
    finally:
        lib.bpf_object__close(handle)


class TimerScaling:
    """One testbed's scaled TCP timers: its cgroup and the program attached to it.

    ``check()`` (no side effects) says why it cannot run here; ``setup()`` makes the cgroup and attaches;
    ``teardown()`` removes the cgroup (``remove_cgroups`` does the same after a crash).
    """

    def __init__(self, prefix: str, speedup: float, hz: int | None = None, mount: Path | None = None) -> None:
        self.prefix = prefix
        self.mount = mount if mount is not None else cgroup2_mount()
        self.hz = hz or kernel_hz()
        self.values = TimerValues.for_speedup(speedup, self.hz) if self.hz else None
        self.cgroup = cgroup_path(prefix, self.mount) if self.mount else None
        self.digest: str | None = None

    def check(self) -> str | None:
        """Why the timers cannot be scaled on this machine (None: they can)."""
        if self.mount is None:
            return "no cgroup v2 hierarchy is mounted (mount -t cgroup2 none /sys/fs/cgroup/unified)"
        if self.hz is None:
            return "this kernel's CONFIG_HZ is unknown (no /proc/config.gz or /boot/config-<release>)"
        if not Path(BTF).exists():
            return f"the kernel has no BTF ({BTF})"
        if not OBJECT.exists():
            return f"{OBJECT} is not built: run `make bpf`"
        if ctypes.util.find_library("bpf") is None:
            return "libbpf.so not found: apt install libbpf1"
        return None

    def setup(self) -> None:
        """Make the testbed's cgroup and attach the program to it (``PreflightError`` naming why not)."""
        why = self.check()
        if why:
            raise PreflightError(f"cannot scale the TCP timers: {why}")
        assert self.cgroup is not None and self.values is not None
        self.cgroup.mkdir(exist_ok=True)
        self.digest = file_digest(OBJECT)
        attach(self.cgroup, self.values)
        log.info("TCP timers scaled in %s: %s", self.cgroup, self.describe())

    def describe(self) -> str | None:
        """What every record's ``tcp_timers`` says (None until set up)."""
        return self.values.describe(self.digest) if self.values and self.digest else None

    def teardown(self) -> None:
        """Remove the cgroup (its processes, which are the testbed's, stopped by pid first); idempotent."""
        if self.cgroup is not None:
            remove_cgroup(self.cgroup)


def cgroup_pids(cgroup: Path) -> list[int]:
    """The processes in ``cgroup`` (none if it is gone)."""
    try:
        return [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_cgroup(cgroup: Path, grace_s: float = 2.0) -> bool:
    """Stop the processes left in ``cgroup`` (by pid: only mplab puts processes there), then remove it.

    Child cgroups go first (a bench splits the testbed's processes into them: ``bench/speedup_cpu.py``).
    """
    if not cgroup.is_dir():
        return False
    for child in [d for d in cgroup.iterdir() if d.is_dir()]:
        remove_cgroup(child, grace_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = cgroup_pids(cgroup)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while cgroup_pids(cgroup) and time.monotonic() < deadline:
            time.sleep(0.02)
    try:
        cgroup.rmdir()
    except OSError as exc:
        log.warning("cannot remove cgroup %s: %s", cgroup, exc)
        return False
    return True


def remove_cgroups(prefix: str, nested: bool, keep=lambda name: False, mount: Path | None = None) -> list[str]:
    """Remove the cgroups of testbeds under ``prefix`` (``harness.machine.owned``) except those ``keep`` names."""
    mount = mount if mount is not None else cgroup2_mount()
    if mount is None:
        return []
    done = []
    for d in sorted(mount.glob(f"{prefix}*{ROLE}")):
        name = d.name
        if not d.is_dir() or not machine.owned(name, prefix, nested) or not name.endswith(ROLE):
            continue
        testbed = name[:-len(ROLE)]
        if keep(testbed):
            continue
        if remove_cgroup(d):
            done.append(f"cgroup {d}")
    return done


@dataclass(frozen=True)
class SocketTimers:
    """One socket as the program left it: its addresses, the values read back from it (us), the setsockopt results."""

    local: str
    remote: str
    local_port: int
    remote_port: int
    op: str
    delack_max_us: int
    rto_min_us: int
    delack_err: int
    rto_err: int


def _ip(n: int) -> str:
    return ".".join(str(b) for b in n.to_bytes(4, "little"))


def seen(host: Host, cgroup: Path, hz: int) -> list[SocketTimers]:
    """The sockets the program attached to ``cgroup`` has set, read back from its map (``bpftool``)."""
    res = host.run(["bpftool", "-j", "cgroup", "show", str(cgroup)], check=False)
    progs = [p for p in json.loads(res.stdout or "[]") if p.get("name") == PROGRAM]
    out = []
    for p in progs:
        info = json.loads(host.run(["bpftool", "-j", "prog", "show", "id", str(p["id"])]).stdout)
        for map_id in info.get("map_ids", []):
            m = json.loads(host.run(["bpftool", "-j", "map", "show", "id", str(map_id)]).stdout)
            if m.get("name") != SEEN_MAP:
                continue
            for e in json.loads(host.run(["bpftool", "-j", "map", "dump", "id", str(map_id)]).stdout):
                k, v = e["formatted"]["key"], e["formatted"]["value"]
                out.append(SocketTimers(
                    _ip(k["local_ip4"]), _ip(k["remote_ip4"]), k["local_port"], k["remote_port"],
                    {4: "active", 5: "passive"}.get(v["op"], str(v["op"])),
                    round(v["delack_max_jiffies"] * 1e6 / hz), round(v["rto_min_jiffies"] * 1e6 / hz),
                    v["delack_err"], v["rto_err"]))
    return out
