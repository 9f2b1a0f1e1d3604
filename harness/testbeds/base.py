"""The Testbed seam: a sender Host, receiver Nodes, and what the runner and the controller ask of them.

``EmulatedTestbed`` (``harness.testbeds.emulated``) builds namespaces from an emulated
inventory; a lab testbed checks and configures real machines over SSH. The runner and the
controller only use what is defined here, so one runner drives every kind.

Life cycle: ``build`` (from an inventory, nothing touched), ``claim`` (what must be held
exclusively), ``preflight`` (checks, no side effects), ``setup`` (per campaign), then per
sample ``check_health``, ``apply_cc``, ``counters`` around the transfer, ``ensure_servers``
right before each test's clients start (a fresh server per test), ``skip_tails``; and ``teardown``
(idempotent, reverse order).

Capabilities: what differs between kinds is *declared* here with a default, and each kind
overrides what it offers; callers never probe attributes or compare kind names.

- ``name``: how records and sessions name the testbed (default: the inventory's name).
- ``probe_host``: where host facts and the kernel flavour are read (default: the sender).
- ``energy_source``: ``measured`` (real meters) or ``emulated`` (a power model), and
  ``energy_note()``, the manifest's sentence about it.
- ``lte_paths()``: per receiver, what its LTE path is (``harness.emulation.access``: its kind,
  an attach time), empty when the testbed does not build LTE paths itself.
- ``clock_offsets()``: per host, the clock offset measured at preflight (None: one clock).
- ``gateway(radio)``, ``downlink_device(receiver, radio)``, ``sender_device(radio)``: the host
  that shapes a radio's downlinks and its device towards each receiver, and the sender's
  device towards that host, where the testbed owns them (None: not ours, e.g. a lab's AP).
- ``reads_queues``: ``qdisc_stats`` reads the shaping queues (a congestion signal source).
- ``radio_loss_counters()``: where packet-loss counters live (None: nowhere of ours).
- ``lab_switch`` / ``splices_switch``: the OpenFlow switch the inventory names, or whether
  the testbed can splice its own OVS into the sender's links.
- ``network_capacity_mbit()``: each access network's shared capacity when known.
- ``has_sessions``: the testbed leaves state under its name that a later session may clean
  (``clean_stale``).
- ``host_groups()``, ``runs_here``, ``disconnect()``: what ``mplab preflight`` checks (a group of
  hosts alone; this machine's kernel too) and lets go of afterwards.
- ``standalone_meters(receivers)``: the meters for reading outside a campaign (``mplab meters``).
"""
from __future__ import annotations

import contextlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from harness.cc import CongestionControl
from harness.errors import CommandError, TrafficError
from harness.hosts.local import BackgroundProcess, Host
from harness.config.inventory import RADIOS, Inventory
from harness.meters.base import Meter
from harness.meters.drivers import meter_from_inventory
from harness.hosts.netcmd import sysctl_argv
from harness.config.switch import SwitchPorts
from harness.traffic import Iperf3, IperfServers
from harness.upkeep.preflight import Check

if TYPE_CHECKING:
    from harness.emulation.sendertail import SenderTail

log = logging.getLogger("mplab.testbed")


@dataclass(frozen=True)
class NodeInterface:
    radio: str
    name: str
    address: str


@dataclass
class Node:
    """A receiver: a Host, its two radios, and its meter."""

    name: str
    host: Host
    interfaces: dict[str, NodeInterface]
    meter_kind: str
    #: iperf3 server port on the sender dedicated to this receiver.
    port: int
    iperf3: Iperf3 | None = None


@dataclass(frozen=True)
class TailSkip:
    """What fast-forwarding a receiver's radio tail skipped (``Testbed.skip_tails``)."""

    #: Wall time from which the meter shows the receiver idle.
    at_wall: float
    #: How much longer the tail would have lasted, and its energy over that time (base power included).
    remaining_s: float
    remaining_j: float


