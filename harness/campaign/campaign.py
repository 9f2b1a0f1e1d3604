"""Campaigns: preflight, manifest, set-up, the sweep, teardown; and resuming.

``start_campaign`` plans a scenario on an inventory, refuses to start if an essential
preflight check fails (before anything exists), writes the manifest, and runs.
``resume_campaign`` reads the scenario and inventory *copied into the manifest*, so a
resumed campaign runs exactly what it was started with, and runs only the samples
that have no records yet.
"""
from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import harness
from harness.campaign import metadata, parallel
from harness.cc import CongestionControl, resolve
from harness.campaign.control import ControlFactory, SampleControl
from harness.config.load import digest_model, parse_model
from harness.errors import ConfigError, DiskFull, Interrupted, MeterError, PreflightError, StoreError, is_disk_full
from harness.config.inventory import RADIOS, Inventory
from harness.files import atomic_write
from harness.meters.recorder import Recorder, TraceWriter
from harness.campaign.plan import SamplePlan, plan_campaign, plan_samples
from harness.campaign.runner import Runner, SampleOutcome, signal_reason, signals_deferred, stop_on_signals
from harness.config.scenario import Scenario
from harness.campaign.store import Campaign, check_campaign_id, check_writable, disk_full_message
from harness.testbeds.base import Testbed
from harness.upkeep.preflight import Check, failed_essentials
from harness.emulation.access import AccessKinds
from harness.testbeds.kinds import build_testbed, testbed_flavour
from harness.emulation.speedup import check_speedup, kernel_scaling

log = logging.getLogger("mplab.campaign")

def resolve_ccs(scenario: Scenario, testbed: Testbed) -> dict[str, CongestionControl]:
    """Each named algorithm's implementation for the testbed's kernel flavour (mptcp.org or upstream) and
    speed-up (at S > 1 Cubic's clock runs S times faster, ``harness.cc.cubic``, unless the kernel's clocks
    are left unscaled: ``harness.emulation.speedup.kernel_scaling``)."""
    flavour = testbed_flavour(testbed)
    s = testbed.speedup if kernel_scaling() else 1.0
    return {name: resolve(name, flavour, s) for name in scenario.congestion_controls}


def preflight_or_raise(testbed: Testbed, ccs: dict[str, CongestionControl],
                       control: SampleControl | None = None) -> list[Check]:
    """Run the testbed's preflight, and the controller's on it; raise ``PreflightError`` listing every
    essential failure with its fix."""
    checks = testbed.preflight(list(ccs.values()))
    if control is not None:
        checks += control.preflight(testbed)
    bad = failed_essentials(checks)
    if bad:
        lines = [f"  - [{c.host}] {c.name}: {c.detail}" + (f"  (fix: {c.fix})" if c.fix else "") for c in bad]
        raise PreflightError("preflight failed, nothing was started:\n" + "\n".join(lines))
    return checks


def describe_testbed(testbed: Testbed) -> dict:
    """The testbed section of the manifest: kind, meters, hosts, where energy comes from, and the emulation
    settings, LTE access and clock offsets where the testbed has them."""
    probe = testbed.probe_host
    inv = testbed.inventory
    out = {
        "kind": testbed.kind,
        "inventory": inv.name,
        # At speedup S the emulation section below is the scaled one the testbed was built from.
        "speedup": testbed.speedup,
        "meter_kinds": sorted({n.meter_kind for n in testbed.nodes.values()}),
        "host": metadata.safely("host", lambda: metadata.host_info(probe)),
        "tools": metadata.safely("tools", lambda: metadata.tool_versions(probe)),
        "iperf3": None,
    }
    if testbed.sender_iperf3:
        out["iperf3"] = {"version": testbed.sender_iperf3.version, "mptcp_mode": testbed.sender_iperf3.mptcp_mode}
    if inv.emulation:
        out["emulation"] = inv.emulation.model_dump(mode="json")
    out["energy_source"] = testbed.energy_note()
    lte = testbed.lte_paths()
    if lte:
        out["lte_access"] = lte
    offsets = testbed.clock_offsets()
    if offsets is not None:
        out["clock_offsets_s"] = offsets  # measured at preflight, per SSH host
    return out


