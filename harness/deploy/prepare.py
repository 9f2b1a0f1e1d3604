"""Preparing the lab's boards: what `mplab lab prepare` changes on a machine so that preflight passes.

For the sender and every receiver, ``plan_host`` reads the machine (no side effects) and returns one
``Step`` per thing preflight checks: the programs (iperf3, mptcpize, ser2net, rfcomm), MPTCP enabled and
its limits, the LTE subflow's endpoint, each radio's link up, its policy route and rule, the meter's
RFCOMM binding, the sender's service address. A step is ``ok`` (nothing to do), ``change`` (the argument
lists that would make it so) or ``refused`` (something there that mplab did not write, or that only a
person can fix: a missing adapter). ``apply_steps`` runs the changes and reads the step again.

Ownership: routes and rules mplab writes carry the routing protocol ``MPLAB_RT_PROTO``; a policy table
holding any other route, a rule priority taken by another rule, or an MPTCP endpoint with other flags
is left alone and reported. Nothing is deleted. What this writes lives until the next boot (like the
Pantheon wrappers' ``setup_after_reboot``): run it again after a reboot; the board's own configuration
(netplan, systemd-networkd, sysctl.d) is not edited.

The routing tables and rule priorities are those of the emulated testbed, so a receiver looks the same
to every check on both kinds.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

from harness.config.inventory import Inventory, Receiver
from harness.errors import MplabError
from harness.hosts.local import Host
from harness.hosts.netcmd import link_up_argv, mptcp_endpoint_argv, mptcp_limits_argv, sysctl_argv

#: The routing protocol number on every route and rule mplab writes (``ip route ... proto 77``): how a later
#: run tells its own from the board's (0-4 are the kernel's, 16+ daemons'; 77 is registered to none).
MPLAB_RT_PROTO = "77"
#: Policy tables and rule priorities per radio: the emulated testbed's (``harness.testbeds.health``, which
#: builds on this layer, so the numbers are repeated here; a test holds them equal).
TABLES = {"wifi": 101, "lte": 102}
RULE_PRIORITY = {"wifi": 1000, "lte": 1001}
#: At least what a receiver's two-path connection needs (the emulated testbed sets 2, 2).
MIN_LIMITS = {"subflows": 2, "add_addr_accepted": 2}
#: Debian/Ubuntu packages of the programs mplab runs on a board.
PACKAGES = {"iperf3": "iperf3", "mptcpize": "mptcpize", "ser2net": "ser2net", "rfcomm": "bluez"}
_RFCOMM = re.compile(r"^/dev/rfcomm(\d+)$")


@dataclass(frozen=True)
class Step:
    """One thing on one machine: ``state`` is ok, change, refused, changed or failed."""

    host: str
    name: str
    state: str
    detail: str
    argvs: tuple[tuple[str, ...], ...] = ()
    fix: str = ""

    def commands(self) -> str:
        """The changes as the shell lines a technician would type."""
        return "; ".join(shlex.join(a) for a in self.argvs)


def _ok(host: Host, name: str, detail: str) -> Step:
    return Step(host.name, name, "ok", detail)


def _change(host: Host, name: str, detail: str, *argvs: Sequence[str]) -> Step:
    return Step(host.name, name, "change", detail, tuple(tuple(a) for a in argvs))


def _refused(host: Host, name: str, detail: str, fix: str) -> Step:
    return Step(host.name, name, "refused", detail, fix=fix)


def packages_step(host: Host, programs: Sequence[str]) -> Step:
    """The programs the machine must have; installs the missing ones' packages with apt-get."""
    missing = [p for p in programs if host.which(p) is None]
    if "iperf3" in programs and "iperf3" not in missing and host.which("mptcpize") is None:
        # iperf3 >= 3.19 opens MPTCP sockets itself (-m); older ones need mptcpize (harness.traffic.Iperf3).
        if "--mptcp" not in host.run(["iperf3", "--help"], check=False).stdout:
            missing.append("mptcpize")
    elif "iperf3" in missing and host.which("mptcpize") is None:
        missing.append("mptcpize")
    if not missing:
        return _ok(host, "packages", ", ".join(programs) + " present")
    pkgs = sorted({PACKAGES.get(p, p) for p in missing})
    if host.which("apt-get") is None:
        return _refused(host, "packages", f"missing {', '.join(missing)}; no apt-get on this machine",
                        f"install {', '.join(pkgs)} with the machine's package manager")
    return _change(host, "packages", f"missing {', '.join(missing)}",
                   ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "--no-install-recommends",
                    *pkgs])


