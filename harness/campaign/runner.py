"""The sweep runner: runs planned samples on a Testbed and appends their records.

One sample = one case (congestion control, receiver count, interface mode) and an
index. Every receiver of the sample gets its own iperf3 client, pre-spawned behind a
gate and released together; the sender pushes the file to all of them at once while
the recorder polls every meter. A failed sample is retried (bounded) and then
recorded as failed with its reason; the sweep goes on. Records are described field by
field in docs/records.md.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import harness
from harness.cc import CongestionControl
from harness.cc.bpfcc import PREFIX as BPF_PREFIX, FaultWatch
from harness.campaign.control import CONTROL_FIELDS, SampleControl
from harness.errors import CommandError, Interrupted, MplabError, TrafficError
from harness.hosts.local import BackgroundProcess, ProcessResult, hold_if_spawning
from harness.meters.idle import IdleResult, IdleSettings, IdleWaiter
from harness.meters.recorder import Recorder, WindowEnergy
from harness.campaign.plan import SamplePlan
from harness.campaign.progress import ATTEMPT_TESTBED_FILE
from harness.config.scenario import MODE_RADIOS, Scenario
from harness.campaign.records import SampleRecord
from harness.config.inventory import RADIOS
from harness.campaign.store import Campaign
from harness.testbeds.base import Counters, TailSkip, Testbed, parallel, queued_bytes
from harness.traffic import Transfer, parse_iperf3

if TYPE_CHECKING:
    from harness.emulation.sendertail import SenderTail

log = logging.getLogger("mplab.runner")

#: Bytes an interface may carry in a mode that should not use it (ARP, stray ACKs, ND).
STRAY_BYTES = 64 * 1024
POLL_S = 0.005
#: Until each client's first data (``Testbed.rx_probe``): the receiver's bytes are looked at this often.
#: Below ``DATA_BYTES`` of growth since the release no data packet has arrived (iperf3's exchanges before
#: the data bring about 0.8 kB in, tcpdump on an MPTCP client; a data packet is 1.5 kB on the wire); at or
#: above it one has, and the window starts there, pinned by a meter reading.
START_POLL_S = 0.001
DATA_BYTES = 1500
#: While a transfer runs under one of mplab's BPF controls and the sample may be measured again, the cc-fault
#: watch is read this often (wall s): an attempt whose subflow ran with a threshold or window no callback returned
#: is stopped there rather than run to its end (its flood can double the transfer), since it is measured again.
FAULT_POLL_S = 1.0


#: Signals that stop a campaign cleanly (SIGINT arrives as KeyboardInterrupt).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def signal_reason(signum: int) -> str:
    """What a user reads for a stop signal."""
    name = signal.Signals(signum).name
    return f"interrupted by Ctrl-C ({name})" if signum == signal.SIGINT else f"stopped by {name}"


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM/SIGHUP into ``Interrupted`` for the block, so teardown and session logs run.

    SIGINT stays Python's ``KeyboardInterrupt`` (and stays ignored where mplab was started with it
    ignored). Any of them that comes while a child is being created waits until the child is owned
    (``harness.hosts.local.spawning``), so an interrupted set-up never leaves one running unowned.
    A no-op outside the main thread (Python delivers signals to the main thread only).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum, frame):
        if hold_if_spawning(signum):
            return  # delivered again once the child being created is owned
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Interrupted(signal_reason(signum), signum)

    old = {s: signal.signal(s, _raise) for s in STOP_SIGNALS}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old[signal.SIGINT] = signal.signal(signal.SIGINT, _raise)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred() -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM/SIGHUP during the block (teardown must finish); yields the ones that came."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    came: list[int] = []

    def _note(signum, frame):
        came.append(signum)
        log.warning("%s during teardown: finishing the teardown first", signal.Signals(signum).name)

    sigs = (signal.SIGINT, *STOP_SIGNALS)
    old = {s: signal.signal(s, _note) for s in sigs}
    try:
        yield came
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@dataclass
class ReceiverOutcome:
    """What happened to one receiver in one attempt."""

    receiver: str
    transfer: Transfer | None = None
    error: str | None = None
    released_at: float | None = None
    exited_at: float | None = None
    counters: dict[str, int] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    window: tuple[float, float] | None = None
    energy: WindowEnergy | None = None
    #: The interface mode this receiver ran (a policy sample's assignment, else the plan's mode).
    mode: str | None = None
    #: Record fields a controller added (policy samples).
    control: dict = field(default_factory=dict)
    #: What the health check before this attempt repaired on this receiver (a link flap's routes).
    repairs: list[str] = field(default_factory=list)
    #: When the receiver was idle again after the transfer, and the energy of that tail.
    idle: IdleResult | None = None
    tail: WindowEnergy | None = None
    #: The part of the tail the testbed fast-forwarded (emulated power model), if any.
    tail_skip: TailSkip | None = None
    #: Policy samples: how long the runner waited after the controller's probes before the release.
    probe_idle_wait_s: float | None = None
    #: Release to exit, less iperf3's transfer time (wall s): the most the window can sit late (``_energy``).
    exit_lag_s: float | None = None
    #: The last look that saw no data packet yet and the first that saw one (wall clock; None where the
    #: testbed cannot look fast, or the data was not seen to begin): the data began in between.
    no_data_until: float | None = None
    data_seen_at: float | None = None
    #: How long the sender's iperf3 server was paused after its last write (wall s; ``Testbed.sender_tail``;
    #: None where the testbed does not pause it).
    sender_paused_s: float | None = None
    #: Wall seconds into the transfer at which the attempt was stopped on a cc-fault (``_wait_clients``).
    stopped: float | None = None


@dataclass
class SampleOutcome:
    plan: SamplePlan
    status: str
    attempts: int
    records: list[dict]
    wall_s: float
    transfer_s: float
    #: Of ``wall_s``, the time spent waiting for receivers to be idle again (radio tails), every attempt.
    idle_s: float = 0.0


def _times(value: float | None, factor: float) -> float | None:
    """``value`` x ``factor``, None kept (a field the sample could not measure)."""
    return None if value is None else value * factor


#: At a speed-up, a window whose energy may be off by more than this fraction for the machine's own delays
#: (``_speedup_lag``) is flagged: the tolerance a speed-up cell is validated to (docs/speedup.md).
SPEEDUP_LAG_FRACTION = 0.03


def _speedup_lag(s: float, o: ReceiverOutcome) -> list[str]:
    """A ``speedup-lag`` flag when, at speed-up ``s`` > 1, the machine's delays leave the energy unsure.

    Two measured delays place the window. Where the runner saw the data begin (``window_start``), the window
    starts there and can be off by the time between the look before and that look (``start_unsure_s``);
    elsewhere it ends at the client's exit, seen ``exit_lag_s`` after its release plus its transfer time,
    and can sit up to that much late (iperf3's exchanges before and after the data, the scheduler). And the
    meters' readings straddling the window's edges (``WindowEnergy.edge_j``: a pin that came late) leave that
    much energy to where the power changed. Both count S times more against a window S times shorter. At
    S = 1 the same figures are recorded (``exit_lag_s``, ``start_unsure_s``, ``energy_edge_j``) but not flagged.
    """
    e = o.energy
    if s <= 1 or o.transfer is None or e is None or not e.energy_j:
        return []
    seen = o.data_seen_at is not None and o.no_data_until is not None
    late = (o.data_seen_at - o.no_data_until) if seen else (o.exit_lag_s or 0.0)
    lag = late / o.transfer.seconds
    edge = (e.edge_j or 0.0) / e.energy_j
    if max(lag, edge) <= SPEEDUP_LAG_FRACTION:
        return []
    where = (f"the data's start was seen to within {1000 * late:.1f} ms" if seen
             else f"the client's exit came {1000 * late:.0f} ms after its transfer time")
    return [f"speedup-lag: at S = {s:g} {where} ({100 * lag:.1f} % of it) and the meter's edges leave "
            f"{100 * edge:.1f} % of the energy unsure (over {100 * SPEEDUP_LAG_FRACTION:g} %: the machine did "
            "not keep up)"]


def _client_spec(node, mode: str, policy: bool = False) -> tuple[str, bool]:
    """(bind address, MPTCP?) for an interface mode.

    Under a policy every receiver runs MPTCP and starts on a path its assignment allows (LTE for
    an LTE-only receiver, else WiFi); the steering keeps it off the other path.
    """
    if policy:
        return node.interfaces["lte" if mode == "lte" else "wifi"].address, True
    if mode == "wifi":
        return node.interfaces["wifi"].address, False
    if mode == "lte":
        return node.interfaces["lte"].address, False
    return node.interfaces["wifi"].address, True  # MPTCP starts on WiFi, the LTE endpoint joins


def _delta(before: dict[str, Counters], after: dict[str, Counters]) -> dict[str, int]:
    return {radio: (after[radio].rx_bytes - before[radio].rx_bytes) + (after[radio].tx_bytes - before[radio].tx_bytes)
            for radio in before}


def _fail_all(outs: dict[str, ReceiverOutcome], error: str) -> list[ReceiverOutcome]:
    """Mark every receiver of an attempt failed with ``error``; returns the outcomes."""
    for o in outs.values():
        o.error = error
    return list(outs.values())


def check_paths(mode: str, moved: dict[str, int], file_bytes: int) -> list[str]:
    """Flags when a mode's traffic is not where it should be (by interface byte counters)."""
    flags = []
    expected = set(MODE_RADIOS[mode])
    for radio, n in moved.items():
        if radio in expected and n < min(file_bytes // 100, 1_000_000) and mode != "both":
            flags.append(f"path-idle: {radio} carried only {n} bytes in mode {mode}")
        if radio not in expected and n > STRAY_BYTES:
            flags.append(f"path-leak: {radio} carried {n} bytes in mode {mode}")
    if mode == "both":
        idle = [r for r in RADIOS if moved.get(r, 0) <= STRAY_BYTES]
        if idle:
            flags.append(f"mptcp-single-path: {', '.join(idle)} carried no data")
    return flags


#: TCP's "no threshold yet" (include/net/tcp.h): a threshold above it, or a window above it (the kernel's
#: tcp_snd_cwnd_set warns on one), is no value a congestion control returns.
TCP_INFINITE_SSTHRESH = 0x7FFFFFFF

#: In the directory of an attempt stopped on a cc-fault (``Runner._stopped``): when, and the flags.
STOPPED_FILE = "stopped.json"

#: The flag of a sample whose subflow ran with a threshold or a window no callback returned (``cc_faults``).
CC_FAULT = "cc-fault"


def cc_faults(nodes: dict, faults: dict[str, tuple[int, int, int]]) -> list[str]:
    """``cc-fault`` flags for a sample whose subflows (by its receivers' interface addresses, ``nodes``: name ->
    node) ran with a slow-start threshold above TCP_INFINITE_SSTHRESH or a window at or above 2^31 during the
    transfer (``FaultWatch.grown``: peer address -> ACKs, the last threshold and window). Every record of the
    sample carries them: the flood such a subflow sends fills queues that the sample's other receivers may
    share (the access point's)."""
    flags = []
    for rx, node in nodes.items():
        for radio, iface in node.interfaces.items():
            if iface.address in faults:
                acks, ssthresh, cwnd = faults[iface.address]
                what = [f"slow-start threshold {ssthresh:#x}"] if ssthresh > TCP_INFINITE_SSTHRESH else []
                what += [f"congestion window {cwnd:#x}"] if cwnd > TCP_INFINITE_SSTHRESH else []
                flags.append(f"{CC_FAULT}: {rx}'s {radio} subflow (to {iface.address}) had "
                             f"{' and '.join(what)}, which no callback returned, for {acks} ACKs")
    return flags


def _keep_client_output(adir: Path, rx: str, res: ProcessResult) -> None:
    """An attempt's raw output of receiver ``rx``'s iperf3 client: its JSON, and its stderr if it wrote any."""
    (adir / f"iperf3-{rx}.json").write_text(res.stdout)
    if res.stderr.strip():
        (adir / f"iperf3-{rx}.stderr").write_text(res.stderr)


class Runner:
    """Runs samples of one campaign on one testbed."""

    #: Deadline for a pre-spawned client to reach its gate (SSH channel set-up included).
    GATE_READY_S = 20.0

    def __init__(self, testbed: Testbed, campaign: Campaign, scenario: Scenario,
                 ccs: dict[str, CongestionControl], recorder: Recorder, metadata: dict, *,
                 testbed_name: str | None = None, cancel: threading.Event | None = None,
                 control: SampleControl | None = None) -> None:
        self.testbed = testbed
        #: Which testbed ran the sample, as records name it (parallel testbeds: the namespace prefix).
        self.testbed_name = testbed_name
        #: Set from another thread to stop the sample in flight (parallel testbeds: the signal
        #: handler lives in the main thread); its clients are stopped and ``Interrupted`` raised.
        self.cancel = cancel
        self.campaign = campaign
        self.scenario = scenario
        self.ccs = ccs
        self.recorder = recorder
        self.meta = metadata
        #: The controller for policy samples (``harness.campaign.control``); None without policies.
        self.control = control
        #: Whether the attempt under way can be followed by another (``run_sample``): only then is an attempt
        #: with a cc-fault stopped as soon as the watch sees it (``FAULT_POLL_S``).
        self._may_retry = False
        #: The watch on the BPF programs' thresholds and windows (``_fault_watch``): None until the first
        #: sample under one of them, False when it cannot be had.
        self._watch: FaultWatch | None | bool = None
        self.idle = IdleWaiter(recorder, IdleSettings(tolerance_w=scenario.idle_tolerance_w,
                                                      hold_s=IdleSettings.hold_s / testbed.speedup,
                                                      timeout_s=scenario.idle_timeout_s),
                               known_w={rx: testbed.idle_power_w(rx) for rx in testbed.nodes})

    # ------------------------------------------------------------ the sweep

    def run(self, plans: list[SamplePlan],
            on_sample: Callable[[SampleOutcome], None] | None = None) -> list[SampleOutcome]:
        """Run ``plans`` in order; SIGINT/SIGTERM stop cleanly between (or inside) samples."""
        outcomes = []
        with stop_on_signals():
            self.idle.learn(list(self.testbed.nodes))  # meters the testbed knows no idle power of (a lab)
            for i, plan in enumerate(plans):
                if i:
                    self.settle()
                out = self.run_sample(plan)
                outcomes.append(out)
                if on_sample:
                    on_sample(out)
        return outcomes

    #: Longest wait for the testbed's shaping queues to drain between samples (s).
    DRAIN_S = 3.0

    def settle(self) -> None:
        """Between samples: the scenario's extra pause, then until the shaping queues are empty (measured).

        The pause is testbed time, as every other time of a sample: at a speed-up S it lasts ``settle_s`` / S
        (a fixed 2 s of wall time would be 2 x S s of the testbed's). Radio tails were settled by the sample
        itself (``_wait_idle``). A testbed whose queues cannot be read (a lab: they are the routers') is not
        waited for; one still queueing at the deadline is logged.
        """
        if self.scenario.settle_s:
            time.sleep(self.scenario.settle_s / self.testbed.speedup)
        deadline = time.monotonic() + self.DRAIN_S
        while (queued := queued_bytes(self.testbed.qdisc_stats())):
            if time.monotonic() > deadline:
                log.warning("the testbed's queues still hold %d bytes %.0f s after the sample", queued, self.DRAIN_S)
                return
            time.sleep(0.05)

    def run_sample(self, plan: SamplePlan) -> SampleOutcome:
        """Run one sample with retries, store its raw output and records, and return the outcome."""
        t0 = time.monotonic()
        raw = self.campaign.partial_dir(plan.sample_id)
        attempts = self.scenario.retries + 1
        outcomes: list[ReceiverOutcome] = []
        idle_s = 0.0
        #: Every attempt's repairs, per receiver: a repair before a failed attempt is recorded too.
        repairs: dict[str, list[dict]] = {rx: [] for rx in plan.receivers}
        for attempt in range(1, attempts + 1):
            adir = raw / f"attempt-{attempt}"
            adir.mkdir(exist_ok=True)
            if self.testbed_name:
                (adir / ATTEMPT_TESTBED_FILE).write_text(self.testbed_name + "\n")
            self._may_retry = attempt < attempts
            outcomes = self._attempt(plan, adir)
            for o in outcomes:
                repairs.setdefault(o.receiver, []).extend({"attempt": attempt, "what": w} for w in o.repairs)
            # Every attempt's radio tail ends before anything else runs: a retry, or the next sample.
            t_idle = time.monotonic()
            self._wait_idle(plan, outcomes)
            idle_s += time.monotonic() - t_idle
            failed = [o for o in outcomes if o.error]
            # A subflow that ran without a slow-start threshold (cc-fault) makes the sample no measurement of its
            # control: measured again while attempts remain (the flagged attempt's raw output stays in its directory).
            faults = sorted({f for o in outcomes for f in o.flags if f.startswith(CC_FAULT)})
            if not failed and not (faults and attempt < attempts):
                break
            reasons = "; ".join(f"{o.receiver}: {o.error}" for o in failed) or "; ".join(faults)
            log.warning("%s attempt %d/%d %s: %s", plan.sample_id, attempt, attempts,
                        "failed" if failed else "flagged", reasons)
        status = "failed" if any(o.error for o in outcomes) else "ok"
        records = [self._record(plan, o, status, attempt, repairs.get(o.receiver, [])) for o in outcomes]
        (raw / "records.json").write_text(json.dumps(records, indent=1))
        self.campaign.commit_raw(plan.sample_id)
        self.campaign.append(records)
        transfer_s = max((o.transfer.seconds for o in outcomes if o.transfer), default=0.0)
        self.recorder.discard_before(time.time() - 30)
        return SampleOutcome(plan, status, attempt, records, time.monotonic() - t0, transfer_s, idle_s)

    # ------------------------------------------------------------ one attempt

    def _attempt(self, plan: SamplePlan, adir: Path) -> list[ReceiverOutcome]:
        """One try at a sample: set up, transfer to every receiver at once, then read counters and energy."""
        tb = self.testbed
        cc = self.ccs[plan.cc]
        outs = {rx: ReceiverOutcome(rx, mode=plan.mode) for rx in plan.receivers}
        try:
            health = tb.check_health(plan.receivers)
        except (CommandError, MplabError) as exc:
            for o in outs.values():
                o.error = f"health check: {exc}"
            return list(outs.values())
        for fix in health.repaired:
            log.warning("%s: repaired before the sample: %s: %s", plan.sample_id, fix.receiver, fix.what)
            if fix.receiver in outs:
                outs[fix.receiver].repairs.append(fix.what)
        if health.broken:
            why = "; ".join(f"receiver {rx} broken: {reason}" for rx, reason in health.broken.items())
            for o in outs.values():
                o.error = f"testbed: {why}"
            return list(outs.values())
        try:
            tb.apply_cc(cc, plan.receivers)
        except (CommandError, MplabError) as exc:
            return _fail_all(outs, f"setup: {exc}")
        if plan.policy is None:
            return self._measured(plan, cc, outs, adir)
        if self.control is None:
            raise MplabError(f"{plan.sample_id}: a policy sample needs a controller (run it with `mplab run`)")
        try:
            try:
                prepared = self.control.prepare(plan)  # probe, decide, steer
            except (CommandError, MplabError) as exc:
                return _fail_all(outs, f"control: {exc}")
            for rx, o in outs.items():
                o.mode = prepared.modes[rx]
                o.control = prepared.fields.get(rx, {})
            self._wait_probes_idle(plan, outs)
            try:
                self.control.started(plan)
            except (CommandError, MplabError) as exc:
                return _fail_all(outs, f"control: {exc}")
            return self._measured(plan, cc, outs, adir)
        finally:
            self._release(plan)

    def _wait_probes_idle(self, plan: SamplePlan, outs: dict[str, ReceiverOutcome]) -> None:
        """After the controller's probe and measurement windows: wait until every receiver is idle again.

        A probe leaves its radio tail (LTE: ~11.6 s in the emulated profile) like any transfer;
        released into it, the measured transfer would be charged for it. Judged on the meters from
        now on (the probes ended inside ``prepare``), so a policy that sent nothing waits one hold window.
        """
        t0 = time.monotonic()
        now = time.time()
        skipped = self._skip_tails(list(plan.receivers))
        results = self.idle.wait({rx: max(now, skipped[rx].at_wall) if rx in skipped else now
                                  for rx in plan.receivers}, 0.0)
        waited = time.monotonic() - t0
        # In testbed time, like idle_wait_s: a fast-forwarded tail counts as waited (the sample's longest).
        waited = round(waited + max((k.remaining_s for k in skipped.values()), default=0.0), 3)
        for rx, o in outs.items():
            o.probe_idle_wait_s = waited
            res = results.get(rx)
            if res is not None and not res.settled:
                ref = f"{res.reference_w:.3f} W" if res.reference_w is not None else "unknown"
                o.flags.append(f"probe-tail-unsettled: not idle {res.wait_s:.1f} s after the controller's probes "
                               f"(idle power {ref}): the transfer may carry some of their tail")

    def _release(self, plan: SamplePlan) -> None:
        """After a policy sample: every receiver allowed on both networks again."""
        try:
            self.control.finish(plan)
        except (CommandError, MplabError) as exc:
            # A later sample would run steered: stop the sweep rather than record wrong data.
            raise MplabError(f"{plan.sample_id}: the controller could not release the receivers: {exc}") from exc

    def _measured(self, plan: SamplePlan, cc: CongestionControl, outs: dict[str, ReceiverOutcome],
                  adir: Path) -> list[ReceiverOutcome]:
        """The transfer with counters before and after, then each receiver's outcome and energy."""
        tb = self.testbed
        try:
            before = dict(zip(plan.receivers, parallel(tb.counters, plan.receivers)))
        except (CommandError, MplabError) as exc:
            return _fail_all(outs, f"setup: {exc}")
        qdisc_before = tb.qdisc_stats()
        watch = self._fault_watch(cc)
        faults_before = watch.read(relist=True) if watch else {}
        nodes = {rx: tb.nodes[rx] for rx in plan.receivers}

        def faulted() -> list[str]:
            return cc_faults(nodes, watch.grown(faults_before, watch.read())) if watch else []

        results = self._transfer(plan, cc, outs, faulted if watch and self._may_retry else None)
        if results is None:
            return list(outs.values())
        faults = faulted()
        if any(o.stopped is not None for o in outs.values()):
            return self._stopped(plan, outs, results, faults, adir)
        try:
            after = dict(zip(plan.receivers, parallel(tb.counters, plan.receivers)))
        except (CommandError, MplabError) as exc:
            after = {}
            for o in outs.values():
                o.error = o.error or f"counters: {exc}"
        qdisc_after = tb.qdisc_stats()
        for rx, res in results.items():
            moved = _delta(before[rx], after[rx]) if rx in after else None
            self._outcome(plan, cc, outs[rx], res, moved, adir)
            outs[rx].flags += faults
        (adir / "qdisc.json").write_text(json.dumps({"before": qdisc_before, "after": qdisc_after}))
        self._energy(plan, outs, adir)
        return [outs[rx] for rx in plan.receivers]

    def _stopped(self, plan: SamplePlan, outs: dict[str, ReceiverOutcome], results: dict[str, ProcessResult],
                 faults: list[str], adir: Path) -> list[ReceiverOutcome]:
        """An attempt stopped on a cc-fault (``_wait_clients``): its clients' raw output and why it stopped are kept
        in its directory; no counters, energy or transfer are read from it, since it is measured again."""
        for rx, res in results.items():
            _keep_client_output(adir, rx, res)
            outs[rx].flags += faults
        at = max(o.stopped for o in outs.values() if o.stopped is not None)
        (adir / STOPPED_FILE).write_text(json.dumps({"after_s": at, "flags": faults}, indent=1) + "\n")
        log.info("%s: stopped %.1f s into the transfer on a cc-fault; measured again", plan.sample_id, at)
        return list(outs.values())

    def _fault_watch(self, cc: CongestionControl) -> FaultWatch | None:
        """The watch on mplab's struct_ops programs (``FaultWatch``) for a sample under one of them; None under
        the kernel's own algorithms, or when the sender's network namespace cannot be read."""
        if not cc.sock_name.startswith(BPF_PREFIX):
            return None
        if self._watch is None:
            res = self.testbed.sender.run(["stat", "-L", "-c", "%i", "/proc/self/ns/net"], check=False)
            try:
                self._watch = FaultWatch(self.testbed.sender, int(res.stdout.strip()))
            except ValueError:
                log.warning("no cc-fault watch: cannot read the sender's network namespace (%s)", res.stderr.strip())
                self._watch = False
        return self._watch or None

    def _transfer(self, plan: SamplePlan, cc: CongestionControl, outs: dict[str, ReceiverOutcome],
                  faulted: Callable[[], list[str]] | None = None) -> dict[str, ProcessResult] | None:
        """Start every client behind its gate, release them together, wait for all (bounded; with ``faulted``,
        stopped early once it names a cc-fault: ``_wait_clients``).

        Returns each client's result, or None when a client could not start (``outs`` say why).
        Whatever happens, no client is left running.
        """
        procs: dict[str, BackgroundProcess] = {}
        results: dict[str, ProcessResult] = {}
        tail = None
        try:
            if not self._start_clients(plan, cc, outs, procs):
                return None
            probes = self._rx_probes(procs)
            tail = self.testbed.sender_tail(procs, self.scenario.file_bytes)
            for rx, p in procs.items():
                try:
                    outs[rx].released_at = p.release()
                except (MplabError, OSError, EOFError) as exc:
                    outs[rx].error = f"release: {exc}"
                if rx in probes:
                    outs[rx].no_data_until = outs[rx].released_at
            self.recorder.poll_now()  # a reading at the release pins the windows' start (Recorder.poll_now)
            self._wait_clients(procs, outs, results, probes, tail, faulted)
        finally:
            if tail is not None:
                tail.release()  # no server left stopped, whatever happened
                for rx in tail.pairs:
                    outs[rx].sender_paused_s = tail.paused_s(rx)
            for rx, p in procs.items():
                if rx not in results:
                    results[rx] = p.stop()  # interrupted: leave nothing running
        return results

    def _start_clients(self, plan: SamplePlan, cc: CongestionControl, outs: dict[str, ReceiverOutcome],
                       procs: dict[str, BackgroundProcess]) -> bool:
        """Pre-spawn each receiver's gated client into ``procs``; False (and every outcome failed) if one fails."""
        tb = self.testbed
        try:
            tb.ensure_servers(plan.receivers)
            for rx in plan.receivers:
                node = tb.nodes[rx]
                bind, mptcp = _client_spec(node, outs[rx].mode, policy=plan.policy is not None)
                argv = node.iperf3.client_argv(tb.server_address, node.port, self.scenario.file_bytes,
                                               bind=bind, mptcp=mptcp, cc=cc.sock_name)
                # A receiver that stops answering (SSH) fails this sample with the reason; the
                # clients already started are stopped by the caller, the sweep goes on.
                procs[rx] = node.host.start(argv, gated=True, label=f"iperf3:{rx}")
            for p in procs.values():
                p.wait_ready(self.GATE_READY_S)
        except MplabError as exc:
            _fail_all(outs, f"start: {exc}")
            return False
        return True

    def _rx_probes(self, procs: dict[str, BackgroundProcess]) -> dict[str, tuple[Callable[[], int], int]]:
        """Per client whose receiver the testbed can look at fast: its reader and the bytes before the release."""
        probes = {}
        for rx in procs:
            probe = self.testbed.rx_probe(rx)
            try:
                if probe is not None:
                    probes[rx] = (probe, probe())
            except OSError as exc:
                log.debug("no first-data probe for %s: %s", rx, exc)
        return probes

    def _look_for_data(self, probes: dict[str, tuple[Callable[[], int], int]],
                       outs: dict[str, ReceiverOutcome]) -> None:
        """One look at each receiver still before its data (``START_POLL_S``): note the last look without a
        data packet and the first with one, which a meter reading pins; a receiver that cannot be read is let go."""
        for rx, (probe, base) in list(probes.items()):
            now = time.time()  # before the look: what it shows held from then on
            try:
                grown = probe() - base
            except OSError:
                del probes[rx]
                continue
            if grown < DATA_BYTES:
                outs[rx].no_data_until = now
            else:
                outs[rx].data_seen_at = now
                self.recorder.poll_now([rx])
                del probes[rx]

    def _wait_clients(self, procs: dict[str, BackgroundProcess], outs: dict[str, ReceiverOutcome],
                      results: dict[str, ProcessResult],
                      probes: dict[str, tuple[Callable[[], int], int]] | None = None,
                      tail: SenderTail | None = None, faulted: Callable[[], list[str]] | None = None) -> None:
        """Collect each client's result into ``results``; stop those still running at the transfer timeout.
        Until each client's data begins, its receiver is looked at every ``START_POLL_S`` (``_look_for_data``);
        the senders' servers are paused while they would spin (``tail``, ``Testbed.sender_tail``). With
        ``faulted``, it is asked every ``FAULT_POLL_S``; once it names a cc-fault every client still running is
        stopped and its outcome's ``stopped`` says when (wall s after the start of the wait)."""
        start = time.monotonic()
        deadline = start + self.scenario.transfer_timeout_s
        next_look = start + FAULT_POLL_S
        pending = dict(procs)
        probes = dict(probes or {})
        while pending:
            if faulted is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + FAULT_POLL_S
                if faulted():
                    for rx, p in pending.items():
                        results[rx] = p.stop()
                        outs[rx].stopped = round(time.monotonic() - start, 3)
                    break
            self._look_for_data(probes, outs)
            if tail is not None:
                tail.look()
            if self.cancel is not None and self.cancel.is_set():
                raise Interrupted("cancelled")  # the caller's finally stops every client
            for rx, p in list(pending.items()):
                if p.poll() is not None:
                    self.recorder.poll_now()  # ... and at its exit, the window's end
                    results[rx] = p.wait(1.0)
                    del pending[rx]
                    if probes.pop(rx, None) is not None:
                        outs[rx].no_data_until = None  # its data never seen to begin: the window ends at the exit
            if pending and time.monotonic() > deadline:
                for rx, p in pending.items():
                    results[rx] = p.stop()
                    outs[rx].error = f"timeout: no result after {self.scenario.transfer_timeout_s:.0f} s"
                break
            time.sleep(START_POLL_S if probes else POLL_S)

    def _outcome(self, plan: SamplePlan, cc: CongestionControl, o: ReceiverOutcome, res: ProcessResult,
                 moved: dict[str, int] | None, adir: Path) -> None:
        """Keep one client's raw output and fill ``o``: transfer, interface bytes, data-quality flags."""
        if res.released_at is not None:
            o.released_at = res.released_at
        o.exited_at = res.exited_at
        _keep_client_output(adir, o.receiver, res)
        if o.error is None:
            try:
                o.transfer = parse_iperf3(res.stdout, f"iperf3 client of {o.receiver} (exit {res.returncode})")
            except TrafficError as exc:
                o.error = str(exc)
        if moved is not None:
            o.counters = moved
            o.flags += check_paths(o.mode, moved, self.scenario.file_bytes)
        if o.transfer and o.transfer.sender_cc and o.transfer.sender_cc != cc.sock_name:
            o.flags.append(f"cc-mismatch: sender used {o.transfer.sender_cc}, expected {cc.sock_name}")

    def _energy(self, plan: SamplePlan, outs: dict[str, ReceiverOutcome], adir: Path) -> None:
        """Each receiver's energy over its window: from its data's start where the runner saw it
        (``_look_for_data``), else back from its client's exit; iperf3's transfer time long."""
        windows = {}
        for rx, o in outs.items():
            if o.transfer and o.exited_at:
                start = o.data_seen_at if o.data_seen_at is not None else o.exited_at - o.transfer.seconds
                windows[rx] = (start, start + o.transfer.seconds)
        if not windows:
            return
        t_end = max(w[1] for w in windows.values())
        self.recorder.wait_covered(t_end)
        for rx, (w0, w1) in windows.items():
            e = self.recorder.energy(rx, w0, w1)
            o = outs[rx]
            o.window = (w0, w1)
            o.energy = e
            o.flags += list(e.flags)
            if o.released_at is not None:
                o.exit_lag_s = max(0.0, o.exited_at - o.released_at - o.transfer.seconds)
            o.flags += _speedup_lag(self.testbed.speedup, o)
            buf = io.StringIO()
            w = csv.writer(buf)
            w.writerow(["wall_s", "mono_s", "volts", "amps", "watts", "counter_wh", "device_watts", "polled_wall_s"])
            for r in self.recorder.trace(rx, w0 - 1.0, w1 + 1.0):
                w.writerow([f"{r.wall_s:.6f}", f"{r.mono_s:.6f}", r.volts, r.amps, f"{r.watts:.6f}", r.counter_wh,
                            r.device_watts, "" if r.polled_wall_s is None else f"{r.polled_wall_s:.6f}"])
            (adir / f"meter-{rx}.csv").write_text(buf.getvalue())

    def _skip_tails(self, receivers: list[str]) -> dict[str, TailSkip]:
        """Fast-forward the receivers' radio tails where the testbed owns them (emulated); {} otherwise.

        Best effort: a receiver the testbed could not fast-forward has its tail waited out instead.
        A reading is pinned just before the request, so the tail up to the fast-forward is metered
        (an integrating meter's next mean starts at the fast-forward and shows idle power only).
        """
        self.recorder.poll_now()
        self.recorder.wait_covered(time.time())
        try:
            return self.testbed.skip_tails(receivers)
        except (CommandError, MplabError) as exc:
            log.warning("radio tails not fast-forwarded (waiting them out): %s", exc)
            return {}

    def _wait_idle(self, plan: SamplePlan, outs: list[ReceiverOutcome]) -> None:
        """Wait until the sample's receivers are idle again; measure each one's tail energy.

        Where the testbed fast-forwards a tail (its power model's state), the tail is what the meter
        showed from the end of the window to the fast-forward plus what the model says it still held;
        the meters must then read idle power at once. Elsewhere the tail is waited out and metered.
        """
        now = time.time()
        since = {o.receiver: (o.window[1] if o.window else now) for o in outs}
        skipped = self._skip_tails(list(since))
        tail_s = self.testbed.tail_s(plan.mode)
        start = {rx: max(t, skipped[rx].at_wall) if rx in skipped else t + tail_s for rx, t in since.items()}
        results = self.idle.wait(start, 0.0)
        for o in outs:
            res = results.get(o.receiver)
            if res is not None:
                res = replace(res, since=since[o.receiver])  # idle_wait_s counts from the window's end
            o.idle = res
            o.tail_skip = skipped.get(o.receiver)
            if res is None or o.window is None:
                continue
            if not res.settled:
                ref = f"{res.reference_w:.3f} W" if res.reference_w is not None else "unknown"
                o.flags.append(f"tail-unsettled: not idle {res.wait_s:.1f} s after the transfer (idle power {ref})")
            if res.idle_at - o.window[1] > 1e-3:
                # A meter gap in the tail leaves tail_energy_j unknown (None); energy_j is unaffected.
                self.recorder.wait_covered(res.idle_at)
                o.tail = self.recorder.energy(o.receiver, o.window[1], res.idle_at)

    # ------------------------------------------------------------ records

    @staticmethod
    def _tail_energy_j(o: ReceiverOutcome) -> float | None:
        """Energy from the end of the transfer window until idle; None when unknown (unsettled, meter gap)."""
        if o.energy is None or o.idle is None or not o.idle.settled:
            return None
        if o.tail is not None and o.tail.flags:
            return None
        metered = o.tail.energy_j if o.tail is not None else 0.0  # None: idle at once
        return metered + (o.tail_skip.remaining_j if o.tail_skip else 0.0)

    def _record(self, plan: SamplePlan, o: ReceiverOutcome, status: str, attempts: int,
                repairs: list[dict]) -> dict:
        """The record of one receiver (``SampleRecord``, fields in docs/records.md), as stored."""
        tb = self.testbed
        node = tb.nodes[o.receiver]
        cc = self.ccs[plan.cc]
        t = o.transfer
        e = o.energy
        window = o.window
        moved = o.counters
        # Records are in testbed (real) time: at speedup S a sample ran S x faster (harness.emulation.speedup).
        s = tb.speedup
        dur = t.seconds * s if t else None
        return SampleRecord(
            campaign=self.campaign.id,
            sample_id=plan.sample_id,
            case_id=plan.case_id,
            cc=plan.cc,
            n_receivers=plan.n_receivers,
            mode=o.mode or plan.mode,
            sample_index=plan.index,
            receiver=o.receiver,
            status="failed" if o.error else "ok",
            sample_status=status,
            error=o.error,
            attempts=attempts,
            flags=o.flags,
            repairs=repairs,
            file_bytes=self.scenario.file_bytes,
            started_at=o.released_at,
            window_start=window[0] if window else None,
            window_end=window[1] if window else None,
            bytes=t.bytes if t else None,
            duration_s=dur,
            throughput_mbit=t.throughput_mbit / s if t else None,
            retransmits=t.retransmits if t else None,
            iface_bytes=moved or None,
            iface_throughput_mbit=({r: b * 8 / dur / 1e6 for r, b in moved.items()} if moved and dur else None),
            energy_j=e.energy_j * s if e and e.energy_j is not None else None,
            mean_power_w=e.mean_power_w if e else None,
            energy_edge_j=e.edge_j * s if e and e.edge_j is not None else None,
            exit_lag_s=_times(o.exit_lag_s, s),
            sender_paused_s=_times(o.sender_paused_s, s),
            start_lag_s=(_times(max(0.0, o.data_seen_at - o.released_at), s)
                         if o.data_seen_at is not None and o.released_at is not None else None),
            start_unsure_s=(_times(o.data_seen_at - o.no_data_until, s)
                            if o.data_seen_at is not None and o.no_data_until is not None else None),
            tail_energy_j=_times(self._tail_energy_j(o), s),
            idle_wait_s=(round(s * (o.idle.wait_s + (o.tail_skip.remaining_s if o.tail_skip else 0.0)), 3)
                         if o.idle else None),
            tail_skipped_s=round(s * o.tail_skip.remaining_s, 3) if o.tail_skip and o.idle else None,
            probe_idle_wait_s=_times(o.probe_idle_wait_s, s),
            meter_readings=e.n_readings if e else 0,
            meter_counter_j=(e.counter_wh * 3600 * s if e and e.counter_wh is not None else None),
            meter_kind=node.meter_kind,
            energy_source=tb.energy_source,
            testbed_kind=tb.kind,
            testbed=self.testbed_name,
            kernel=self.meta.get("kernel"),
            cc_impl=cc.implementation,
            sender_cc=t.sender_cc if t else None,
            mptcp_mode=node.iperf3.mptcp_mode if (node.iperf3 and plan.mode == "both") else None,
            iperf3_version=t.iperf3_version if t else None,
            mplab_version=harness.__version__,
            power_profile=self.meta.get("power_profile"),
            speedup=s,
            tcp_timers=tb.tcp_timers,
            lte_access=(a["kind"] if (a := tb.lte_paths().get(o.receiver)) else None),
            lte_attach_s=a.get("attach_s") if a else None,
            **{k: o.control.get(k) for k in CONTROL_FIELDS},
        ).to_json()
