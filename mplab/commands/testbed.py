"""`mplab preflight` and `mplab doctor`: checks with fixes, before anything runs.

`mplab preflight` checks every host of a testbed (lab inventories: every machine over SSH;
emulated ones: the machine that hosts the namespaces); `mplab doctor` checks this machine
at set-up time. Mounted on the `mplab` app by ``mplab.cli``.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError, PreflightError
from harness.resources import paper_file

if TYPE_CHECKING:
    from rich.table import Table

    from harness.upkeep.preflight import Check

# The testbeds (SSH), the inventory and scenario models and the checks are imported by the commands that run them.
console = Console()


def checks_table(checks: list[Check], title: str) -> Table:
    """A pass/fail table: one row per check, with what was found and how to fix a failure."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for col in ("host", "check", "result", "found", "fix"):
        t.add_column(col, overflow="fold")
    for c in checks:
        result = "[green]PASS[/]" if c.ok else ("[red]FAIL[/]" if c.essential else "[yellow]WARN[/]")
        t.add_row(escape(c.host), escape(c.name), result, escape(c.detail), "" if c.ok else escape(c.fix))
    return t


def preflight(
    ctx: typer.Context,
    inventory: Annotated[Path | None, typer.Option(help="inventory file (default: the scenario's)")] = None,
    scenario: Annotated[Path | None, typer.Option(help="check the congestion controls this scenario uses")] = None,
    cc: Annotated[list[str] | None, typer.Option("--cc", help="congestion control to check (repeatable)")] = None,
    group: Annotated[str | None, typer.Option(help="only the hosts of this lab group (lab.groups)")] = None,
) -> None:
    """Check every host: reachability, kernel and MPTCP, congestion controls, interfaces and routes,
    iperf3, meters, clock offset. Exits 1 if an essential check fails (a sweep would refuse to start)."""
    from harness.campaign.campaign import resolve_ccs
    from harness.cc import resolve
    from harness.config.inventory import load_inventory
    from harness.config.scenario import load_scenario, scenario_inventory
    from harness.hosts.local import LocalHost
    from harness.testbeds.kinds import build_testbed, testbed_flavour
    from harness.upkeep.preflight import failed_essentials, kernel_checks

    sc = load_scenario(scenario) if scenario else None
    inv_path = inventory or (scenario_inventory(sc, scenario) if sc else None)
    if inv_path is None:
        raise ConfigError("give --inventory (e.g. inventory/lab.yaml) or --scenario")
    inv = load_inventory(inv_path)
    obj = ctx.find_root().obj
    testbed = build_testbed(inv, obj.get("access_kinds") if isinstance(obj, Mapping) else None)
    try:
        ccs = (list(resolve_ccs(sc, testbed).values()) if sc else
               [resolve(name, testbed_flavour(testbed)) for name in (cc or ["cubic"])])
        only = None
        if group is not None:
            groups = testbed.host_groups()
            if not groups and inv.lab is None:
                raise ConfigError("--group applies to testbeds with host groups (lab inventories' lab.groups)")
            if group not in groups:
                raise ConfigError(f"no group {group!r} (groups: {', '.join(groups) or 'none'})",
                                  source=str(inv_path), field="lab.groups")
            only = groups[group]
        checks = testbed.preflight(ccs) if only is None else testbed.preflight(ccs, only=only)
        # the LTE cell's versions on its hosts, by the rule `lte up` applies (lte registers it: see mplab.cli)
        lte_checks = obj.get("lte_preflight") if isinstance(obj, Mapping) else None
        if inv.lte is not None and lte_checks is not None and only is None:
            checks += lte_checks(inv)
        if testbed.runs_here and all(c.ok for c in checks if c.name == "kernel MPTCP"):
            checks += kernel_checks(LocalHost("root"))
    finally:
        testbed.disconnect()  # closes connections; nothing was started
    console.print(checks_table(checks, f"preflight: {inv.name} ({inv.kind})"))
    bad = failed_essentials(checks)
    if bad:
        hosts = ", ".join(dict.fromkeys(c.host for c in bad))
        raise PreflightError(f"{len(bad)} essential check(s) failed (on {hosts}): a sweep on {inv.name} would refuse "
                             "to start; each FAIL row above says how to fix it")
    warn = [c for c in checks if not c.ok]
    console.print(f"[green]ready[/]: {len(checks)} checks passed" if not warn else
                  f"[yellow]ready with {len(warn)} warning(s)[/]")


