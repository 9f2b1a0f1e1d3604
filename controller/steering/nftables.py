"""Steering with nftables verdict maps in the emulated AP and eNB (no daemon).

In each gateway namespace (``ap`` for WiFi, ``enb`` for LTE) one table ``mplab_steer`` holds two
verdict maps keyed by the receiver's address on that network, ``dl`` (``ip daddr``) and ``ul``
(``ip saddr``), both with per-element counters, looked up from a forward-hook chain. Blocking a
receiver on a network swaps its elements' verdict from accept to drop in one nft transaction
(delete + add: nft has no in-place replace, and a re-added element's counter restarts at zero,
so the counters are read first and carried forward). ARP is not touched: the "radio" stays
attached, as when the reference paper deleted a forwarding entry. The table name is ours alone
(the fidelity issue's loss emulation uses ``mplab_radio``); the chain is not called ``fwd``,
which nft refuses.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from harness.errors import CommandError, MplabError
from harness.hosts import Host

from controller.policy import IFACES, Assignment
from controller.steering.base import SteeredReceiver, all_both

log = logging.getLogger("mplab.controller.nft")

TABLE = "mplab_steer"
CHAIN = "steer"
#: Before the filter hook's default priority, so a drop here wins over later accepts.
PRIORITY = -10


def table_script(entries: Mapping[str, str]) -> str:
    """The table in nft's language; ``entries`` maps receiver address -> verdict ("accept"/"drop")."""
    elems = ", ".join(f"{a} : {v}" for a, v in sorted(entries.items()))
    body = f" elements = {{ {elems} }};" if elems else ""
    return (f"table ip {TABLE} {{\n"
            f"  map dl {{ type ipv4_addr : verdict; counter;{body} }}\n"
            f"  map ul {{ type ipv4_addr : verdict; counter;{body} }}\n"
            f"  chain {CHAIN} {{ type filter hook forward priority {PRIORITY}; policy accept;\n"
            f"    ip daddr vmap @dl\n    ip saddr vmap @ul\n  }}\n}}\n")


def replace_argv(changes: Mapping[str, str]) -> list[str]:
    """One nft transaction that sets each address's verdict in both maps."""
    cmds = []
    for addr, verdict in sorted(changes.items()):
        for m in ("dl", "ul"):
            cmds.append(f"delete element ip {TABLE} {m} {{ {addr} }}")
            cmds.append(f"add element ip {TABLE} {m} {{ {addr} : {verdict} }}")
    return ["nft", "; ".join(cmds)]


def delete_table_argv() -> list[str]:
    return ["nft", "delete", "table", "ip", TABLE]


def list_map_argv(name: str) -> list[str]:
    return ["nft", "-j", "list", "map", "ip", TABLE, name]


def parse_map_counters(text: str) -> dict[str, tuple[int, str]]:
    """``{address: (bytes, verdict)}`` from ``nft -j list map``."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MplabError(f"cannot parse `nft -j list map` output ({exc})") from None
    out: dict[str, tuple[int, str]] = {}
    for item in doc.get("nftables", []):
        m = item.get("map")
        if not m:
            continue
        for key, verdict in m.get("elem", []):
            if isinstance(key, dict) and "elem" in key:
                addr = key["elem"]["val"]
                nbytes = int(key["elem"].get("counter", {}).get("bytes", 0))
            else:
                addr, nbytes = key, 0
            out[str(addr)] = (nbytes, next(iter(verdict)) if isinstance(verdict, dict) else str(verdict))
    return out


class NftSteering:
    """Per-receiver accept/drop at the gateways of the two networks.

    Args:
        gateways: the Host forwarding each network's traffic (``{"wifi": ap, "lte": enb}``).
        receivers: who is steered, with their address on each network.
    """

    name = "nftables"

    def __init__(self, gateways: Mapping[str, Host], receivers: list[SteeredReceiver]) -> None:
        missing = [r for r in IFACES if r not in gateways]
        if missing:
            raise MplabError(f"nftables steering needs a gateway for {missing}")
        self.gateways = dict(gateways)
        self.receivers = list(receivers)
        self._verdicts: dict[str, dict[str, str]] = {}
        self._carried: dict[tuple[str, str], int] = {}
        self._installed: set[str] = set()

    def setup(self) -> None:
        for radio, gw in self.gateways.items():
            gw.run(delete_table_argv(), check=False)  # a leftover of ours from a crashed run
            entries = {r.addresses[radio]: "accept" for r in self.receivers}
            gw.run(["nft", "-f", "-"], input=table_script(entries))
            self._installed.add(radio)
            self._verdicts[radio] = dict(entries)
        self._carried.clear()

    def _read(self, radio: str) -> dict[str, tuple[int, str]]:
        return parse_map_counters(self.gateways[radio].run(list_map_argv("dl")).stdout)

    def apply(self, assignment: Assignment) -> None:
        by_addr = {r.addresses[radio]: (r.name, radio) for r in self.receivers for radio in IFACES}
        for radio, gw in self.gateways.items():
            changes = {}
            for r in self.receivers:
                d = assignment.get(r.name)
                if d is None:
                    continue
                addr = r.addresses[radio]
                want = "accept" if radio in d.ifaces else "drop"
                if self._verdicts[radio].get(addr) != want:
                    changes[addr] = want
            if not changes:
                continue
            before = self._read(radio)  # replaced elements restart from zero: keep what they counted
            gw.run(replace_argv(changes))
            for addr in changes:
                key = by_addr[addr]
                self._carried[key] = self._carried.get(key, 0) + before.get(addr, (0, ""))[0]
                self._verdicts[radio][addr] = changes[addr]

    def counters(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {r.name: {} for r in self.receivers}
        for radio in self.gateways:
            now = self._read(radio)
            for r in self.receivers:
                addr = r.addresses[radio]
                out[r.name][radio] = now.get(addr, (0, ""))[0] + self._carried.get((r.name, radio), 0)
        return out

    def verdicts(self) -> dict[str, dict[str, str]]:
        """``{receiver: {network: accept|drop}}`` as installed."""
        return {r.name: {radio: self._verdicts[radio][r.addresses[radio]] for radio in self.gateways}
                for r in self.receivers}

    def reset(self) -> None:
        """Everyone allowed again."""
        self.apply(all_both(self.receivers))

    def teardown(self) -> None:
        for radio in list(self._installed):
            try:
                self.gateways[radio].run(delete_table_argv(), check=False)
            except CommandError as exc:  # the namespace may already be gone: best effort
                log.warning("removing %s on %s: %s", TABLE, radio, exc)
            self._installed.discard(radio)
