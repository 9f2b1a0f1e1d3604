"""Per receiver and path rate caps as HTB in the emulated AP and eNB (the ``caps_mbit`` of a Decision).

A cap on receiver *i*'s WiFi (LTE) path is an HTB root on the AP's (eNB's) device towards it,
``rx<i>``, with one class ``1:1`` (rate = ceil = the cap) that every packet goes to; lifting the cap
deletes that root qdisc. Shaping, not policing: TCP through a policer settles well below its rate,
through a shaper at it. HTB counts whole frames (Ethernet header included), so goodput sits ~4 %
below the cap and IP bytes ~1 % below. Works beside ``NftSteering`` (which filters in the same
namespaces) and the OpenFlow rig (which splices in at the sender). On a lab testbed caps belong in
OpenFlow meters on the switch, which the os-ken app does not install yet.

This branch's emulated testbed shapes channels on the sender's egress (``to-ap``/``to-enb``), so the
AP's and eNB's ``rx<i>`` devices are free; a testbed that shapes on ``rx<i>`` itself must nest the cap
under its radio class instead.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from harness.errors import CommandError
from harness.hosts.local import Host
from harness.hosts.netcmd import htb_class_argv

from controller.policy import Assignment

log = logging.getLogger("mplab.controller.caps")


def cap_argvs(dev: str, cap_mbit: float) -> list[list[str]]:
    """HTB root whose default class 1:1 is held to ``cap_mbit``."""
    return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
            htb_class_argv(dev, "1:", "1:1", cap_mbit)]


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
                    for argv in cap_argvs(dev, want):
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
