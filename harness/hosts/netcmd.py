"""Pure functions that build iproute2, tc, ethtool and sysctl argument lists.

Each returns an argv (or a list of them) and needs no kernel, so tests can check the
exact commands. The HTB chain reads like Mininet's ``bwCmds``: the root qdisc, the
shared class, one class per receiver with its ceiling, and a FIFO of the receiver's
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


def htb_root_argv(dev: str, handle: int = 1) -> list[str]:
    """Root HTB; unclassified traffic goes to a class that does not exist, i.e. unshaped."""
    return ["tc", "qdisc", "replace", "dev", dev, "root", "handle", f"{handle:x}:", "htb", "default", "ffff"]


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


def u32_dst_filter_argv(dev: str, dst: str, flowid: str, prio: int = 1) -> list[str]:
    return ["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", str(prio),
            "u32", "match", "ip", "dst", f"{dst}/32", "flowid", flowid]


def shared_bottleneck_argvs(dev: str, capacity_mbit: float,
                            receivers: Sequence[tuple[str, float, int]]) -> list[list[str]]:
    """HTB for one access network: shared ``capacity_mbit``, and per receiver (address, ceiling, buffer bytes).

    Each receiver is guaranteed an equal share (capped by its own ceiling) and may
    borrow up to its ceiling while others are idle.
    """
    share = capacity_mbit / max(1, len(receivers))
    cmds = [htb_root_argv(dev), htb_class_argv(dev, "1:", "1:1", capacity_mbit)]
    for i, (address, ceil_mbit, buffer_bytes) in enumerate(receivers, start=1):
        minor = f"{0x10 + i:x}"
        ceil = min(ceil_mbit, capacity_mbit)
        cmds.append(htb_class_argv(dev, "1:1", f"1:{minor}", min(share, ceil), ceil))
        cmds.append(bfifo_argv(dev, f"1:{minor}", f"{minor}:", buffer_bytes))
        cmds.append(u32_dst_filter_argv(dev, address, f"1:{minor}"))
    return cmds
