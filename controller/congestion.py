"""The congestion signal of each access network, as MP-SDN reads it every execution interval (EI).

The paper's signal is the AP's mean MAC queue occupancy over the EI (Algorithm 2's MacOcc). What
stands in for it depends on what the testbed lets us see, and one run reads exactly one source,
named in every epoch entry (``control_epochs[].occupancy_source``); a network the source cannot
read in an interval is left out of that interval's occupancy (its Tier-2 limit stays) and the
entry says why (``congestion[net].error``). No other source fills in.

- ``qdisc`` (the emulated testbed, which owns the AP's and eNB's queues): the fill of the shaping
  FIFOs (``tc -s -j qdisc``, ``controller.measure.interval_occupancy``), sampled every 0.2 s, per
  network its fullest active station queue, averaged over the EI. A queue occupancy, as the paper's.
- ``switch-port`` (a lab, where the AP's and eNB's queues are not ours): the lab switch's port
  towards the AP / eNB over OpenFlow (``OFPMP_PORT_STATS``): its transmit rate over the EI against
  the network's nominal capacity from the inventory (``lab.switch.networks.<net>.capacity_mbit``),
  utilisation = tx_mbit / capacity. **Utilisation is a proxy for queue occupancy, not the same
  thing**: a queue fills only once the link runs at its capacity, so a saturated network reads
  ~1.0 either way, but utilisation crosses CTh (0.85) while the queue may still be empty (it is the
  earlier, more cautious signal), and with a Tier-2 flow alone on a network the limit settles where
  utilisation sits around CTh rather than at full use. A port that dropped packets in the interval
  (``tx_dropped`` grew) had its egress queue full at least once: read as occupancy 1. The meters'
  dropped bytes (Tier-2 traffic held back by its limit) are recorded, not used: they measure the
  secondaries' demand, and reading them as congestion would pin a backlogged Tier 2 at the floor
  on an idle network.

Why not the gateway's own queue over SSH (``tc -s qdisc`` on an OpenWrt AP): a mac80211 AP queues
in the driver's per-station TXQs, below the qdisc (whose backlog stays near 0 under load), an LTE
eNB queues in srsenb's RLC buffers with no qdisc at all, and an appliance AP has no SSH. The switch
is there whenever a lab can cap at all (caps on a lab are the switch's meters).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from harness.errors import PreflightError
from harness.testbeds.base import Testbed

from controller.measure import fifos, interval_occupancy

QUEUE_SOURCE = "qdisc"
SWITCH_PORT_SOURCE = "switch-port"


@dataclass(frozen=True)
class CongestionReading:
    """One interval's signal: occupancy per network (0..1), the source, how many reads, the raw numbers."""

    occupancy: dict[str, float]
    source: str
    samples: int
    detail: dict[str, dict] | None = None


class CongestionSignal(Protocol):
    """``start`` opens an interval, ``sample`` is called every sample period during it, ``read`` closes it
    (returning its reading) and opens the next."""

    source: str

    def start(self) -> None: ...

    def sample(self) -> None: ...

    def read(self) -> CongestionReading: ...


@dataclass
class QueueSignal:
    """The emulated AP's and eNB's shaping FIFOs (``testbed.qdisc_stats()``)."""

    testbed: Testbed
    source: str = QUEUE_SOURCE
    _snaps: list = field(default_factory=list)

    def start(self) -> None:
        self._snaps = []

    def sample(self) -> None:
        self._snaps.append(fifos(self.testbed.qdisc_stats()))

    def read(self) -> CongestionReading:
        snaps, self._snaps = self._snaps, []
        return CongestionReading(interval_occupancy(snaps), self.source, len(snaps))


@dataclass(frozen=True)
class PortReading:
    """One network's down port at one moment: bytes and packets dropped on transmit, the switch's clock
    for them (the port's age, s), and what the network's meters dropped so far (bytes)."""

    tx_bytes: int
    tx_dropped: int
    duration_s: float
    meter_dropped_bytes: int = 0


def port_readings(reply: Mapping[str, Mapping | None]) -> dict[str, PortReading | None]:
    """The ``ports`` reply of the OpenFlow app (``controller.steering.ofapp``), per network."""
    return {net: None if p is None else PortReading(int(p["tx_bytes"]), int(p["tx_dropped"]), float(p["duration_s"]),
                                                     int(p.get("meter_dropped_bytes", 0)))
            for net, p in reply.items()}


