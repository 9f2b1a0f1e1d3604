"""The Policy seam: per-receiver measurements in, per receiver an interface set (and caps) out.

A policy sees what a controller sees network-side: each receiver's probe rate on WiFi and on
LTE (bytes counted at the AP and the eNB while every receiver used that network alone). It
returns a ``Decision`` per receiver: the interfaces it may use and, for rate-split schemes
(EEMPTCP, MP-SDN), optional per-path caps. ``epoch_s`` says whether it decides once before a
transfer (``None``) or again every epoch (MP-SDN's loop); ``decide`` gets the epoch number in
the context. Policies that need more than the probes (the reference paper's Tuning) get a
``measure`` callback that runs the receivers under an assignment for a short window and
returns the per-interface throughputs counted network-side.

Registry: ``controller.registry.POLICIES`` maps a name to a factory taking the policy's parameters
(a dict from the scenario or the command line); the related schemes live in ``controller.related``.
Adding a scheme is one class and one line there.

Ambiguities of the reference paper resolved here (docs/reference/papers.md §1, ambiguity `ref-band` of
docs/reference/ambiguities.md): the 10 % band is ``|R1 - R2| <= band * base(R1, R2)`` with ``base = max`` by default
(``min`` and ``mean`` selectable; both logged in every record); both probes ~0 fails the node
rather than assigning "both"; Tuning compares energies predicted from throughputs *measured
under each assignment* (like for like), not from the probes; a tie adopts the tuned assignment,
as the pseudo-code's step 7 is written; Tuning is all-or-nothing over the "both" receivers.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol

from harness.errors import ConfigError, MplabError

log = logging.getLogger("mplab.controller")

Iface = Literal["wifi", "lte"]
IFACES: tuple[Iface, ...] = ("wifi", "lte")
#: A probe at or below this rate (Mbit/s) counts as "the path carried nothing".
DEAD_MBIT = 0.01


class NodeFailed(MplabError):
    """A receiver carried nothing on either network while probed: no interface can be chosen."""


@dataclass(frozen=True)
class PathStats:
    """Transport and loss state of one receiver's path, as the controller measured it while probing.

    ``rtt_s`` and ``loss`` are the values the schemes use: the base RTT (the subflow's minimum RTT from
    the sender's ``ss -ti``: the probe's own queueing does not inflate it) and the path's random loss
    (the testbed's loss counters over the probe window where it has them, else the sender's
    retransmission ratio). ``srtt_s`` and ``retrans_ratio`` are recorded beside them; ``loss_pkts``
    holds the counted packets (``seen``, ``lost``) when the loss came from counters. ``source`` names,
    per field, where the number came from (``controller.measure``: e.g. ``loss: nft-loss-counters``
    or ``loss: ss-retrans``); it is written into the records with the numbers.
    """

    rtt_s: float | None = None
    loss: float | None = None
    cwnd_pkts: float | None = None
    source: Mapping[str, str] = field(default_factory=dict)
    srtt_s: float | None = None
    retrans_ratio: float | None = None
    loss_pkts: Mapping[str, int] | None = None


@dataclass(frozen=True)
class ReceiverMeasurement:
    """What the controller measured for one receiver: probe rate per network (Mbit/s), and
    per-path transport state when a policy asks for it (``Policy.path_stats``)."""

    receiver: str
    probe_mbit: Mapping[str, float]
    paths: Mapping[str, PathStats] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The interfaces one receiver may use, with optional per-path rate caps (Mbit/s)."""

    ifaces: frozenset[str]
    caps_mbit: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if not self.ifaces or not self.ifaces <= set(IFACES):
            raise ValueError(f"interface set {sorted(self.ifaces)} is not a non-empty subset of {IFACES}")

    @property
    def mode(self) -> str:
        """``wifi``, ``lte`` or ``both`` (the dataset's mode names)."""
        return "both" if len(self.ifaces) == 2 else next(iter(self.ifaces))

    @classmethod
    def of(cls, mode: str) -> Decision:
        """The decision for a mode name (``wifi``, ``lte``, ``both``); one shared (frozen) instance per mode."""
        try:
            return _BY_MODE[mode]
        except KeyError:
            raise ValueError(f"unknown mode {mode!r} (wifi, lte or both)") from None