def mptcp_enabled_step(host: Host) -> Step:
    """net.mptcp.enabled = 1 (an upstream kernel; a kernel without MPTCP is the technician's to replace)."""
    if not host.exists("/proc/sys/net/mptcp/enabled"):
        return _refused(host, "MPTCP enabled", "no /proc/sys/net/mptcp/enabled: the kernel has no upstream MPTCP",
                        "boot a kernel with CONFIG_MPTCP=y (upstream >= 5.19)")
    val = host.read_text("/proc/sys/net/mptcp/enabled").strip()
    if val == "1":
        return _ok(host, "MPTCP enabled", "net.mptcp.enabled = 1")
    return _change(host, "MPTCP enabled", f"net.mptcp.enabled = {val}", sysctl_argv("net.mptcp.enabled", 1))


def parse_limits(text: str) -> dict[str, int]:
    """``ip mptcp limits show`` ("add_addr_accepted 0 subflows 2") as a dict (iproute2 has no JSON for it)."""
    words = text.split()
    return {k: int(v) for k, v in zip(words[::2], words[1::2], strict=False) if v.isdigit()}


def limits_step(host: Host) -> Step:
    """MPTCP limits at least ``MIN_LIMITS`` (raised, never lowered)."""
    res = host.run(["ip", "mptcp", "limits", "show"], check=False)
    if res.returncode != 0:
        return _refused(host, "MPTCP limits", f"ip mptcp limits: {res.stderr.strip()[-200:]}",
                        "install iproute2 >= 5.7 (ip mptcp)")
    have = parse_limits(res.stdout)
    want = {k: max(v, have.get(k, 0)) for k, v in MIN_LIMITS.items()}
    shown = f"subflows {have.get('subflows', 0)}, add_addr_accepted {have.get('add_addr_accepted', 0)}"
    if all(have.get(k, 0) >= v for k, v in MIN_LIMITS.items()):
        return _ok(host, "MPTCP limits", shown)
    return _change(host, "MPTCP limits", shown, mptcp_limits_argv(want["subflows"], want["add_addr_accepted"]))


def endpoint_step(host: Host, address: str, dev: str) -> Step:
    """The LTE address an MPTCP ``subflow`` endpoint on its device: the second path's subflow starts from it."""
    name = f"MPTCP endpoint {address}"
    res = host.run(["ip", "-j", "mptcp", "endpoint", "show"], check=False)
    try:
        eps = json.loads(res.stdout or "[]")
    except json.JSONDecodeError:
        eps = None
    if res.returncode != 0 or eps is None:
        return _refused(host, name, f"cannot read MPTCP endpoints: {res.stderr.strip()[-200:]}",
                        "install iproute2 >= 5.7 (ip mptcp)")
    mine = [e for e in eps if e.get("address") == address]
    if not mine:
        return _change(host, name, "absent", mptcp_endpoint_argv(address, dev, ("subflow",)))
    e = mine[0]
    if e.get("subflow") and e.get("dev", dev) == dev:
        return _ok(host, name, f"id {e.get('id')} subflow dev {dev}")
    flags = [k for k in ("signal", "subflow", "backup", "fullmesh") if e.get(k)]
    return _refused(host, name, f"id {e.get('id')} has flags {flags or 'none'} dev {e.get('dev', '-')}: "
                                "not what mplab writes, so not changed",
                    f"if it is stale: ip mptcp endpoint delete id {e.get('id')}; then prepare again")


