"""`mplab run`, `mplab status`, `mplab clean`: the campaign commands.

Mounted on the `mplab` app by ``mplab.cli``. Errors are raised as ``MplabError`` and
turned into exit codes by ``mplab.cli.main`` (usage errors: 2).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.emulation.speedup import DEFAULT_TABLE
from harness.errors import ConfigError, SamplesFailed, StoreError

if TYPE_CHECKING:
    from rich.progress import Progress
    from rich.table import Table

    from harness.campaign.campaign import RunHooks
    from harness.campaign.entry import DryRun
    from harness.campaign.runner import SampleOutcome
    from harness.campaign.store import Campaign

# The campaign's modules (pydantic models, testbeds, SSH) are imported by the command that runs: `mplab status`
# and `mplab --help` need none of them.
console = Console()
log = logging.getLogger("mplab")


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def flag_kinds(records: list[dict]) -> Counter:
    """Per kind of flag (``cc-fault``, ``meter-gap``: a flag's text before its colon), the records carrying one."""
    return Counter(kind for r in records for kind in {f.split(":", 1)[0] for f in r.get("flags") or []})


def summary_table(records: list[dict], title: str) -> Table:
    from rich.table import Table

    from harness.campaign.summary import summarize

    energy_kind = {r.get("energy_source") for r in records} or {"-"}
    kinds = flag_kinds(records)
    flagged = (f"; flagged records, by flag (left out of datasets): "
               f"{', '.join(f'{k} {n}' for k, n in kinds.most_common())}") if kinds else ""
    t = Table(title=title, caption=f"energy: {', '.join(sorted(str(e) for e in energy_kind))}; "
                                    f"means are per receiver over ok samples (energy: unflagged records){flagged}")
    cases = summarize(records, intervals=False)  # the table shows no intervals: no scipy
    # Case names differ at their ends (ref-is vs ref-is-tuned): never cut with an ellipsis; a terminal too
    # narrow for the whole name folds it onto a second line.
    t.add_column("case", overflow="fold")
    for col in ("ok", "failed", "flagged", "Mbit/s", "energy J", "power W"):
        t.add_column(col, justify="right")
    for c in cases:
        t.add_row(c.case_id, str(c.samples_ok), str(c.samples_failed), str(c.flagged_records),
                  _fmt(c.mean_throughput_mbit), _fmt(c.mean_energy_j), _fmt(c.mean_power_w, ".3f"))
    return t


def _hooks(progress: Progress, watcher: WatchChild | None = None) -> RunHooks:
    from harness.campaign.campaign import RunHooks
    from harness.campaign.progress import compute, read_events, sessions_from_events

    state: dict = {}

    def on_start(campaign: Campaign, plans) -> None:
        if watcher is not None:
            watcher.start(campaign.path)
        done = len(campaign.completed())
        state["task"] = progress.add_task(f"{campaign.id}", total=done + len(plans), completed=done)
        # Progress is counted from the records in memory (the ones on disk when the session began, then each
        # sample's as it is appended): the same computation as `mplab status` and `mplab watch`, without
        # rereading samples.jsonl after every sample.
        state["campaign"], state["records"] = campaign, campaign.records()
        console.print(f"campaign [bold]{campaign.id}[/]: {len(plans)} sample(s) to run, {done} already recorded "
                      f"-> {campaign.path}")

    def on_sample(o: SampleOutcome) -> None:
        style = "green" if o.status == "ok" else "red"
        state["records"].extend(o.records)
        c: Campaign = state["campaign"]
        sessions = sessions_from_events(read_events(c.path / "sessions.jsonl"), os.getpid())
        prog = compute(c.plan, state["records"], sessions, last_append_at=time.time())
        rates = ", ".join(f"{r['receiver']} {_fmt(r['throughput_mbit'], '.1f')}" for r in o.records)
        # One line per sample carries n/N, rate and ETA: a log that is not a terminal has no progress bar.
        progress.console.print(f"[{style}]{o.status:6}[/] {o.plan.sample_id:28} {o.wall_s:6.1f} s  "
                               f"Mbit/s: {rates}" + (f"  (attempts {o.attempts})" if o.attempts > 1 else "")
                               + f"  [{prog.line()}]", soft_wrap=True)
        progress.advance(state["task"])

    return RunHooks(on_start, on_sample)


class WatchChild:
    """`mplab run --watch`: `mplab watch` on the campaign in a process of its own while the run lasts.

    A separate process, so serving the page never takes the runner's CPU time or its GIL; it only
    reads the store. Stopped (SIGTERM, by its pid) when the run ends, however it ends.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: subprocess.Popen | None = None

    def start(self, path: Path) -> None:
        if self.proc is None:
            self.proc = subprocess.Popen([sys.executable, "-m", "mplab", "watch", str(path), "--port", str(self.port)])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def _watching(port: int | None) -> Iterator[WatchChild | None]:
    child = WatchChild(port) if port is not None else None
    try:
        yield child
    finally:
        if child is not None:
            child.stop()


def _progress() -> Progress:
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console)


def run(
    ctx: typer.Context,
    scenario: Annotated[Path | None, typer.Argument(help="scenario file (scenarios/*.yaml)")] = None,
    inventory: Annotated[Path | None, typer.Option(help="inventory file (default: the scenario's)")] = None,
    runs_dir: Annotated[Path, typer.Option(help="where campaigns are stored")] = Path("runs"),
    campaign_id: Annotated[str | None, typer.Option("--id", help="campaign id (default: <scenario>-<time>)")] = None,
    resume: Annotated[Path | None, typer.Option(help="resume this campaign directory")] = None,
    make_up: Annotated[bool, typer.Option(help="with --resume: first add to each case short of usable samples "
                                                "(failed, or flagged) as many samples as it lacks")] = False,
    dry_run: Annotated[bool, typer.Option(help="print the plan and an ETA, run nothing (with --resume: what "
                                                "resuming would run)")] = False,
    testbeds: Annotated[int, typer.Option(min=1, max=64, help="run on K parallel copies of the emulated testbed "
                                                              "(one campaign; 1-64)")] = 1,
    force: Annotated[bool, typer.Option(help="run more --testbeds than the machine sustains without losing "
                                              "fidelity")] = False,
    cluster: Annotated[str | None, typer.Option(help="run shards on the Ray cluster at this address "
                                                        "(the `cluster` extra; docs/cluster.md)")] = None,
    shard_size: Annotated[int | None, typer.Option(min=1, help="--cluster: samples per shard (default: plan/50, "
                                                           "at most 20)")] = None,
    speedup: Annotated[str | None, typer.Option(help="emulated testbed only: run S times faster than real "
                                                        "time (rates x S, delays / S; records in real time; "
                                                        "overrides the scenario's `speedup`), or `auto`: per "
                                                        "interface mode, the highest S this machine's "
                                                        "bench/speedup.py table validated for the scenario's "
                                                        "congestion controls")] = None,
    speedup_table: Annotated[Path, typer.Option(help="--speedup auto: the validation table to read")] = DEFAULT_TABLE,
    watch: Annotated[bool, typer.Option(help="serve the live page (`mplab watch`) on 127.0.0.1 while it runs")] = False,
    watch_port: Annotated[int, typer.Option(min=1, max=65535, help="--watch: the page's port (1-65535)")] = 8765,
) -> None:
    """Run a scenario's sweep (or --resume a campaign) and print a per-case summary."""
    from harness.campaign.entry import RunOptions, run_campaign

    # mplab.cli puts the controller's factory and the real LTE access drivers into the context
    # (the harness never imports a controller or lte); a dry run builds no testbed, so it loads no drivers.
    obj = ctx.find_root().obj if isinstance(ctx.find_root().obj, Mapping) else {}
    options = RunOptions(scenario=scenario, inventory=inventory, runs_dir=runs_dir, campaign_id=campaign_id,
                         resume=resume, make_up=make_up, dry_run=dry_run, testbeds=testbeds, force=force,
                         cluster=cluster, shard_size=shard_size, speedup=speedup, speedup_table=speedup_table,
                         access_kinds=None if dry_run else obj.get("access_kinds"),
                         control_factory=obj.get("control_factory"))
    if dry_run:
        print_dry_run(run_campaign(options, note=console.print).dry_run)
        return
    with _watching(watch_port if watch else None) as watcher, _progress() as progress:
        outcome = run_campaign(options, _hooks(progress, watcher), note=console.print)
    campaign = outcome.campaign
    console.print(summary_table(outcome.records, f"campaign {campaign.id}"))
    console.print(f"records: {campaign.samples_path}\nraw output: {campaign.path / 'raw'}\n"
                  f"manifest: {campaign.path / 'manifest.json'}")
    print_short_cases(campaign)
    if outcome.failed_samples:
        raise SamplesFailed(f"{len(outcome.failed_samples)} sample(s) of campaign {campaign.id} failed, recorded "
                            f"with their reasons (e.g. {outcome.failed_samples[0]}); see `mplab status {campaign.path}`")


def print_short_cases(c: Campaign) -> None:
    """With nothing left to run: the cases short of usable samples, and the command that makes them up."""
    from harness.campaign.campaign import campaign_inputs
    from harness.campaign.makeup import plan_make_up

    try:
        short = plan_make_up(c, campaign_inputs(c)[0]).short
    except StoreError:   # a manifest without its scenario, a malformed record: `mplab dataset build` names it
        return
    if short:
        console.print(f"{len(short)} case(s) short of usable samples ({sum(short.values())} in all; failed or "
                      f"flagged): mplab run --resume {c.path} --make-up", soft_wrap=True, highlight=False)


def print_dry_run(dry: DryRun) -> None:
    """The plan's first samples, the speed-up, and the estimated wall time."""
    sc, inv, plans = dry.scenario, dry.inventory, dry.plans
    if dry.campaign is not None:
        if dry.make_up is not None:
            console.print(dry.make_up.describe(dry_run=True), soft_wrap=True)
        console.print(f"campaign {dry.campaign.id}: resuming would run {len(plans)} of its {dry.planned} planned "
                      f"samples on {inv.name} ({inv.kind})")
    else:
        console.print(f"scenario {sc.name}: {sc.n_cases} case(s) x {sc.samples_per_case} sample(s) = "
                      f"{len(plans)} samples on {inv.name} ({inv.kind}); shuffled={sc.shuffle} seed={sc.seed}")
    for p in plans[:20]:
        console.print(f"  {p.sample_id}  receivers={','.join(p.receivers)}")
    if len(plans) > 20:
        console.print(f"  ... and {len(plans) - 20} more")
    if sc.speedup_by_mode:
        per = ", ".join(f"{m} {sc.speedup_for(m):g}" for m in sc.modes)
        console.print(f"speedup by mode ({per}): the emulated testbed runs that many times faster than real time for "
                      "that mode's samples, one phase per speed-up; records are written in real time")
    elif sc.speedup != 1:
        console.print(f"speedup {sc.speedup:g}: the emulated testbed runs {sc.speedup:g} x faster than "
                      "real time; records are written in real time")
    eta, k = dry.eta_s, dry.testbeds
    console.print(f"estimated wall time: {eta / 60:.1f} min" + (
        f" on one testbed, {(dry.eta_testbeds_s or eta) / 60:.1f} min on {k} (the samples dealt out in plan order; "
        f"{eta / 60 / k:.1f} min were they evenly shared), set-up not included" if k > 1 else ""))


def print_damaged(c: Campaign, st: dict) -> None:
    """One line per damaged record, naming it (file:line) and why."""
    for d in st.get("damaged", []):
        console.print(f"[red]damaged[/] {c.samples_path}:{d['line']}: {d['reason']} (not counted; "
                      "`mplab run --resume` runs its sample again)", soft_wrap=True, highlight=False)
    if st.get("torn_tail"):
        console.print(f"[red]torn[/] {st['torn_tail']['reason']}", soft_wrap=True, highlight=False)


def status(campaign: Annotated[Path, typer.Argument(help="campaign directory (runs/<id>)")],
           as_json: Annotated[bool, typer.Option("--json", help="print the status as JSON (for scripts)")] = False,
           ) -> None:
    """Progress of a sweep: samples planned, recorded, ok and failed, the last session, the per-case summary."""
    from harness.campaign.progress import format_duration
    from harness.campaign.status import campaign_status, describe_session
    from harness.campaign.store import Campaign

    c = Campaign.open(campaign)
    st = campaign_status(c)
    if as_json:
        print(json.dumps(st, indent=1))
        return
    console.print(f"campaign {c.id}: {st['recorded']}/{st['planned']} samples recorded ({st['ok']} ok, "
                  f"{st['failed']} failed, {st['flagged']} flagged); testbed {st['testbed']}")
    if st["rate_samples_per_h"] is not None:
        rate = f"{st['rate_samples_per_h']:.1f} samples/h in the last session"
        console.print(rate + (f", ETA {format_duration(st['eta_s'])} (about "
                              f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(st['eta_at']))})"
                              if st["eta_s"] is not None else ""))
    if st["running_pid"]:
        console.print(f"running now (pid {st['running_pid']})")
    if st["last_session"]:
        console.print(f"last session ({st['sessions']} in all): {describe_session(st['last_session'])}",
                      soft_wrap=True)
    print_damaged(c, st)
    if st["pending"] and not st["running_pid"]:
        console.print(f"resume with: mplab run --resume {c.path}")
    records = c.records()
    if records:
        console.print(summary_table(records, f"campaign {c.id}"))
    if not st["pending"] and not st["running_pid"]:
        print_short_cases(c)