#: ``Decision.of``'s answers, made once: a decision builds one per receiver, twice.
_BY_MODE: dict[str, Decision] = {"both": Decision(frozenset(IFACES)),
                                 **{r: Decision(frozenset({r})) for r in IFACES}}


Assignment = dict[str, Decision]
#: Run the receivers under an assignment for a short window; per receiver, Mbit/s per interface.
Measure = Callable[[Assignment], dict[str, dict[str, float]]]
#: Predicted energy (J) per receiver for rows (n_receivers, cc, mode, wifi/lte throughput).
Predict = Callable[[Sequence[Mapping]], Sequence[float]]


@dataclass(frozen=True)
class Context:
    """What a policy knows besides the measurements."""

    cc: str
    n_receivers: int
    file_bytes: int
    epoch: int = 0
    #: Per network, the AP's / eNB's queue occupancy over the last epoch (0..1; periodic policies).
    occupancy: Mapping[str, float] | None = None
    #: Per network, the access network's capacity (Mbit/s) when the testbed knows it.
    capacity_mbit: Mapping[str, float] | None = None


@dataclass
class Outcome:
    """A policy's answer and how it got there (logged in every record)."""

    assignment: Assignment
    #: Policy-specific detail: parameters, intermediate assignments, predicted energies.
    trace: dict = field(default_factory=dict)


class Policy(Protocol):
    """What every policy offers (see ``RefIS`` for an annotated example)."""

    name: str
    #: None: decide once before the transfer; a number: decide again every epoch_s seconds.
    epoch_s: float | None
    #: Whether ``decide`` reads the probe rates (the controller skips probing when not).
    probes: bool
    #: At most how many ``measure`` windows ``decide`` asks for (the dry run's estimate).
    measures: int
    #: Whether its decisions carry per-path rate caps (a testbed that cannot cap refuses it up front).
    caps: ClassVar[bool]
    #: Whether ``decide`` reads each path's transport state (RTT, loss, cwnd) measured while probing
    #: (``ReceiverMeasurement.paths``); the controller reads them only for such a policy.
    path_stats: ClassVar[bool]
    #: Whether ``decide`` reads each network's congestion signal every epoch (``Context.occupancy``);
    #: a testbed without a source for it refuses the policy up front.
    reads_congestion: ClassVar[bool]

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        """The assignment for these measurements."""
        ...

    def params(self) -> dict:
        """The parameters, recorded with every decision."""
        ...


def assignment_modes(a: Assignment) -> dict[str, str]:
    """``{receiver: mode}``, for records and logs."""
    return {rx: d.mode for rx, d in a.items()}


@dataclass
class Fixed:
    """Every receiver on the same interface set (plain single-path TCP or plain MPTCP)."""

    name: str
    mode: str
    epoch_s: float | None = None
    probes: bool = False
    caps: ClassVar[bool] = False
    path_stats: ClassVar[bool] = False
    reads_congestion: ClassVar[bool] = False
    measures: int = 0

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return Outcome({m.receiver: Decision.of(self.mode) for m in measurements})

    def params(self) -> dict:
        return {"mode": self.mode}


_BASES: dict[str, Callable[[float, float], float]] = {
    "max": max, "min": min, "mean": lambda a, b: (a + b) / 2}


