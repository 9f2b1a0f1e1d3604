"""One way into a campaign: parsed run options in, the campaign (or a dry run's plan) out.

``mplab run`` parses its options into ``RunOptions`` and calls ``run_campaign``; nothing else of
the campaign's making is the command's. The data go one way:

    scenario file -> Scenario (model resolved, --speedup applied)
                  -> Inventory (the file given, else the scenario's)
                  -> plan (dry run: the plan and an estimate, nothing built)
                  -> campaign (here, on K parallel copies, or on a Ray cluster)

or, with ``resume``, the campaign directory -> the scenario and inventory in its manifest -> the
samples without records (with ``make_up``, first the samples its short cases lack added to its plan).
Every refusal (a bad option pair, a bad file, an unvalidated speed-up) comes before anything is built,
as ``ConfigError`` (exit 2). Progress is the caller's (``RunHooks``); so is printing.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.campaign.campaign import (RunHooks, build_control, campaign_inputs, pending_plans, queue_makespan_s,
                                      resume_campaign, sample_estimates_s, speedup_phases, start_campaign)
from harness.campaign.cluster import resume_cluster_campaign, start_cluster_campaign
from harness.campaign.control import ControlFactory
from harness.campaign.makeup import MakeUp, failed_in_short_cases, make_up, plan_make_up
from harness.campaign.plan import SamplePlan, plan_campaign, plan_samples
from harness.campaign.store import Campaign, check_campaign_id
from harness.config.inventory import Inventory, load_inventory
from harness.config.load import parse_model
from harness.config.scenario import Scenario, load_scenario, scenario_inventory, with_model_resolved
from harness.emulation.access import AccessKinds
from harness.emulation.speedup import DEFAULT_TABLE, check_speedup, validated_speedup
from harness.errors import ConfigError

log = logging.getLogger("mplab.campaign")


@dataclass(frozen=True)
class RunOptions:
    """What `mplab run` was asked to do, parsed (the options keep their command-line names)."""

    scenario: Path | None = None
    inventory: Path | None = None
    runs_dir: Path = Path("runs")
    campaign_id: str | None = None
    resume: Path | None = None
    #: With ``resume``: first add to the plan the samples the campaign's short cases lack (``harness.campaign.makeup``).
    make_up: bool = False
    dry_run: bool = False
    testbeds: int = 1
    force: bool = False
    cluster: str | None = None
    shard_size: int | None = None
    #: A number, or ``auto`` (the highest S ``speedup_table`` validated for the scenario's CCs).
    speedup: str | None = None
    speedup_table: Path = DEFAULT_TABLE
    #: Real LTE access drivers and the controller's factory: the command line's to give (harness
    #: never imports lte or the controller).
    access_kinds: AccessKinds | None = None
    control_factory: ControlFactory | None = None


@dataclass(frozen=True)
class DryRun:
    """A dry run's answer: the plan and its estimated wall time; nothing was built."""

    scenario: Scenario
    inventory: Inventory
    plans: list[SamplePlan]
    #: The estimated wall time on one testbed, and on the ``testbeds`` copies asked for (the samples dealt out
    #: from one queue as the runner deals them); set-up not included.
    eta_s: float
    testbeds: int = 1
    eta_testbeds_s: float | None = None
    #: A resumed campaign's dry run: the campaign, its planned samples in all, and what a make-up would add.
    campaign: Campaign | None = None
    planned: int | None = None
    make_up: MakeUp | None = None


@dataclass(frozen=True)
class Outcome:
    """What ``run_campaign`` did: the campaign it ran (and its failed samples), or a dry run."""

    campaign: Campaign | None = None
    dry_run: DryRun | None = None
    #: The campaign's records (every session's), and the ids of its samples that failed.
    records: list[dict] = field(default_factory=list)
    failed_samples: list[str] = field(default_factory=list)