def link_step(host: Host, radio: str, dev: str) -> tuple[Step, dict | None]:
    """The radio's interface present and up (the modem's wwan0 often comes up down)."""
    name = f"link {radio} ({dev})"
    res = host.run(["ip", "-j", "link", "show", "dev", dev], check=False)
    if res.returncode != 0:
        return _refused(host, name, f"no interface {dev}", f"plug in the {radio} adapter, or fix "
                                                           "interfaces.<radio>.name in the inventory"), None
    info = (json.loads(res.stdout or "[{}]") or [{}])[0]
    if "UP" in info.get("flags", []):
        return _ok(host, name, f"up ({info.get('operstate', '?')})"), info
    return _change(host, name, "down", link_up_argv(dev)), info


def route_steps(host: Host, radio: str, dev: str, address: str, gateway: str | None,
                link: dict | None) -> list[Step]:
    """Per-interface routing: a policy table per radio with a default route through it, and the rule that
    sends traffic from the radio's address there (preflight: "route from <radio>")."""
    table, prio = TABLES[radio], RULE_PRIORITY[radio]
    out: list[Step] = []
    name = f"route {radio} (table {table})"
    if gateway is None and link is not None:
        found = host.run(["ip", "-j", "route", "show", "default", "dev", dev], check=False).stdout
        gateway = next((r.get("gateway") for r in json.loads(found or "[]") if r.get("gateway")), None)
    if gateway is None and link is not None and link.get("link_type") not in ("none", None):
        out.append(_refused(host, name, f"no gateway known for {dev} ({link.get('link_type')})",
                            f"set interfaces.{radio}.gateway in the inventory (the next hop on that network)"))
    else:
        routes = json.loads(host.run(["ip", "-j", "route", "show", "table", str(table)], check=False).stdout or "[]")
        foreign = [r for r in routes if r.get("protocol") != MPLAB_RT_PROTO]
        want = ["ip", "route", "replace", "default", *(["via", gateway] if gateway else []), "dev", dev,
                "table", str(table), "proto", MPLAB_RT_PROTO]
        if foreign:
            out.append(_refused(host, name, f"table {table} holds {len(foreign)} route(s) mplab did not write "
                                            f"({foreign[0].get('dst')} dev {foreign[0].get('dev')})",
                                f"move them to another table, or remove them (ip route flush table {table}) "
                                "if they are stale"))
        elif any(r.get("dst") == "default" and r.get("dev") == dev and r.get("gateway") == gateway for r in routes):
            out.append(_ok(host, name, f"default{' via ' + gateway if gateway else ''} dev {dev}"))
        else:
            have = ", ".join(f"{r.get('dst')} via {r.get('gateway', '-')} dev {r.get('dev')}" for r in routes)
            out.append(_change(host, name, have or "empty", want))
    rname = f"rule from {address}"
    rules = json.loads(host.run(["ip", "-j", "rule", "show"], check=False).stdout or "[]")
    at = [r for r in rules if r.get("priority") == prio]
    if any(r.get("src") == address and str(r.get("table")) == str(table) for r in at):
        out.append(_ok(host, rname, f"lookup {table} priority {prio}"))
    elif at:
        r = at[0]
        out.append(_refused(host, rname, f"priority {prio} holds another rule (from {r.get('src')} lookup "
                                         f"{r.get('table')}): not mplab's", f"free priority {prio} (ip rule del "
                                                                           f"priority {prio}) if it is stale"))
    else:
        out.append(_change(host, rname, "absent", ["ip", "rule", "add", "from", address, "lookup", str(table),
                                                   "priority", str(prio), "protocol", MPLAB_RT_PROTO]))
    return out


