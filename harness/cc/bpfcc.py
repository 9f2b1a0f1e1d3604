"""mplab's coupled congestion controls as BPF struct_ops, and the multipath-tcp.org kernel's own.

Upstream Linux MPTCP has no coupled congestion control, so on an upstream kernel mplab
registers its own BPF ``tcp_congestion_ops`` (``harness/cc/bpf/*.bpf.c``, built by
``make bpf``) under prefixed names (``mplab_lia``, ...). On a multipath-tcp.org kernel
the in-kernel ``lia``/``olia``/``balia``/``wvegas`` run instead, with that kernel's
sysctls. Which one ran is each record's ``cc_impl``: for mplab's programs the name and the
SHA-256 of the object that was registered (``bpf:mplab_olia@sha256:<16 hex digits>``), so two
builds of one algorithm never share a label.

Registration is global to the machine (not per namespace): ``setup`` registers unless
the name is already registered (idempotent; another live testbed may share it). Who registered
what is recorded machine-wide before the registration (``harness.machine.join_struct_ops``:
the testbed's prefix as ``owner``, ``pid:N`` for a trial in ``check``), so that a clean of one
prefix unregisters only what that prefix's testbeds registered (``unregister_released``) and
never a registration nobody recorded (another user's), which only ``unregister_all`` (the
machine-wide clean) removes. ``teardown`` unregisters only what this object registered itself
and nobody recorded (a lab host's), and only if no live mplab testbed still needs it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.errors import CommandError, PreflightError
from harness.resources import package_path
from harness.hosts.local import Host
from harness import machine
from harness.machine import names_needed

log = logging.getLogger("mplab.cc")

BPF_DIR = package_path("harness", "cc", "bpf")
BUILD_DIR = BPF_DIR / "build"
PREFIX = "mplab_"
COUPLED = ("lia", "olia", "balia", "wvegas")
#: Single-path programs for benches only (no scenario offers them): Vegas, the competitor of wVegas,
#: which this project's kernel does not ship (CONFIG_TCP_CONG_VEGAS unset).
SINGLE_PATH = ("vegas",)
BTF = "/sys/kernel/btf/vmlinux"
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
#: Kernel modules of the multipath-tcp.org kernel's coupled algorithms.
MPTCP_ORG_MODULES = {"lia": "mptcp_coupled", "olia": "mptcp_olia", "balia": "mptcp_balia",
                     "wvegas": "mptcp_wvegas"}
MPTCP_ORG_SYSCTLS = {"net.mptcp.mptcp_enabled": "1", "net.mptcp.mptcp_path_manager": "fullmesh"}


def object_path(algorithm: str) -> Path:
    """The compiled struct_ops object of ``algorithm``."""
    return BUILD_DIR / f"{algorithm}.bpf.o"


#: Hex digits of the object's SHA-256 kept in ``cc_impl`` (64 bits: no accidental collisions between builds).
DIGEST_HEX = 16


def file_digest(path: Path) -> str | None:
    """The first DIGEST_HEX hex digits of ``path``'s SHA-256 (None if it does not exist)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:DIGEST_HEX]
    except FileNotFoundError:
        return None


def object_digest(cc: object) -> str | None:
    """The digest of the BPF object behind ``cc`` (None for anything that is not mplab's BPF)."""
    return cc.digest() if isinstance(cc, BpfCC) else None


def map_name(algorithm: str) -> str:
    """Name of the per-connection coupling map inside ``algorithm``'s object."""
    return f"{algorithm}_conns"


def _available(host: Host) -> list[str]:
    return host.read_text(AVAILABLE).split()


def registered(host: Host) -> dict[str, int]:
    """mplab's struct_ops congestion controls registered on ``host``: name -> struct_ops map id."""
    res = host.run(["bpftool", "-j", "struct_ops", "show"], check=False)
    if res.returncode != 0:
        return {}
    try:
        entries = json.loads(res.stdout or "[]")
    except json.JSONDecodeError:
        return {}
    # An unregistered struct_ops stays listed until its last socket lets go (unregistering
    # it again fails with EINPROGRESS); only names the kernel still offers are registered.
    offered = set(_available(host))
    return {e["name"]: int(e["id"]) for e in entries
            if isinstance(e, dict) and str(e.get("name", "")).startswith(PREFIX)
            and e.get("kernel_struct_ops") == "tcp_congestion_ops" and e["name"] in offered}