def run_campaign(options: RunOptions, hooks: RunHooks | None = None,
                 note: Callable[[str], None] = log.info) -> Outcome:
    """Start, resume or dry-run the campaign ``options`` describe; ``note`` hears what was decided on
    the way (``--speedup auto``'s choice)."""
    check_options(options)
    if options.resume is not None:
        if options.dry_run:
            return Outcome(dry_run=_resume_dry_run(options))
        return _finished(_resume(options, hooks, note), made_up=options.make_up)
    scenario, inventory = read_inputs(options, note)
    source = str(options.scenario)
    if options.dry_run:
        return Outcome(dry_run=_dry_run(scenario, inventory, plan_campaign(scenario, inventory, source), source,
                                        options))
    if options.cluster:
        campaign = start_cluster_campaign(scenario, inventory, options.runs_dir, options.cluster,
                                          campaign_id=options.campaign_id, scenario_source=source, hooks=hooks,
                                          shard_size=options.shard_size, control_factory=options.control_factory)
    else:
        campaign = start_campaign(scenario, inventory, options.runs_dir, campaign_id=options.campaign_id,
                                  scenario_source=source, hooks=hooks, testbeds=options.testbeds,
                                  force=options.force, access_kinds=options.access_kinds,
                                  control_factory=options.control_factory)
    return _finished(campaign)


def _dry_run(scenario: Scenario, inventory: Inventory, plans: list[SamplePlan], source: str, options: RunOptions,
             **resumed) -> DryRun:
    """``plans`` and their estimated wall time on one testbed and on ``options.testbeds``; nothing is built."""
    control = build_control(scenario, source, options.control_factory)  # a model not covering it: refused
    per_sample = dict(zip((p.sample_id for p in plans), sample_estimates_s(plans, scenario, inventory, control)))
    # One phase per speed-up, one after the other: each phase's samples dealt out to the K copies.
    makespan = sum(queue_makespan_s([per_sample[p.sample_id] for p in phase], options.testbeds)
                   for _, phase in speedup_phases(scenario, plans))
    return DryRun(scenario, inventory, plans, sum(per_sample.values()), options.testbeds, makespan, **resumed)


def _resume_dry_run(options: RunOptions) -> DryRun:
    """What resuming would run: the pending samples, and with ``make_up`` those it would add (nothing written)."""
    assert options.resume is not None
    campaign = Campaign.open(options.resume)
    campaign.torn_tail()   # samples.jsonl or makeup.jsonl unreadable: StoreError (4), as a resume would say
    campaign.make_ups()
    scenario, inventory = campaign_inputs(campaign)
    source = str(campaign.path / "manifest.json")
    plans = pending_plans(campaign, scenario, inventory)
    added = plan_make_up(campaign, scenario) if options.make_up else None
    if added is not None:
        plans += plan_samples(scenario, inventory, added.samples, source)
    return _dry_run(scenario, inventory, plans, source, options, campaign=campaign,
                    planned=len(campaign.plan) + len(added.samples if added else []), make_up=added)


def check_options(options: RunOptions) -> None:
    """Refuse option pairs that cannot go together, before any file is read."""
    if options.make_up and options.resume is None:
        raise ConfigError("--make-up adds samples to a campaign's short cases: give it with --resume CAMPAIGN")
    if options.cluster and options.testbeds != 1:
        raise ConfigError("--cluster runs one testbed per node's `testbed` resource; give --testbeds or --cluster")
    if options.resume is not None:
        if options.scenario is not None:
            raise ConfigError("give either a scenario or --resume, not both")
        if options.speedup is not None:
            raise ConfigError("--resume runs at the speedup the campaign started with (its manifest); "
                              "drop --speedup")
    elif options.scenario is None:
        raise ConfigError("missing scenario (e.g. `mplab run scenarios/quick.yaml`) or --resume CAMPAIGN")


