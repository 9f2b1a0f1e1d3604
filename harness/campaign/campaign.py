"""Campaigns: preflight, manifest, set-up, the sweep, teardown; and resuming.

``start_campaign`` plans a scenario on an inventory, refuses to start if an essential
preflight check fails (before anything exists), writes the manifest, and runs.
``resume_campaign`` reads the scenario and inventory *copied into the manifest*, so a
resumed campaign runs exactly what it was started with, and runs only the samples
that have no records yet.
"""
from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import harness
from harness.campaign import metadata
from harness.cc import CongestionControl, resolve
from harness.config.load import digest_model, parse_model
from harness.errors import Interrupted, MeterError, PreflightError, StoreError
from harness.config.inventory import RADIOS, Inventory
from harness.meters.recorder import Recorder, TraceWriter
from harness.campaign.plan import SamplePlan, plan_campaign
from harness.campaign.runner import Runner, SampleOutcome, signal_reason, signals_deferred, stop_on_signals
from harness.config.scenario import MODE_RADIOS, Scenario
from harness.campaign.store import Campaign, check_campaign_id, check_writable
from harness.testbeds.base import Check, Testbed, failed_essentials
from harness.testbeds.access import AccessKinds
from harness.testbeds.kinds import build_testbed, testbed_flavour

log = logging.getLogger("mplab.campaign")

def resolve_ccs(scenario: Scenario, testbed: Testbed) -> dict[str, CongestionControl]:
    """Each named algorithm's implementation for the testbed's kernel flavour (mptcp.org or upstream)."""
    flavour = testbed_flavour(testbed)
    return {name: resolve(name, flavour) for name in scenario.congestion_controls}


def preflight_or_raise(testbed: Testbed, ccs: dict[str, CongestionControl]) -> list[Check]:
    """Run the testbed's preflight; raise ``PreflightError`` listing every essential failure with its fix."""
    checks = testbed.preflight(list(ccs.values()))
    bad = failed_essentials(checks)
    if bad:
        lines = [f"  - [{c.host}] {c.name}: {c.detail}" + (f"  (fix: {c.fix})" if c.fix else "") for c in bad]
        raise PreflightError("preflight failed, nothing was started:\n" + "\n".join(lines))
    return checks


def describe_testbed(testbed: Testbed) -> dict:
    """The testbed section of the manifest: kind, meters, hosts, and the power profile if emulated."""
    probe = getattr(testbed, "root", testbed.sender)
    inv = testbed.inventory
    out = {
        "kind": testbed.kind,
        "inventory": inv.name,
        "meter_kinds": sorted({n.meter_kind for n in testbed.nodes.values()}),
        "host": metadata.safely("host", lambda: metadata.host_info(probe)),
        "tools": metadata.safely("tools", lambda: metadata.tool_versions(probe)),
        "iperf3": None,
    }
    if testbed.sender_iperf3:
        out["iperf3"] = {"version": testbed.sender_iperf3.version, "mptcp_mode": testbed.sender_iperf3.mptcp_mode}
    if inv.emulation:
        out["emulation"] = inv.emulation.model_dump(mode="json")
        out["energy_source"] = "emulated: power model driven by real interface byte counters, read through the UM25C protocol"
    else:
        out["energy_source"] = "measured"
    access = getattr(testbed, "lte_access", None)
    if access:
        out["lte_access"] = {name: a.describe() for name, a in access.items()}
    offsets = getattr(testbed, "clock_offsets_s", None)
    if offsets is not None:
        out["clock_offsets_s"] = dict(offsets)  # measured at preflight, per SSH host
    return out


@dataclass
class RunHooks:
    """Callbacks the command line uses for progress."""

    on_start: Callable[[Campaign, list[SamplePlan]], None] = lambda c, p: None
    on_sample: Callable[[SampleOutcome], None] = lambda o: None


def start_campaign(scenario: Scenario, inventory: Inventory, runs_dir: Path, *, campaign_id: str | None = None,
                   scenario_source: str = "scenario", hooks: RunHooks | None = None,
                   access_kinds: AccessKinds | None = None) -> Campaign:
    """Plan, preflight, create and run a new campaign.

    Refused before anything is built when the id is bad, the runs directory cannot be
    written, or another live testbed holds the namespace prefix. From here on SIGTERM and
    SIGHUP stop the work cleanly (teardown, a session line), as Ctrl-C does.
    """
    cid = check_campaign_id(campaign_id or f"{scenario.name}-{time.strftime('%Y%m%dT%H%M%S')}")
    plans = plan_campaign(scenario, inventory, scenario_source)
    check_writable(runs_dir)
    with stop_on_signals():
        testbed = build_testbed(inventory, access_kinds)
        testbed.claim(f"campaign {cid}")
        try:
            ccs = resolve_ccs(scenario, testbed)
            checks = preflight_or_raise(testbed, ccs)
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
            }
            campaign = Campaign.create(runs_dir, cid, manifest)
            campaign.check_writable()
            _execute(campaign, scenario, inventory, testbed, ccs, plans, hooks or RunHooks())
        finally:
            testbed.release_claim()
    return campaign