def register_argv(obj: Path) -> list[str]:
    return ["bpftool", "struct_ops", "register", str(obj)]


def unregister_argv(name: str) -> list[str]:
    return ["bpftool", "struct_ops", "unregister", "name", name]


def unregister_all(host: Host, keep: Iterable[str] = ()) -> list[str]:
    """Unregister every ``mplab_*`` struct_ops congestion control except ``keep``; idempotent."""
    keep = set(keep)
    done = []
    for name in registered(host):
        if name in keep:
            continue
        res = host.run(unregister_argv(name), check=False)
        if res.returncode == 0:
            done.append(f"struct_ops {name}")
        else:
            log.warning("unregistering %s: %s", name, res.stderr.strip()[-200:])
    return done


def unregister_released(host: Host, leaving: Callable[[str], bool], keep: Iterable[str] = ()) -> list[str]:
    """Drop the recorded users ``leaving`` selects, then unregister the names nobody uses any more.

    Only names mplab recorded (``harness.machine.struct_ops_users``); ``keep`` (names a live
    testbed needs) stays registered. Records of names the kernel no longer has are dropped.
    """
    orphans = machine.release_struct_ops(leaving)
    if not orphans:
        return []
    keep, live = set(keep), registered(host)
    done, gone = [], []
    for name in orphans:
        if name in keep:
            continue
        if name not in live:
            gone.append(name)
            continue
        res = host.run(unregister_argv(name), check=False)
        if res.returncode == 0:
            done.append(f"struct_ops {name}")
            gone.append(name)
        else:
            log.warning("unregistering %s: %s", name, res.stderr.strip()[-200:])
    machine.drop_struct_ops(gone)
    return done


def _needed_elsewhere() -> set[str]:
    return names_needed()