def clean(prefix: Annotated[str, typer.Option(help="namespace prefix to remove")] = "mplab-",
          machine_wide: Annotated[bool, typer.Option(
              "--machine-wide", help="also unregister every mplab_* BPF congestion control no live testbed "
                                     "needs, even one nobody recorded (another user's)")] = False) -> None:
    """Remove every namespace, process and state an emulated testbed left behind (idempotent).

    A testbed another live process holds (a running campaign) is left alone and named. BPF
    congestion controls go only if the prefix's testbeds registered them; --machine-wide also
    removes registrations nobody recorded.
    """
    from harness.upkeep.clean import CLEANERS, MACHINE_WIDE, clean_prefix

    if not prefix.startswith("mplab-"):
        raise ConfigError(f"prefix {prefix!r} must start with 'mplab-' (mplab only removes what it made)")
    if not prefix.endswith("-"):
        # A testbed's prefix ends in '-' (the inventory refuses any other): `mplab-flt` would also match
        # mplab-flt2-'s namespaces, which are another testbed's.
        raise ConfigError(f"prefix {prefix!r} must end in '-' as a testbed's namespace_prefix does (e.g. "
                          f"{prefix + '-'!r})", field="--prefix")
    done = clean_prefix(prefix, cleaners=MACHINE_WIDE if machine_wide else CLEANERS)
    removed = [d for d in done if not d.startswith("skipped ")]
    console.print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"))
    for d in done:
        if d.startswith("skipped "):
            console.print(d)


def register(app: typer.Typer) -> None:
    """Mount the harness commands on the top-level app."""
    app.command()(run)
    app.command()(status)
    app.command()(clean)