@dataclass(frozen=True)
class Counters:
    """Byte counters of one interface (both directions)."""

    rx_bytes: int
    tx_bytes: int


@dataclass(frozen=True)
class LossCounters:
    """Packets the testbed's own radio-loss rule saw and dropped on one path (cumulative, or over a window)."""

    seen_pkts: int
    lost_pkts: int

    @property
    def loss(self) -> float | None:
        """The dropped share, or None when no packet was seen (nothing to estimate from)."""
        return self.lost_pkts / self.seen_pkts if self.seen_pkts > 0 else None

    def since(self, earlier: LossCounters) -> LossCounters:
        """What was counted after ``earlier`` (the counters only grow while the testbed is up)."""
        return LossCounters(self.seen_pkts - earlier.seen_pkts, self.lost_pkts - earlier.lost_pkts)


#: Where a loss estimate from ``Testbed.radio_loss_counters`` comes from, as path_stats records say it.
LOSS_COUNTERS_SOURCE = "nft-loss-counters"


def parse_loss_counters(text: str, source: str) -> dict[str, LossCounters]:
    """``{device: LossCounters}`` from ``nft -j list counters table ...`` of the radio-loss table.

    The counters are named ``<dev>_seen`` / ``<dev>_lost`` (``netcmd.radio_loss_argvs``); a device with
    a ``_seen`` counter and no ``_lost`` one has lost nothing. Other counters are ignored.
    """
    try:
        doc = json.loads(text)
        got = {c["counter"]["name"]: int(c["counter"]["packets"]) for c in doc["nftables"] if "counter" in c}
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TrafficError(f"{source}: cannot read loss counters from `nft -j list counters` ({exc})") from None
    return {name[:-len("_seen")]: LossCounters(n, got.get(name[:-len("_seen")] + "_lost", 0))
            for name, n in got.items() if name.endswith("_seen")}


def loss_over(before: dict[str, dict[str, LossCounters]],
              after: dict[str, dict[str, LossCounters]]) -> dict[str, dict[str, LossCounters]]:
    """Per receiver and radio, what the counters counted between two ``radio_loss_counters`` readings
    (paths in both readings only)."""
    return {rx: {r: c.since(before[rx][r]) for r, c in radios.items() if r in before.get(rx, {})}
            for rx, radios in after.items() if rx in before}


@dataclass(frozen=True)
class Repair:
    """One thing a health check put back on one receiver (e.g. a route a link flap dropped)."""

    receiver: str
    what: str


@dataclass
class Health:
    """What a health check before a sample found: repairs it made, receivers it could not repair (with why)."""

    repaired: list[Repair] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)


def parse_link_stats(text: str, source: str) -> dict[str, Counters]:
    """Counters per interface from ``ip -j -s link show``."""
    try:
        links = json.loads(text)
        return {ln["ifname"]: Counters(int(ln["stats64"]["rx"]["bytes"]), int(ln["stats64"]["tx"]["bytes"]))
                for ln in links}
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise TrafficError(f"{source}: cannot read interface counters from `ip -j -s link` ({exc})") from None


def queued_bytes(stats: dict[str, str]) -> int | None:
    """Bytes queued in the qdiscs of a ``Testbed.qdisc_stats()`` snapshot; None when it cannot be read.

    A classful qdisc repeats its children's backlog, so the sum over-counts: only "is it 0" is meaningful.
    """
    total = 0
    for text in stats.values():
        try:
            total += sum(int(q.get("backlog", 0)) for q in json.loads(text))
        except (ValueError, TypeError, AttributeError):
            return None
    return total


def parallel(fn: Callable, items: Sequence, max_workers: int = 16) -> list:
    """``fn`` over ``items`` in threads, results in order (exceptions re-raised)."""
    if len(items) <= 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items))) as pool:
        return list(pool.map(fn, items))


