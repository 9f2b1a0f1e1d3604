"""Per receiver and path rate caps (the ``caps_mbit`` of a Decision), and which part enforces them.

Every enforcer offers the ``Caps`` seam: ``apply(assignment)`` installs, changes or lifts caps to
match (a cap on a path the assignment does not allow is lifted), ``caps()`` the caps in force,
``clear()`` lifts them all (idempotent), and ``name`` says in the records what enforced them
(``caps_by``): ``htb`` or ``openflow-meter``. ``caps_for`` picks the enforcer from the steering
backend: OpenFlow steering caps with meters on its switch, every other backend (and a switch whose
meter features lack kbit/s drop bands) with HTB where the testbed leaves room.

HTB (``HtbCaps``, ``EgressCaps``): a cap on receiver *i*'s WiFi (LTE) path is an HTB class held to
the cap (rate = ceil) over a byte FIFO. Shaping, not policing: TCP through a shaper settles at the
rate. HTB counts whole frames (Ethernet header included), so goodput sits ~4 % below the cap and
IP bytes ~1 % below. Where it goes depends on where the testbed shapes its channels: a testbed that
shapes on the sender's egress (``to-ap``/``to-enb``) leaves the AP's and eNB's ``rx<i>`` free
(``HtbCaps``, a root on that device); one that shapes on ``rx<i>`` (the radio loop owning class
``1:1``) leaves the sender's egress free (``EgressCaps``). ``controller.setup2.gateway_caps`` picks
by looking.

OpenFlow meters (``MeterCaps``): one meter per receiver and path on the switch the OpenFlow
steering drives, installed by the os-ken app (``controller.steering.ofapp``), rate in kbit/s with
one DROP band, the downlink entry towards that receiver on that path carrying a meter instruction.
Policing, not shaping: what exceeds the rate plus the burst is dropped. The burst is
``METER_BURST_S`` of the rate (see there for why 0.25 s).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from harness.errors import CommandError, MplabError
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


class Caps(Protocol):
    """What every cap enforcer offers (``HtbCaps`` is the annotated example)."""

    #: What enforces the caps, as the records say it (``caps_by``).
    name: str

    def apply(self, assignment: Assignment) -> dict[str, dict[str, float]]:
        """Install, change or lift caps to match ``assignment``; returns the caps in force."""
        ...

    def caps(self) -> dict[str, dict[str, float]]:
        """Receiver -> network -> cap in force (Mbit/s)."""
        ...

    def clear(self) -> None:
        """Every cap lifted; idempotent, best effort."""
        ...


class CapTable:
    """The caps in force per (receiver, network), and what an assignment would change: the
    book-keeping every enforcer shares, so that each only says how one cap is set or lifted."""

    def __init__(self) -> None:
        self._caps: dict[tuple[str, str], float] = {}

    def _changes(self, assignment: Assignment,
                 networks: Callable[[str], Iterable[str]]) -> list[tuple[str, str, float | None, float | None]]:
        """(receiver, network, wanted cap or None, cap in force or None) where they differ; a cap on a
        path the decision does not allow is lifted."""
        out = []
        for rx, d in assignment.items():
            for net in networks(rx):
                want = (d.caps_mbit or {}).get(net) if net in d.ifaces else None
                have = self._caps.get((rx, net))
                if want != have:
                    out.append((rx, net, want, have))
        return out

    def _set(self, rx: str, net: str, cap_mbit: float | None) -> None:
        if cap_mbit is None:
            self._caps.pop((rx, net), None)
        else:
            self._caps[(rx, net)] = cap_mbit

    def caps(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for (rx, net), c in self._caps.items():
            out.setdefault(rx, {})[net] = c
        return out


class HtbCaps(CapTable):
    """Caps per receiver and network on the gateways' downlink devices.

    Args:
        gateways: network -> the Host forwarding it (``{"wifi": ap, "lte": enb}``).
        devices: receiver -> network -> the gateway's device towards that receiver.
    """

    name = "htb"

    def __init__(self, gateways: Mapping[str, Host], devices: Mapping[str, Mapping[str, str]]) -> None:
        super().__init__()
        self.gateways = dict(gateways)
        self.devices = {rx: dict(d) for rx, d in devices.items()}

    def apply(self, assignment: Assignment) -> dict[str, dict[str, float]]:
        for rx, net, want, have in self._changes(assignment, lambda rx: self.devices.get(rx, {})):
            dev, gw = self.devices[rx][net], self.gateways[net]
            if want is None:
                gw.run(uncap_argv(dev), check=False)
            else:
                # The root only once: HTB refuses a `replace` of itself ("change not supported").
                for argv in cap_argvs(dev, want)[0 if have is None else 1:]:
                    gw.run(argv)
            self._set(rx, net, want)
        return self.caps()

    def clear(self) -> None:
        """Every cap lifted; idempotent, best effort per device (a namespace may be gone)."""
        for (rx, net) in list(self._caps):
            try:
                self.gateways[net].run(uncap_argv(self.devices[rx][net]), check=False)
            except CommandError as exc:
                log.warning("lifting the cap of %s on %s: %s", rx, net, exc)
            self._set(rx, net, None)


#: An uncapped class: far above any emulated channel, over a FIFO deep enough not to matter.
UNCAPPED_MBIT = 10_000.0
UNCAPPED_QUEUE_BYTES = CAP_QUEUE_MIN_BYTES * 10


def egress_setup_argvs(dev: str, classes: Mapping[str, str]) -> list[list[str]]:
    """HTB root on the sender's egress (unclassified traffic passes unshaped) and, per receiver address,
    an uncapped class with a u32 destination filter; ``classes`` maps address -> class minor (hex)."""
    cmds = [["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "ffff"]]
    for addr, minor in sorted(classes.items()):
        cmds.append(htb_class_argv(dev, "1:", f"1:{minor}", UNCAPPED_MBIT))
        cmds.append(bfifo_argv(dev, f"1:{minor}", f"{minor}:", UNCAPPED_QUEUE_BYTES))
        cmds.append(["tc", "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                     "match", "ip", "dst", f"{addr}/32", "flowid", f"1:{minor}"])
    return cmds


class EgressCaps(CapTable):
    """Caps per receiver and network as HTB classes on the sender's egress towards the AP / eNB.

    For testbeds that shape the channels on the AP's and eNB's own devices (the fidelity layout), where
    the sender's egress is free: one root per network device, one class per receiver (uncapped until a
    cap is set, back to uncapped when lifted), selected by destination address; under a cap its byte
    FIFO is ``CAP_QUEUE_S`` at the cap, as ``HtbCaps``'s.

    Args:
        sender: the Host of the sender.
        devices: network -> the sender's egress device towards that network.
        addresses: receiver -> network -> its address there.
    """

    name = "htb"

    def __init__(self, sender: Host, devices: Mapping[str, str], addresses: Mapping[str, Mapping[str, str]]) -> None:
        super().__init__()
        self.sender = sender
        self.devices = dict(devices)
        self.minor = {rx: f"{0x20 + i:x}" for i, rx in enumerate(addresses, start=1)}
        self.addresses = {rx: dict(a) for rx, a in addresses.items()}
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
        for rx, net, want, _ in self._changes(assignment, lambda rx: self.devices if rx in self.minor else ()):
            dev, minor = self.devices[net], self.minor[rx]
            self.sender.run(htb_class_argv(dev, "1:", f"1:{minor}", want or UNCAPPED_MBIT))
            # The FIFO follows the cap (50 ms at it, as HtbCaps): the uncapped depth held 1.2 s at 2 Mbit/s.
            self.sender.run(bfifo_argv(dev, f"1:{minor}", f"{minor}:",
                                       cap_queue_bytes(want) if want else UNCAPPED_QUEUE_BYTES))
            self._set(rx, net, want)
        return self.caps()

    def clear(self) -> None:
        """Every cap lifted and the roots removed; idempotent, best effort (the namespace may be gone)."""
        for net in list(self._installed):
            try:
                self.sender.run(uncap_argv(self.devices[net]), check=False)
            except CommandError as exc:
                log.warning("removing the cap qdisc on %s: %s", self.devices[net], exc)
            self._installed.discard(net)
        self._caps.clear()


#: A meter's burst, as time at the capped rate. Measured on the emulated testbed (bench/caps.py,
#: iperf3 cubic through an 8 Mbit/s meter, 30 Mbit/s channel, 5 s): 0.1 s of burst passed 58 % of the
#: rate, 0.15 s 77 %, 0.2 s 94-95 %, 0.25 s and more 98-104 % (two runs). A policer has no queue: with the few-ms
#: RTTs of these paths a small bucket drops whole bursts of a window too small for fast retransmit,
#: and TCP waits out its 200 ms minimum RTO. The cost of a larger burst: over any T seconds a meter
#: passes up to the rate plus one burst (+5 % over 5 s at 0.25 s), single seconds range 0.82-1.12 of
#: the cap, and a set or changed cap starts with a full bucket (the userspace datapath rebuilds a
#: modified meter).
METER_BURST_S = 0.25


def meter_band(cap_mbit: float, burst_s: float = METER_BURST_S) -> dict[str, int]:
    """The meter for ``cap_mbit``: rate in kbit/s (1 kbit = 1000 bit, as OpenFlow and OVS count)
    and burst in kbit."""
    kbps = max(1, round(cap_mbit * 1000))
    return {"kbps": kbps, "burst_kbit": max(1, round(kbps * burst_s))}


def meter_shortfall(features: Mapping, want: int) -> str | None:
    """Why meters with these features (``max_meter``, ``band_types``, ``capabilities``: OFPMP_METER_FEATURES
    as the os-ken app or ``harness.upkeep.ofprobe`` reports them) cannot hold ``want`` caps, or None."""
    f = features
    missing = [w for w, have in (("drop bands", "drop" in f["band_types"]),
                                 ("kbit/s rates", "kbps" in f["capabilities"]),
                                 ("burst sizes", "burst" in f["capabilities"]),
                                 (f"{want} meters", f["max_meter"] >= want)) if not have]
    if missing:
        return (f"the switch's meters lack {', '.join(missing)} (meter features: max_meter {f['max_meter']}, "
                f"bands {list(f['band_types'])}, capabilities {list(f['capabilities'])})")
    return None


class MeterCaps(CapTable):
    """Caps as OpenFlow meters on the switch an ``OpenFlowSteering`` drives (its os-ken app installs them).

    Changing a cap modifies the meter in place (``OFPMC_MODIFY``): the downlink entry keeps its meter
    instruction and its counters; lifting it first takes the instruction off the entry, then deletes
    the meter (deleting a meter in use would delete the entries that use it).

    Args:
        steering: the OpenFlow steering (``request``, ``networks``, ``receivers``), set up.
        burst_s: each meter's burst as time at its rate.
    """

    name = "openflow-meter"

    def __init__(self, steering, burst_s: float = METER_BURST_S) -> None:
        super().__init__()
        self.steering = steering
        self.burst_s = burst_s
        self._receivers = {r.name for r in steering.receivers}

    def unsupported(self) -> str | None:
        """Why the switch cannot enforce the caps (its OFPMP_METER_FEATURES), or None when it can."""
        return meter_shortfall(self.steering.request({"op": "meter_features"}),
                               len(self._receivers) * len(self.steering.networks))

    def apply(self, assignment: Assignment) -> dict[str, dict[str, float]]:
        changes = self._changes(assignment, lambda rx: self.steering.networks if rx in self._receivers else ())
        if changes:
            want: dict[str, dict[str, dict | None]] = {}
            for rx, net, cap, _ in changes:
                want.setdefault(rx, {})[net] = None if cap is None else meter_band(cap, self.burst_s)
            self.steering.request({"op": "caps", "caps": want})
            for rx, net, cap, _ in changes:
                self._set(rx, net, cap)
        return self.caps()

    def stats(self) -> dict[str, dict[str, dict]]:
        """Receiver -> network -> the meter's configuration and statistics (see ``ofapp.SteerApp.meters``)."""
        return self.steering.request({"op": "meters"})["meters"]

    def clear(self) -> None:
        """Every meter deleted (its entry kept, uncapped); idempotent, best effort (the app may be gone)."""
        if not self._caps:
            return
        lift = {}
        for rx, net in self._caps:
            lift.setdefault(rx, {})[net] = None
        try:
            self.steering.request({"op": "caps", "caps": lift})
        except (OSError, MplabError) as exc:
            log.warning("deleting the cap meters: %s", exc)
        self._caps.clear()


def caps_for(steering, fallback: Callable[[], Caps | None]) -> tuple[Caps | None, str | None]:
    """The cap enforcer for a steering backend, and why it is not the switch's meters (None when it is):
    OpenFlow meters when it is OpenFlow steering and its switch offers kbit/s drop meters, else
    ``fallback()`` (HTB where the testbed leaves room; a fall-back from OpenFlow is logged with why)."""
    if steering.name == "openflow":
        meters = MeterCaps(steering)
        why = meters.unsupported()
        if why is None:
            return meters, None
    else:
        why = f"{steering.name} steering has no rate caps"
    caps = fallback()
    if caps is not None and steering.name == "openflow":
        log.warning("rate caps fall back to HTB on the gateways' ports: %s", why)
    return caps, why
