"""What a receiver of the emulated testbed needs to carry traffic, checked and repaired before each sample.

Set-up gives each receiver *i* its two links up with their addresses, a default route over
WiFi, one policy table per radio (``WIFI_TABLE``, ``LTE_TABLE``: MPTCP's LTE subflow leaves
by source address) and the rules that pick them. A link flap (``ip link set wlan0 down; up``)
makes the kernel drop every route through that link, in the main and the policy tables;
``repair_receiver`` puts back what is missing and says what it did, or raises with why it
cannot (an interface that is gone). ``harness.testbeds.emulated`` builds from the same lists,
so set-up and repair never disagree.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

from harness.errors import MplabError
from harness.hosts.local import Host
from harness.hosts.netcmd import addr_add_argv, link_up_argv, route_add_argv, rule_add_argv
from harness.testbeds.base import NodeInterface

#: Policy-routing tables on each receiver.
WIFI_TABLE, LTE_TABLE = 101, 102


@dataclass(frozen=True)
class Route:
    """A route a receiver needs (``table`` None: the main table)."""

    dest: str
    via: str
    dev: str
    table: int | None


@dataclass(frozen=True)
class Rule:
    source: str
    table: int
    priority: int


def receiver_routes(i: int, wifi_dev: str, lte_dev: str) -> list[Route]:
    """Receiver *i*'s routes: default over WiFi, and one policy table per radio (for MPTCP's second subflow)."""
    return [Route("default", f"10.10.{i}.1", wifi_dev, None),
            Route("default", f"10.10.{i}.1", wifi_dev, WIFI_TABLE),
            Route("default", f"10.20.{i}.1", lte_dev, LTE_TABLE)]


def receiver_rules(wifi_address: str, lte_address: str) -> list[Rule]:
    """Source-address rules that pick each radio's policy table."""
    return [Rule(wifi_address, WIFI_TABLE, 1000), Rule(lte_address, LTE_TABLE, 1001)]


def missing_routes(routes_json: str, want: list[Route]) -> list[Route]:
    """Which of ``want`` are absent from ``ip -j route show table all``."""
    have = set()
    for r in json.loads(routes_json or "[]"):
        table = r.get("table", "main")
        have.add((r.get("dst"), r.get("gateway"), r.get("dev"), None if table == "main" else str(table)))
    return [w for w in want if (w.dest, w.via, w.dev, None if w.table is None else str(w.table)) not in have]


def missing_rules(rules_json: str, want: list[Rule]) -> list[Rule]:
    """Which of ``want`` are absent from ``ip -j rule show``."""
    have = {(r.get("src"), str(r.get("table")), r.get("priority")) for r in json.loads(rules_json or "[]")}
    return [w for w in want if (w.source, str(w.table), w.priority) not in have]


def repair_receiver(h: Host, i: int, wifi: NodeInterface, lte: NodeInterface, repair_s: float = 5.0) -> list[str]:
    """Put back receiver *i*'s links, addresses, routes and rules where missing; returns what was repaired.

    Raises ``MplabError`` when it cannot (an interface is gone, routes still missing after ``repair_s``).
    """
    done = []
    links = {ln["ifname"]: ln for ln in json.loads(h.run(["ip", "-j", "addr", "show"]).stdout or "[]")}
    for intf in (wifi, lte):
        ln = links.get(intf.name)
        if ln is None:
            raise MplabError(f"interface {intf.name} ({intf.radio}) is gone; cannot repair")
        if "UP" not in ln.get("flags", []):
            h.run(link_up_argv(intf.name))
            done.append(f"set {intf.name} up")
        if intf.address not in {a.get("local") for a in ln.get("addr_info", [])}:
            h.run(addr_add_argv(intf.name, f"{intf.address}/24"))
            done.append(f"address {intf.address} back on {intf.name}")
    want = receiver_routes(i, wifi.name, lte.name)
    deadline = time.monotonic() + repair_s
    while missing := missing_routes(h.run(["ip", "-j", "route", "show", "table", "all"]).stdout, want):
        if time.monotonic() > deadline:
            raise MplabError(f"routes could not be restored within {repair_s:.0f} s: "
                             + ", ".join(f"{r.dest} via {r.via} dev {r.dev} table {r.table or 'main'}"
                                         for r in missing))
        for r in missing:
            # Right after a link comes up its connected route may not be back yet: retried until the deadline.
            res = h.run(route_add_argv(r.dest, via=r.via, dev=r.dev, table=r.table), check=False)
            if res.returncode == 0:
                done.append(f"route {r.dest} via {r.via} dev {r.dev} table {r.table or 'main'} restored")
        time.sleep(0.02)
    for rule in missing_rules(h.run(["ip", "-j", "rule", "show"]).stdout, receiver_rules(wifi.address, lte.address)):
        h.run(rule_add_argv(rule.source, rule.table, rule.priority))
        done.append(f"rule from {rule.source} lookup {rule.table} restored")
    return done