@dataclass(kw_only=True)
class _Band:
    """The IS band's parameters (``|R1 - R2| <= band * base(R1, R2)``), checked when a policy is made.

    Keyword-only, so a policy's own leading fields (``RefISTuned.predict``) stay positional.
    """

    caps: ClassVar[bool] = False
    path_stats: ClassVar[bool] = False
    reads_congestion: ClassVar[bool] = False

    band: float = 0.10
    base: str = "max"

    def __post_init__(self) -> None:
        if not 0 <= self.band < 1:
            raise ConfigError(f"band {self.band} must be in [0, 1)", field="band")
        if self.base not in _BASES:
            raise ConfigError(f"base {self.base!r} is not one of {sorted(_BASES)}", field="base")

    def choose(self, m: ReceiverMeasurement) -> Decision:
        """IS for one receiver: "both" within the band, else its faster network."""
        rw, rl = float(m.probe_mbit.get("wifi", 0.0)), float(m.probe_mbit.get("lte", 0.0))
        if max(rw, rl) <= DEAD_MBIT:
            raise NodeFailed(f"receiver {m.receiver} carried nothing on WiFi ({rw:.3f} Mbit/s) nor LTE "
                             f"({rl:.3f} Mbit/s) while probed; check its links")
        if abs(rw - rl) <= self.band * _BASES[self.base](rw, rl):
            return Decision.of("both")
        return Decision.of("wifi" if rw > rl else "lte")

    @staticmethod
    def check_params(policy: str, params: Mapping[str, object]) -> None:
        """``ConfigError`` unless ``params`` (a scenario's policy parameters) are band and base only."""
        unknown = set(params) - {"band", "base"}
        if unknown:
            raise ConfigError(f"{policy} parameters are band and base (got {sorted(unknown)})", field="policies")


@dataclass
class RefIS(_Band):
    """The reference paper's Interface Selection: both networks when the probes are within a band.

    Annotated example of a policy: pure (no I/O), parameters as fields (``band``, ``base`` from
    ``_Band``), ``decide`` maps the measurements to one ``Decision`` per receiver, ``params`` says
    what to log.
    """

    name: str = "ref-is"
    epoch_s: float | None = None
    probes: bool = True
    measures: int = 0

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        return Outcome({m.receiver: self.choose(m) for m in measurements}, {"params": self.params()})

    def params(self) -> dict:
        return {"band": self.band, "base": self.base}


@dataclass
class RefISTuned(_Band):
    """IS, then the paper's Tuning: every "both" receiver onto its faster interface, or none.

    Needs ``predict`` (the exported energy model) and, at decision time, ``measure``. Energies
    are summed over all receivers for the IS assignment and for the tuned one, each from
    throughputs measured under that assignment; the lower sum wins, a tie adopts the tuned one.
    """

    predict: Predict
    name: str = "ref-is-tuned"
    epoch_s: float | None = None
    probes: bool = True
    measures: int = 2

    def rows(self, a: Assignment, thr: Mapping[str, Mapping[str, float]], ctx: Context) -> list[dict]:
        return [{"n_receivers": ctx.n_receivers, "cc": ctx.cc, "mode": d.mode,
                 "wifi_throughput_mbit": thr[rx].get("wifi", 0.0) if "wifi" in d.ifaces else 0.0,
                 "lte_throughput_mbit": thr[rx].get("lte", 0.0) if "lte" in d.ifaces else 0.0}
                for rx, d in a.items()]

    def energies(self, a: Assignment, thr: Mapping[str, Mapping[str, float]], ctx: Context) -> dict[str, float]:
        pred = self.predict(self.rows(a, thr, ctx))
        return {rx: float(e) for rx, e in zip(a, pred)}

    def energies_both(self, a: Assignment, thr_a: Mapping[str, Mapping[str, float]], b: Assignment,
                      thr_b: Mapping[str, Mapping[str, float]], ctx: Context,
                      ) -> tuple[dict[str, float], dict[str, float]]:
        """``energies`` of two assignments from one model call (one ONNX Runtime run per decision, not two).

        The rows are predicted independently (an MLP has no cross-row terms), so this equals two calls.
        """
        pred = self.predict(self.rows(a, thr_a, ctx) + self.rows(b, thr_b, ctx))
        n = len(a)
        return ({rx: float(e) for rx, e in zip(a, pred[:n])}, {rx: float(e) for rx, e in zip(b, pred[n:])})

    def decide(self, measurements: Sequence[ReceiverMeasurement], ctx: Context,
               measure: Measure | None = None) -> Outcome:
        a_is = {m.receiver: self.choose(m) for m in measurements}  # RefIS's assignment, same band and base
        probes = {m.receiver: m.probe_mbit for m in measurements}
        a_t: Assignment = {}
        for rx, d in a_is.items():
            if len(d.ifaces) == 2:
                best = max(IFACES, key=lambda r: probes[rx].get(r, 0.0))
                a_t[rx] = Decision.of(best)
            else:
                a_t[rx] = d
        trace: dict = {"params": self.params(), "is_assignment": assignment_modes(a_is),
                       "tuned_assignment": assignment_modes(a_t)}
        if a_t == a_is:
            # No "both" receiver: nothing to tune, and nothing to measure or predict.
            trace.update(adopted="is", reason="no receiver on both")
            return Outcome(a_is, trace)
        if measure is None:
            raise ConfigError("ref-is-tuned needs a measurement callback (it re-measures under each assignment)")
        thr_is = measure(a_is)
        thr_t = measure(a_t)
        e_is, e_t = self.energies_both(a_is, thr_is, a_t, thr_t, ctx)
        total_is, total_t = sum(e_is.values()), sum(e_t.values())
        adopted = "is" if total_t > total_is else "tuned"
        trace.update(is_throughput_mbit=thr_is, tuned_throughput_mbit=thr_t, is_energy_j=e_is,
                     tuned_energy_j=e_t, is_energy_total_j=total_is, tuned_energy_total_j=total_t,
                     adopted=adopted)
        # No logging here: decide() runs inside the timed decision latency (see timed_decide), which logs after.
        return Outcome(a_is if adopted == "is" else a_t, trace)

    def params(self) -> dict:
        return {"band": self.band, "base": self.base, "tuning": "all-or-nothing over both-receivers"}