@dataclass
class RunHooks:
    """Callbacks the command line uses for progress."""

    on_start: Callable[[Campaign, list[SamplePlan]], None] = lambda c, p: None
    on_sample: Callable[[SampleOutcome], None] = lambda o: None


def build_control(scenario: Scenario, source: str, factory: ControlFactory | None) -> SampleControl | None:
    """The controller for a scenario with policies (refused here, before anything starts); None without policies."""
    if not scenario.policies:
        return None
    if factory is None:
        raise ConfigError("this scenario runs controller policies, but no controller was given (run it with "
                          "`mplab run`, which mounts the controller package)", source=source, field="policies")
    return factory(scenario, source)


def build_controls(scenario: Scenario, source: str, factory: ControlFactory | None,
                   testbeds: int = 1) -> list[SampleControl] | None:
    """One controller per testbed copy for a scenario with policies (None without policies).

    A controller steers one testbed (the nftables rules in its AP and eNB, or the switch spliced
    into it and the os-ken app driving that switch) and holds the sample it is preparing and a
    periodic policy's loop, so copies never share one. All are built here, before anything
    starts: a bad policy or model is refused with nothing built.
    """
    first = build_control(scenario, source, factory)
    if first is None or factory is None:  # (no factory with policies: refused by build_control)
        return None
    return [first] + [factory(scenario, source) for _ in range(testbeds - 1)]


def describe_controls(controls: list[SampleControl], where: str) -> dict:
    """The manifest's ``control`` section: the controller (every copy's is built from the same scenario),
    and that each testbed (``where``: which ones) has its own."""
    out = metadata.safely("control", controls[0].describe)
    if isinstance(out, dict):
        out = {**out, "instances": f"one per testbed ({where})"}
    return out


def build_testbeds(inventory: Inventory, k: int, force: bool,
                   access_kinds: AccessKinds | None = None, speedup: float = 1.0) -> list[Testbed]:
    """The testbed, or ``k`` copies of an emulated one (``harness.campaign.parallel``), refused beyond the rule."""
    if k == 1:
        return [build_testbed(inventory, access_kinds, speedup)]
    if any(rx.interfaces["lte"].real_cell is not None for rx in inventory.receivers if "lte" in rx.interfaces):
        # One ZMQ cell per machine: its ports and the UE's SIM are not per copy.
        raise ConfigError(f"--testbeds {k}: inventory {inventory.name} puts a receiver on a real srsRAN cell, "
                          "which one machine runs once: use --testbeds 1")
    parallel.check_testbeds(k, force)
    return [build_testbed(inv, access_kinds, speedup) for inv in parallel.testbed_copies(inventory, k)]


