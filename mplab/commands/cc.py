"""`mplab cc`: which implementation of each congestion control runs on this machine, and whether it can.

Mounted on the `mplab` app by ``mplab.cli``.
"""
from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError, PreflightError

console = Console()
cc_app = typer.Typer(help="Congestion controls: implementations, preflight, registered BPF programs.",
                     no_args_is_help=True)


@cc_app.command("check")
def check(algorithms: Annotated[list[str] | None, typer.Argument(help="algorithms (default: all)")] = None) -> None:
    """Preflight each algorithm on this machine (a BPF one is loaded once and unloaded)."""
    from rich.table import Table

    from harness.cc import ALGORITHMS, kernel_flavour, resolve
    from harness.hosts.local import LocalHost

    host = LocalHost("root")
    flavour = kernel_flavour(host)
    names = algorithms or list(ALGORITHMS)
    unknown = [n for n in names if n not in ALGORITHMS]
    if unknown:
        raise ConfigError(f"unknown congestion control(s) {', '.join(unknown)} (known: {', '.join(ALGORITHMS)})")
    t = Table(title=f"congestion controls on this {flavour} kernel")
    for col in ("algorithm", "implementation", "socket name", "status"):
        t.add_column(col)
    failed = 0
    for name in names:
        cc = resolve(name, flavour)
        try:
            cc.check(host)
            status = "[green]ok[/]"
        except PreflightError as exc:
            status, failed = f"[red]{exc}[/]", failed + 1
        t.add_row(name, cc.implementation, cc.sock_name, status)
    console.print(t)
    if failed:
        raise typer.Exit(1)


@cc_app.command("status")
def status() -> None:
    """mplab's BPF congestion controls registered now, and their live coupled connections."""
    from rich.table import Table

    from harness.cc import bpfcc
    from harness.hosts.local import LocalHost

    host = LocalHost("root")
    reg = bpfcc.registered(host)
    t = Table(title="registered mplab struct_ops")
    for col in ("name", "struct_ops id", "coupled connections"):
        t.add_column(col)
    for name, sid in sorted(reg.items()):
        n = bpfcc.conn_entries(host, name.removeprefix(bpfcc.PREFIX))
        t.add_row(name, str(sid), "-" if n is None else str(n))
    console.print(t if reg else "no mplab struct_ops registered")


def register(app: typer.Typer) -> None:
    app.add_typer(cc_app, name="cc")