def timed_decide(policy: Policy, measurements: Sequence[ReceiverMeasurement], ctx: Context,
                 measure: Measure | None = None) -> tuple[Outcome, float]:
    """``policy.decide`` and its decision latency in seconds: the decision alone, without the time spent
    in ``measure`` (the re-measurement windows) and without logging, which happens after the clock stops
    (a slow log handler must not show up as decision latency). The trace keeps what the log line says."""
    measured_s = 0.0

    def timed_measure(a: Assignment) -> dict[str, dict[str, float]]:
        nonlocal measured_s
        t = time.perf_counter()
        try:
            return measure(a)  # type: ignore[misc]
        finally:
            measured_s += time.perf_counter() - t

    t0 = time.perf_counter()
    outcome = policy.decide(measurements, ctx, timed_measure if measure is not None else None)
    latency_s = time.perf_counter() - t0 - measured_s
    tr = outcome.trace
    if "is_energy_total_j" in tr:
        log.info("%s: E_IS %.2f J, E_tuned %.2f J -> %s (decision %.1f ms)", policy.name,
                 tr["is_energy_total_j"], tr["tuned_energy_total_j"], tr.get("adopted"), latency_s * 1e3)
    return outcome, latency_s


def make_fixed(mode: str) -> Callable[..., Policy]:
    """The registry's factory of ``all-<mode>`` (no parameters)."""
    def make(**params) -> Policy:
        if params:
            raise ConfigError(f"policy all-{mode} takes no parameters (got {sorted(params)})", field="policies")
        return Fixed(f"all-{mode}", mode)
    return make


def make_ref_is(**params) -> Policy:
    """The registry's factory of ``ref-is``: the band parameters checked first."""
    _Band.check_params("ref-is", params)
    return RefIS(**params)


def make_ref_is_tuned(predict: Predict | None = None, **params) -> Policy:
    """The registry's factory of ``ref-is-tuned``: it needs the model's ``predict``."""
    _Band.check_params("ref-is-tuned", params)
    if predict is None:
        raise ConfigError("policy ref-is-tuned needs a model (scenario key `model: models/<name>`)", field="model")
    return RefISTuned(predict, **params)
