"""`mplab controller decide` and `mplab controller serve`.

``decide`` prints the assignment a policy makes for given probe rates, for a lab operator
checking a model before a campaign: offline, so the throughputs under an assignment that
``ref-is-tuned`` would re-measure are estimated from the probes (each allowed path at its probe
rate) and the output says so. ``serve`` runs the OpenFlow app against a lab switch (from a switch
spec YAML, or from a lab inventory's ``lab.switch`` with ``--inventory``), first checking that it
answers as an OpenFlow 1.3 switch; it applies ``--assign NAME=MODE`` and ``--cap NAME:NET=MBIT``
(OpenFlow meters, as a campaign caps) and prints per-receiver byte counters every second until
interrupted; the meters go when it stops.
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
from controller.policy import IFACES, Context, Decision, ReceiverMeasurement
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


def parse_cap(text: str, receivers: set[str]) -> tuple[str, str, float]:
    """``NAME:NET=RATE`` (Mbit/s) -> (receiver, network, rate)."""
    try:
        who, rate = text.split("=", 1)
        name, net = who.split(":", 1)
        mbit = float(rate)
    except ValueError:
        raise ConfigError(f"--cap {text!r}: expected NAME:NET=MBIT (e.g. n1:wifi=8)", field="cap") from None
    if name not in receivers:
        raise ConfigError(f"--cap {text!r}: {name!r} is not a receiver (known: {', '.join(sorted(receivers))})",
                          field="cap")
    if net not in IFACES:
        raise ConfigError(f"--cap {text!r}: network {net!r} is not one of {', '.join(IFACES)}", field="cap")
    if not mbit > 0:
        raise ConfigError(f"--cap {text!r}: the rate must be > 0 Mbit/s (no cap: leave --cap out)", field="cap")
    return name, net, mbit


def serve_decisions(assign: list[str], cap: list[str], receivers: set[str]) -> dict[str, Decision]:
    """The decisions ``--assign NAME=MODE`` and ``--cap NAME:NET=MBIT`` ask for (a cap alone keeps both
    networks; a cap on a network the receiver is not assigned is refused)."""
    decisions: dict[str, Decision] = {}
    for a in assign:
        name, _, mode = a.partition("=")
        if name not in receivers:
            raise ConfigError(f"--assign {a!r}: {name!r} is not a receiver (known: {', '.join(sorted(receivers))})",
                              field="assign")
        try:
            decisions[name] = Decision.of(mode)
        except ValueError as exc:
            raise ConfigError(f"--assign {a!r}: {exc}", field="assign") from None
    caps: dict[str, dict[str, float]] = {}
    for c in cap:
        name, net, mbit = parse_cap(c, receivers)
        ifaces = decisions.get(name, Decision.of("both")).ifaces
        if net not in ifaces:
            raise ConfigError(f"--cap {c!r}: {name} is assigned {sorted(ifaces)}, so {net} carries nothing to cap",
                              field="cap")
        caps.setdefault(name, {})[net] = mbit
    for name, c in caps.items():
        decisions[name] = Decision(decisions.get(name, Decision.of("both")).ifaces, c)
    return decisions


def serve_target(spec: Path | None, inventory: Path | None):
    """(switch, receivers) from a SwitchSpec YAML or a lab inventory's ``lab.switch`` section (one of them)."""
    from harness.config.inventory import load_inventory
    from harness.config.load import load_yaml_model

    from controller.steering.base import SteeredReceiver
    from controller.steering.openflow import SwitchSpec

    if (spec is None) == (inventory is None):
        raise ConfigError("give the switch either as SPEC (a switch YAML) or as --inventory INV (its lab.switch), "
                          "not both or neither", field="inventory")
    if spec is not None:
        sw = load_yaml_model(SwitchSpec, spec)
        return sw, sw.steered()
    inv = load_inventory(inventory)
    if inv.kind != "lab" or inv.lab is None or inv.lab.switch is None:
        raise ConfigError("no lab.switch section (listen: HOST:PORT, networks: {wifi: {up, down}, lte: {up, down}})",
                          source=str(inventory), field="lab.switch")
    missing = [f"receivers.{r.name}.interfaces.{n}.address" for r in inv.receivers
               for n, i in r.interfaces.items() if i.address is None]
    if missing:
        raise ConfigError(f"steering needs every receiver address: {', '.join(missing)} missing",
                          source=str(inventory), field=missing[0])
    return inv.lab.switch, [SteeredReceiver(r.name, {n: str(i.address) for n, i in r.interfaces.items()})
                            for r in inv.receivers]


@app.command()
def serve(
    spec: Annotated[Optional[Path], typer.Argument(
        help="switch spec (YAML: listen host:port, networks' ports, receivers); or use --inventory")] = None,
    inventory: Annotated[Optional[Path], typer.Option(
        help="a lab inventory: the switch from its lab.switch, the receivers from its receivers")] = None,
    assign: Annotated[list[str], typer.Option(help="NAME=wifi|lte|both, applied once connected")] = [],  # noqa: B006
    cap: Annotated[list[str], typer.Option(
        help="NAME:NET=MBIT, a rate cap as an OpenFlow meter on that receiver's path (e.g. n1:wifi=8)")] = [],  # noqa: B006
    interval_s: Annotated[float, typer.Option(help="seconds between counter prints")] = 1.0,
    state_dir: Annotated[Path, typer.Option(help="where the app's spec and control socket go")] = Path(
        "/tmp/mplab-controller"),
) -> None:
    """Run the OpenFlow steering app against a switch; print per-receiver bytes until Ctrl-C."""
    from harness.errors import PreflightError
    from harness.testbeds.ofprobe import probe_switch

    from controller.steering.caps import MeterCaps
    from controller.steering.openflow import OpenFlowSteering

    sw, receivers = serve_target(spec, inventory)
    decisions = serve_decisions(assign, cap, {r.name for r in receivers})
    info = probe_switch(sw.listen)  # a clear failure now rather than the app's connect deadline
    console.print(f"switch {sw.listen}: {info.describe()}")
    steering = OpenFlowSteering.for_lab(sw, receivers, state_dir)
    meters = None
    steering.setup()
    try:
        if cap:
            meters = MeterCaps(steering)
            why = meters.unsupported()
            if why is not None:
                raise PreflightError(f"--cap needs OpenFlow meters on the switch: {why}")
        if decisions:
            steering.apply(decisions)
            shown = {k: d.mode for k, d in decisions.items()}
            console.print(f"applied {shown} in {steering.last_apply_s * 1e3:.2f} ms (barrier-confirmed)")
        if meters is not None:
            meters.apply(decisions)
            for rx, nets in meters.stats().items():
                for net, m in nets.items():
                    console.print(f"capped {rx} {net} at {m['kbps'] / 1000:g} Mbit/s: meter {m['meter_id']}, "
                                  f"burst {m['burst_kbit']} kbit")
        console.print(f"connected to {sw.listen}; bytes towards each receiver per network (Ctrl-C stops)")
        while True:
            c = steering.counters()
            console.print("  ".join(f"{rx}: " + " ".join(f"{n}={b}" for n, b in nets.items()) for rx, nets in c.items()))
            time.sleep(interval_s)
    except KeyboardInterrupt:
        pass
    finally:
        if meters is not None:
            meters.clear()
        steering.teardown()


def register(parent: typer.Typer) -> None:
    """Mount `mplab controller ...` on the top-level app."""
    parent.add_typer(app, name="controller")