def resume_campaign(path: Path, hooks: RunHooks | None = None, access_kinds: AccessKinds | None = None) -> Campaign:
    """Continue a campaign where it stopped: repair the directory, run the samples without (all their) records."""
    campaign = Campaign.open(path)
    campaign.check_writable()
    src = str(path / "manifest.json")
    scenario = parse_model(Scenario, campaign.manifest["scenario"], f"{src} (scenario)")
    inventory = parse_model(Inventory, campaign.manifest["inventory"], f"{src} (inventory)")
    with stop_on_signals():
        with campaign.lock():  # another process resuming it is refused before anything is built
            pass
        testbed = build_testbed(inventory, access_kinds)
        testbed.claim(f"campaign {campaign.id}")
        try:
            ccs = resolve_ccs(scenario, testbed)
            preflight_or_raise(testbed, ccs)
            with campaign.lock():
                for msg in campaign.repair():
                    log.warning("%s: %s", campaign.id, msg)
            done = campaign.completed()
            by_id = {p.sample_id: p for p in plan_campaign(scenario, inventory, src)}
            plans = [by_id[sid] for sid in campaign.manifest["plan"] if sid not in done]
            _execute(campaign, scenario, inventory, testbed, ccs, plans, hooks or RunHooks(), resumed=True)
        finally:
            testbed.release_claim()
    return campaign


def _execute(campaign: Campaign, scenario: Scenario, inventory: Inventory, testbed: Testbed,
             ccs: dict[str, CongestionControl], plans: list[SamplePlan], hooks: RunHooks,
             resumed: bool = False) -> None:
    meta = {"kernel": campaign.manifest.get("kernel"),
            "power_profile": inventory.emulation.power_profile.name if inventory.emulation else None}
    with campaign.lock():
        campaign.log_session({"event": "resume" if resumed else "start", "pending": len(plans), "pid": os.getpid()})
        hooks.on_start(campaign, plans)
        end: dict = {"event": "interrupted"}
        try:
            if plans:
                testbed.setup(list(ccs.values()))
                meters = testbed.meters()
                opened = []
                try:
                    for name, m in meters.items():
                        m.open()
                        opened.append(m)
                except MeterError as exc:
                    for m in opened:
                        m.close()
                    raise PreflightError(f"meter check failed: {exc}") from None
                # Every reading and meter fault of the session goes to disk as it happens (the runner keeps
                # only each sample's window in raw/<sample>/meter-<rx>.csv and forgets older readings).
                (campaign.path / "meters").mkdir(exist_ok=True)
                trace = TraceWriter(campaign.path / "meters" / f"trace-{time.strftime('%Y%m%dT%H%M%S')}.csv",
                                    {name: node.meter_kind for name, node in testbed.nodes.items()})
                try:
                    with Recorder(meters, sink=trace) as recorder:
                        # The first transfer must start inside every meter's trace: a slow meter (rfc2217
                        # over ser2net) would otherwise flag the first sample's records with a meter gap.
                        if recorder.wait_first(10.0) is None:
                            log.warning("not every meter gave a reading within 10 s; the first samples may be "
                                        "flagged meter-gap")
                        outcomes = Runner(testbed, campaign, scenario, ccs, recorder, meta).run(plans, hooks.on_sample)
                finally:
                    trace.close()
                if recorder.sink_error:
                    raise StoreError(f"{trace.path}: {recorder.sink_error} (records are complete; the continuous "
                                     "trace is not)")
                end = {"event": "finished", "samples_run": len(outcomes),
                       "samples_failed": sum(1 for o in outcomes if o.status != "ok")}
            else:
                end = {"event": "finished", "samples_run": 0, "samples_failed": 0}
        except (KeyboardInterrupt, Interrupted) as exc:
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            reason = signal_reason(signum)
            end = {"event": "interrupted", "reason": reason, "signal": signal.Signals(signum).name}
            done = len(campaign.completed())
            raise Interrupted(f"{reason}: {done}/{len(campaign.manifest['plan'])} samples are recorded and kept; "
                              f"resume with `mplab run --resume {campaign.path}`", signum) from None
        except BaseException as exc:
            end = {"event": "failed", "reason": f"{type(exc).__name__}: {exc}"[:500]}
            raise
        finally:
            # A second Ctrl-C or SIGTERM must not cut the teardown short (namespaces, struct_ops).
            with signals_deferred():
                try:
                    testbed.teardown()
                finally:
                    campaign.log_session(end)


def dry_run_estimate_s(plans: list[SamplePlan], scenario: Scenario, inventory: Inventory) -> float:
    """A rough wall-time estimate: each sample lasts as long as its slowest receiver.

    On an emulated testbed the sharing models predict it (``harness.testbeds.sharing``); on a lab,
    10 Mbit/s per path is assumed.
    """
    from harness.testbeds.sharing import AccessNetwork, simulate_sample

    total = 0.0
    emu = inventory.emulation
    for p in plans:
        tail = 0.0
        if emu is not None:
            nets = {r: AccessNetwork(emu.wifi_sharing if r == "wifi" else emu.lte_sharing, spec.capacity_mbit,
                                     spec.capacity_by_active)
                    for r, spec in (("wifi", emu.wifi_ap), ("lte", emu.lte_cell))}
            links = {r: {n: inventory.receiver(n).interfaces[r].channel.rate_mbit for n in p.receivers}
                     for r in RADIOS}
            res = simulate_sample(scenario.file_bytes * 8 / 1e6, list(p.receivers), p.mode, nets["wifi"], nets["lte"],
                                  links["wifi"], links["lte"], emu.coexistence if p.mode == "both" else 1.0)
            slowest = max(r.duration_s for r in res.values())
            # The radios' tails are waited out between samples (harness.meters.idle), plus the idle hold.
            tail = max(getattr(emu.power_profile, r).tail_s for r in MODE_RADIOS[p.mode]) + 0.6
        else:
            rate = 20.0 if p.mode == "both" else 10.0
            slowest = scenario.file_bytes * 8 / (rate * 1e6)
        total += slowest + 0.5 + scenario.settle_s + tail
    return total