def start_campaign(scenario: Scenario, inventory: Inventory, runs_dir: Path, *, campaign_id: str | None = None,
                   scenario_source: str = "scenario", hooks: RunHooks | None = None, testbeds: int = 1,
                   force: bool = False, access_kinds: AccessKinds | None = None,
                   control_factory: ControlFactory | None = None) -> Campaign:
    """Plan, preflight, create and run a new campaign (on ``testbeds`` parallel copies of an emulated testbed).

    Refused before anything is built when the id is bad, the runs directory cannot be
    written, the scenario runs policies without a controller (each copy gets its own,
    ``build_controls``), or another live testbed holds a namespace prefix (each copy claims its
    own). From here on SIGTERM and SIGHUP stop the work cleanly (teardown of every copy and of
    its controller, a session line), as Ctrl-C does.
    """
    cid = check_campaign_id(campaign_id or f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%S')}")
    plans = plan_campaign(scenario, inventory, scenario_source)
    for s in scenario.speedups:
        check_speedup(inventory, s, policies=bool(scenario.policies))
    controls = build_controls(scenario, scenario_source, control_factory, testbeds)
    check_writable(runs_dir)
    campaign: Campaign | None = None
    with stop_on_signals():
        for s, phase in speedup_phases(scenario, plans):
            beds = build_testbeds(inventory, testbeds, force, access_kinds, s)
            with claimed(beds, f"campaign {cid}"):
                ccs = resolve_ccs(scenario, beds[0])
                # One machine: the first copy's preflight (and its controller's on it) holds for all.
                checks = preflight_or_raise(beds[0], ccs, controls[0] if controls else None)
                if campaign is None:
                    campaign = create_campaign(scenario, inventory, runs_dir, plans, beds[0], ccs, checks,
                                               campaign_id=cid,
                                               parallel_section={"testbeds": testbeds,
                                                                 "names": [t.name for t in beds],
                                                                 "forced": force,
                                                                 "max_testbeds": parallel.max_testbeds(),
                                                                 "cores_per_testbed": parallel.CORES_PER_TESTBED},
                                               controls=controls)
                    campaign.check_writable()
                execute_samples(campaign, scenario, inventory, beds, ccs, phase, hooks or RunHooks(),
                                controls=controls)
    assert campaign is not None  # a plan has at least one sample (Scenario's own checks)
    return campaign


def plan_speedup(scenario: Scenario, plan: SamplePlan) -> float:
    """The S ``plan`` runs at: its mode's (``Scenario.speedup_for``; a policy sample's is the scenario's)."""
    return scenario.speedup_for(plan.mode, plan.policy is not None)


def _at(scenario: Scenario, plans: list[SamplePlan], s: float) -> list[SamplePlan]:
    """Those of ``plans`` that run at ``s``, in plan order."""
    return dict(speedup_phases(scenario, plans)).get(s, [])


def speedup_phases(scenario: Scenario, plans: list[SamplePlan]) -> list[tuple[float, list[SamplePlan]]]:
    """The plans by the S they run at (``plan_speedup``), highest S first, each in plan order: a campaign
    runs one phase per S, on testbeds built for it (one phase when every mode runs at one S)."""
    by: dict[float, list[SamplePlan]] = {}
    for p in plans:
        by.setdefault(plan_speedup(scenario, p), []).append(p)
    return sorted(by.items(), key=lambda kv: -kv[0])


@contextlib.contextmanager
def claimed(beds: list[Testbed], owner: str) -> Iterator[None]:
    """Claim every testbed's namespace prefix for ``owner`` (``Busy`` naming a live holder); release after."""
    with contextlib.ExitStack() as stack:
        for tb in beds:
            tb.claim(owner)
            stack.callback(tb.release_claim)
        yield


def create_campaign(scenario: Scenario, inventory: Inventory, runs_dir: Path, plans: list[SamplePlan],
                    testbed: Testbed, ccs: dict[str, CongestionControl], checks: list[Check], *,
                    campaign_id: str | None = None, parallel_section: dict | None = None,
                    controls: list[SampleControl] | None = None, controls_where: str = "") -> Campaign:
    """Write a new campaign's manifest (nothing runs); ``controls_where`` says which testbeds have a controller
    (default: the campaign's parallel copies)."""
    cid = check_campaign_id(campaign_id or f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%S')}")
    tb = describe_testbed(testbed)
    manifest = {
        "created_at": time.time(),
        "mplab_version": harness.__version__,
        "scenario": scenario.model_dump(mode="json"),
        "scenario_digest": digest_model(scenario),
        "inventory": inventory.model_dump(mode="json"),
        "inventory_digest": digest_model(inventory),
        "plan": [p.sample_id for p in plans],
        "congestion_controls": {n: cc.implementation for n, cc in ccs.items()},
        "testbed": tb,
        "kernel": (tb.get("host") or {}).get("kernel"),
        "software": metadata.safely("software", metadata.software),
        "git": metadata.safely("git", metadata.git_info),
        "preflight": [c.__dict__ for c in checks],
        "parallel": parallel_section or {},
    }
    if controls:
        names = (parallel_section or {}).get("names") or [testbed.name]
        manifest["control"] = describe_controls(controls, controls_where or ", ".join(names))
    return Campaign.create(runs_dir, cid, manifest)


def resume_campaign(path: Path, hooks: RunHooks | None = None, *, testbeds: int = 1,
                    force: bool = False, access_kinds: AccessKinds | None = None,
                    control_factory: ControlFactory | None = None) -> Campaign:
    """Continue a campaign where it stopped: repair the directory, run the samples without (all their) records.

    ``testbeds`` need not be what the campaign ran on before: the plan is by sample id.
    """
    campaign = Campaign.open(path)
    campaign.torn_tail()  # samples.jsonl read before anything is created or built: unreadable is StoreError (4)
    campaign.make_ups()   # and makeup.jsonl (torn_tail reads it only when samples.jsonl exists)
    campaign.check_writable()
    scenario, inventory = campaign_inputs(campaign)
    controls = build_controls(scenario, str(campaign.path / "manifest.json"), control_factory, testbeds)
    with stop_on_signals():
        with campaign.lock():  # another process resuming it is refused before anything is built
            pass
        first = True
        for s in scenario.speedups:
            if not first and not _at(scenario, pending_plans(campaign, scenario, inventory), s):
                continue  # this speed-up's phase is done: no testbed built for it
            beds = build_testbeds(inventory, testbeds, force, access_kinds, s)
            with claimed(beds, f"campaign {campaign.id}"):
                ccs = resolve_ccs(scenario, beds[0])
                preflight_or_raise(beds[0], ccs, controls[0] if controls else None)
                with campaign.lock():
                    if first:
                        for msg in campaign.repair():
                            log.warning("%s: %s", campaign.id, msg)
                        for d in campaign.damaged():  # left where they are, never counted: their samples run again
                            log.warning("%s: damaged record %s; its sample runs again", campaign.id,
                                        d.describe(campaign.samples_path))
                    _clean_earlier_copies(campaign, beds)
                first = False
                plans = _at(scenario, pending_plans(campaign, scenario, inventory), s)
                if plans or len(scenario.speedups) == 1:
                    execute_samples(campaign, scenario, inventory, beds, ccs, plans, hooks or RunHooks(),
                                    resumed=True, controls=controls)
    return campaign


def campaign_inputs(campaign: Campaign) -> tuple[Scenario, Inventory]:
    """The scenario and inventory copied into the manifest (what a resumed campaign runs)."""
    src = str(campaign.path / "manifest.json")
    for key in ("scenario", "inventory"):
        if not isinstance(campaign.manifest.get(key), dict):
            raise StoreError(f"{src}: manifest without its {key} (a resumed campaign runs the copy it holds); "
                             "restore it from a copy")
    return (parse_model(Scenario, campaign.manifest["scenario"], f"{src} (scenario)"),
            parse_model(Inventory, campaign.manifest["inventory"], f"{src} (inventory)"))


def pending_plans(campaign: Campaign, scenario: Scenario, inventory: Inventory) -> list[SamplePlan]:
    """The planned samples without records, in plan order (a make-up's after the manifest's)."""
    done = campaign.completed()
    return plan_samples(scenario, inventory, [sid for sid in campaign.plan if sid not in done],
                        str(campaign.path / "manifest.json"))


def _clean_earlier_copies(campaign: Campaign, beds: list[Testbed]) -> None:
    """Remove what testbed copies of earlier sessions left (a killed K=2 run resumed with K=1)."""
    sessions = campaign.path / "sessions.jsonl"
    if not sessions.exists() or not beds[0].has_sessions:
        return
    now = {t.name for t in beds}
    earlier: set[str] = set()
    for line in sessions.read_text().splitlines():
        try:
            earlier.update(json.loads(line).get("testbeds") or [])
        except json.JSONDecodeError:
            continue
    for name in sorted(earlier - now):
        removed = beds[0].clean_stale(name)  # never a live testbed
        if removed:
            log.warning("%s: removed what testbed %s left: %s", campaign.id, name, ", ".join(removed))


@contextlib.contextmanager
def _testbed_session(campaign: Campaign, testbed: Testbed, ccs: dict[str, CongestionControl],
                     trace_name: str, control: SampleControl | None = None) -> Iterator[Recorder]:
    """Set up ``testbed`` (and the controller on it), open its meters and record them (to
    ``meters/<trace_name>``); tear both down after."""
    try:
        testbed.setup(list(ccs.values()))
        if control is not None:
            control.setup(testbed)
        meters = testbed.meters()
        opened = []
        try:
            for m in meters.values():
                m.open()
                opened.append(m)
        except MeterError as exc:
            for m in opened:
                m.close()
            raise PreflightError(f"meter check failed: {exc}") from None
        # Every reading and meter fault of the session goes to disk as it happens (the runner keeps
        # only each sample's window in raw/<sample>/meter-<rx>.csv and forgets older readings).
        (campaign.path / "meters").mkdir(exist_ok=True)
        trace = TraceWriter(campaign.path / "meters" / trace_name,
                            {name: node.meter_kind for name, node in testbed.nodes.items()})
        try:
            with Recorder(meters, sink=trace) as recorder:
                # The first transfer must start inside every meter's trace: a slow meter (rfc2217
                # over ser2net) would otherwise flag the first sample's records with a meter gap.
                if recorder.wait_first(10.0) is None:
                    log.warning("not every meter gave a reading within 10 s; the first samples may be "
                                "flagged meter-gap")
                yield recorder
        finally:
            trace.close()
        if recorder.sink_error and recorder.sink_exception is not None and is_disk_full(recorder.sink_exception):
            raise DiskFull(f"{trace.path}: the disk filled up (records are complete; the continuous meter trace "
                           "is not): free space")
        if recorder.sink_error:
            raise StoreError(f"{trace.path}: {recorder.sink_error} (records are complete; the continuous "
                             "trace is not)")
    finally:
        with signals_deferred():
            try:
                if control is not None:
                    try:
                        control.teardown()
                    except Exception as exc:  # noqa: BLE001 - the testbed must still go
                        log.warning("controller teardown: %s", exc)
            finally:
                testbed.teardown()


def execute_samples(campaign: Campaign, scenario: Scenario, inventory: Inventory, testbeds: list[Testbed],
                    ccs: dict[str, CongestionControl], plans: list[SamplePlan], hooks: RunHooks,
                    resumed: bool = False, controls: list[SampleControl] | None = None) -> None:
    """Run ``plans`` on ``testbeds``, copy *i* with controller ``controls[i]`` (one each, never shared)."""
    meta = {"kernel": campaign.manifest.get("kernel"),
            "power_profile": inventory.emulation.power_profile.name if inventory.emulation else None}
    names = [t.name for t in testbeds]
    per_bed: list[SampleControl | None] = list(controls) if controls else [None] * len(testbeds)
    if controls and (len(controls) != len(testbeds) or len({id(c) for c in controls}) != len(controls)):
        # A controller steers the one testbed it was set up on and holds that copy's sample in flight:
        # shared, one copy's transfers would run unsteered while the other's were steered twice.
        raise ValueError(f"{len(testbeds)} testbed(s) need {len(testbeds)} distinct controllers, got "
                         f"{len({id(c) for c in controls})} distinct of {len(controls)}")
    with campaign.lock():
        campaign.hold_reserve()  # so that the last session line fits even if the disk fills
        campaign.log_session({"event": "resume" if resumed else "start", "pending": len(plans), "pid": os.getpid(),
                              "testbeds": names, "speedup": testbeds[0].speedup})
        hooks.on_start(campaign, plans)
        end: dict = {"event": "interrupted"}
        stamp = time.strftime('%Y%m%dT%H%M%S')
        try:
            outcomes: list[SampleOutcome] = []
            if plans:
                with contextlib.ExitStack() as stack:
                    # Set up one copy after the other (they share BPF registrations and the allowed list).
                    recorders = [stack.enter_context(_testbed_session(
                        campaign, tb, ccs, f"trace-{stamp}.csv" if len(testbeds) == 1 else f"trace-{stamp}-{n}.csv",
                        ctl)) for tb, n, ctl in zip(testbeds, names, per_bed)]
                    runners = [Runner(tb, campaign, scenario, ccs, rec, meta, testbed_name=n, control=ctl)
                               for tb, rec, n, ctl in zip(testbeds, recorders, names, per_bed)]
                    with parallel.Interference() as interference:
                        try:
                            if len(runners) == 1:
                                outcomes = runners[0].run(plans, hooks.on_sample)
                            else:
                                outcomes = _run_parallel(runners, plans, hooks.on_sample)
                        finally:
                            _note_interference(campaign, interference, plans, inventory, len(testbeds))
            end = {"event": "finished", "samples_run": len(outcomes),
                   "samples_failed": sum(1 for o in outcomes if o.status != "ok")}
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            reason = signal_reason(signum)
            end = {"event": "interrupted", "reason": reason, "signal": signal.Signals(signum).name}
            done = len(campaign.completed())
            raise Interrupted(f"{reason}: {done}/{len(campaign.plan)} samples are recorded and kept; "
                              f"resume with `mplab run --resume {campaign.path}`", signum) from None
        except BaseException as exc:
            if is_disk_full(exc):
                msg = disk_full_message(campaign.path, len(campaign.completed()), len(campaign.plan))
                end = {"event": "failed", "reason": msg, "disk_full": True}
                raise DiskFull(msg) from None
            end = {"event": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}
            raise
        finally:
            # A second Ctrl-C or SIGTERM must not cut the teardown short (namespaces, struct_ops,
            # the controller's switch and rules).
            with signals_deferred():
                try:
                    for ctl in per_bed:
                        if ctl is not None:
                            try:
                                ctl.teardown()  # idempotent: _testbed_session tore it down already
                            except Exception as exc:  # noqa: BLE001 - the testbeds must still go
                                log.warning("controller teardown: %s", exc)
                    for tb in testbeds:
                        tb.teardown()  # idempotent; a set-up that failed half-way left something
                finally:
                    campaign.log_session(end)
                    campaign.release_reserve()


def _run_parallel(runners: list[Runner], plans: list[SamplePlan],
                  on_sample: Callable[[SampleOutcome], None]) -> list[SampleOutcome]:
    """Run ``plans`` on every runner at once from one queue; SIGTERM/SIGINT cancel the samples in flight.

    Each runner settles its own receivers' radio tails after each of its samples (``run_sample``),
    so the idle wait is per copy; the signal handlers (``stop_on_signals``) live in this, the main, thread.
    """
    stop = threading.Event()
    outcomes: list[SampleOutcome] = []

    def worker(runner: Runner) -> Callable[[SamplePlan], SampleOutcome]:
        first = [True]

        def one(plan: SamplePlan) -> SampleOutcome:
            if first[0]:
                runner.idle.learn(list(runner.testbed.nodes))  # meters the testbed knows no idle power of
            else:
                runner.settle()  # this copy's queues drained (its radio tails were accounted by the sample)
            first[0] = False
            return runner.run_sample(plan)
        return one

    def done(out: SampleOutcome) -> None:
        outcomes.append(out)
        on_sample(out)

    for r in runners:
        r.cancel = stop
    with stop_on_signals():
        errors = parallel.run_queue(plans, {r.testbed_name: worker(r) for r in runners}, stop, done)
    if errors:
        raise errors[0]
    return outcomes


def _note_interference(campaign: Campaign, interference: parallel.Interference, plans: list[SamplePlan],
                       inventory: Inventory, k: int) -> None:
    """Add this session's interference to the manifest (``interference``: one entry per session; an atomic rewrite)."""
    ids = {p.sample_id for p in plans}
    records = [r for r in campaign.records() if r["sample_id"] in ids]
    entry = {"n_testbeds": k, **interference.summary(records, inventory)}
    campaign.manifest.setdefault("interference", []).append(entry)
    atomic_write(campaign.path / "manifest.json", (json.dumps(campaign.manifest, indent=2) + "\n").encode())
    ratios = [t["rate_ratio_mean"] for t in entry["testbeds"].values() if t["rate_ratio_mean"] is not None]
    if k > 1 and ratios:
        log.info("%s: %d testbeds, CPU busy %.0f%% (max %.0f%%), achieved/configured rate %.2f..%.2f", campaign.id, k,
                 100 * (entry["cpu_busy_mean"] or 0), 100 * (entry["cpu_busy_max"] or 0), min(ratios), max(ratios))


#: What a fast-forwarded radio tail costs between samples on the emulated testbed (s).
TAIL_SKIP_S = 0.8


def dry_run_estimate_s(plans: list[SamplePlan], scenario: Scenario, inventory: Inventory,
                       control: SampleControl | None = None) -> float:
    """A rough wall-time estimate of ``plans`` on one testbed (set-up not included): the samples' estimates
    (``sample_estimates_s``) summed. On K copies, ``queue_makespan_s`` of the same estimates."""
    return sum(sample_estimates_s(plans, scenario, inventory, control))


def between_samples_s(scenario: Scenario, emulated: bool, speedup: float | None = None) -> float:
    """What the estimate gives a sample beyond its transfer, in wall time: the fast-forwarded tail (emulated
    testbed only), the runner's half second of checks, and the scenario's settle (testbed time: / S, the
    scenario's or ``speedup``)."""
    s = scenario.speedup if speedup is None else speedup
    return ((TAIL_SKIP_S if emulated else 0.0) + scenario.settle_s) / s + 0.5


def queue_makespan_s(durations: list[float], testbeds: int) -> float:
    """When the last of ``testbeds`` copies finishes ``durations`` (in plan order) taken from one queue, each
    copy taking the next sample as it falls free (``parallel.run_queue``).

    Not the total over K: a slice of a few long samples (nine receivers, LTE only) keeps one copy busy after
    the others ran out of work. A 60 MB slice of paper-setup1 on two copies (18 samples) is 1.17 times its
    total / 2; the whole sweep (6,075 samples) 1.0003 times.
    """
    free = [0.0] * max(1, testbeds)
    for d in durations:
        heapq.heapreplace(free, free[0] + d)  # the copy that falls free first takes it
    return max(free)


def model_slowest_s(inventory: Inventory, file_bytes: int, receivers: list[str], mode: str) -> float:
    """The slowest of ``receivers`` receiving ``file_bytes`` at once in ``mode`` on an emulated ``inventory``, by
    its sharing models (``harness.emulation.sharing``), in testbed seconds."""
    from harness.emulation.sharing import AccessNetwork, simulate_sample

    emu = inventory.emulation
    nets = {r: AccessNetwork(emu.wifi_sharing if r == "wifi" else emu.lte_sharing, spec.capacity_mbit,
                             spec.capacity_by_active)
            for r, spec in (("wifi", emu.wifi_ap), ("lte", emu.lte_cell))}
    links = {r: {n: inventory.receiver(n).interfaces[r].channel.rate_mbit for n in receivers} for r in RADIOS}
    res = simulate_sample(file_bytes * 8 / 1e6, receivers, mode, nets["wifi"], nets["lte"], links["wifi"],
                          links["lte"], emu.coexistence if mode == "both" else 1.0)
    return max(r.duration_s for r in res.values())


def sample_estimates_s(plans: list[SamplePlan], scenario: Scenario, inventory: Inventory,
                       control: SampleControl | None = None) -> list[float]:
    """Each sample's rough wall time: as long as its slowest receiver, plus, for a policy sample, what the
    controller expects to spend probing and deciding.

    On an emulated testbed the sharing models predict it (``harness.emulation.sharing``); on a lab,
    10 Mbit/s per path is assumed.
    """
    out: list[float] = []
    emu = inventory.emulation
    for p in plans:
        tail = 0.0
        if emu is not None:
            slowest = model_slowest_s(inventory, scenario.file_bytes, list(p.receivers), p.mode)
            # The radios' tails are fast-forwarded in the power model (Testbed.skip_tails): the request,
            # one idle hold to confirm it (harness.meters.idle), and the window's last meter readings.
            tail = TAIL_SKIP_S
        else:
            rate = 20.0 if p.mode == "both" else 10.0
            slowest = scenario.file_bytes * 8 / (rate * 1e6)
        s = plan_speedup(scenario, p)
        est = slowest / s + between_samples_s(scenario, emu is not None, s)
        if p.policy is not None and control is not None:
            probing_s = control.estimate_s(p)
            # After the controller's own traffic the runner waits out its tails too (one hold if none).
            est += probing_s + (tail if probing_s > 0 else 0.6)
        out.append(est)
    return out