def read_inputs(options: RunOptions, note: Callable[[str], None] = log.info) -> tuple[Scenario, Inventory]:
    """The scenario (its model resolved, ``--speedup`` in place of its own) and the inventory it runs on,
    each read once; the speed-up checked against the inventory."""
    assert options.scenario is not None  # check_options
    if options.campaign_id is not None:
        check_campaign_id(options.campaign_id)  # before any file is read or anything is built
    scenario = with_model_resolved(load_scenario(options.scenario), options.scenario)
    if options.speedup is not None:
        scenario = with_speedup(scenario, *speedup_value(options.speedup, scenario, options.speedup_table, note,
                                                         options.testbeds))
    inventory = load_inventory(options.inventory or scenario_inventory(scenario, options.scenario))
    for s in scenario.speedups:
        check_speedup(inventory, s, policies=bool(scenario.policies))
    return scenario, inventory


def speedup_value(text: str, scenario: Scenario, table: Path, note: Callable[[str], None] = log.info,
                  testbeds: int = 1) -> tuple[float, dict[str, float] | None]:
    """``--speedup``: a number, or ``auto``: per interface mode of the scenario, the S its cells were validated to
    for every one of the scenario's congestion controls and that ``testbeds`` copies sustain on this machine's
    cores (``harness.emulation.speedup.validated_speedup``). Returns the scenario's ``speedup`` (the lowest)
    and, where the modes differ, ``speedup_by_mode``."""
    if text != "auto":
        try:
            return float(text), None
        except ValueError:
            raise ConfigError(f"--speedup {text!r}: give a number (1..64) or auto") from None
    if scenario.policies or not scenario.modes:  # policies run at 1 (check_speedup): one S, all cells judged
        s, why = validated_speedup(scenario.congestion_controls, table, testbeds)
        note(f"--speedup auto: {s:g} ({why})")
        return s, None
    picked = {m: validated_speedup(scenario.congestion_controls, table, testbeds, mode=m) for m in scenario.modes}
    for m, (s, why) in picked.items():
        note(f"--speedup auto: {m} {s:g} ({why})")
    by_mode = {m: s for m, (s, _) in picked.items()}
    low = min(by_mode.values())
    return low, (by_mode if len(set(by_mode.values())) > 1 else None)


def with_speedup(scenario: Scenario, speedup: float, by_mode: dict[str, float] | None = None) -> Scenario:
    """The scenario with ``--speedup`` in place of its own (validated as the scenario fields are): one S, or one per
    interface mode (``speedup_by_mode``, what ``auto`` gives where modes were validated to different S)."""
    return parse_model(Scenario, {**scenario.model_dump(mode="json"), "speedup": speedup, "speedup_by_mode": by_mode},
                       "--speedup")


def _resume(options: RunOptions, hooks: RunHooks | None, note: Callable[[str], None] = log.info) -> Campaign:
    assert options.resume is not None
    if options.make_up:
        # Refused before anything is added: unreadable records or make-ups (4), a store that cannot be written.
        campaign = Campaign.open(options.resume)
        campaign.torn_tail()
        campaign.check_writable()
        note(make_up(campaign, campaign_inputs(campaign)[0]).describe())
    if options.cluster:
        return resume_cluster_campaign(options.resume, options.cluster, hooks=hooks, shard_size=options.shard_size,
                                       control_factory=options.control_factory)
    return resume_campaign(options.resume, hooks, testbeds=options.testbeds, force=options.force,
                           access_kinds=options.access_kinds, control_factory=options.control_factory)


def _finished(campaign: Campaign, made_up: bool = False) -> Outcome:
    """The campaign and the samples of it that failed (recorded with their reasons); after a make-up, only those
    of the cases still short (the others' failures are made up for)."""
    records = campaign.records()
    if made_up:
        failed = failed_in_short_cases(campaign, campaign_inputs(campaign)[0])
    else:
        failed = sorted({r["sample_id"] for r in records if r["sample_status"] != "ok"})
    return Outcome(campaign=campaign, records=records, failed_samples=failed)