def meter_step(host: Host, rx: Receiver) -> Step | None:
    """The meter's serial device on the receiver: an RFCOMM device bound to the meter's MAC (pairing stays a
    person's step: the meter's PIN is typed once in bluetoothctl)."""
    cfg = rx.meter.ser2net
    if cfg is None:
        return None
    name = f"meter link ({cfg.device})"
    if host.exists(cfg.device):
        return _ok(host, name, "present")
    m = _RFCOMM.match(cfg.device)
    if m and cfg.bluetooth:
        return _change(host, name, "absent", ["rfcomm", "bind", m.group(1), cfg.bluetooth, "1"])
    return _refused(host, name, "absent", "pair the meter (bluetoothctl: pair <MAC>, PIN 1234) and give its MAC as "
                                          "meter.ser2net.bluetooth, or bind it by hand: rfcomm bind 0 <MAC> 1")


def service_address_step(host: Host, address: str) -> Step:
    """The sender's service address (receivers' iperf3 clients connect to it) on some interface, else on lo."""
    res = host.run(["ip", "-j", "-4", "addr", "show"], check=False)
    have = {a.get("local") for ln in json.loads(res.stdout or "[]") for a in ln.get("addr_info", [])}
    if address in have:
        return _ok(host, "service address", f"{address} present")
    return _change(host, "service address", f"{address} missing", ["ip", "addr", "add", f"{address}/32", "dev", "lo"])


def plan_host(inv: Inventory, name: str, host: Host) -> list[Step]:
    """Every step for machine ``name`` (the sender or a receiver), read from the machine; no side effects."""
    if name == inv.sender.name:
        return [packages_step(host, ["iperf3"]), mptcp_enabled_step(host), limits_step(host),
                service_address_step(host, str(inv.sender.address))]
    rx = inv.receiver(name)
    programs = ["iperf3"]
    if rx.meter.ser2net is not None:
        programs.append("ser2net")
        if rx.meter.ser2net.bluetooth:
            programs.append("rfcomm")
    out = [packages_step(host, programs), mptcp_enabled_step(host), limits_step(host)]
    for radio, intf in rx.interfaces.items():
        step, link = link_step(host, radio, intf.name)
        out.append(step)
        if intf.address is None:
            out.append(_refused(host, f"route {radio}", "the inventory gives no address",
                                f"set receivers.{name}.interfaces.{radio}.address"))
            continue
        out += route_steps(host, radio, intf.name, str(intf.address),
                           str(intf.gateway) if intf.gateway else None, link)
    lte = rx.interfaces.get("lte")
    if lte is not None and lte.address is not None:
        out.append(endpoint_step(host, str(lte.address), lte.name))
    meter = meter_step(host, rx)
    if meter is not None:
        out.append(meter)
    return out


def apply_steps(host: Host, steps: Sequence[Step], timeout_s: float = 600.0) -> list[Step]:
    """Run every ``change`` step's commands (in order); each becomes ``changed`` or ``failed`` (with the
    command's error). Steps that are ok or refused pass through."""
    out = []
    for s in steps:
        if s.state != "change":
            out.append(s)
            continue
        try:
            for argv in s.argvs:
                host.run(list(argv), timeout=timeout_s)
            out.append(replace(s, state="changed", detail=f"{s.detail} -> done"))
        except MplabError as exc:
            out.append(replace(s, state="failed", detail=str(exc)[-300:], fix="run the command by hand to see why"))
    return out


def prepare_hosts(inv: Inventory, hosts: dict[str, Host], apply: bool) -> list[Step]:
    """Plan (and with ``apply``, carry out) every step on the sender and receivers in ``hosts``, in parallel;
    an unreachable machine is one failed step."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name: str) -> list[Step]:
        host = hosts[name]
        try:
            host.run(["true"], timeout=30.0)
        except MplabError as exc:
            return [Step(name, "reachable", "failed", str(exc),
                         fix="check that the machine is up and its ssh section (address, port, user, key_file, "
                             "known_hosts); `mplab lab keys` installs and pins the keys")]
        try:
            steps = plan_host(inv, name, host)
            return apply_steps(host, steps) if apply else steps
        except MplabError as exc:
            return [Step(name, "prepare", "failed", f"stopped early: {exc}", fix="see the message")]

    with ThreadPoolExecutor(max_workers=max(1, min(16, len(hosts)))) as pool:
        return [s for steps in pool.map(one, list(hosts)) for s in steps]