class BpfCC:
    """A coupled algorithm (or a bench's single-path one, SINGLE_PATH) as mplab's BPF struct_ops program."""

    def __init__(self, algorithm: str, build_dir: Path | None = None) -> None:
        if algorithm not in COUPLED + SINGLE_PATH:
            raise KeyError(algorithm)
        self.algorithm = algorithm
        self.sock_name = f"{PREFIX}{algorithm}"
        self.obj = (build_dir or BUILD_DIR) / f"{algorithm}.bpf.o"
        #: hosts on which this object registered the name without a record (a lab host's); teardown's to undo
        self._unrecorded: set[str] = set()
        #: Digest of the object as ``setup`` registered it (until then, of the file as it is now).
        self._registered_digest: str | None = None

    def digest(self) -> str | None:
        """SHA-256 prefix of the object this implementation stands for (None: not built)."""
        return self._registered_digest or file_digest(self.obj)

    @property
    def implementation(self) -> str:
        """``bpf:mplab_<algo>@sha256:<digest>``, or without the digest while the object is not built."""
        d = self.digest()
        return f"bpf:{self.sock_name}@sha256:{d}" if d else f"bpf:{self.sock_name}"

    def _missing(self, host: Host) -> str | None:
        """Why this cannot load on ``host`` (None if nothing static is missing)."""
        if not host.exists("/proc/sys/net/mptcp/enabled"):
            return "the kernel has no upstream MPTCP (CONFIG_MPTCP=y, Linux >= 5.19 recommended)"
        if not host.exists(BTF):
            return (f"the kernel has no BTF ({BTF}); BPF struct_ops congestion control needs a kernel "
                    "built with CONFIG_DEBUG_INFO_BTF=y and CONFIG_BPF_JIT=y (Linux >= 6.0)")
        if host.which("bpftool") is None:
            return "bpftool not found: apt install bpftool (or linux-tools), then `make bpf`"
        if not self.obj.exists():
            return (f"{self.obj} is not built: run `make bpf` (needs clang, llvm, libbpf-dev, bpftool: "
                    "apt install clang llvm libbpf-dev bpftool)")
        return None

    def check(self, host: Host) -> None:
        """Static checks, then a trial registration (unregistered at once) so the verifier has its say now."""
        why = self._missing(host)
        if why:
            raise PreflightError(f"[{host.name}] congestion control {self.algorithm!r} ({self.implementation}) "
                                 f"cannot run: {why}")
        trial = f"pid:{os.getpid()}"
        if not machine.join_struct_ops(self.sock_name, trial, lambda: self.sock_name in _available(host)):
            machine.release_struct_ops(lambda u: u == trial)
            return
        self._register(host)
        # Recorded as this process's: killed before the next line, any clean removes it (a dead pid).
        if self.sock_name in machine.release_struct_ops(lambda u: u == trial) and \
                self.sock_name not in _needed_elsewhere():
            host.run(unregister_argv(self.sock_name), check=False)
            machine.drop_struct_ops([self.sock_name])

    def _register(self, host: Host) -> None:
        try:
            host.run(register_argv(self.obj), timeout=60)
        except CommandError as exc:
            if self.sock_name in _available(host):
                return  # registered concurrently by someone else: same program, fine
            raise PreflightError(
                f"[{host.name}] the kernel refused {self.implementation} ({self.obj.name}): {exc}. "
                "The verifier log above says why; kernels older than 6.0 or without struct_ops "
                "(CONFIG_BPF_JIT, CONFIG_DEBUG_INFO_BTF) cannot load it") from None
        if self.sock_name not in _available(host):
            raise PreflightError(f"[{host.name}] {self.sock_name} registered but not listed in {AVAILABLE}")

    def setup(self, host: Host, owner: str | None = None) -> None:
        """Register the program unless the name is there; record ``owner`` (a testbed's prefix) as its user.

        Without ``owner`` (a lab host reached over SSH: this machine's record is not that host's)
        nothing is recorded and ``teardown`` undoes what this object registered.
        """
        why = self._missing(host)
        if why:
            raise PreflightError(f"[{host.name}] {self.implementation}: {why}")
        self._registered_digest = file_digest(self.obj)
        if owner is not None:
            # Already registered by another live testbed of this machine (this checkout's build as a rule):
            # the record names the object this process would have registered.
            if machine.join_struct_ops(self.sock_name, owner, lambda: self.sock_name in _available(host)):
                self._register(host)
            return
        if self.sock_name not in _available(host):
            self._register(host)
            self._unrecorded.add(host.name)

    def teardown(self, host: Host) -> None:
        """Unregister what ``setup`` registered without a record, unless a live testbed needs it (best effort).

        Recorded registrations are the clean-up's (``unregister_released``, by prefix).
        """
        if host.name not in self._unrecorded:
            return
        self._unrecorded.discard(host.name)
        if self.sock_name in _needed_elsewhere() or self.sock_name in machine.struct_ops_users():
            return
        if self.sock_name in registered(host):
            host.run(unregister_argv(self.sock_name), check=False)


class MptcpOrgCC:
    """A coupled algorithm built into the multipath-tcp.org kernel (v0.9x)."""

    def __init__(self, algorithm: str) -> None:
        if algorithm not in COUPLED:
            raise KeyError(algorithm)
        self.algorithm = algorithm
        self.sock_name = algorithm
        self.implementation = f"mptcp.org:{algorithm}"

    def check(self, host: Host) -> None:
        if self.sock_name in _available(host):
            return
        mod = MPTCP_ORG_MODULES[self.algorithm]
        if host.run(["modinfo", mod], check=False).returncode != 0:
            raise PreflightError(f"[{host.name}] {self.algorithm!r} is not in this multipath-tcp.org kernel "
                                 f"(no module {mod}); build it with CONFIG_TCP_CONG_{self.algorithm.upper()}"
                                 "=y/m (CONFIG_TCP_CONG_COUPLED for lia)")

    def setup(self, host: Host, owner: str | None = None) -> None:  # modules are not recorded
        if self.sock_name not in _available(host):
            try:
                host.run(["modprobe", MPTCP_ORG_MODULES[self.algorithm]])
            except CommandError as exc:
                raise PreflightError(f"[{host.name}] cannot load {MPTCP_ORG_MODULES[self.algorithm]}: {exc}") from None
        for key, value in MPTCP_ORG_SYSCTLS.items():
            host.run(["sysctl", "-q", "-w", f"{key}={value}"])

    def teardown(self, host: Host) -> None:
        """Modules and sysctls stay: other users' sockets may depend on them."""