class Testbed(ABC):
    """A sender and receivers that the runner can drive."""

    #: The inventory kind this class drives ("emulated", "lab", or a registered one), recorded in every record.
    kind: ClassVar[str]
    #: Which inventory sections the kind reads: "emulated" (an emulation section, channels, emulated
    #: meters) or "lab" (machines over SSH) (``harness.config.inventory.INVENTORY_KINDS``).
    inventory_schema: ClassVar[str] = "lab"
    #: How much faster than real time the testbed runs (``harness.emulation.speedup``); records are
    #: written in testbed (real) time. Real radios and meters run at 1.
    speedup: float = 1.0
    #: The kernel's TCP timers as the testbed's sockets run them, when it scales them with ``speedup``
    #: (``harness.cc.timers``: the program and the values, e.g. ``bpf:mplab_timers@sha256:... delack_max=8ms
    #: rto_min=28ms``); None: the kernel's own. Recorded in every record as ``tcp_timers``.
    tcp_timers: str | None = None
    #: Where receivers' energy comes from: "measured" (real meters) or "emulated" (a power model).
    energy_source: ClassVar[str] = "measured"
    #: Whether ``qdisc_stats`` reads the queues of the testbed's own shaping points (a congestion signal).
    reads_queues: ClassVar[bool] = False
    #: Whether the testbed can splice an Open vSwitch of its own into the sender's links (OpenFlow steering
    #: without a switch named in the inventory). The splice works on the emulated topology
    #: (``controller.steering.ovs.splice_switch``): only ``EmulatedTestbed`` and kinds built on it say True.
    splices_switch: ClassVar[bool] = False
    #: Whether the testbed leaves state under its ``name`` that a later session can remove (``clean_stale``).
    has_sessions: ClassVar[bool] = False
    #: The testbed is built on this machine, so this machine's kernel is the testbed's kernel:
    #: ``mplab preflight`` adds this machine's kernel checks (the emulated kind).
    runs_here: ClassVar[bool] = False

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.sender: Host
        self.server_address: str
        self.nodes: dict[str, Node] = {}
        self.sender_iperf3: Iperf3 | None = None
        #: iperf3 server per receiver on the sender, started by ``ensure_servers``.
        self._servers: IperfServers | None = None

    @classmethod
    def build(cls, inventory: Inventory, access_kinds: Mapping[str, Any] | None = None,
              speedup: float = 1.0) -> Testbed:
        """The testbed of ``inventory`` (nothing touched yet). ``access_kinds``: real LTE access drivers for
        kinds that build LTE paths (``harness.emulation.access.AccessKinds``: that module builds on this one,
        so the type is named, not imported); ``speedup``: faster than real time, for kinds whose radios are a model
        (``harness.emulation.speedup`` refuses it where they are not). The default takes neither."""
        return cls(inventory)

    # ------------------------------------------------------------ capabilities

    @property
    def name(self) -> str:
        """How records, sessions and parallel copies name this testbed."""
        return self.inventory.name

    @property
    def probe_host(self) -> Host:
        """Where host facts (kernel, tools) and the kernel flavour are read for the manifest."""
        return self.sender

    def energy_note(self) -> str:
        """The manifest's ``energy_source``: where the receivers' energy comes from, in words."""
        return self.energy_source

    def lte_paths(self) -> dict[str, dict]:
        """Per receiver, what its LTE path is (``kind``, and e.g. ``attach_s`` for a real cell), for records
        and the manifest; empty when the testbed does not build LTE paths itself (a lab's are its own)."""
        return {}

    def clock_offsets(self) -> dict[str, float | None] | None:
        """Per host, its clock's offset to the orchestrator measured at preflight; None: one clock for all."""
        return None

    def gateway(self, radio: str) -> Host | None:
        """The host that shapes and forwards ``radio``'s downlinks when the testbed owns it (None: not ours)."""
        return None

    def downlink_device(self, receiver: str, radio: str) -> str | None:
        """The device on ``gateway(radio)`` towards ``receiver`` (None without a gateway of ours)."""
        return None

    def sender_device(self, radio: str) -> str | None:
        """The sender's device towards ``gateway(radio)`` (None without a gateway of ours)."""
        return None

    @property
    def lab_switch(self) -> SwitchPorts | None:
        """The OpenFlow switch between the sender and the access networks that the inventory names."""
        return self.inventory.lab.switch if self.inventory.lab is not None else None

    def network_capacity_mbit(self) -> dict[str, float] | None:
        """Each access network's shared capacity (Mbit/s) when the testbed knows it: the lab switch's
        nominal ones (all networks or none) by default."""
        sw = self.lab_switch
        return sw.capacity_mbit() if sw is not None else None

    def clean_stale(self, name: str) -> list[str]:
        """Remove what a copy of this kind named ``name`` left (an earlier session's copy that is gone
        now); what was removed. Only for kinds with ``has_sessions``; never touches a live testbed."""
        return []

    @classmethod
    @contextlib.contextmanager
    def standalone_meters(cls, inventory: Inventory, receivers: Sequence[str],
                          note: Callable[[str], None] = log.info) -> Iterator[dict[str, Meter]]:
        """Unopened meters of ``receivers`` for reading outside a campaign (``mplab meters``).

        A class method: a bench of meters needs no testbed that could run a sweep. By default each
        inventory entry's meter, read where mplab runs (a device path or a pyserial URL); a kind whose
        meters live inside what it builds brings them up for the block.
        """
        yield {name: meter_from_inventory(inventory.receiver(name).meter) for name in receivers}

    def host_groups(self) -> dict[str, list[str]]:
        """Named groups of hosts that ``preflight(ccs, only=...)`` can check alone (a lab's
        ``lab.groups``); none by default."""
        return {}

    def disconnect(self) -> None:  # noqa: B027 - optional hook: a kind that opens nothing keeps it empty
        """Let go of what building and checking opened (connections), leaving alone anything a live
        campaign set up under the same names (an emulated testbed's namespaces)."""

    # ------------------------------------------------------------ life cycle

    @abstractmethod
    def preflight(self, ccs: Sequence[CongestionControl]) -> list[Check]:
        """Checks with no side effects; the runner refuses to start if an essential one fails."""

    @abstractmethod
    def setup(self, ccs: Sequence[CongestionControl]) -> None:
        """Per-campaign setup: topology or configuration, servers, meters' devices."""

    @abstractmethod
    def teardown(self) -> None:
        """Undo ``setup``; idempotent, best effort, reverse order."""

    def claim(self, owner: str) -> None:  # noqa: B027 - optional hook: a kind with nothing exclusive keeps it empty
        """Hold what this testbed needs exclusively (the emulated namespace prefix) for ``owner``.

        Raises ``Busy`` naming the live holder. A lab is one testbed by nature: nothing to claim.
        """

    def release_claim(self) -> None:  # noqa: B027 - optional hook, the pair of claim()
        """Give up what ``claim`` took (idempotent); ``teardown`` does it too."""

    @abstractmethod
    def meters(self) -> dict[str, Meter]:
        """One unopened Meter per receiver."""

    def __enter__(self) -> Testbed:
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    # ------------------------------------------------------------ per sample

    def hosts(self) -> list[Host]:
        return [self.sender, *(n.host for n in self.nodes.values())]

    def apply_cc(self, cc: CongestionControl, nodes: Sequence[str]) -> None:
        """Make ``cc`` the default congestion control on the sender and the given receivers.

        iperf3's ``-C`` sets it on the data sockets as well; the default covers the
        control connection and anything else that opens sockets.
        """
        hosts = [self.sender, *(self.nodes[n].host for n in nodes)]
        parallel(lambda h: h.run(sysctl_argv("net.ipv4.tcp_congestion_control", cc.sock_name)), hosts)

    def check_health(self, nodes: Sequence[str]) -> Health:
        """Check what the testbed owns on ``nodes`` (links up, routes, policy tables) and repair it.

        Called before every sample. A receiver that cannot be repaired is returned in
        ``broken`` with the reason; its sample fails with that reason and the sweep goes on.
        The base checks nothing (a lab's routes belong to its machines' own configuration).
        """
        return Health()

    def idle_power_w(self, node: str) -> float | None:
        """A receiver's power when all its radios are idle, if the testbed knows it (None: measure it)."""
        return None

    def tail_s(self, mode: str) -> float:
        """How long the radios a mode uses stay in a high-power state after the last byte (0: unknown)."""
        return 0.0

    def skip_tails(self, nodes: Sequence[str]) -> dict[str, TailSkip]:
        """Fast-forward the radio tails of ``nodes``, if the testbed's tails are a model it owns.

        Returns per receiver what was skipped (``TailSkip``): the runner adds it to the tail the
        meter showed. Empty when tails are real radios (a lab, the default): then they are waited out.
        """
        return {}

    def rx_probe(self, node: str) -> Callable[[], int] | None:
        """A reader of the bytes receiver ``node`` has taken in over its radios so far, cheap enough to call
        every millisecond (the runner looks for a transfer's first data with it); None where a look costs more
        than that (a lab over SSH, the default)."""
        return None

    def sender_tail(self, clients: Mapping[str, BackgroundProcess], nbytes: int) -> SenderTail | None:
        """What pauses the senders' iperf3 servers between their last write and their clients' last read
        (``harness.emulation.sendertail``), for the clients of one transfer; None where the sender is a machine of
        its own whose idle spin costs the measurement nothing (a lab, the default)."""
        return None

    def counters(self, node: str) -> dict[str, Counters]:
        """Byte counters of a receiver's radios, by radio."""
        n = self.nodes[node]
        res = n.host.run(["ip", "-j", "-s", "link", "show"])
        stats = parse_link_stats(res.stdout, f"{node}")
        out = {}
        for radio in RADIOS:
            ifname = n.interfaces[radio].name
            if ifname not in stats:
                raise CommandError(n.host.name, ["ip", "-j", "-s", "link", "show"], 0,
                                   note=f"interface {ifname} missing")
            out[radio] = stats[ifname]
        return out

    def radio_loss_counters(self) -> dict[str, dict[str, LossCounters]] | None:
        """Cumulative packets seen and dropped by the testbed's own random radio loss, per receiver and radio.

        Read twice and subtracted (``loss_over``), they give a path's random loss over a window, apart from
        drops at a full queue (which a retransmission ratio cannot tell from path loss). None: the testbed
        has no such counters (the default, and a lab's answer: a real radio loses packets in the air,
        where nothing of ours counts them); callers then fall back to the retransmission ratio.
        """
        return None

    @staticmethod
    def stop_all(procs: dict[str, BackgroundProcess]) -> None:
        """Stop every process in ``procs`` (best effort: teardown must go on) and forget them."""
        for proc in procs.values():
            try:
                proc.stop(grace_s=1.0)
            except Exception as exc:  # noqa: BLE001 - teardown is best effort, it must go on
                log.warning("stopping %s: %s", proc.label, exc)
        procs.clear()

    def ensure_servers(self, receivers: Sequence[str] | None = None) -> None:
        """A fresh iperf3 server on the sender for each of ``receivers`` (default: all), listening: call it right
        before the clients of each test start (``harness.traffic.IperfServers``)."""
        assert self.sender_iperf3 is not None
        if self._servers is None:
            self._servers = IperfServers(self.sender, self.sender_iperf3,
                                         {name: node.port for name, node in self.nodes.items()})
        self._servers.fresh(receivers)

    def stop_servers(self) -> None:
        """Stop the iperf3 servers (best effort, for teardown)."""
        if self._servers is not None:
            self._servers.stop()

    def qdisc_stats(self) -> dict[str, str]:
        """``tc -s qdisc`` of the shaping points, by host (best effort; empty on a lab)."""
        return {}
