"""Preflight checks of one host: what a sample needs, checked before anything starts.

Each function takes a Host and returns ``Check``s (pass/fail, what was found, how to
fix it); none has side effects on the host. ``LabTestbed.preflight`` runs them on every
lab machine in parallel; ``mplab preflight`` prints the table. The same functions run
on namespace and SSH hosts alike.
"""
from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from harness.cc import CongestionControl, kernel_flavour
from harness.errors import MplabError, PreflightError
from harness.hosts.local import Host
from harness.traffic import Iperf3


@dataclass(frozen=True)
class Check:
    """One preflight check on one host."""

    host: str
    name: str
    ok: bool
    detail: str
    fix: str = ""
    essential: bool = True


def failed_essentials(checks: list[Check]) -> list[Check]:
    """The essential checks that failed: a sweep refuses to start on any, `mplab doctor` exits 1."""
    return [c for c in checks if c.essential and not c.ok]


def one_line(checks: list[Check]) -> str:
    """Failed checks on one line, each with its fix: ``name: detail (fix: ...)``, separated by ``; ``."""
    return "; ".join(f"{c.name}: {c.detail} (fix: {c.fix})" for c in checks)


#: UP, or UNKNOWN for drivers that never report carrier (many LTE modems' wwan/usb interfaces).
USABLE_OPERSTATES = ("UP", "UNKNOWN")


def reachable(host: Host, timeout_s: float = 10.0) -> Check:
    """Can we run a command there at all?"""
    try:
        host.run(["true"], timeout=timeout_s)
        return Check(host.name, "reachable", True, host.kind)
    except MplabError as exc:
        return reachable_failure(host, exc)


def reachable_failure(host: Host, exc: MplabError, essential: bool = True) -> Check:
    """The failed ``reachable`` row of ``host`` for the error a command there raised."""
    fix = ("check that the machine is up and on the management network, and its ssh section "
           "(address, port, user, key_file, known_hosts); `mplab lab keys` installs and pins the keys"
           ) if host.kind == "ssh" else "set up the testbed first"
    return Check(host.name, "reachable", False, str(exc), fix, essential=essential)


def kernel_checks(host: Host) -> list[Check]:
    """Kernel flavour (upstream or multipath-tcp.org) and whether MPTCP is enabled."""
    flavour = kernel_flavour(host)
    release = host.run(["uname", "-r"]).stdout.strip()
    out = [Check(host.name, "kernel flavour", flavour != "none", f"{flavour} ({release})",
                 "boot a kernel with MPTCP: upstream >= 5.19 (CONFIG_MPTCP=y) or a multipath-tcp.org v0.95 kernel")]
    if flavour == "upstream":
        val = host.read_text("/proc/sys/net/mptcp/enabled").strip()
        out.append(Check(host.name, "MPTCP enabled", val == "1", f"net.mptcp.enabled = {val}",
                         "sysctl -w net.mptcp.enabled=1 (and in /etc/sysctl.d/ to keep it); a lab board: `mplab lab prepare`"))
    elif flavour == "multipath-tcp.org":
        val = host.read_text("/proc/sys/net/mptcp/mptcp_enabled").strip()
        out.append(Check(host.name, "MPTCP enabled", val in ("1", "2"), f"net.mptcp.mptcp_enabled = {val}",
                         "sysctl -w net.mptcp.mptcp_enabled=1"))
    return out


def cc_checks(host: Host, ccs: Sequence[CongestionControl]) -> list[Check]:
    """Every congestion control of the sweep can be selected on ``host``."""
    out = []
    for cc in ccs:
        try:
            cc.check(host)
            out.append(Check(host.name, f"congestion control {cc.algorithm}", True, cc.implementation))
        except PreflightError as exc:
            out.append(Check(host.name, f"congestion control {cc.algorithm}", False, str(exc),
                             f"load tcp_{cc.sock_name} (modprobe) or use a kernel that has it"))
    return out


def iperf3_check(host: Host) -> tuple[Check, Iperf3 | None]:
    """iperf3's version and how it gets MPTCP sockets."""
    try:
        ip3 = Iperf3.check(host)
        return Check(host.name, "iperf3", True, f"{ip3.version}, MPTCP via {ip3.mptcp_mode}"), ip3
    except PreflightError as exc:
        return Check(host.name, "iperf3", False, str(exc),
                     "apt install iperf3 mptcpize (or iperf3 >= 3.19); a lab board: `mplab lab prepare`"), None


def interface_checks(host: Host, radio: str, ifname: str, address: str, probe_dst: str) -> list[Check]:
    """The interface is up with its address, and traffic from that address leaves through it."""
    name = f"interface {radio} ({ifname})"
    res = host.run(["ip", "-j", "addr", "show", "dev", ifname], check=False)
    if res.returncode != 0:
        return [Check(host.name, name, False, f"no interface {ifname}: {res.stderr.strip()}",
                      f"plug in the {radio} adapter, or fix the interface name in the inventory")]
    try:
        info = json.loads(res.stdout)[0]
    except (json.JSONDecodeError, IndexError):
        return [Check(host.name, name, False, "cannot read `ip -j addr`", "")]
    state = info.get("operstate", "?")
    addrs = [a.get("local") for a in info.get("addr_info", []) if a.get("family") == "inet"]
    out = [Check(host.name, name, state in USABLE_OPERSTATES and address in addrs,
                 f"{state}, addresses {addrs or 'none'} (want {address})",
                 f"ip link set {ifname} up; associate/attach it and make sure it gets {address}")]
    route = host.run(["ip", "-j", "route", "get", probe_dst, "from", address], check=False)
    dev = None
    try:
        dev = json.loads(route.stdout)[0].get("dev")
    except (json.JSONDecodeError, IndexError):
        pass
    out.append(Check(host.name, f"route from {radio}", dev == ifname,
                     f"{probe_dst} from {address} leaves via {dev or route.stderr.strip() or '?'}",
                     f"per-interface routing (a lab board: `mplab lab prepare`): ip rule add from {address} "
                     f"table <n>; ip route add default via <{radio} gateway> dev {ifname} table <n>"))
    return out


def clock_check(host: Host, max_offset_s: float) -> tuple[Check, float | None]:
    """Offset of the host's wall clock to the orchestrator's (not essential: starts are gated, not scheduled)."""
    try:
        off = host.clock_offset_s()
    except MplabError as exc:
        return Check(host.name, "clock offset", False, str(exc), "", essential=False), None
    return Check(host.name, "clock offset", abs(off) <= max_offset_s,
                 f"{off * 1000:+.1f} ms (limit {max_offset_s * 1000:.0f} ms)",
                 "run chrony/systemd-timesyncd against the orchestrator or one common NTP server",
                 essential=False), off


def tcp_reachable(url: str, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Whether the host:port of a ``rfc2217://``/``socket://`` URL accepts a TCP connection."""
    u = urlparse(url)
    if not u.hostname or not u.port:
        return False, f"{url}: no host:port"
    try:
        with socket.create_connection((u.hostname, u.port), timeout=timeout_s):
            return True, f"{u.hostname}:{u.port} accepts connections"
    except OSError as exc:
        return False, f"{u.hostname}:{u.port}: {exc}"
