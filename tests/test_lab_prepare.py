"""`mplab lab prepare`'s plan read from a board's answers (captured `ip -j` output): what it changes, what
it leaves alone because mplab did not write it. The real thing on namespace boards: tests/test_lab_box.py."""
from __future__ import annotations

import json

from harness.config.inventory import load_inventory
from harness.deploy.prepare import (MPLAB_RT_PROTO, RULE_PRIORITY, TABLES, parse_limits, plan_host)
from harness.hosts.local import CommandResult
from harness.testbeds.health import LTE_TABLE, WIFI_TABLE, receiver_rules

from conftest import REPO


class Board:
    """A Host that answers from a dict of ``argv -> stdout`` (and has the programs in ``programs``)."""

    name = "rx1"

    def __init__(self, answers: dict[tuple[str, ...], str], programs=("iperf3", "mptcpize", "ser2net", "rfcomm",
                                                                          "apt-get"), files=()) -> None:
        self.answers, self.programs, self.files = answers, set(programs), set(files)

    def which(self, program: str) -> str | None:
        return f"/usr/bin/{program}" if program in self.programs else None

    def exists(self, path: str) -> bool:
        return path in self.files or path == "/proc/sys/net/mptcp/enabled"

    def read_text(self, path: str) -> str:
        return "1\n"

    def run(self, argv, check: bool = True, timeout: float = 30.0, input=None) -> CommandResult:
        out = self.answers.get(tuple(argv))
        return CommandResult(self.name, tuple(argv), 0 if out is not None else 1, out or "", "", 0.0)


def _ready_board(changes: dict | None = None) -> dict[tuple[str, ...], str]:
    """rx1 of the reference lab as prepare leaves it."""
    routes = {t: [{"dst": "default", "gateway": gw, "dev": dev, "protocol": MPLAB_RT_PROTO}]
              for t, gw, dev in ((101, "10.1.0.1", "wlan0"), (102, None, "wwan0"))}
    del routes[102][0]["gateway"]
    rules = [{"priority": 1000, "src": "10.1.0.21", "table": "101"}, {"priority": 1001, "src": "10.45.0.21",
                                                                      "table": "102"}]
    a = {("ip", "mptcp", "limits", "show"): "add_addr_accepted 2 subflows 2 \n",
         ("ip", "-j", "mptcp", "endpoint", "show"): json.dumps([{"address": "10.45.0.21", "id": 1, "subflow": True,
                                                                 "dev": "wwan0"}]),
         ("ip", "-j", "link", "show", "dev", "wlan0"): json.dumps([{"flags": ["UP"], "link_type": "ether"}]),
         ("ip", "-j", "link", "show", "dev", "wwan0"): json.dumps([{"flags": ["UP"], "link_type": "none"}]),
         ("ip", "-j", "route", "show", "table", "101"): json.dumps(routes[101]),
         ("ip", "-j", "route", "show", "table", "102"): json.dumps(routes[102]),
         ("ip", "-j", "route", "show", "default", "dev", "wlan0"): json.dumps([{"dst": "default",
                                                                               "gateway": "10.1.0.1"}]),
         ("ip", "-j", "route", "show", "default", "dev", "wwan0"): "[]",
         ("ip", "-j", "rule", "show"): json.dumps(rules), ("iperf3", "--help"): "  -m, --mptcp\n"}
    a.update(changes or {})
    return a


def _plan(board: Board) -> dict[str, object]:
    inv = load_inventory(REPO / "inventory" / "lab.yaml")
    return {s.name: s for s in plan_host(inv, "rx1", board)}


def test_a_ready_board_needs_nothing():
    steps = _plan(Board(_ready_board(), files={"/dev/rfcomm0"}))
    assert {n: s.state for n, s in steps.items() if s.state != "ok"} == {}


def test_a_bare_board_gets_every_change_as_argument_lists():
    board = Board(_ready_board({
        ("ip", "mptcp", "limits", "show"): "add_addr_accepted 0 subflows 0 \n",
        ("ip", "-j", "mptcp", "endpoint", "show"): "[]",
        ("ip", "-j", "link", "show", "dev", "wwan0"): json.dumps([{"flags": ["BROADCAST"], "link_type": "none"}]),
        ("ip", "-j", "route", "show", "table", "101"): "[]", ("ip", "-j", "route", "show", "table", "102"): "[]",
        ("ip", "-j", "rule", "show"): "[]"}), programs=("apt-get", "rfcomm"))
    steps = _plan(board)
    assert steps["packages"].argvs == (("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y",
                                        "--no-install-recommends", "iperf3", "mptcpize", "ser2net"),)
    assert steps["link lte (wwan0)"].argvs == (("ip", "link", "set", "dev", "wwan0", "up"),)
    # the gateway: the board's DHCP default through wlan0; the raw-IP modem needs none
    assert steps["route wifi (table 101)"].commands() == \
        "ip route replace default via 10.1.0.1 dev wlan0 table 101 proto 77"
    assert steps["route lte (table 102)"].commands() == "ip route replace default dev wwan0 table 102 proto 77"
    assert steps["rule from 10.45.0.21"].commands() == "ip rule add from 10.45.0.21 lookup 102 priority 1001 protocol 77"
    assert steps["MPTCP endpoint 10.45.0.21"].commands() == "ip mptcp endpoint add 10.45.0.21 dev wwan0 subflow"
    assert steps["MPTCP limits"].commands() == "ip mptcp limits set subflows 2 add_addr_accepted 2"
    assert steps["meter link (/dev/rfcomm0)"].commands() == "rfcomm bind 0 00:00:00:00:00:21 1"


def test_what_mplab_did_not_write_is_refused_with_a_fix():
    board = Board(_ready_board({
        ("ip", "-j", "route", "show", "table", "102"): json.dumps([{"dst": "192.0.2.0/24", "dev": "eth0"}]),
        ("ip", "-j", "rule", "show"): json.dumps([{"priority": 1000, "src": "all", "table": "200"}]),
        ("ip", "-j", "mptcp", "endpoint", "show"): json.dumps([{"address": "10.45.0.21", "id": 4, "signal": True}])}),
        files={"/dev/rfcomm0"})
    steps = _plan(board)
    for name, why in (("route lte (table 102)", "mplab did not write"), ("rule from 10.1.0.21", "not mplab's"),
                      ("MPTCP endpoint 10.45.0.21", "not what mplab writes")):
        assert steps[name].state == "refused" and why in steps[name].detail and steps[name].fix, steps[name]
        assert steps[name].argvs == ()


def test_tables_are_the_emulated_testbeds():
    assert TABLES == {"wifi": WIFI_TABLE, "lte": LTE_TABLE}
    assert [r.priority for r in receiver_rules("a", "b")] == [RULE_PRIORITY["wifi"], RULE_PRIORITY["lte"]]
    assert parse_limits("add_addr_accepted 0 subflows 2 \n") == {"add_addr_accepted": 0, "subflows": 2}
