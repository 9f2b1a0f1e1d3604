"""The related papers' schemes on the Policy seam: es-mptcp, ee-mptcp, eemptcp, mp-sdn, mp-sdn-energy,
marginal-efficiency.

Each class adapts one rule of ``controller.schemes`` to ``controller.policy.Policy``: it reads each
receiver's probe rates (capacity per path) and, where the rule needs them, the per-path RTT and
window the controller took from the sender's subflows and the path's loss from the testbed's loss
counters (``PathStats``, ``controller.measure``), and returns one
``Decision`` per receiver. Parameters come from the scenario (``policies: [{name, params}]``) with
the papers' defaults; power constants are ``wifi_b``/``wifi_theta``/``lte_b``/``lte_theta`` (mW per
Mbit/s, mW) and default to the papers' (137, 132.9) and (52, 1288). Every ambiguity and how it is
resolved is in the class docstring and in docs/schemes.md.

MP-SDN and its energy variant are periodic (``epoch_s`` = the execution interval EI, 2 s): the
controller calls ``decide`` before the transfer (epoch 0: categorisation, Tier-2 limit at its
initial value) and again every EI during it with each network's congestion signal in the context
(queue occupancy on the emulated testbed, the switch port's utilisation on a lab: ``MpSdn``);
their state (the Tier-2 limit per network, the floor streaks) lives in the policy object and
restarts at epoch 0.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from harness.errors import ConfigError, MplabError

from controller import schemes
from controller.policy import IFACES, DEAD_MBIT, Context, Decision, Measure, NodeFailed, Outcome, Policy, ReceiverMeasurement

log = logging.getLogger("mplab.controller.related")

POWER_KEYS = ("wifi_b", "wifi_theta", "lte_b", "lte_theta")


def _power(params: Mapping) -> dict[str, tuple[float, float]]:
    p = schemes.PAPER_POWER
    return {"wifi": (float(params.get("wifi_b", p["wifi"][0])), float(params.get("wifi_theta", p["wifi"][1]))),
            "lte": (float(params.get("lte_b", p["lte"][0])), float(params.get("lte_theta", p["lte"][1])))}


def _probes(m: ReceiverMeasurement) -> dict[str, float]:
    rates = {r: float(m.probe_mbit.get(r, 0.0)) for r in IFACES}
    if max(rates.values()) <= DEAD_MBIT:
        raise NodeFailed(f"receiver {m.receiver} carried nothing on WiFi ({rates['wifi']:.3f} Mbit/s) nor LTE "
                         f"({rates['lte']:.3f} Mbit/s) while probed; check its links")
    return rates


def _path_states(m: ReceiverMeasurement, need_rtt: bool) -> dict[str, schemes.PathState]:
    """Capacity from the probe, RTT/loss/cwnd from the sender's subflows; paths that carried nothing left out."""
    out = {}
    for r, x in _probes(m).items():
        if x <= DEAD_MBIT:
            continue
        st = m.paths.get(r)
        if need_rtt and (st is None or not st.rtt_s):
            raise MplabError(f"receiver {m.receiver}: no RTT measured on {r} (the controller reads it from the "
                             "sender's subflows with `ss -ti` while probing)")
        out[r] = schemes.PathState(x, st.rtt_s if st else None, st.loss if st else None, st.cwnd_pkts if st else None)
    return out


def _decision(paths: frozenset[str], caps: Mapping[str, float] | None = None) -> Decision:
    return Decision(frozenset(p for p in paths if p in IFACES), dict(caps) if caps else None)


