"""`mplab lte ...`: render, up, down, status, check and logs of the lab's LTE cell.

Mounted by ``mplab.cli``. Errors are ``MplabError``s (``ConfigError``: exit 2).
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from mplab.commands.verdicts import checked_something, print_verdicts
from harness.errors import MplabError

# lte's modules (templates, SSH, the subscriber database) are imported by each command: `mplab --help` needs none.
console = Console()
app = typer.Typer(name="lte", no_args_is_help=True, help="The lab's LTE cell: srsRAN eNodeB + Open5GS EPC.")

InventoryArg = Annotated[Path, typer.Argument(help="lab inventory with an lte section (inventory/*.yaml)")]
SecretsOpt = Annotated[Path | None, typer.Option(
    "--secrets", help="secrets file with SIM keys (mode 0600; default: lab.secrets_file of the inventory)")]


@app.command()
def render(inventory: InventoryArg,
           version: Annotated[str | None, typer.Option(
               help="the Open5GS version the EPC runs (checked against lte.epc.version; default: the pin)")] = None,
           secrets: SecretsOpt = None,
           out: Annotated[Path, typer.Option(help="directory to write into (one subdirectory per machine)")] =
           Path("lte-rendered")) -> None:
    """Write every configuration file of the cell locally, for review."""
    from harness.deploy.secrets import secrets_for
    from lte.hosts import lte_inventory

    inv = lte_inventory(inventory)
    if inv.lte.epc.kind == "srsepc":
        from lte.render import render_srsenb
        from lte.srsepc import render_epc_conf, render_srsepc
        sec = secrets_for(inv, inventory, secrets, required=False)
        files = render_srsenb(inv) + (render_srsepc(inv, sec)[0] if sec else [render_epc_conf(inv)])
        if sec is None:
            console.print("user_db.csv needs the SIM keys: pass --secrets to render it too")
    else:
        from lte.render import render_all
        from lte.version import decide_open5gs, parse_version

        # Open5GS keeps the SIM keys in its database (`mplab lte up` writes them), not in a rendered file; a
        # --secrets file is still read, so that a group-readable or invalid one is refused as on the srsEPC path.
        if secrets is not None:
            secrets_for(inv, inventory, secrets, required=False)
        # the same decision `lte up` makes, with --version standing in for what the EPC host reports
        installed = parse_version(version, source="--version") if version else None
        v = decide_open5gs(inv.lte.epc.version, installed, "--version")
        console.print(f"Open5GS {v} ({'--version' if installed else 'lte.epc.version'}): its template set")
        files = render_all(inv, v)
    for f in files:
        p = out / f.machine / f.path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.text)
        p.chmod(f.mode)
        console.print(f"{f.machine:4} {f.path:40} -> {p}")


@app.command()
def up(inventory: InventoryArg, secrets: SecretsOpt = None,
       subscribers: Annotated[bool, typer.Option(
           "--subscribers/--no-subscribers", help="provision the subscriber database (--no-subscribers: leave it)")
       ] = True) -> None:
    """Push configs (keeping backups), provision subscribers, restart daemons in dependency order."""
    from harness.deploy.secrets import secrets_for
    from lte.deploy import lte_up
    from lte.hosts import cell_hosts, lte_inventory, provision_uri
    from lte.subscribers import open_collection

    inv = lte_inventory(inventory)
    sec = secrets_for(inv, inventory, secrets) if subscribers else None
    with ExitStack() as stack:
        hosts = stack.enter_context(cell_hosts(inv))
        collection = None
        if subscribers and inv.lte.epc.kind == "open5gs":
            uri = provision_uri(inv, hosts.epc, stack)
            collection = lambda: open_collection(uri)  # noqa: E731 - None or a factory: one name for both
        rep = lte_up(inv, hosts, sec, collection)
    changed = [p for p in rep.pushed if p.changed]
    core = "srsEPC" if rep.version == "srsepc" else f"Open5GS {rep.version}"
    console.print(f"{core}: {len(changed)} of {len(rep.pushed)} file(s) changed"
                  + "".join(f"\n  {p.host}:{p.path}" + (f" (was kept as {p.backup})" if p.backup else "")
                            for p in changed))
    if rep.subscribers:
        s = rep.subscribers
        console.print(f"subscribers: {len(s.inserted)} inserted, {len(s.updated)} updated, {len(s.unchanged)} unchanged")
    if rep.sqn:
        console.print(f"user_db.csv: SQN kept for {len(rep.sqn.kept)}, new {len(rep.sqn.new)}"
                      + (f", RESET (keys changed) for {', '.join(rep.sqn.reset)}" if rep.sqn.reset else "")
                      + (f", dropped {', '.join(rep.sqn.dropped)}" if rep.sqn.dropped else ""))
    console.print(f"started in order: {', '.join(rep.started)} ({rep.duration_s:.1f} s)")
    console.print("next: `mplab lte check` once the modems have attached")


@app.command()
def down(inventory: InventoryArg) -> None:
    """Stop every daemon of the cell, eNodeB first."""
    from lte.deploy import lte_down
    from lte.hosts import cell_hosts, lte_inventory

    inv = lte_inventory(inventory)
    with cell_hosts(inv) as hosts:
        stopped = lte_down(inv, hosts)
    console.print(f"stopped: {', '.join(stopped)}")


@app.command()
def status(inventory: InventoryArg) -> None:
    """Which daemons of the cell are running."""
    from rich.table import Table

    from lte.deploy import lte_status
    from lte.hosts import cell_hosts, lte_inventory

    inv = lte_inventory(inventory)
    with cell_hosts(inv) as hosts:
        rows = lte_status(inv, hosts)
    t = Table(title=f"LTE cell of {inv.name}")
    for col in ("daemon", "unit", "host", "state"):
        t.add_column(col)
    for r in rows:
        t.add_row(r.what, r.unit, r.host, "[green]active[/]" if r.active else "[red]inactive[/]")
    console.print(t)
    if not all(r.active for r in rows):
        raise typer.Exit(1)


@app.command()
def check(inventory: InventoryArg) -> None:
    """S1 setup, each receiver attached with a UE-pool address, and a ping through LTE."""
    from harness.deploy.machines import receiver_hosts
    from lte.checks import diagnose, run_checks
    from lte.hosts import lte_hosts, lte_inventory

    inv = lte_inventory(inventory)
    hosts = lte_hosts(inv)
    rx = receiver_hosts(inv)
    try:
        epc_log = hosts.services["epc"].logs(inv.lte.epc.unit, 300) if inv.lte.epc.kind == "srsepc" else ""
        checks = run_checks(inv, hosts.epc, rx, enb=hosts.enb, epc_console=epc_log)
    finally:
        for h in [hosts.enb, hosts.epc, *rx.values()]:
            h.close()
    for c in checks:
        console.print(f"{'[green]ok  [/]' if c.ok else '[red]FAIL[/]'} {c.name:10} {c.host:8} {c.detail}")
    msg = diagnose(checks)
    if msg:
        raise MplabError(msg)


@app.command()
def logs(inventory: InventoryArg,
         dest: Annotated[Path | None, typer.Option(help="where to put them (default lte-logs/<time>)")] = None) -> None:
    """Collect every daemon's journal and log file."""
    from lte.deploy import collect_logs
    from lte.hosts import cell_hosts, lte_inventory

    inv = lte_inventory(inventory)
    dest = dest or Path("lte-logs") / time.strftime("%Y%m%dT%H%M%S")
    with cell_hosts(inv) as hosts:
        files = collect_logs(inv, hosts, dest)
    console.print(f"{len(files)} file(s) in {dest}")


