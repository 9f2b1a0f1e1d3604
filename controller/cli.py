"""`mplab controller decide` and `mplab controller serve`.

``decide`` prints the assignment a policy makes for given probe rates, for a lab operator
checking a model before a campaign: offline, so the throughputs under an assignment that
``ref-is-tuned`` would re-measure are estimated from the probes (each allowed path at its probe
rate) and the output says so. ``serve`` runs the OpenFlow app against a switch (``--switch``
host:port where OVS listens, or OVS connects to ``--listen``) and applies assignments given as
``--assign NAME=MODE`` until interrupted, printing per-receiver byte counters every second.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from harness.errors import ConfigError

from controller.model import EnergyModel
from controller.policy import Context, Decision, ReceiverMeasurement
from controller.registry import NEEDS_MODEL, POLICIES, make_policy

console = Console()
app = typer.Typer(no_args_is_help=True, help="Setup II controller: policies, the energy model, steering.")


def parse_probe(text: str) -> ReceiverMeasurement:
    """``NAME=WIFI,LTE`` (Mbit/s) -> a measurement."""
    try:
        name, rates = text.split("=", 1)
        w, lte = (float(x) for x in rates.split(","))
    except ValueError:
        raise ConfigError(f"--probe {text!r}: expected NAME=WIFI_MBIT,LTE_MBIT (e.g. n1=12,9.5)",
                          field="probe") from None
    if w < 0 or lte < 0:
        raise ConfigError(f"--probe {text!r}: rates must be >= 0", field="probe")
    return ReceiverMeasurement(name, {"wifi": w, "lte": lte})


@app.command()
def decide(
    probe: Annotated[list[str], typer.Option(help="NAME=WIFI_MBIT,LTE_MBIT, once per receiver")],
    policy: Annotated[str, typer.Option(help=f"one of {', '.join(POLICIES)}")] = "ref-is-tuned",
    model: Annotated[Optional[Path], typer.Option(help="exported model (models/<name>)")] = None,
    cc: Annotated[str, typer.Option(help="congestion control of the transfer")] = "balia",
    band: Annotated[Optional[float], typer.Option(help="IS band (default 0.10)")] = None,
    base: Annotated[Optional[str], typer.Option(help="IS band base: max, min or mean")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print the assignment POLICY makes for the given probe rates."""
    meas = [parse_probe(p) for p in probe]
    names = [m.receiver for m in meas]
    if len(set(names)) != len(names):
        raise ConfigError(f"receivers repeated in --probe: {names}", field="probe")
    params = {k: v for k, v in (("band", band), ("base", base)) if v is not None}
    m = None
    if model is not None:
        m = EnergyModel.load(model)
        m.check_covers([cc], [len(meas)], m.validity.file_bytes[0], source=str(model))
    elif policy in NEEDS_MODEL:
        raise ConfigError(f"policy {policy} needs --model models/<name>", field="model")
    pol = make_policy(policy, params if policy not in ("all-wifi", "all-lte", "all-both") else None,
                      m.predict if m else None)
    probes = {x.receiver: x.probe_mbit for x in meas}

    def estimate(a: dict[str, Decision]) -> dict[str, dict[str, float]]:
        return {rx: {r: probes[rx][r] for r in d.ifaces} for rx, d in a.items()}

    ctx = Context(cc=cc, n_receivers=len(meas), file_bytes=m.validity.file_bytes[0] if m else 0)
    t0 = time.perf_counter()
    out = pol.decide(meas, ctx, estimate)
    latency_ms = (time.perf_counter() - t0) * 1e3
    doc = {"policy": pol.name, "params": pol.params(), "assignment": {rx: d.mode for rx, d in out.assignment.items()},
           "trace": out.trace, "decision_ms": latency_ms,
           "note": "offline: throughputs under an assignment are estimated from the probes"}
    if as_json:
        print(json.dumps(doc, indent=1, default=str))
        return
    t = Table(title=f"{pol.name} {pol.params()}")
    for col in ("receiver", "WiFi Mbit/s", "LTE Mbit/s", "assignment"):
        t.add_column(col)
    for x in meas:
        t.add_row(x.receiver, f"{x.probe_mbit['wifi']:.2f}", f"{x.probe_mbit['lte']:.2f}",
                  out.assignment[x.receiver].mode)
    console.print(t)
    tr = out.trace
    if "is_energy_total_j" in tr:
        console.print(f"predicted energy: IS {tr['is_energy_total_j']:.2f} J, tuned {tr['tuned_energy_total_j']:.2f} J "
                      f"-> adopted {tr['adopted']}")
    elif "adopted" in tr:
        console.print(f"adopted {tr['adopted']} ({tr.get('reason', '')})")
    console.print(f"decision {latency_ms:.2f} ms; {doc['note']}")


@app.command()
def serve(
    spec: Annotated[Path, typer.Argument(help="switch spec (YAML: switch host:port, networks' ports, receivers)")],
    assign: Annotated[list[str], typer.Option(help="NAME=wifi|lte|both, applied once connected")] = [],  # noqa: B006
    interval_s: Annotated[float, typer.Option(help="seconds between counter prints")] = 1.0,
    state_dir: Annotated[Path, typer.Option(help="where the app's spec and control socket go")] = Path(
        "/tmp/mplab-controller"),
) -> None:
    """Run the OpenFlow steering app against a switch; print per-receiver bytes until Ctrl-C."""
    from harness.config.load import load_yaml_model
    from harness.hosts.local import LocalHost

    from controller.steering.openflow import OpenFlowSteering, SwitchSpec

    sw = load_yaml_model(SwitchSpec, spec)
    decisions = {}
    for a in assign:
        name, _, mode = a.partition("=")
        if name not in sw.receivers:
            raise ConfigError(f"--assign {a!r}: {name!r} is not a receiver of {spec}", field="assign")
        try:
            decisions[name] = Decision.of(mode)
        except ValueError as exc:
            raise ConfigError(f"--assign {a!r}: {exc}", field="assign") from None
    steering = OpenFlowSteering(LocalHost(), sw.switch, {k: v.model_dump() for k, v in sw.networks.items()},
                                sw.steered(), state_dir)
    steering.setup()
    try:
        if decisions:
            steering.apply(decisions)
            console.print(f"applied {({k: d.mode for k, d in decisions.items()})} in "
                          f"{steering.last_apply_s * 1e3:.2f} ms (barrier-confirmed)")
        console.print(f"connected to {sw.switch}; bytes towards each receiver per network (Ctrl-C stops)")
        while True:
            c = steering.counters()
            console.print("  ".join(f"{rx}: " + " ".join(f"{n}={b}" for n, b in nets.items()) for rx, nets in c.items()))
            time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        steering.teardown()


def register(parent: typer.Typer) -> None:
    """Mount `mplab controller ...` on the top-level app."""
    parent.add_typer(app, name="controller")