@dataclass
class _Base:
    """Conveniences shared by the related schemes: parameters, power model, one decision per receiver."""

    power: dict[str, tuple[float, float]] = field(default_factory=lambda: _power({}))
    epoch_s: float | None = None
    probes: bool = True
    #: No scheme here asks for measurement windows beyond the probes (the dry run's estimate).
    measures: int = 0
    #: The controller reads RTT, loss and cwnd of the sender's subflows while probing.
    path_stats: ClassVar[bool] = False
    #: Decisions carry per-path rate caps (EEMPTCP's split, MP-SDN's Tier-2 limits).
    caps: ClassVar[bool] = False
    #: Reads each network's congestion signal every epoch (MP-SDN).
    reads_congestion: ClassVar[bool] = False

    def _params(self) -> dict:
        return {"wifi_b": self.power["wifi"][0], "wifi_theta": self.power["wifi"][1],
                "lte_b": self.power["lte"][0], "lte_theta": self.power["lte"][1]}

    def _each(self, measurements: Sequence[ReceiverMeasurement],
              choose: Callable[[ReceiverMeasurement], schemes.Choice], caps: bool = False) -> Outcome:
        """One ``choose`` per receiver: its paths (and, with ``caps``, its rate caps) and its trace."""
        out, per = {}, {}
        for m in measurements:
            c = choose(m)
            out[m.receiver] = _decision(c.paths, c.caps_mbit) if caps else _decision(c.paths)
            per[m.receiver] = {**c.trace, "caps_mbit": dict(c.caps_mbit or {})} if caps else c.trace
        return Outcome(out, {"params": self.params(), "per_receiver": per})


@dataclass
class EsMptcp(_Base):
    """ES-MPTCP (Dong et al., Electronics 11(3):490, 2022; docs/reference/papers.md §2).

    Per receiver, once before the transfer: rank the paths by effective energy per bit b + theta/x,
    take the top k maximising O_k (``schemes.es_mptcp``). Resolutions: O_k is a ratio (ambiguity `objective-form`);
    completion time by the paper's round counting with a loss-aware window model capped at the BDP,
    each path's ranking rate its own predicted average for this file (``time_mode=rounds``, the
    default; ``size`` uses S / sum X with LIA rates, ambiguity `completion-time`); loss floored at ``p_floor`` for the
    LIA fixed point (ambiguity `zero-loss`); capacity = the probe rate; decided once per transfer, not every RTT (flow
    changes are not free network-side).

    What p and RTT mean. The paper's p_r (the LIA fixed point, Eq. 6) is the path's random loss
    probability: its links are WANem paths with a configured loss (WLAN 1 %, 3G 0 %), independent of the
    sender's own rate. A probe's drops at a queue it filled itself are not that (a 1 s Cubic probe
    overflowing the 3G path's 60 ms buffer retransmitted 6 % on a lossless path), so ``loss`` is the
    share the testbed's loss rules dropped over the probe window (``Testbed.radio_loss_counters``:
    nftables counters before the radio queue on the emulated testbed); only where nothing counts it (a
    lab, a real cell) does the sender's retransmission ratio stand in, and ``path_stats.source`` says
    which. The RTT is the subflow's minimum RTT, the path's base RTT as the paper's Table 3 gives it:
    the round counting models slow start, when the queue is empty, and the smoothed RTT of a probe that
    filled its queue (3G: 118 ms for 65 ms) charges a short file with queueing it never builds.
    """

    objective: str = "ratio"
    time_mode: str = "rounds"
    p_floor: float = schemes.P_FLOOR
    w0: float = 10.0
    name: str = "es-mptcp"
    path_stats: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.objective not in ("ratio", "difference") or self.time_mode not in ("rounds", "size"):
            raise ValueError(f"objective {self.objective!r} (ratio|difference), time_mode {self.time_mode!r} "
                             "(rounds|size)")

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return self._each(measurements, lambda m: schemes.es_mptcp(
            _path_states(m, True), self.power, ctx.file_bytes, objective=self.objective, time_mode=self.time_mode,
            p_floor=self.p_floor, w0=self.w0))

    def params(self) -> dict:
        return {"objective": self.objective, "time_mode": self.time_mode, "p_floor": self.p_floor, "w0": self.w0,
                **self._params()}