#: Kernel flavour -> how a coupled algorithm is implemented there.
COUPLED_IMPLS: dict[str, Callable[[str], object]] = {"upstream": BpfCC, "multipath-tcp.org": MptcpOrgCC}


def conn_entries(host: Host, algorithm: str) -> int | None:
    """Entries in ``algorithm``'s coupling map (live coupled connections); None if not loaded."""
    maps = maps_named(host, map_name(algorithm))
    if not maps:
        return None
    total = 0
    for m in maps:
        dump = host.run(["bpftool", "-j", "map", "dump", "id", str(m["id"])], check=False)
        try:
            total += len(json.loads(dump.stdout or "[]"))
        except json.JSONDecodeError:
            return None
    return total


#: The delay-based algorithms' rings of round ends (MPLAB_TRACE_RING in mplab_cc.h): ``vegas_rounds``
#: (vegas.bpf.c, struct vegas_round_rec) and ``wvegas_rounds`` (wvegas.bpf.c, struct wvegas_round_rec).
VEGAS_ROUNDS_MAP, WVEGAS_ROUNDS_MAP = "vegas_rounds", "wvegas_rounds"
#: A record's ``kind``: the algorithm's own rule decided (named by the algorithm: "vegas", "wvegas"); too
#: few RTT samples (Reno's step); too few and not cwnd-limited (the window left alone).
ROUND_KINDS = ("", "reno", "idle")


def maps_named(host: Host, name: str) -> list[dict]:
    """``bpftool map show`` of every loaded map called ``name`` (several when several objects define it)."""
    res = host.run(["bpftool", "-j", "map", "show"], check=False)
    try:
        return [m for m in json.loads(res.stdout or "[]") if m.get("name") == name]
    except (json.JSONDecodeError, AttributeError):
        return []


def map_values(host: Host, map_id: int) -> list[dict]:
    """The values of map ``map_id`` as bpftool formats them with BTF (named fields); [] when unreadable."""
    dump = host.run(["bpftool", "-j", "map", "dump", "id", str(map_id)], check=False)
    try:
        entries = json.loads(dump.stdout or "[]")
    except json.JSONDecodeError:
        return []
    if not isinstance(entries, list):  # {"error": ...}: the map went between `map show` and this dump
        return []
    values = [(e.get("formatted") or {}).get("value") or e.get("value") for e in entries if isinstance(e, dict)]
    return [v for v in values if isinstance(v, dict)]


#: The map in which each of mplab's struct_ops objects counts the ACKs that found a subflow's slow-start
#: threshold above TCP_INFINITE_SSTHRESH or its window at or above 2^31, values no callback returned
#: (mplab_watch, harness/cc/bpf/mplab_cc.h).
FAULTS_MAP = "mplab_faults"