@app.command("check-configs")
def check_configs(inventory: InventoryArg,
                  keep: Annotated[Path | None, typer.Option(
                      help="render into this directory and keep it (default: a temporary one)")] = None,
                  on_hosts: Annotated[bool, typer.Option(
                      "--hosts", help="check each daemon on the host that will run it (over SSH), with the "
                                      "versions installed there")] = False) -> None:
    """Start each installed srsRAN/Open5GS daemon on the rendered configs in a scratch namespace; a daemon
    passes when it gets past parsing. Programs: $MPLAB_LTE_BIN, then PATH. Exit 1 if one refuses its file."""
    import os

    from lte.hosts import cell_hosts, lte_inventory
    from lte.realcheck import BIN_ENV, check_configs as run_check

    inv = lte_inventory(inventory)
    if on_hosts:
        from lte.hostcheck import check_hosts
        with cell_hosts(inv) as hosts:
            verdicts = check_hosts(inv, hosts, f"mplab-ltecheck-{os.getpid()}")
        print_verdicts(verdicts)
        checked_something(verdicts, "srsRAN 4G or Open5GS", "on the cell's hosts (install them there, or set "
                          "lte.enb.bin_dir / the EPC's programs on PATH)")
        return
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    plan, verdicts = run_check(inv, f"mplab-ltecheck-{os.getpid()}", keep.resolve() if keep else None)
    if plan.open5gs_version:
        console.print(f"Open5GS schema of {plan.open5gs_version}")
    print_verdicts(verdicts)
    checked_something(verdicts, "srsRAN 4G or Open5GS",
                      f"here (install them, or point {BIN_ENV} at their bin directory; see the guide's LTE page)")


@app.command()
def zmq(inventory: InventoryArg,
        receiver: Annotated[str, typer.Option(help="the receiver whose SIM srsUE uses")],
        secrets: SecretsOpt = None,
        netns: Annotated[str, typer.Option(help="namespace srsUE runs in (created and removed by mplab)")] =
        "mplab-zmq-ue",
        config_dir: Annotated[Path, typer.Option(help="where the ZMQ configs are written")] = Path("/tmp/mplab-zmq"),
        ) -> None:
    """All-software cell on this machine: srsenb over ZeroMQ + one srsUE in a namespace (needs srsRAN 4G and
    a running Open5GS EPC here). Holds the cell until Ctrl-C, then stops UE before eNB."""
    from harness.deploy.secrets import secrets_for
    from harness.hosts.local import LocalHost
    from lte.hosts import lte_inventory
    from lte.realcheck import bin_dirs
    from lte.zmq import ZmqCell, check as zmq_check, render_zmq

    inv = lte_inventory(inventory)
    here = LocalHost("here")
    zmq_check(here, bin_dirs())                       # a clear PreflightError when srsRAN is missing
    sec = secrets_for(inv, inventory, secrets)
    config_dir.mkdir(parents=True, exist_ok=True)
    files = render_zmq(inv, receiver, sec, str(config_dir), netns)
    created = here.run(["ip", "netns", "add", netns], check=False).returncode == 0
    cell = ZmqCell(here, netns, dirs=tuple(bin_dirs()))
    try:
        addr = cell.start(files, inv.lte.epc.ue_pool)
        console.print(f"srsUE ({receiver}) attached with {addr} in namespace {netns}; Ctrl-C stops the cell")
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        cell.stop()
        if created:
            here.run(["ip", "netns", "del", netns], check=False)


def register(root: typer.Typer) -> None:
    """Mount `mplab lte ...` on the root app."""
    root.add_typer(app, name="lte")