@dataclass
class EeMptcp(_Base):
    """EE-MPTCP (Dong, Cao, Xiong, Dong, Electronics 11:3104, 2022; §4).

    Rank by b + theta/x (x = cwnd/RTT of the sender's subflow, else the probe), then for each top-k
    set count rounds with the expected-window model (binom(w, l), any loss at W <= 3 a timeout,
    window capped at the BDP: ambiguities `zero-loss`, `binomial`) and take the k maximising the difference
    sum X - T sum(bX + theta) in (Mbit/s, mJ), the energy term divided by ``energy_scale`` (ambiguity `objective-units`).
    RTT and loss as for ``EsMptcp`` (base RTT, the path's counted random loss: the round model's p is
    the same per-packet path loss); cwnd/RTT is capped at the probe rate.
    """

    w0: float = 10.0
    ssthresh0: float = 64.0
    objective: str = "difference"
    energy_scale: float = 1.0
    name: str = "ee-mptcp"
    path_stats: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.objective not in ("ratio", "difference") or self.energy_scale <= 0:
            raise ValueError(f"objective {self.objective!r} (ratio|difference), energy_scale {self.energy_scale} (> 0)")

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return self._each(measurements, lambda m: schemes.ee_mptcp(
            _path_states(m, True), self.power, ctx.file_bytes, w0=self.w0, ssthresh0=self.ssthresh0,
            objective=self.objective, energy_scale=self.energy_scale))

    def params(self) -> dict:
        return {"w0": self.w0, "ssthresh0": self.ssthresh0, "objective": self.objective,
                "energy_scale": self.energy_scale, **self._params()}


@dataclass
class Eemptcp(_Base):
    """EEMPTCP (Wang, Wang, Wang, IEEE Access 2018; §3) as a network-side rate split.

    Per receiver, once: the split maximising sum x / sum(theta + b x) with sum x >= max C, x_r <= C_r,
    power <= E_max(sum x), by enumeration on a ``step_mbit`` grid (ambiguity `ga-parameters`; no GA). C_r = the probe
    rate (the paper's Mathis rate needs loss, which the probe already reflects). E_max mode
    ``max_at_aggregate`` by default (ambiguity `energy-cap`). The split is enforced as per-path caps (HTB in emulation,
    OpenFlow meters on OVS), not by the paper's modified LIA (ambiguity `window-target`).
    """

    emax_mode: str = "max_at_aggregate"
    step_mbit: float = 0.1
    name: str = "eemptcp"
    caps: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.emax_mode not in schemes.EMAX_MODES or self.step_mbit <= 0:
            raise ValueError(f"emax_mode {self.emax_mode!r} ({', '.join(schemes.EMAX_MODES)}), step_mbit "
                             f"{self.step_mbit} (> 0)")

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return self._each(measurements, lambda m: schemes.eemptcp(
            {r: x for r, x in _probes(m).items() if x > DEAD_MBIT}, self.power, emax_mode=self.emax_mode,
            step_mbit=self.step_mbit), caps=True)

    def params(self) -> dict:
        return {"emax_mode": self.emax_mode, "step_mbit": self.step_mbit, **self._params()}


@dataclass
class MarginalEfficiency(_Base):
    """§7.2 (mplab's derivation, docs/reference/papers.md): the best single path by x/(P0 + P), plus the other path iff
    its own bits per joule beat the device's with the first alone. ``p0_mw`` is the device's base power
    (default 2400 mW, the emulated ``sbc-huang2012`` profile's board); x = the probe rates (stand-alone,
    so optimistic about the second path under sharing)."""

    p0_mw: float = 2400.0
    name: str = "marginal-efficiency"

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return self._each(measurements, lambda m: schemes.marginal_efficiency(_probes(m), self.power, self.p0_mw))

    def params(self) -> dict:
        return {"p0_mw": self.p0_mw, **self._params()}