def port_occupancy(before: Mapping[str, PortReading | None], after: Mapping[str, PortReading | None],
                   capacity_mbit: Mapping[str, float]) -> tuple[dict[str, float], dict[str, dict]]:
    """Per network, occupancy over the interval between two port readings, and the numbers behind it.

    Utilisation = transmit rate (bytes over the switch's own clock between the readings) / nominal
    capacity, clipped to 1; a port that dropped on transmit in the interval reads 1. A network
    without both readings, or whose port restarted (clock or counters went back), gets no
    occupancy and an ``error`` in its detail.
    """
    occ: dict[str, float] = {}
    detail: dict[str, dict] = {}
    for net, cap in capacity_mbit.items():
        a, b = before.get(net), after.get(net)
        if a is None or b is None:
            detail[net] = {"error": "no port statistics for the network's down port"}
            continue
        dt = b.duration_s - a.duration_s
        if dt <= 0 or b.tx_bytes < a.tx_bytes or b.tx_dropped < a.tx_dropped:
            detail[net] = {"error": f"port counters restarted (age {a.duration_s:.3f} -> {b.duration_s:.3f} s)"}
            continue
        tx_mbit = (b.tx_bytes - a.tx_bytes) * 8 / dt / 1e6
        dropped = b.tx_dropped - a.tx_dropped
        util = tx_mbit / cap
        occ[net] = 1.0 if dropped > 0 else min(1.0, util)
        detail[net] = {"tx_mbit": round(tx_mbit, 3), "capacity_mbit": cap, "utilisation": round(util, 4),
                       "tx_dropped": dropped, "interval_s": round(dt, 3),
                       "meter_dropped_bytes": max(0, b.meter_dropped_bytes - a.meter_dropped_bytes)}
    return occ, detail


@dataclass
class SwitchPortSignal:
    """The lab switch's ports towards the AP and eNB, read through the OpenFlow app (``request``: its
    control call, ``controller.steering.openflow.OpenFlowSteering.request``)."""

    request: Callable[[dict], dict]
    capacity_mbit: dict[str, float]
    source: str = SWITCH_PORT_SOURCE
    _base: dict[str, PortReading | None] = field(default_factory=dict)

    def _now(self) -> dict[str, PortReading | None]:
        return port_readings(self.request({"op": "ports"})["ports"])

    def start(self) -> None:
        self._base = self._now()

    def sample(self) -> None:
        """Nothing between the interval's ends: the byte counters integrate the rate over it."""

    def read(self) -> CongestionReading:
        now = self._now()
        occ, detail = port_occupancy(self._base, now, self.capacity_mbit)
        self._base = now
        return CongestionReading(occ, self.source, 2, detail)


def lab_signal_gap(testbed: Testbed, steering_name: str) -> str | None:
    """Why a lab cannot give MP-SDN its congestion signal (None: it can)."""
    sw = testbed.inventory.lab.switch if testbed.inventory.lab else None
    if steering_name != "openflow" or sw is None:
        return (f"on a lab the congestion signal is the lab switch's port towards the AP / eNB, read over OpenFlow: "
                f"it needs `steering: openflow` and lab.switch (got {steering_name} steering"
                f"{'' if sw else ', no lab.switch'})")
    missing = [net for net, p in sw.networks.items() if p.capacity_mbit is None]
    if missing:
        return (f"on a lab the congestion signal is each network's down-port rate against its nominal capacity, and "
                f"lab.switch.networks.{{{','.join(missing)}}}.capacity_mbit is not set")
    return None


def signal_for(testbed: Testbed, steering) -> CongestionSignal:
    """The one congestion source of this testbed: its own queues where it reads them (``Testbed.reads_queues``),
    else the lab switch's ports (``PreflightError`` when it has none)."""
    if testbed.reads_queues:
        return QueueSignal(testbed)
    why = lab_signal_gap(testbed, steering.name)
    if why is not None:
        raise PreflightError(why)
    return SwitchPortSignal(steering.request, testbed.inventory.lab.switch.capacity_mbit())