def doctor() -> None:
    """Check this machine: every program mplab calls (with versions), the kernel features it needs
    (MPTCP, BTF and struct_ops, HTB/TBF, nftables, namespaces), the Python packages. Exits 1 with the
    fix when something essential is missing."""
    from rich.markup import escape

    from harness.upkeep.doctor import run_doctor
    from harness.upkeep.preflight import failed_essentials, one_line

    checks = run_doctor()
    for c in checks:
        mark = "[green]ok  [/]" if c.ok else ("[red]FAIL[/]" if c.essential else "[yellow]warn[/]")
        # escape: a check's text is data ("mplab[train]" is no style tag)
        console.print(f"{mark} {escape(f'{c.name:36}')} {escape(c.detail)}", highlight=False, soft_wrap=True)
        if not c.ok and c.fix:
            console.print(f"     fix: {escape(c.fix)}", highlight=False, soft_wrap=True)
    bad = failed_essentials(checks)
    if bad:
        raise PreflightError(f"{len(bad)} essential check(s) failed: {one_line(bad)}")
    console.print(f"mplab doctor: all {sum(c.essential for c in checks)} essential checks passed")


def register(app: typer.Typer) -> None:
    """Mount the preflight and doctor commands on the top-level app."""
    app.command()(preflight)
    app.command()(doctor)
    app.command()(calibrate)


def calibrate(
    paper: Annotated[Path | None, typer.Option(
        "--paper", help="the paper's tables (default: the copy mplab ships)")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="the inventory to write")] = Path("inventory/paper-lab.yaml"),
    tolerance: Annotated[float, typer.Option(help="worst relative error a power model may leave in Table 3")] = 0.02,
    both_efficiency: Annotated[float, typer.Option(
        help="MPTCP payload over the sum of its two shaped paths (bench/fidelity.py measures it)")] = 0.89,
    counter_overhead: Annotated[float, typer.Option(
        help="interface-counter bytes (rx+tx, link) per payload byte (records: iface_bytes / bytes)")] = 1.07,
    check: Annotated[bool, typer.Option("--check", help="only compare OUT with what the calibration gives")] = False,
) -> None:
    """Fit an emulated testbed to the reference paper's baseline Tables 2-3 and write its inventory."""
    from rich.table import Table

    from harness.emulation.calibration import calibrate as run_calibration
    from harness.emulation.calibration import inventory_text, residual_check

    if not 0 < tolerance < 1:
        raise ConfigError(f"--tolerance {tolerance}: use a fraction between 0 and 1, e.g. 0.02")
    cal = run_calibration(paper or paper_file("sensors-2023-7699.yaml"), tolerance=tolerance,
                          both_efficiency=both_efficiency, counter_overhead=counter_overhead)
    text = inventory_text(cal)
    if check:
        same = out.exists() and out.read_text() == text
        console.print(f"{out}: {'up to date' if same else 'DIFFERS from the calibration: rerun mplab calibrate'}")
        if not same:
            raise ConfigError("inventory out of date", source=str(out))
        return
    t = Table(title=f"paper vs calibrated model ({cal.data.file_bytes / 1e6:.0f} MB, first N receivers)")
    for col in ("column", "N", "paper Mbit/s", "model", "paper J", "model "):
        t.add_column(col, justify="left" if col == "column" else "right")
    for r in cal.rows:
        t.add_row(r["column"], str(r["nodes"]), f"{r['paper_mbit_s']:.2f}", f"{r['model_mbit_s']:.2f}",
                  f"{r['paper_j']:.2f}", f"{r['model_j']:.2f}")
    console.print(t)
    kept = ", ".join(f"{k} = {v:.4g}" for k, v in cal.fit.terms.items() if v > 0)
    console.print(f"power terms kept: {kept} (max error {cal.fit.max_rel:.2%}); "
                  f"coexistence factor {cal.caps.coexistence_factor}; worst cell {residual_check(cal.rows):.1%}")
    from harness.files import atomic_write

    atomic_write(out, text.encode())
    console.print(f"wrote {out}")
