"""`mplab meters check` and `mplab meters record`: every receiver's meter, from an inventory.

On a lab inventory the meters are read where mplab runs, through each entry's
``port`` (a device path or a pyserial URL such as ``socket://sbc3:3333``). On an
emulated inventory the meters are devices inside the receivers' namespaces: if that
testbed is already up (its namespaces exist), its devices are read; otherwise the
testbed is brought up for the command and torn down afterwards (root needed). Do not
run these against a testbed a campaign is using: two readers on one meter steal each
other's frames.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError, MeterError, StoreError

if TYPE_CHECKING:
    from harness.config.inventory import Inventory
    from harness.meters.base import Meter

# The inventory models, the testbeds (SSH) and the recorder are imported by the commands that read meters.
console = Console()
meters_app = typer.Typer(help="Energy meters: list, read and record every receiver's meter.", no_args_is_help=True)


def _select(inv: Inventory, receivers: list[str] | None) -> list[str]:
    names = [r.name for r in inv.receivers]
    if not receivers:
        return names
    unknown = [r for r in receivers if r not in names]
    if unknown:
        raise ConfigError(f"unknown receiver(s) {unknown} (inventory {inv.name!r} has {names})", field="--receiver")
    return list(receivers)


@contextlib.contextmanager
def inventory_meters(inv: Inventory, receivers: list[str]) -> Iterator[dict[str, Meter]]:
    """Unopened meters of ``receivers``, as the inventory's testbed kind offers them outside a campaign."""
    from harness.testbeds.kinds import testbed_class

    with testbed_class(inv).standalone_meters(inv, receivers, note=console.print) as meters:
        yield meters


def _open_each(meters: dict[str, Meter]) -> dict[str, str]:
    """Open every meter; returns the failures by receiver (the others are open)."""
    failed = {}
    for name, m in meters.items():
        try:
            m.open()
        except MeterError as exc:
            failed[name] = str(exc)
    return failed


InventoryOpt = Annotated[Path, typer.Option("--inventory", "-i", help="inventory file (inventory/*.yaml)")]
ReceiverOpt = Annotated[list[str] | None, typer.Option("--receiver", "-r", help="only this receiver (repeatable)")]


@meters_app.command()
def check(
    inventory: InventoryOpt = Path("inventory/emulated.yaml"),
    receiver: ReceiverOpt = None,
    duration_s: Annotated[float, typer.Option(help="how long to read each meter for its idle power (s)")] = 2.0,
) -> None:
    """List every meter, read it, and report each receiver's idle power; exit 1 if any meter fails."""
    if duration_s <= 0:
        raise ConfigError(f"must be > 0, got {duration_s}", field="--duration-s")
    from rich.table import Table

    from harness.config.inventory import load_inventory
    from harness.meters.recorder import Recorder

    inv = load_inventory(inventory)
    names = _select(inv, receiver)
    table = Table(title=f"meters of {inv.name} ({inv.kind})")
    for col in ("receiver", "kind", "port", "status", "V", "A", "idle W", "readings", "Hz", "counter mWh"):
        table.add_column(col, justify="left" if col in ("receiver", "kind", "port", "status") else "right")
    with inventory_meters(inv, names) as meters:
        failed = _open_each(meters)
        ok = {n: m for n, m in meters.items() if n not in failed}
        results = {}
        if ok:
            with Recorder(ok) as rec:
                t0 = rec.wait_first() or time.time()
                time.sleep(duration_s)
                t1 = time.time()
                rec.wait_covered(t1)
                for n in ok:
                    results[n] = (rec.energy(n, t0, t1), rec.trace(n), rec.stats()[n])
        for n in names:
            m = meters[n]
            if n in failed:
                table.add_row(n, m.kind, m.port, f"[red]FAIL[/] {failed[n]}", *["-"] * 6)
                continue
            e, trace, st = results[n]
            last = trace[-1] if trace else None
            status = "[green]ok[/]" if not e.flags else f"[yellow]flagged[/] {'; '.join(e.flags)}"
            table.add_row(n, m.kind, m.port, status, f"{last.volts:.3f}" if last else "-",
                          f"{last.amps:.4f}" if last else "-",
                          f"{e.mean_power_w:.3f}" if e.mean_power_w is not None else "-",
                          str(st["readings"]), f"{st['rate_hz']:.1f}" if st["rate_hz"] else "-",
                          f"{last.counter_wh * 1000:.0f}" if last and last.counter_wh is not None else "-")
    console.print(table)
    if failed:
        raise MeterError(f"{len(failed)} of {len(names)} meter(s) failed: {', '.join(sorted(failed))}")


@meters_app.command()
def record(
    duration_s: Annotated[float, typer.Option(help="how long to record (s)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write (one row per reading or fault)")],
    inventory: InventoryOpt = Path("inventory/emulated.yaml"),
    receiver: ReceiverOpt = None,
    rate_hz: Annotated[float | None, typer.Option(help="poll rate (default: the devices' limit)")] = None,
) -> None:
    """Record every meter's trace to a CSV file for ``--duration-s`` seconds, then print energies."""
    if duration_s <= 0:
        raise ConfigError(f"must be > 0, got {duration_s}", field="--duration-s")
    if rate_hz is not None and rate_hz <= 0:
        raise ConfigError(f"must be > 0, got {rate_hz}", field="--rate-hz")
    if not out.parent.is_dir():
        raise ConfigError(f"directory {out.parent} does not exist", field="--out")
    from rich.table import Table

    from harness.config.inventory import load_inventory
    from harness.meters.recorder import Recorder, TraceWriter

    inv = load_inventory(inventory)
    names = _select(inv, receiver)
    with inventory_meters(inv, names) as meters:
        failed = _open_each(meters)
        if failed:
            for m in meters.values():
                m.close()
            raise MeterError("cannot record, meter(s) not answering: "
                             + "; ".join(f"{n}: {why}" for n, why in failed.items()))
        writer = TraceWriter(out, {n: m.kind for n, m in meters.items()})
        try:
            with Recorder(meters, rate_hz=rate_hz, sink=writer) as rec:
                t0 = rec.wait_first() or time.time()
                time.sleep(duration_s)
                t1 = time.time()
                rec.wait_covered(t1)
                table = Table(title=f"{duration_s:.1f} s recorded -> {out}")
                for col in ("receiver", "kind", "readings", "faults", "Hz", "energy J", "mean W", "counter J", "flags"):
                    table.add_column(col)
                stats = rec.stats()
                for n in names:
                    e = rec.energy(n, t0, t1)
                    st = stats[n]
                    table.add_row(n, meters[n].kind, str(st["readings"]), str(st["faults"]),
                                  f"{st['rate_hz']:.1f}" if st["rate_hz"] else "-",
                                  f"{e.energy_j:.3f}" if e.energy_j is not None else "-",
                                  f"{e.mean_power_w:.3f}" if e.mean_power_w is not None else "-",
                                  f"{e.counter_wh * 3600:.1f}" if e.counter_wh is not None else "-",
                                  "; ".join(e.flags) or "-")
        finally:
            writer.close()
        if rec.sink_error:
            raise StoreError(f"{out}: {rec.sink_error}")
    console.print(table)
    console.print(f"{writer.rows} row(s) written to {out}")


def register(app: typer.Typer) -> None:
    """Mount `mplab meters ...` on the top-level app."""
    app.add_typer(meters_app, name="meters")
