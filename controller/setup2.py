"""Setup II on a testbed: probe, decide, steer, for each policy sample of a campaign.

``Setup2Control`` is the controller the campaign runner reaches through
``harness.campaign.control.SampleControl``. Per policy sample (the paper's procedure, §1 of
docs/reference/papers.md):

1. probing (policies that read probes): every receiver steered onto WiFi, all transferring at once
   (MPTCP, so the connection is the one the transfer will use), bytes counted network-side for
   ``probe_s`` seconds after ``warm_s`` of slow start, or until ``probe_bytes`` arrived; then the
   same on LTE;
2. decide: the policy maps the probe rates to an assignment; ``ref-is-tuned`` re-measures under the
   IS and the tuned assignments (``measure_s`` each) through the ``measure`` callback;
3. steer: the assignment is applied; the runner then runs the transfer (MPTCP on every receiver,
   starting on an allowed path) and calls ``finish``, which allows both networks again.

The decision latency recorded is the policy's own time (model inference included), without the
measurement windows it asked for; ``control_s`` is the whole probe + decide + steer wall time.
Probing energy is not in the receivers' energy (meters integrate over the transfer window only).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.campaign.control import PreparedSample
from harness.errors import ConfigError, MplabError, PreflightError, TrafficError
from harness.files import make_owned_temp_dir
from harness.hosts.local import BackgroundProcess, Host
from harness.campaign.plan import SamplePlan
from harness.config.scenario import ControlSpec, Scenario
from harness.config.switch import SwitchPorts
from harness.testbeds.base import LossCounters, Testbed, loss_over
from harness.upkeep.preflight import Check
from harness.upkeep.ofprobe import switch_check

from controller.policy import IFACES, Assignment, Context, Decision, Policy, ReceiverMeasurement, assignment_modes, timed_decide
from controller.registry import NEEDS_MODEL, make_policy
from controller.congestion import CongestionSignal, lab_signal_gap, signal_for
from controller.measure import parse_ss, path_stats, ss_argv
from controller.steering import backend_class
from controller.steering.base import SteeredReceiver, Steering, all_both
from controller.steering.caps import Caps, EgressCaps, HtbCaps, caps_for, meter_shortfall

if TYPE_CHECKING:
    from controller.model import EnergyModel

log = logging.getLogger("mplab.controller")

#: Deadline for probe clients to reach their gate, and for one to stop.
GATE_READY_S = 20.0


def model_digest(model_dir: str) -> str | None:
    try:
        with open(f"{model_dir}/model.onnx", "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def steered_receivers(testbed: Testbed) -> list[SteeredReceiver]:
    return [SteeredReceiver(name, {r: i.address for r, i in node.interfaces.items()}, node.host,
                            {r: i.name for r, i in node.interfaces.items()})
            for name, node in testbed.nodes.items()]


def has_htb_root(host: Host, dev: str) -> bool:
    """Whether ``dev`` on ``host`` has an HTB qdisc (``tc -j qdisc show``, read as JSON)."""
    out = host.run(["tc", "-j", "qdisc", "show", "dev", dev]).stdout
    try:
        qdiscs = json.loads(out or "[]")
        return any(q.get("kind") == "htb" for q in qdiscs)
    except (json.JSONDecodeError, AttributeError, TypeError) as exc:
        raise TrafficError(f"[{host.name}] cannot read `tc -j qdisc show dev {dev}` ({exc})") from None


def gateway_caps(testbed: Testbed) -> HtbCaps | EgressCaps | None:
    """Rate caps where the testbed owns the gateways (``Testbed.gateway``) and their shaping leaves room;
    None on a testbed without gateways of its own (a lab: its caps are the switch's meters).

    Channels shaped on the sender's egress: caps on each gateway's device towards each receiver
    (``Testbed.downlink_device``). Channels shaped on those devices (an HTB root already there): caps
    on the sender's devices towards the gateways (``Testbed.sender_device``) instead.
    """
    gateways = {r: testbed.gateway(r) for r in IFACES}
    if not testbed.nodes or any(g is None for g in gateways.values()):
        return None
    first = next(iter(testbed.nodes))
    if has_htb_root(gateways["wifi"], testbed.downlink_device(first, "wifi")):
        return EgressCaps(testbed.sender, {r: testbed.sender_device(r) for r in IFACES},
                          {name: {r: i.address for r, i in node.interfaces.items()}
                           for name, node in testbed.nodes.items()})
    return HtbCaps(gateways, {name: {r: testbed.downlink_device(name, r) for r in IFACES} for name in testbed.nodes})


class EpochLoop:
    """A periodic policy during the transfer: every ``epoch_s`` read each network's congestion signal
    (``controller.congestion``: the testbed's one source, sampled every ``sample_s`` over the interval)
    and each receiver's rates (steering counters), decide again, steer and cap; every epoch's decision
    is kept for the records, with the signal's source and raw numbers."""

    def __init__(self, control: Setup2Control, policy: Policy, measurements: list[ReceiverMeasurement],
                 ctx: Context, sample_s: float = 0.2, signal: CongestionSignal | None = None) -> None:
        self.control, self.policy, self.measurements, self.ctx = control, policy, measurements, ctx
        self.sample_s = sample_s
        self.signal = signal or signal_for(control.testbed, control.steering)
        self.epochs: list[dict] = []
        self._stop = threading.Event()
        # Named after the testbed too: with --testbeds K several copies' loops run in one process.
        where = control.testbed.name if control.testbed is not None else "no-testbed"
        self._thread = threading.Thread(target=self._run, name=f"epochs:{where}:{policy.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread.ident is not None:  # never started: the sample failed before its release
            self._thread.join(timeout=30)
        return self.epochs

    def _run(self) -> None:
        c = self.control
        t0 = time.monotonic()
        epoch = 0
        try:
            c0 = c.steering.counters()
            sig = self.signal
            sig.start()
            while not self._stop.is_set():
                epoch += 1
                end = t0 + epoch * self.policy.epoch_s
                while not self._stop.is_set() and time.monotonic() < end:
                    sig.sample()
                    self._stop.wait(min(self.sample_s, max(0.0, end - time.monotonic())))
                if self._stop.is_set():
                    return
                c1 = c.steering.counters()
                dt = self.policy.epoch_s
                rates = {rx: {r: (c1[rx][r] - c0[rx][r]) * 8 / dt / 1e6 for r in IFACES} for rx in c1}
                c0 = c1
                got = sig.read()
                occ = got.occupancy
                ctx = Context(self.ctx.cc, self.ctx.n_receivers, self.ctx.file_bytes, epoch=epoch, occupancy=occ,
                              capacity_mbit=self.ctx.capacity_mbit)
                out = self.policy.decide(self.measurements, ctx)
                c.enforce(out.assignment)
                self.epochs.append({"t_s": round(time.monotonic() - t0, 3), "epoch": epoch, "occupancy": occ,
                                    "occupancy_source": got.source, "congestion": got.detail,
                                    "tier2_mbit": out.trace.get("tier2_mbit"), "samples": got.samples,
                                    "assignment": {rx: sorted(d.ifaces) for rx, d in out.assignment.items()},
                                    "caps_mbit": {rx: dict(d.caps_mbit or {}) for rx, d in out.assignment.items()},
                                    "rate_mbit": {rx: rates.get(rx) for rx in out.assignment}})
        except Exception as exc:  # noqa: BLE001 - a failed loop must not kill the transfer; it is recorded
            log.warning("%s epoch loop stopped: %s", self.policy.name, exc)
            self.epochs.append({"epoch": epoch, "error": str(exc)})


def build_steering(name: str, testbed: Testbed) -> Steering:
    """The steering backend ``name`` for this testbed (``PreflightError`` where it cannot run)."""
    receivers = steered_receivers(testbed)
    cls = backend_class(name)
    if name == "nftables":
        gateways = {r: testbed.gateway(r) for r in IFACES}
        if any(g is None for g in gateways.values()):
            raise PreflightError(f"nftables steering needs the AP and eNB as hosts of the testbed's own (the "
                                 f"emulated testbed's namespaces); a {testbed.kind} testbed steers with `openflow` "
                                 "or `host`")
        return cls(gateways, receivers)
    if name == "host":
        return cls(receivers)
    raise PreflightError(f"openflow steering needs an Open vSwitch on the {testbed.kind} testbed's path, and "
                         "this testbed kind has none wired in (a lab names its switch in lab.switch; see "
                         "docs/controller.md)")


def lab_switch(testbed: Testbed) -> SwitchPorts:
    """The switch the testbed names (``Testbed.lab_switch``; ``PreflightError`` when it names none)."""
    sw = testbed.lab_switch
    if sw is None:
        raise PreflightError(f"steering: openflow on lab {testbed.inventory.name!r} needs the inventory's lab.switch "
                             "section (listen: HOST:PORT where OVS listens, networks: {wifi: {up, down}, lte: "
                             "{up, down}}); see docs/lab.md")
    return sw


#: Why a testbed without gateways of its own (a lab) gets no HTB caps: the shaping qdiscs would go on
#: machines mplab does not own.
NO_LAB_HTB = ("where the testbed owns no gateway (a lab) mplab caps only with the switch's OpenFlow meters (no HTB "
              "on a lab switch, AP or eNB we do not own)")


@dataclass
class Setup2Control:
    """Probing, deciding and steering for the policy samples of one campaign."""

    spec: ControlSpec
    policies: dict[str, Policy]
    file_bytes: int
    model: EnergyModel | None = None
    model_path: str | None = None
    testbed: Testbed | None = None
    steering: Steering | None = None
    caps: Caps | None = None
    _receivers: list[SteeredReceiver] = field(default_factory=list)
    _rig: object | None = None
    _state_dir: Path | None = None
    #: Why this testbed cannot cap (said when a policy's decision carries caps).
    _no_caps: str | None = None
    _loop: EpochLoop | None = None
    _fields: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def from_scenario(cls, scenario: Scenario, source: str = "scenario") -> Setup2Control:
        """Build the policies and open the model; refuse (exit 2) what cannot run, before anything starts."""
        needs_model = [p.name for p in scenario.policies if p.name in NEEDS_MODEL]
        model = None
        if scenario.model:
            from controller.model import EnergyModel  # numpy and onnxruntime: only for a scenario with a model

            model = EnergyModel.open(scenario.model)  # a folder or models:/NAME@alias (harness.model_registry)
            model.check_covers(scenario.congestion_controls, scenario.receiver_counts, scenario.file_bytes, source)
        elif needs_model:
            raise ConfigError(f"policies {needs_model} need an energy model: add `model: models/<name>` "
                              "(train one with `make setup2`)", source=source, field="model")
        policies = {p.name: make_policy(p.name, p.params, model.predict if model else None)
                    for p in scenario.policies}
        backend_class(scenario.control.steering)  # an unknown or uninstallable backend fails here
        return cls(scenario.control, policies, scenario.file_bytes, model, str(model.path) if model else None)

    def describe(self) -> dict:
        """The manifest's ``control`` section."""
        return {"policies": {n: p.params() for n, p in self.policies.items()},
                "steering": self.spec.steering, "probe": self.spec.model_dump(mode="json"),
                "model": self.model_path, "model_source": self.model.source if self.model else None,
                "model_onnx_sha256": model_digest(self.model_path) if self.model_path else None}

    def capping(self) -> list[str]:
        """The policies whose decisions carry per-path rate caps."""
        return [n for n, p in self.policies.items() if p.caps]

    # ------------------------------------------------------------ life cycle

    def preflight(self, testbed: Testbed) -> list[Check]:
        """What the controller needs of the testbed, checked before anything starts (no side effects).

        On a lab with ``steering: openflow``: the inventory names a switch, it answers as an OpenFlow 1.3
        switch, and, when a policy caps rates, its meters can hold one cap per receiver and network. On a
        lab with MP-SDN: its congestion signal has a source (the switch, each network's nominal capacity).
        """
        return self._switch_checks(testbed) + self._congestion_checks(testbed)

    def _switch_checks(self, testbed: Testbed) -> list[Check]:
        """With ``steering: openflow`` on a testbed that splices no switch of its own (a lab): the switch section,
        the OpenFlow 1.3 handshake, meters for caps."""
        if self.spec.steering != "openflow" or testbed.splices_switch:
            return []
        try:
            sw = lab_switch(testbed)
        except PreflightError as exc:
            return [Check("controller", "openflow steering", False, str(exc),
                          "add lab.switch to the inventory (docs/lab.md)")]
        check, info = switch_check(sw.listen)
        out = [Check("switch", "openflow steering", check.ok,
                     check.detail if check.ok else f"steering: openflow needs the lab switch: {check.detail}",
                     check.fix)]
        capping = self.capping()
        if info is not None and capping:
            want = len(testbed.nodes) * len(sw.networks)
            why = meter_shortfall(info.meter_features(), want)
            out.append(Check("switch", "rate caps (OpenFlow meters)", why is None,
                             f"{want} kbit/s drop meters for {capping}" if why is None else
                             f"policies {capping} cap per-path rates, but {why}; {NO_LAB_HTB}",
                             "use a switch whose datapath has kbit/s drop meters (OVS userspace datapath, or the "
                             "kernel datapath on Linux >= 4.15), or leave these policies out"))
        return out

    def congestion_readers(self) -> list[str]:
        """The policies that read each network's congestion signal every epoch (MP-SDN and its variant)."""
        return [n for n, p in self.policies.items() if p.reads_congestion]

    def _congestion_checks(self, testbed: Testbed) -> list[Check]:
        """Where the testbed does not read its own queues (a lab): the congestion signal MP-SDN reads has a
        source (``controller.congestion``)."""
        readers = self.congestion_readers()
        if testbed.reads_queues or not readers:
            return []
        why = lab_signal_gap(testbed, self.spec.steering)
        caps = testbed.network_capacity_mbit() or {}
        against = ", ".join(f"{net} {caps[net]:g}" for net in IFACES if net in caps)
        return [Check("controller", "congestion signal", why is None,
                      f"each network's down port on the lab switch against its capacity ({against} Mbit/s; "
                      f"utilisation, a proxy for queue occupancy) for {readers}" if why is None
                      else f"policies {readers}: {why}",
                      "set lab.switch.networks.<net>.capacity_mbit to what each network carries saturated "
                      "(docs/lab.md), with steering: openflow")]

    def setup(self, testbed: Testbed) -> None:
        self.testbed = testbed
        self._receivers = steered_receivers(testbed)
        from controller.steering.openflow import OpenFlowSteering

        if self.spec.steering == "openflow" and testbed.splices_switch:
            # A real OVS spliced into the sender's links, the os-ken app driving it.
            from controller.steering.ovs import splice_switch

            self._rig = splice_switch(testbed)
            self.steering = OpenFlowSteering.for_switch(self._rig, self._receivers)
        elif self.spec.steering == "openflow":
            # The app runs here, where mplab runs, and connects to where the lab switch listens.
            sw = lab_switch(testbed)
            # Named with our pid: `mplab clean` removes it if we are killed outright.
            self._state_dir = make_owned_temp_dir("ofapp")
            self.steering = OpenFlowSteering.for_lab(sw, self._receivers, self._state_dir)
        else:
            self.steering = build_steering(self.spec.steering, testbed)
        self.steering.setup()
        self.caps, self._no_caps = self._caps(testbed)

    def _caps(self, testbed: Testbed) -> tuple[Caps | None, str | None]:
        """OpenFlow steering caps with meters on its switch; the others (or a switch without kbit/s drop
        meters, said in the log) with HTB on the testbed's own gateways. Without either: why there are no
        caps (refused now if a policy needs them)."""
        caps, why = caps_for(self.steering, lambda: gateway_caps(testbed))
        if caps is not None:
            return caps, None
        why = f"{why}; {NO_LAB_HTB}"
        if self.capping():
            raise PreflightError(f"policies {self.capping()} cap per-path rates, and this {testbed.kind} testbed "
                                 f"cannot: {why}")
        return None, why

    def teardown(self) -> None:
        try:
            if self._loop is not None:
                self._loop.stop()
                self._loop = None
            if self.caps is not None:
                self.caps.clear()
            if self.steering is not None:
                self.steering.teardown()
        finally:
            if self._rig is not None:
                self._rig.stop()
                self._rig = None
            if self._state_dir is not None:
                shutil.rmtree(self._state_dir, ignore_errors=True)
                self._state_dir = None

    #: What a drain after each window usually takes (s).
    DRAIN_S = 0.3

    def estimate_s(self, plan: SamplePlan) -> float:
        policy = self.policies[plan.policy]
        sp = self.spec
        probe = sp.probe_s if sp.probe_bytes is None else sp.probe_bytes * 8 / 10e6  # ~10 Mbit/s a receiver
        t = 2 * (sp.warm_s + probe + self.DRAIN_S) if policy.probes else 0.0
        return t + policy.measures * (sp.warm_s + sp.measure_s + self.DRAIN_S)

    def started(self, plan: SamplePlan) -> None:
        if self._loop is not None:
            self._loop.start()

    def finish(self, plan: SamplePlan) -> None:
        if self._loop is not None:
            epochs = self._loop.stop()
            self._loop = None
            for rx, f in self._fields.items():
                # The records are built after finish(): the runner holds these very dicts.
                f["control_epochs"] = [{**{k: v for k, v in e.items() if k not in ("assignment", "caps_mbit",
                                                                                   "rate_mbit")},
                                        "ifaces": e.get("assignment", {}).get(rx),
                                        "caps_mbit": e.get("caps_mbit", {}).get(rx),
                                        "rate_mbit": e.get("rate_mbit", {}).get(rx)} for e in epochs]
        self._fields = {}
        if self.caps is not None:
            self.caps.clear()
        self.steering.apply(all_both([r for r in self._receivers if r.name in plan.receivers]))

    def enforce(self, assignment: Assignment) -> None:
        """Steer and cap to ``assignment`` (caps need OpenFlow meters or the emulated gateways)."""
        self.steering.apply(assignment)
        if any(d.caps_mbit for d in assignment.values()):
            if self.caps is None:
                raise PreflightError(self._no_caps or (
                    f"rate caps need OpenFlow steering (meters on its switch) or the emulated AP and eNB (HTB); "
                    f"this {self.testbed.kind} testbed with {self.steering.name} steering has neither"))
            self.caps.apply(assignment)
        elif self.caps is not None:
            self.caps.apply(assignment)

    # ------------------------------------------------------------ one sample

    def prepare(self, plan: SamplePlan) -> PreparedSample:
        policy = self.policies[plan.policy]
        t_start = time.monotonic()
        rxs = list(plan.receivers)
        probes: dict[str, dict[str, float]] = {rx: {} for rx in rxs}
        stats: dict[str, dict] = {rx: {} for rx in rxs}
        want_stats = policy.path_stats
        if policy.probes:
            for radio in IFACES:
                got: dict[str, dict] = {}
                rates = self.window(rxs, {rx: Decision.of(radio) for rx in rxs}, self.spec.probe_s,
                                    self.spec.probe_bytes, stats=got if want_stats else None)
                for rx in rxs:
                    probes[rx][radio] = rates[rx].get(radio, 0.0)
                    if radio in got.get(rx, {}):
                        stats[rx][radio] = got[rx][radio]
        def measure(a: Assignment) -> dict[str, dict[str, float]]:
            return self.window(rxs, a, self.spec.measure_s)

        ctx = Context(cc=plan.cc, n_receivers=plan.n_receivers, file_bytes=self.file_bytes,
                      capacity_mbit=self.testbed.network_capacity_mbit())
        measurements = [ReceiverMeasurement(rx, probes[rx], stats[rx]) for rx in rxs]
        outcome, latency_s = timed_decide(policy, measurements, ctx, measure)
        self.enforce(outcome.assignment)
        control_s = time.monotonic() - t_start
        tr = outcome.trace
        per_rx = tr.get("per_receiver", {})
        fields = {}
        for rx in rxs:
            pred = None
            if "is_energy_j" in tr:
                pred = {"is": tr["is_energy_j"][rx], "tuned": tr["tuned_energy_j"][rx]}
            totals = ({"is": tr["is_energy_total_j"], "tuned": tr["tuned_energy_total_j"]}
                      if "is_energy_total_j" in tr else None)
            fields[rx] = {"policy": policy.name, "policy_params": policy.params(), "steering": self.steering.name,
                          "assignment": outcome.assignment[rx].mode, "probe_mbit": probes[rx] or None,
                          "predicted_energy_j": pred, "predicted_energy_total_j": totals,
                          "adopted": tr.get("adopted"), "decision_latency_s": latency_s, "control_s": control_s,
                          "path_stats": ({r: vars(st) for r, st in stats[rx].items()} or None),
                          "caps_mbit": dict(outcome.assignment[rx].caps_mbit or {}) or None,
                          "caps_by": self.caps.name if self.caps is not None and (
                              outcome.assignment[rx].caps_mbit or policy.epoch_s) else None,
                          "policy_trace": per_rx.get(rx) or ({"primary": tr["primary"].get(rx),
                                                             "tier2_mbit": tr.get("tier2_mbit")}
                                                            if "primary" in tr else None),
                          "control_epochs": None}
        log.info("%s %s: %s", plan.sample_id, policy.name, assignment_modes(outcome.assignment))
        self._fields = fields
        if policy.epoch_s:
            # Started by started(), once the runner has waited out the probes' radio tails: the
            # epochs are timed from the transfer's release and must see its traffic only.
            self._loop = EpochLoop(self, policy, measurements, ctx)
        return PreparedSample({rx: outcome.assignment[rx].mode for rx in rxs}, fields)

    def window(self, rxs: list[str], assignment: Assignment, seconds: float,
               nbytes: int | None = None, stats: dict | None = None) -> dict[str, dict[str, float]]:
        """Steer to ``assignment``, run every receiver, and return Mbit/s per receiver and network.

        Rates come from the steering backend's counters (network-side). Timed: counted over
        ``seconds`` after ``warm_s``; by size (``nbytes``): from release until each client's exit.
        """
        tb = self.testbed
        self.steering.apply(assignment)
        procs: dict[str, BackgroundProcess] = {}
        try:
            tb.ensure_servers(rxs)
            for rx in rxs:
                node = tb.nodes[rx]
                bind = node.interfaces["lte" if assignment[rx].mode == "lte" else "wifi"].address
                if nbytes is None:
                    # Long enough to outlast the window: the clients are stopped once it closes.
                    argv = node.iperf3.client_argv(tb.server_address, node.port, None, bind=bind, mptcp=True,
                                                   cc=None, duration_s=math.ceil(self.spec.warm_s + seconds) + 5)
                else:
                    argv = node.iperf3.client_argv(tb.server_address, node.port, nbytes, bind=bind, mptcp=True,
                                                   cc=None)
                procs[rx] = node.host.start(argv, gated=True, label=f"probe:{rx}")
            for p in procs.values():
                p.wait_ready(GATE_READY_S)
            if nbytes is None:
                # Loss counted from the release (slow start included: random loss does not depend on the
                # rate, and more packets make a tighter estimate) to the window's end.
                loss0 = self.loss_counters() if stats is not None else None
                for p in procs.values():
                    p.release()
                time.sleep(self.spec.warm_s)  # a measurement window, not a readiness wait
                c0, t0 = self.steering.counters(), time.monotonic()
                time.sleep(seconds)
                c1, t1 = self.steering.counters(), time.monotonic()
                if stats is not None:
                    loss1 = self.loss_counters()
                    stats.update(self.subflow_stats(rxs, loss_over(loss0, loss1) if loss0 and loss1 else None))
                self._stop(procs)
                return {rx: {r: (c1[rx][r] - c0[rx][r]) * 8 / (t1 - t0) / 1e6 for r in IFACES} for rx in rxs}
            c0 = self.steering.counters()
            released = {rx: p.release() for rx, p in procs.items()}
            deadline = time.monotonic() + 300
            exited: dict[str, float] = {}
            while len(exited) < len(procs):
                for rx, p in procs.items():
                    if rx not in exited and p.poll() is not None:
                        res = p.wait(1.0)
                        if res.returncode != 0:
                            raise TrafficError(f"probe of {rx} failed (exit {res.returncode}): "
                                               f"{res.stderr.strip()[-300:]}")
                        exited[rx] = res.exited_at or time.time()
                if time.monotonic() > deadline:
                    raise TrafficError(f"probe of {nbytes} bytes did not finish within 300 s")
                time.sleep(0.01)
            c1 = self.steering.counters()
            if stats is not None:
                # By size the clients have exited: their subflows are gone, so the stats come too late.
                log.warning("path stats need a timed probe (probe_s); probe_bytes leaves them out")
            return {rx: {r: (c1[rx][r] - c0[rx][r]) * 8 / max(1e-3, exited[rx] - released[rx]) / 1e6
                         for r in IFACES} for rx in rxs}
        finally:
            self._stop(procs)
            self._drain()

    def subflow_stats(self, rxs: list[str], loss: Mapping[str, Mapping[str, LossCounters]] | None = None
                      ) -> dict[str, dict]:
        """``{receiver: {network: PathStats}}`` from ``ss -tin`` on the sender (its subflows towards
        each receiver address), with the loss counted over the window (``loss``) where the testbed
        counts it; best effort: a failed read gives no stats (the policy then says so)."""
        tb = self.testbed
        try:
            text = tb.sender.run(ss_argv()).stdout
        except MplabError as exc:
            log.warning("ss on the sender: %s", exc)
            return {}
        addrs = {rx: {r: i.address for r, i in tb.nodes[rx].interfaces.items()} for rx in rxs}
        return path_stats(parse_ss(text), addrs, loss)

    def loss_counters(self) -> dict[str, dict[str, LossCounters]] | None:
        """The testbed's loss counters now (None: it has none, or they could not be read: the
        retransmission ratio then stands in, and the records say so)."""
        try:
            return self.testbed.radio_loss_counters()
        except MplabError as exc:
            log.warning("loss counters: %s; the retransmission ratio stands in", exc)
            return None

    def _drain(self, quiet_s: float = 0.2, deadline_s: float = 3.0) -> None:
        """Wait until no receiver's counters move for ``quiet_s``: a stopped probe's queued data (a deep
        LTE buffer holds ~0.1 s) must not land in the next window or in the transfer. Best effort:
        after ``deadline_s`` it goes on and logs it."""
        end = time.monotonic() + deadline_s
        last, since = self.steering.counters(), time.monotonic()
        while time.monotonic() - since < quiet_s:
            if time.monotonic() > end:
                log.warning("paths still carrying probe traffic after %.1f s; going on", deadline_s)
                return
            time.sleep(0.05)
            now = self.steering.counters()
            if now != last:
                last, since = now, time.monotonic()

    @staticmethod
    def _stop(procs: Mapping[str, BackgroundProcess]) -> None:
        # The rates come from network-side counters; a client stopped at the end of its window
        # exits on SIGINT (iperf3 tells its server, which is ready for the next client).
        for p in procs.values():
            if p.poll() is None:
                p.stop(grace_s=2.0)
            else:
                p.wait(1.0)


def control_factory(scenario: Scenario, source: str) -> Setup2Control:
    """What ``mplab.cli`` hands to the campaign (``harness.campaign.control.ControlFactory``)."""
    return Setup2Control.from_scenario(scenario, source)
