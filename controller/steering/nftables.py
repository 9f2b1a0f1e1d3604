"""Steering with nftables verdict maps in the emulated AP and eNB (no daemon).

In each gateway namespace (``ap`` for WiFi, ``enb`` for LTE) one table ``mplab_steer`` holds two
verdict maps keyed by the receiver's address on that network, ``dl`` (``ip daddr``) and ``ul``
(``ip saddr``), looked up from a forward-hook chain: ``continue`` lets the packet on, ``drop``
blocks it. Blocking a receiver on a network swaps its elements' verdict in one nft transaction
(delete + add: nft has no in-place replace). Counting is apart from steering: a set ``dl_count``
with per-element counters, matched after the maps, counts the bytes the gateway forwarded to each
receiver; its elements never change, so the counters never restart (a verdict map's element
counter would, when the element is replaced). A path with a base delay crosses the gateway's
forward hook twice (into the delay line's TUN device ``dly0``, then from it to the receiver), so
the count skips packets leaving for ``dly0``: each packet is counted once, on its way to the
receiver (the verdict maps see both passes; a drop on either is the same drop). ARP is not touched: the "radio" stays attached, as
when the reference paper deleted a forwarding entry. The table name is ours alone (the fidelity
issue's loss emulation uses ``mplab_radio``); the chain is not called ``fwd``, which nft refuses.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from harness.errors import CommandError, MplabError
from harness.hosts.local import Host
from harness.emulation.delayline import DEV as DELAY_DEV

from controller.policy import IFACES, Assignment
from controller.steering.base import SteeredReceiver, all_both

log = logging.getLogger("mplab.controller.nft")

TABLE = "mplab_steer"
CHAIN = "steer"
#: Before the filter hook's default priority, so a drop here wins over later accepts.
PRIORITY = -10
ALLOW, BLOCK = "continue", "drop"


def table_script(entries: Mapping[str, str]) -> str:
    """The table in nft's language; ``entries`` maps receiver address -> verdict (``continue``/``drop``)."""
    elems = ", ".join(f"{a} : {v}" for a, v in sorted(entries.items()))
    addrs = ", ".join(sorted(entries))
    vm = f" elements = {{ {elems} }};" if elems else ""
    st = f" elements = {{ {addrs} }};" if addrs else ""
    return (f"table ip {TABLE} {{\n"
            f"  map dl {{ type ipv4_addr : verdict;{vm} }}\n"
            f"  map ul {{ type ipv4_addr : verdict;{vm} }}\n"
            f"  set dl_count {{ type ipv4_addr; counter;{st} }}\n"
            f"  chain {CHAIN} {{ type filter hook forward priority {PRIORITY}; policy accept;\n"
            f"    ip daddr vmap @dl\n    ip saddr vmap @ul\n"
            f'    oifname != "{DELAY_DEV}" ip daddr @dl_count\n  }}\n}}\n')


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


def list_counts_argv() -> list[str]:
    return ["nft", "-j", "list", "set", "ip", TABLE, "dl_count"]


def parse_set_counters(text: str) -> dict[str, int]:
    """``{address: bytes}`` from ``nft -j list set`` of a set with per-element counters."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MplabError(f"cannot parse `nft -j list set` output ({exc})") from None
    out: dict[str, int] = {}
    for item in doc.get("nftables", []):
        for e in (item.get("set") or {}).get("elem", []):
            if isinstance(e, dict) and "elem" in e:
                out[str(e["elem"]["val"])] = int(e["elem"].get("counter", {}).get("bytes", 0))
            else:
                out[str(e)] = 0
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
        self._installed: set[str] = set()

    def setup(self) -> None:
        for radio, gw in self.gateways.items():
            gw.run(delete_table_argv(), check=False)  # a leftover of ours from a crashed run
            entries = {r.addresses[radio]: ALLOW for r in self.receivers}
            gw.run(["nft", "-f", "-"], input=table_script(entries))
            self._installed.add(radio)
            self._verdicts[radio] = dict(entries)

    def apply(self, assignment: Assignment) -> None:
        for radio, gw in self.gateways.items():
            changes = {}
            for r in self.receivers:
                d = assignment.get(r.name)
                if d is None:
                    continue
                addr = r.addresses[radio]
                want = ALLOW if radio in d.ifaces else BLOCK
                if self._verdicts[radio].get(addr) != want:
                    changes[addr] = want
            if changes:
                gw.run(replace_argv(changes))
                self._verdicts[radio].update(changes)

    def counters(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {r.name: {} for r in self.receivers}
        for radio, gw in self.gateways.items():
            now = parse_set_counters(gw.run(list_counts_argv()).stdout)
            for r in self.receivers:
                out[r.name][radio] = now.get(r.addresses[radio], 0)
        return out

    def verdicts(self) -> dict[str, dict[str, str]]:
        """``{receiver: {network: continue|drop}}`` as installed."""
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