@dataclass
class MpSdn(_Base):
    """MP-SDN (Chen, Xing, Palash, Liu, Martin; §5): primary untouched, secondaries in a regulated Tier 2.

    Epoch 0 (before the transfer): each receiver's primary = the network with the higher probe rate
    (Algorithm 1; with per-receiver probes taken while all receivers were active, the priority walk
    reduces to this), its other network is its secondary; each network's Tier-2 limit starts at
    ``initial_mbit`` (default: the network's capacity, i.e. secondaries unrestricted until congestion
    is seen; the paper does not say). Every EI (``ei_s``, 2 s) during the transfer: the network's
    congestion signal drives Algorithm 2 with the prose's increase rule (ambiguity `mpsdn-increase`: BW (1 + alpha
    (CTh - occ)/occ), occ floored at ``occ_min``, capped at the capacity); the limit is split equally
    among the receivers whose secondary is on that network and enforced as each one's per-path cap.

    The signal (``controller.congestion``; one source per run, recorded in each epoch entry as
    ``occupancy_source``) stands in for the AP's mean MAC queue occupancy: on the emulated testbed
    the queue occupancy of its shaping FIFOs (``qdisc``: mean backlog / limit over the EI); on a lab,
    whose AP and eNB queues are not ours, the **utilisation** of the lab switch's port towards the AP /
    eNB (``switch-port``: its transmit rate over the EI, OpenFlow port stats, against the network's
    nominal ``lab.switch.networks.<net>.capacity_mbit``; 1 if the port dropped on transmit). Utilisation
    is a proxy for queue occupancy, not the paper's quantity: both read ~1 on a saturated network, but
    utilisation crosses CTh before a queue builds, so on a lab Tier 2 is squeezed earlier and a Tier-2
    flow alone on a network is held near CTh of its capacity. A network its source cannot read in an
    EI keeps its limit for that EI (the entry says why); no other source fills in.
    """

    cth: float = 0.85
    alpha: float = 0.5
    floor_mbit: float = 0.1
    occ_min: float = 0.05
    ei_s: float = 2.0
    initial_mbit: float | None = None
    name: str = "mp-sdn"
    caps: ClassVar[bool] = True
    #: Reads each network's congestion signal every EI (``Setup2Control`` checks a lab has one).
    reads_congestion: ClassVar[bool] = True
    primary: dict[str, str] = field(default_factory=dict)
    tier2_mbit: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.cth <= 1 or not 0 < self.alpha < 1 or self.floor_mbit <= 0 or self.ei_s <= 0:
            raise ValueError(f"need 0 < cth <= 1, 0 < alpha < 1, floor_mbit > 0, ei_s > 0 (got cth "
                              f"{self.cth}, alpha {self.alpha}, floor_mbit {self.floor_mbit}, ei_s {self.ei_s})")
        self.epoch_s = self.ei_s

    def _capacity(self, ctx: Context, measurements: Sequence[ReceiverMeasurement], net: str) -> float:
        if ctx.capacity_mbit and ctx.capacity_mbit.get(net):
            return float(ctx.capacity_mbit[net])
        return sum(float(m.probe_mbit.get(net, 0.0)) for m in measurements) or 1.0

    def _categorise(self, measurements: Sequence[ReceiverMeasurement], ctx: Context) -> None:
        self.primary = {m.receiver: schemes.mp_sdn_primary(_probes(m)) for m in measurements}
        self.tier2_mbit = {net: (self.initial_mbit if self.initial_mbit is not None
                                 else self._capacity(ctx, measurements, net)) for net in IFACES}

    def _secondaries(self, receivers: Sequence[str]) -> dict[str, list[str]]:
        """Network -> receivers whose secondary is on it."""
        return {net: [rx for rx in receivers if self.primary[rx] != net] for net in IFACES}

    def _regulate(self, measurements: Sequence[ReceiverMeasurement], ctx: Context) -> dict[str, float]:
        occ = dict(ctx.occupancy or {})
        for net in IFACES:
            if net in occ:
                self.tier2_mbit[net] = schemes.mp_sdn_regulate(
                    self.tier2_mbit[net], occ[net], self._capacity(ctx, measurements, net), cth=self.cth,
                    alpha=self.alpha, floor_mbit=self.floor_mbit, occ_min=self.occ_min)
        return occ

    def _caps(self, receivers: Sequence[str]) -> dict[str, dict[str, float]]:
        caps: dict[str, dict[str, float]] = {rx: {} for rx in receivers}
        for net, rxs in self._secondaries(receivers).items():
            for rx, share in schemes.tier2_shares(self.tier2_mbit[net], rxs).items():
                caps[rx][net] = max(share, self.floor_mbit / len(rxs))
        return caps

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        if ctx.epoch == 0 or not self.primary:
            self._categorise(measurements, ctx)
            occ = {}
        else:
            occ = self._regulate(measurements, ctx)
        rxs = [m.receiver for m in measurements]
        caps = self._caps(rxs)
        out = {rx: Decision(frozenset(IFACES), caps[rx] or None) for rx in rxs}
        return Outcome(out, {"params": self.params(), "epoch": ctx.epoch, "primary": dict(self.primary),
                             "occupancy": occ, "tier2_mbit": dict(self.tier2_mbit), "caps_mbit": caps})

    def params(self) -> dict:
        return {"cth": self.cth, "alpha": self.alpha, "floor_mbit": self.floor_mbit, "occ_min": self.occ_min,
                "ei_s": self.ei_s, "initial_mbit": self.initial_mbit}


