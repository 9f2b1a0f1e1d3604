"""`mplab lab ...`: bring the lab's boards to what preflight checks, and its SSH keys.

`mplab lab keys` makes mplab's key, pins every machine's host key and logs in with it;
`mplab lab prepare` makes the sender and every receiver ready (``harness.deploy.prepare``),
``--dry-run`` shows what it would change. Both print one table, a row per step, and exit 1 when
a step failed or was refused (each such row says how to fix it). Mounted by ``mplab.cli``.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError, PreflightError

if TYPE_CHECKING:
    from rich.table import Table

    from harness.deploy.prepare import Step

console = Console()
app = typer.Typer(name="lab", no_args_is_help=True,
                  help="The lab's machines: SSH keys (`lab keys`), then boards made ready for preflight (`lab prepare`).")

InventoryArg = Annotated[Path, typer.Argument(help="lab inventory (inventory/lab.yaml)")]

_RESULT = {"ok": "[green]ok[/]", "change": "[yellow]WOULD CHANGE[/]", "changed": "[cyan]changed[/]",
           "refused": "[red]REFUSED[/]", "failed": "[red]FAIL[/]"}


def steps_table(steps: list[Step], title: str) -> Table:
    """One row per step: what was found, the commands run (or that would run), the fix of a refusal."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title)
    for col in ("host", "step", "result", "found", "commands / fix"):
        t.add_column(col, overflow="fold")
    for s in steps:
        how = s.fix if s.state in ("refused", "failed") else ("$ " + s.commands() if s.argvs else "")
        t.add_row(escape(s.host), escape(s.name), _RESULT.get(s.state, s.state), escape(s.detail), escape(how))
    return t


def _lab_inventory(path: Path):
    from harness.config.inventory import load_inventory

    inv = load_inventory(path)
    if inv.emulation is not None:
        raise ConfigError("this is an emulated inventory: `mplab lab` prepares real machines over SSH (a lab "
                          "inventory, e.g. inventory/lab.yaml)", source=str(path))
    return inv


def _verdict(steps: list[Step], what: str) -> None:
    bad = [s for s in steps if s.state in ("refused", "failed")]
    if bad:
        hosts = ", ".join(dict.fromkeys(s.host for s in bad))
        raise PreflightError(f"{len(bad)} step(s) {what} (on {hosts}); each row above says how to fix it")


@app.command()
def prepare(inventory: InventoryArg,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="only say what would change")] = False,
            host: Annotated[list[str] | None, typer.Option("--host", help="only this machine (repeatable)")] = None,
            ) -> None:
    """Make the sender and every receiver ready the way preflight checks them: packages (iperf3, mptcpize,
    ser2net, rfcomm), MPTCP enabled with its limits and the LTE subflow endpoint, each radio up with its policy
    route and rule, the meter's RFCOMM device bound. Idempotent; never changes what mplab did not write."""
    from harness.deploy.machines import ssh_host
    from harness.deploy.prepare import prepare_hosts

    inv = _lab_inventory(inventory)
    machines = [(inv.sender.name, inv.sender.ssh), *((r.name, r.ssh) for r in inv.receivers)]
    unknown = sorted(set(host or []) - {n for n, _ in machines})
    if unknown:
        raise ConfigError(f"--host {', '.join(unknown)}: not the sender or a receiver of {inv.name} "
                          f"({', '.join(n for n, _ in machines)})")
    missing = [n for n, t in machines if t is None and (not host or n in host)]
    if missing:
        raise ConfigError(f"{', '.join(missing)}: no ssh section, so mplab cannot reach it", source=str(inventory))
    hosts = {n: ssh_host(inv, n, t) for n, t in machines if not host or n in host}
    try:
        steps = prepare_hosts(inv, hosts, apply=not dry_run)
    finally:
        for h in hosts.values():
            h.close()
    console.print(steps_table(steps, f"lab prepare{' --dry-run' if dry_run else ''}: {inv.name}"))
    _verdict(steps, "cannot be done by mplab")
    n = sum(s.state in ("change", "changed") for s in steps)
    if dry_run:
        console.print(f"{n} change(s) to make: run `mplab lab prepare {inventory}`" if n else
                      "nothing to change: every board is ready; next: `mplab preflight --inventory "
                      f"{inventory}`")
    else:
        console.print(f"{n} change(s) made; " if n else "nothing to change; ", end="")
        console.print(f"next: `mplab preflight --inventory {inventory}`")


@app.command()
def keys(inventory: InventoryArg,
         copy: Annotated[bool, typer.Option("--copy", help="install the key where it is refused (ssh-copy-id "
                                                           "asks for each such machine's password once)")] = False,
         ) -> None:
    """Make mplab's SSH key if missing, pin each machine's host key in the inventory's known_hosts (compare the
    fingerprints with the machines' consoles), and log in with the key."""
    from harness.deploy.keys import setup_keys

    inv = _lab_inventory(inventory)
    steps = setup_keys(inv, copy=copy)
    console.print(steps_table(steps, f"lab keys: {inv.name}"))
    _verdict(steps, "failed")
    console.print(f"every machine takes the key; next: `mplab lab prepare {inventory} --dry-run`")


def register(root: typer.Typer) -> None:
    """Mount `mplab lab ...` on the root app."""
    root.add_typer(app, name="lab")