class FaultWatch:
    """Reads the loaded ``mplab_faults`` maps on the host that sends (``host``): a sample reads them before its
    transfer (``read(relist=True)``: the maps loaded then, whose ids the read after reuses) and after it, and
    ``grown`` says, per peer address in the sender's network namespace (``netns``, its inode number), how many
    ACKs found no threshold or no window in between, and the last such ACK's threshold and window."""

    def __init__(self, host: Host, netns: int) -> None:
        self.host = host
        self.netns = netns
        self._ids: list[int] = []

    def read(self, relist: bool = False) -> dict[tuple[int, str, int, int], tuple[int, int, int]]:
        """(netns, peer address, local port, peer port) -> (ACKs, last threshold, last window) of every subflow
        seen so far."""
        if relist:
            self._ids = [m["id"] for m in maps_named(self.host, FAULTS_MAP)]
        out: dict[tuple[int, str, int, int], tuple[int, int, int]] = {}
        for map_id in self._ids:
            for v in map_values(self.host, map_id):
                sock = v.get("sock")
                try:
                    key = (int(sock["netns"]), socket.inet_ntoa(int(sock["peer_ip4"]).to_bytes(4, "little")),
                           int(sock["port"]), int(sock["dport"]))
                    out[key] = (int(v["acks"]), int(v["ssthresh"]), int(v["cwnd"]))
                except (KeyError, TypeError, ValueError, OverflowError):
                    continue
        return out

    def grown(self, before: dict, after: dict) -> dict[str, tuple[int, int, int]]:
        """Peer address -> (ACKs between the two reads, summed over its subflows; the last threshold and
        window), for the subflows of this sender's namespace whose count grew."""
        out: dict[str, tuple[int, int, int]] = {}
        for key, (acks, ssthresh, cwnd) in after.items():
            grew = acks - before.get(key, (0, 0, 0))[0]
            if key[0] == self.netns and grew > 0:
                out[key[1]] = (out.get(key[1], (0,))[0] + grew, ssthresh, cwnd)
        return out


def trace_rounds(host: Host, ring: str, since_ns: int = 0) -> list[dict]:
    """The round ends in trace ring ``ring`` (VEGAS_ROUNDS_MAP, WVEGAS_ROUNDS_MAP) written at or after
    ``since_ns`` (CLOCK_MONOTONIC nanoseconds, the clock of ``time.monotonic_ns()`` and of the program's
    ``bpf_ktime_get_ns``), oldest first, each as its record's fields (``kind`` by name, ROUND_KINDS, the
    rule's rounds by the algorithm's).
    RTTs are microseconds + 1, the unit tcp_vegas.c and mptcp_wvegas.c keep them in. A ring keeps its
    last 8192 (Vegas) or 16384 (wVegas) entries; [] when the algorithm is not loaded."""
    kinds = (ring.removesuffix("_rounds"), *ROUND_KINDS[1:])
    out: list[dict] = []
    for m in maps_named(host, ring):
        for rec in map_values(host, m["id"]):
            if not isinstance(rec.get("head"), dict):
                continue
            rec = {**rec.pop("head"), **rec}     # struct mplab_round's fields beside the algorithm's own
            if rec.get("seq") and rec["t_ns"] >= since_ns:
                out.append({**rec, "kind": kinds[rec["kind"]] if rec["kind"] < 3 else str(rec["kind"])})
    return sorted(out, key=lambda r: (r["t_ns"], r["seq"]))


def by_socket(rounds: list[dict]) -> dict[tuple[int, int], list[dict]]:
    """A trace's round ends per socket, (local port, peer port), each in the trace's order (a server's
    subflows share the local port; the peer port tells them apart)."""
    out: dict[tuple[int, int], list[dict]] = {}
    for r in rounds:
        out.setdefault((r["port"], r["dport"]), []).append(r)
    return out


def vegas_rounds(host: Host, since_ns: int = 0) -> list[dict]:
    """mplab_vegas' round ends (trace_rounds): per round the socket's port, ``kind``, base and minimum RTT
    and the sample count as the algorithm held them, the smoothed RTT, packets out, and the window before
    and after."""
    return trace_rounds(host, VEGAS_ROUNDS_MAP, since_ns)


def wvegas_rounds(host: Host, since_ns: int = 0) -> list[dict]:
    """mplab_wvegas' round ends (trace_rounds): per subflow round the port and slot, ``kind``, base RTT,
    the round's mean RTT and sample count, alpha and queueing delay before and after, the weight after
    (2^-16), the smoothed RTT, packets out, and the window before and after."""
    return trace_rounds(host, WVEGAS_ROUNDS_MAP, since_ns)