@dataclass
class MpSdnEnergy(MpSdn):
    """MP-SDN with the energy rule of §5.5 (derived): a secondary whose Tier-2 share sat at the floor for
    ``m`` consecutive EIs is removed (the receiver keeps its primary only); it is re-admitted when its
    network's occupancy is below ``cth - margin`` and §7.2's marginal-efficiency test (``p0_mw`` and
    the power constants, the probe rates) says the second path pays for itself. ``m`` = 3 and
    ``margin`` = 0.10 are ours (the paper has no energy variant)."""

    m: int = 3
    margin: float = 0.10
    p0_mw: float = 2400.0
    name: str = "mp-sdn-energy"
    watches: dict[str, schemes.FloorWatch] = field(default_factory=dict)
    admit: dict[str, bool] = field(default_factory=dict)

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        base = super().decide(measurements, ctx, measure)
        if ctx.epoch == 0 or not self.watches:
            self.watches = {m.receiver: schemes.FloorWatch(self.m) for m in measurements}
            self.admit = {m.receiver: len(schemes.marginal_efficiency(_probes(m), self.power, self.p0_mw).paths) == 2
                          for m in measurements}
        out = dict(base.assignment)
        removed = []
        for rx in base.assignment:
            sec = next(n for n in IFACES if n != self.primary[rx])
            occ = (ctx.occupancy or {}).get(sec, 1.0)
            at_floor = ctx.epoch > 0 and self.tier2_mbit[sec] <= self.floor_mbit + 1e-9
            keep = self.watches[rx].step(at_floor, occ, self.cth, self.margin, self.admit[rx]) if ctx.epoch else True
            if not keep:
                out[rx] = Decision(frozenset({self.primary[rx]}))
                removed.append(rx)
        return Outcome(out, {**base.trace, "removed": removed, "admit": dict(self.admit)})

    def params(self) -> dict:
        return {**super().params(), "m": self.m, "margin": self.margin, "p0_mw": self.p0_mw, **self._params()}


def _factory(cls: type, allowed: Sequence[str]) -> Callable[..., Policy]:
    def make(**params) -> Policy:
        unknown = set(params) - set(allowed) - set(POWER_KEYS)
        if unknown:
            raise ConfigError(f"{cls.name} parameters are {', '.join([*allowed, *POWER_KEYS])} "  # type: ignore[attr-defined]
                              f"(got {sorted(unknown)})", field="policies")
        kw = {k: v for k, v in params.items() if k not in POWER_KEYS}
        try:
            return cls(power=_power(params), **kw)
        except ValueError as exc:
            raise ConfigError(f"{cls.name}: {exc}", field="policies") from None  # type: ignore[attr-defined]
    return make


#: The related schemes by name (merged into ``controller.registry.POLICIES``).
RELATED: dict[str, Callable[..., Policy]] = {
    "es-mptcp": _factory(EsMptcp, ("objective", "time_mode", "p_floor", "w0")),
    "ee-mptcp": _factory(EeMptcp, ("w0", "ssthresh0", "objective", "energy_scale")),
    "eemptcp": _factory(Eemptcp, ("emax_mode", "step_mbit")),
    "mp-sdn": _factory(MpSdn, ("cth", "alpha", "floor_mbit", "occ_min", "ei_s", "initial_mbit")),
    "mp-sdn-energy": _factory(MpSdnEnergy, ("cth", "alpha", "floor_mbit", "occ_min", "ei_s", "initial_mbit",
                                            "m", "margin", "p0_mw")),
    "marginal-efficiency": _factory(MarginalEfficiency, ("p0_mw",)),
}
