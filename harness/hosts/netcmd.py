"""Pure functions that build iproute2, tc, ethtool and sysctl argument lists.

Each returns an argv (or a list of them) and needs no kernel, so tests can check the
exact commands. A receiver's emulated downlink reads like Mininet's ``bwCmds``: a root
HTB, one class with the receiver's rate (re-shared by the radio loop) and a FIFO of its
buffer depth under it (this kernel has no netem: queueing delay comes from the FIFO's
depth at the bottleneck rate).
"""
from __future__ import annotations

from collections.abc import Sequence


def _mbit(rate_mbit: float) -> str:
    # tc accepts "kbit" with integers; keep sub-Mbit precision without float formatting surprises.
    return f"{max(1, round(rate_mbit * 1000))}kbit"


def netns_add_argv(ns: str) -> list[str]:
    return ["ip", "netns", "add", ns]


def netns_del_argv(ns: str) -> list[str]:
    return ["ip", "netns", "del", ns]


def veth_argv(name_a: str, ns_a: str, name_b: str, ns_b: str) -> list[str]:
    """A veth pair created directly inside two namespaces (nothing appears in the root namespace)."""
    return ["ip", "link", "add", name_a, "netns", ns_a, "type", "veth", "peer", "name", name_b, "netns", ns_b]


def link_up_argv(dev: str) -> list[str]:
    return ["ip", "link", "set", "dev", dev, "up"]


def addr_add_argv(dev: str, cidr: str) -> list[str]:
    return ["ip", "addr", "add", cidr, "dev", dev]


def route_add_argv(dest: str, via: str | None = None, dev: str | None = None, table: int | None = None) -> list[str]:
    argv = ["ip", "route", "replace", dest]
    if via:
        argv += ["via", via]
    if dev:
        argv += ["dev", dev]
    if table is not None:
        argv += ["table", str(table)]
    return argv


def rule_add_argv(source: str, table: int, priority: int) -> list[str]:
    return ["ip", "rule", "add", "from", source, "lookup", str(table), "priority", str(priority)]


def sysctl_argv(key: str, value: str | int) -> list[str]:
    return ["sysctl", "-q", "-w", f"{key}={value}"]


def offloads_off_argv(dev: str) -> list[str]:
    """Segmentation offloads off: a 64 kB GSO burst would overflow a shallow FIFO and blur HTB's rate."""
    return ["ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off"]


def mptcp_limits_argv(subflows: int, add_addr_accepted: int) -> list[str]:
    return ["ip", "mptcp", "limits", "set", "subflows", str(subflows), "add_addr_accepted", str(add_addr_accepted)]


def mptcp_endpoint_argv(address: str, dev: str, flags: Sequence[str] = ("subflow",)) -> list[str]:
    return ["ip", "mptcp", "endpoint", "add", address, "dev", dev, *flags]


def mptcp_flush_argv() -> list[str]:
    return ["ip", "mptcp", "endpoint", "flush"]


def htb_class_argv(dev: str, parent: str, classid: str, rate_mbit: float, ceil_mbit: float | None = None) -> list[str]:
    """An HTB class guaranteed ``rate_mbit`` and borrowing up to ``ceil_mbit`` (default: the rate)."""
    ceil = ceil_mbit if ceil_mbit is not None else rate_mbit
    # An explicit quantum silences HTB's "quantum is big" warning and makes siblings share spare
    # capacity equally (HTB's default quantum follows the rate).
    return ["tc", "class", "replace", "dev", dev, "parent", parent, "classid", classid, "htb",
            "rate", _mbit(rate_mbit), "ceil", _mbit(ceil), "quantum", "1514"]


def bfifo_argv(dev: str, parent: str, handle: str, limit_bytes: int) -> list[str]:
    return ["tc", "qdisc", "replace", "dev", dev, "parent", parent, "handle", handle, "bfifo",
            "limit", str(limit_bytes)]


def radio_qdisc_argvs(dev: str, rate_mbit: float, buffer_bytes: int) -> list[list[str]]:
    """A receiver's downlink on one access network: HTB class 1:1 (its rate, changed by the radio loop)
    over a byte FIFO (its buffer), on the AP's or eNB's device towards that receiver."""
    return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
            htb_class_argv(dev, "1:", "1:1", rate_mbit),
            bfifo_argv(dev, "1:1", "10:", buffer_bytes)]


#: nftables table of the emulated radios' loss rules (the controller's steering uses its own tables).
RADIO_TABLE = "mplab_radio"


def loss_counter_names(dev: str) -> tuple[str, str]:
    """The named nft counters of one downlink device's loss rule: (packets seen, packets dropped)."""
    return f"{dev}_seen", f"{dev}_lost"


def radio_loss_argvs(losses: Sequence[tuple[str, float]]) -> list[list[str]]:
    """Random loss per downlink device, with named counters: (device, percent) -> nft commands in the AP's or
    eNB's namespace.

    Every device gets a rule counting the packets forwarded to it (counter ``<dev>_seen``), and, when its
    loss is above 0, one dropping with probability ``p`` percent (``numgen random mod 1000000 < p * 10000``,
    counter ``<dev>_lost``); a lossless device's ``_lost`` counter stays 0. The forward hook runs before
    the device's radio queue (HTB + FIFO), so the counters see the emulated radio loss only: drops at a
    full queue happen after them. ``EmulatedTestbed.radio_loss_counters`` reads them. Empty when there
    is no device.
    """
    if not losses:
        return []
    cmds = [["nft", "add", "table", "ip", RADIO_TABLE],
            ["nft", "add", "chain", "ip", RADIO_TABLE, "loss", "{", "type", "filter", "hook", "forward",
             "priority", "-10", ";", "policy", "accept", ";", "}"]]
    for dev, pct in losses:
        seen, lost = loss_counter_names(dev)
        cmds += [["nft", "add", "counter", "ip", RADIO_TABLE, seen], ["nft", "add", "counter", "ip", RADIO_TABLE, lost],
                 ["nft", "add", "rule", "ip", RADIO_TABLE, "loss", "oifname", dev, "counter", "name", seen]]
        if pct > 0:
            cmds.append(["nft", "add", "rule", "ip", RADIO_TABLE, "loss", "oifname", dev, "numgen", "random", "mod",
                         "1000000", "<", str(round(pct * 10000)), "counter", "name", lost, "drop"])
    return cmds


def radio_counters_argv() -> list[str]:
    """The loss rules' named counters of one AP / eNB namespace, as JSON (``parse_loss_counters``)."""
    return ["nft", "-j", "list", "counters", "table", "ip", RADIO_TABLE]
