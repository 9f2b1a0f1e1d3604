"""Per receiver and path rate caps as HTB in the emulated AP and eNB (the ``caps_mbit`` of a Decision).

A cap on receiver *i*'s WiFi (LTE) path is an HTB root on the AP's (eNB's) device towards it,
``rx<i>``, with one class ``1:1`` (rate = ceil = the cap) that every packet goes to; lifting the cap
deletes that root qdisc. Shaping, not policing: TCP through a policer settles well below its rate,
through a shaper at it. HTB counts whole frames (Ethernet header included), so goodput sits ~4 %
below the cap and IP bytes ~1 % below. Works beside ``NftSteering`` (which filters in the same
namespaces) and the OpenFlow rig (which splices in at the sender). On a lab testbed caps belong in
OpenFlow meters on the switch, which the os-ken app does not install yet.

Where the cap goes depends on where the testbed shapes its channels: a testbed that shapes on the
sender's egress (``to-ap``/``to-enb``) leaves the AP's and eNB's ``rx<i>`` free (``HtbCaps``); one
that shapes on ``rx<i>`` (queues at the access network, the radio loop owning class ``1:1``) leaves
the sender's egress free (``EgressCaps``). ``controller.setup2.gateway_caps`` picks by looking.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from harness.errors import CommandError
from harness.hosts.local import Host
from harness.hosts.netcmd import bfifo_argv, htb_class_argv

from controller.policy import Assignment

log = logging.getLogger("mplab.controller.caps")


#: Queue depth behind a cap, as time at the capped rate (a veth has no transmit queue length, so
#: HTB's default leaf would hold one packet and TCP would collapse behind it).
CAP_QUEUE_S = 0.05
CAP_QUEUE_MIN_BYTES = 30_000


def cap_queue_bytes(cap_mbit: float) -> int:
    return max(CAP_QUEUE_MIN_BYTES, int(cap_mbit * 1e6 / 8 * CAP_QUEUE_S))


def cap_argvs(dev: str, cap_mbit: float) -> list[list[str]]:
    """HTB root whose default class 1:1 is held to ``cap_mbit``, over a byte FIFO of ``CAP_QUEUE_S``."""
    return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
            htb_class_argv(dev, "1:", "1:1", cap_mbit),
            bfifo_argv(dev, "1:1", "c1:", cap_queue_bytes(cap_mbit))]


def uncap_argv(dev: str) -> list[str]:
    return ["tc", "qdisc", "del", "dev", dev, "root"]


class HtbCaps:
    """Caps per receiver and network on the gateways' downlink devices.

    Args:
        gateways: network -> the Host forwarding it (``{"wifi": ap, "lte": enb}``).
        devices: receiver -> network -> the gateway's device towards that receiver.
    """

    def __init__(self, gateways: Mapping[str, Host], devices: Mapping[str, Mapping[str, str]]) -> None:
        self.gateways = dict(gateways)
        self.devices = {rx: dict(d) for rx, d in devices.items()}
        self._caps: dict[tuple[str, str], float] = {}

    def apply(self, assignment: Assignment) -> dict[str, dict[str, float]]:
        """Install, change or lift caps so that they match ``assignment``; returns the caps in force."""
        for rx, d in assignment.items():
            for net, dev in self.devices.get(rx, {}).items():
                want = (d.caps_mbit or {}).get(net) if net in d.ifaces else None
                have = self._caps.get((rx, net))
                if want == have:
                    continue
                gw = self.gateways[net]
                if want is None:
                    gw.run(uncap_argv(dev), check=False)
                    self._caps.pop((rx, net), None)
                else:
                    # The root only once: HTB refuses a `replace` of itself ("change not supported").
                    for argv in (cap_argvs(dev, want) if have is None else cap_argvs(dev, want)[1:]):
                        gw.run(argv)
                    self._caps[(rx, net)] = want
        return self.caps()

    def caps(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for (rx, net), c in self._caps.items():
            out.setdefault(rx, {})[net] = c
        return out

    def clear(self) -> None:
        """Every cap lifted; idempotent, best effort per device (a namespace may be gone)."""
        for (rx, net) in list(self._caps):
            try:
                self.gateways[net].run(uncap_argv(self.devices[rx][net]), check=False)
            except CommandError as exc:
                log.warning("lifting the cap of %s on %s: %s", rx, net, exc)
            self._caps.pop((rx, net), None)


#: An uncapped class: far above any emulated channel.
UNCAPPED_MBIT = 10_000.0


def egress_setup_argvs(dev: str, classes: Mapping[str, str]) -> list[list[str]]:
    """HTB root on the sender's egress (unclassified traffic passes unshaped) and, per receiver address,
    an uncapped class with a u32 destination filter; ``classes`` maps address -> class minor (hex)."""
    cmds = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "ffff"]]
    for addr, minor in sorted(classes.items()):
        cmds.append(htb_class_argv(dev, "1:", f"1:{minor}", UNCAPPED_MBIT))
        cmds.append(bfifo_argv(dev, f"1:{minor}", f"{minor}:", CAP_QUEUE_MIN_BYTES * 10))
        cmds.append(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                     "match", "ip", "dst", f"{addr}/32", "flowid", f"1:{minor}"])
    return cmds


class EgressCaps:
    """Caps per receiver and network as HTB classes on the sender's egress towards the AP / eNB.

    For testbeds that shape the channels on the AP's and eNB's own devices (the fidelity layout), where
    the sender's egress is free: one root per network device, one class per receiver (uncapped until a
    cap is set, back to uncapped when lifted), selected by destination address.

    Args:
        sender: the Host of the sender.
        devices: network -> the sender's egress device towards that network.
        addresses: receiver -> network -> its address there.
    """

    def __init__(self, sender: Host, devices: Mapping[str, str], addresses: Mapping[str, Mapping[str, str]]) -> None:
        self.sender = sender
        self.devices = dict(devices)
        self.minor = {rx: f"{0x20 + i:x}" for i, rx in enumerate(addresses, start=1)}
        self.addresses = {rx: dict(a) for rx, a in addresses.items()}
        self._caps: dict[tuple[str, str], float] = {}
        self._installed: set[str] = set()

    def setup(self) -> None:
        for net, dev in self.devices.items():
            classes = {self.addresses[rx][net]: self.minor[rx] for rx in self.addresses if net in self.addresses[rx]}
            for argv in egress_setup_argvs(dev, classes):
                self.sender.run(argv)
            self._installed.add(net)

    def apply(self, assignment: Assignment) -> dict[str, dict[str, float]]:
        if not self._installed:
            self.setup()
        for rx, d in assignment.items():
            if rx not in self.minor:
                continue
            for net, dev in self.devices.items():
                want = (d.caps_mbit or {}).get(net) if net in d.ifaces else None
                if self._caps.get((rx, net)) == want:
                    continue
                self.sender.run(htb_class_argv(dev, "1:", f"1:{self.minor[rx]}", want or UNCAPPED_MBIT))
                if want is None:
                    self._caps.pop((rx, net), None)
                else:
                    self._caps[(rx, net)] = want
        return self.caps()

    def caps(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for (rx, net), c in self._caps.items():
            out.setdefault(rx, {})[net] = c
        return out

    def clear(self) -> None:
        """Every cap lifted and the roots removed; idempotent, best effort (the namespace may be gone)."""
        for net in list(self._installed):
            try:
                self.sender.run(uncap_argv(self.devices[net]), check=False)
            except CommandError as exc:
                log.warning("removing the cap qdisc on %s: %s", self.devices[net], exc)
            self._installed.discard(net)
        self._caps.clear()
