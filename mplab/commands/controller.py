"""`mplab controller policies`, `mplab controller decide` and `mplab controller serve`.

``policies`` lists every registered policy: what it does, its paper, what it needs, its parameters
and their defaults. ``decide`` prints the assignment a policy makes for given probe rates (and,
for the schemes that read them, each path's RTT and loss), with any per-path caps, for a lab
operator checking a model or a scheme before a campaign: offline, so the throughputs under an
assignment that ``ref-is-tuned`` would re-measure are estimated from the probes (each allowed path
at its probe rate) and the output says so. ``--model`` takes a folder or a registered model
(``models:/NAME@alias``), resolved by ``harness.model_registry``. ``serve`` runs the OpenFlow app
against a lab switch (from a switch
spec YAML, or from a lab inventory's ``lab.switch`` with ``--inventory``), first checking that it
answers as an OpenFlow 1.3 switch; it applies ``--assign NAME=MODE`` and ``--cap NAME:NET=MBIT``
(OpenFlow meters, as a campaign caps) and prints per-receiver byte counters every second until
interrupted; the meters go when it stops.
"""
from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError

if TYPE_CHECKING:
    from controller.policy import Decision, Outcome, Policy, ReceiverMeasurement

# The controller's modules (its policies, the energy model with numpy and onnxruntime, the steering backends) are
# imported by the functions that use them: `mplab --help` and the other commands need none.
console = Console()
app = typer.Typer(no_args_is_help=True, help="Setup II controller: policies, the energy model, steering.")


def parse_probe(text: str) -> tuple[str, dict[str, float]]:
    """``NAME=WIFI,LTE`` (Mbit/s) -> (receiver, rates)."""
    try:
        name, rates = text.split("=", 1)
        w, lte = (float(x) for x in rates.split(","))
    except ValueError:
        raise ConfigError(f"--probe {text!r}: expected NAME=WIFI_MBIT,LTE_MBIT (e.g. n1=12,9.5)",
                          field="probe") from None
    if w < 0 or lte < 0:
        raise ConfigError(f"--probe {text!r}: rates must be >= 0", field="probe")
    return name, {"wifi": w, "lte": lte}


_TIME = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(us|ms|s)?\s*$")
_TIME_UNIT = {"us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1e-3}


def _path_option(text: str, option: str, receivers: set[str]) -> tuple[str | None, str, str]:
    """``[NAME:]NET=VALUE`` -> (receiver or None for every receiver, network, value text)."""
    from controller.policy import IFACES

    who, sep, value = text.partition("=")
    name, _, net = who.rpartition(":")
    if not sep or not value or net not in IFACES:
        raise ConfigError(f"{option} {text!r}: expected [NAME:]NET=VALUE with NET one of {', '.join(IFACES)} "
                          f"(e.g. {option} wifi=25ms or {option} n1:lte=65ms)", field=option)
    if name and name not in receivers:
        raise ConfigError(f"{option} {text!r}: {name!r} is not a receiver of --probe (known: "
                          f"{', '.join(sorted(receivers))})", field=option)
    return name or None, net, value


def parse_rtt(text: str, receivers: set[str]) -> tuple[str | None, str, float]:
    """``[NAME:]NET=TIME`` (``25ms``, ``0.025s``, ``900us``; a bare number is ms) -> (receiver, network, seconds)."""
    name, net, value = _path_option(text, "--rtt", receivers)
    m = _TIME.match(value)
    if not m or float(m[1]) <= 0:
        raise ConfigError(f"--rtt {text!r}: {value!r} is not a positive time (e.g. 25ms, 0.065s)", field="--rtt")
    return name, net, float(m[1]) * _TIME_UNIT[m[2]]


def parse_loss(text: str, receivers: set[str]) -> tuple[str | None, str, float]:
    """``[NAME:]NET=LOSS`` (``1%`` or a probability ``0.01``) -> (receiver, network, probability)."""
    name, net, value = _path_option(text, "--loss", receivers)
    try:
        p = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        p = -1.0
    if not 0 <= p < 1:
        raise ConfigError(f"--loss {text!r}: {value!r} is not a loss in [0, 1) (e.g. 1% or 0.01)", field="--loss")
    return name, net, p


def parse_param(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` -> (key, value): a number when it parses as one, else as YAML reads it (max a word, null nothing)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise ConfigError(f"--param {text!r}: expected KEY=VALUE (e.g. --param band=0.2)", field="--param")
    for number in (int, float):  # 1e-1 is a number here (YAML 1.1 would read it as text)
        try:
            return key, number(value)
        except ValueError:
            pass
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError:
        return key, value


def measurements(probes: list[str], rtts: list[str], losses: list[str]) -> list[ReceiverMeasurement]:
    """Per receiver its probe rates and, where given, each path's RTT and loss (per receiver beats for all)."""
    from controller.policy import PathStats, ReceiverMeasurement

    parsed = [parse_probe(p) for p in probes]
    names = [n for n, _ in parsed]
    if len(set(names)) != len(names):
        raise ConfigError(f"receivers repeated in --probe: {names}", field="probe")
    known = set(names)
    given: dict[tuple[str, str], dict[str, float]] = {}
    for option, parse, what in ((rtts, parse_rtt, "rtt_s"), (losses, parse_loss, "loss")):
        for text in sorted(option, key=lambda t: ":" in t.partition("=")[0]):  # for-all first, then per receiver
            name, net, value = parse(text, known)
            for rx in ([name] if name else names):
                given.setdefault((rx, net), {})[what] = value
    out = []
    for name, rates in parsed:
        paths = {net: PathStats(rtt_s=g.get("rtt_s"), loss=g.get("loss"),
                                source={k.removesuffix("_s"): "command line" for k in g})
                 for (rx, net), g in given.items() if rx == name}
        out.append(ReceiverMeasurement(name, rates, paths))
    return out


def check_path_inputs(policy: str, meas: list[ReceiverMeasurement]) -> None:
    """A policy that reads RTTs (es-mptcp, ee-mptcp) needs one for every path that carries traffic."""
    from controller.policy import DEAD_MBIT, IFACES
    from controller.registry import POLICIES

    if not POLICIES[policy].needs_paths:
        return
    for m in meas:
        for net in IFACES:
            if m.probe_mbit.get(net, 0.0) > DEAD_MBIT and not (m.paths.get(net) and m.paths[net].rtt_s):
                raise ConfigError(f"policy {policy} needs each path's RTT: none for {m.receiver}'s {net}; give "
                                  f"--rtt {net}=25ms (every receiver) or --rtt {m.receiver}:{net}=25ms "
                                  "(and --loss, else lossless)", field="--rtt")


def _caps_text(d: Decision) -> str:
    return ", ".join(f"{net} <= {mbit:.3g}" for net, mbit in sorted((d.caps_mbit or {}).items())) or "-"


def _path_cells(x: ReceiverMeasurement, with_rtt: bool, with_loss: bool) -> list[str]:
    from controller.policy import IFACES

    cells = []
    for net in IFACES:
        st = x.paths.get(net)
        if with_rtt:
            cells.append(f"{st.rtt_s * 1e3:.3g}" if st and st.rtt_s else "-")
        if with_loss:
            cells.append(f"{st.loss * 100:.3g} %" if st and st.loss is not None else "-")
    return cells


def print_decision(pol: Policy, meas: list[ReceiverMeasurement], out: Outcome, note: str) -> None:
    """The table: probes, the given RTT/loss, the assignment and its caps; then the trace's verdict."""
    from rich.table import Table

    from controller.registry import describe_params

    with_rtt = any(st.rtt_s for m in meas for st in m.paths.values())
    with_loss = any(st.loss is not None for m in meas for st in m.paths.values())
    t = Table(title=f"{pol.name}: {describe_params(pol.params())}")
    cols = ["receiver", "WiFi Mbit/s", "LTE Mbit/s"]
    for net in ("WiFi", "LTE"):
        cols += ([f"{net} RTT ms"] if with_rtt else []) + ([f"{net} loss"] if with_loss else [])
    for col in (*cols, "assignment", "caps Mbit/s"):
        t.add_column(col)
    for x in meas:
        d = out.assignment[x.receiver]
        t.add_row(x.receiver, f"{x.probe_mbit['wifi']:.2f}", f"{x.probe_mbit['lte']:.2f}",
                  *_path_cells(x, with_rtt, with_loss), d.mode, _caps_text(d))
    console.print(t)
    tr = out.trace
    if "is_energy_total_j" in tr:
        console.print(f"predicted energy: IS {tr['is_energy_total_j']:.2f} J, tuned {tr['tuned_energy_total_j']:.2f} J "
                      f"-> adopted {tr['adopted']}")
    elif "adopted" in tr:
        console.print(f"adopted {tr['adopted']} ({tr.get('reason', '')})")
    console.print(note)


@app.command()
def decide(
    probe: Annotated[list[str], typer.Option(help="NAME=WIFI_MBIT,LTE_MBIT, once per receiver")],
    policy: Annotated[str, typer.Option(help="a policy of `mplab controller policies`")] = "ref-is-tuned",
    model: Annotated[str | None, typer.Option(
        help="exported model: a folder (models/<name>) or a registered one (models:/NAME@alias, models:/NAME/VERSION)")
    ] = None,
    tracking_uri: Annotated[str | None, typer.Option(
        help="MLflow server for models:/ references (default: $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db)")] = None,
    cc: Annotated[str, typer.Option(help="congestion control of the transfer")] = "balia",
    rtt: Annotated[list[str], typer.Option(
        help="[NAME:]NET=TIME, a path's base RTT (25ms, 0.065s; bare numbers are ms); without NAME for every "
             "receiver. es-mptcp and ee-mptcp need it")] = [],  # noqa: B006 - typer builds a new list per call; never mutated
    loss: Annotated[list[str], typer.Option(
        help="[NAME:]NET=LOSS, a path's random loss (1% or 0.01); not given: lossless")] = [],  # noqa: B006 - typer builds a new list per call; never mutated
    param: Annotated[list[str], typer.Option(
        help="KEY=VALUE, a policy parameter (see `mplab controller policies`), e.g. band=0.2")] = [],  # noqa: B006 - typer builds a new list per call; never mutated
    file_size: Annotated[str | None, typer.Option(
        help="file size of the transfer (60M = 60 MiB; default: the model's, else 60M)")] = None,
    band: Annotated[float | None, typer.Option(help="IS band (same as --param band=...)")] = None,
    base: Annotated[str | None, typer.Option(help="IS band base: max, min or mean (--param base=...)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Print the assignment POLICY makes for the given probe rates (and per-path RTT and loss)."""
    from harness.config.scenario import parse_size

    from controller.policy import Context
    from controller.registry import NEEDS_MODEL, POLICIES, check_params, make_policy

    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})", field="--policy")
    meas = measurements(probe, rtt, loss)
    params = dict(parse_param(p) for p in param)
    params.update({k: v for k, v in (("band", band), ("base", base)) if v is not None})
    check_params(policy, params)  # unknown key or wrong type: one line, exit 2, before a model is opened
    check_path_inputs(policy, meas)
    m = None
    if model is not None:
        from controller.model import EnergyModel  # numpy, onnxruntime: only with a model

        m = EnergyModel.open(model, tracking_uri)
        m.check_covers([cc], [len(meas)], m.validity.file_bytes[0], source=str(model))
    elif policy in NEEDS_MODEL:
        raise ConfigError(f"policy {policy} needs --model (models/<name> or models:/NAME@alias)", field="--model")
    try:
        size = parse_size(file_size) if file_size else (m.validity.file_bytes[0] if m else parse_size("60M"))
    except ValueError as exc:
        raise ConfigError(str(exc), field="--file-size") from None
    pol = make_policy(policy, params, m.predict if m else None)
    probes = {x.receiver: x.probe_mbit for x in meas}

    def estimate(a: dict[str, Decision]) -> dict[str, dict[str, float]]:
        return {rx: {r: probes[rx][r] for r in d.ifaces} for rx, d in a.items()}

    ctx = Context(cc=cc, n_receivers=len(meas), file_bytes=size)
    t0 = time.perf_counter()
    out = pol.decide(meas, ctx, estimate)
    latency_ms = (time.perf_counter() - t0) * 1e3
    note = (f"decision {latency_ms:.2f} ms for a {size / 2**20:.4g} MiB file under {cc}"
            + (f"; model {m.source} ({m.path})" if m else "")
            + "; offline: throughputs under an assignment are estimated from the probes")
    if as_json:
        doc = {"policy": pol.name, "params": pol.params(), "file_bytes": size,
               "model": {"source": m.source, "path": str(m.path)} if m else None,
               "assignment": {rx: d.mode for rx, d in out.assignment.items()},
               "caps_mbit": {rx: dict(d.caps_mbit) for rx, d in out.assignment.items() if d.caps_mbit},
               "paths": {x.receiver: {net: {"rtt_s": st.rtt_s, "loss": st.loss} for net, st in x.paths.items()}
                         for x in meas if x.paths},
               "trace": out.trace, "decision_ms": latency_ms,
               "note": "offline: throughputs under an assignment are estimated from the probes"}
        print(json.dumps(doc, indent=1, default=str))
        return
    print_decision(pol, meas, out, note)


@app.command("policies")
def policies_cmd(as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False) -> None:
    """Every registered policy: what it does, its paper, what it needs, its parameters and defaults."""
    from harness import citations

    from controller.registry import PARAM_DOCS, POLICIES, describe_params, parameter_defaults

    docs = []
    for name, info in POLICIES.items():
        cite = citations.for_policy(name)
        needs = ["probe rates"] if name not in ("all-wifi", "all-lte", "all-both") else []
        needs += ["an energy model (--model)"] if info.needs_model else []
        needs += ["each path's RTT (--rtt) and loss (--loss, else lossless)"] if info.needs_paths else []
        docs.append({"name": name, "summary": info.summary,
                     "paper": cite.text() if cite else None, "derived": info.derived,
                     "needs": needs, "params": parameter_defaults(name)})
    if as_json:
        print(json.dumps(docs, indent=1))
        return
    for d in docs:
        console.print(f"[bold]{d['name']}[/]: {d['summary']}", highlight=False)
        if d["paper"]:
            console.print(f"  paper: {d['paper']}" + (f" ({d['derived']})" if d["derived"] else ""),
                          highlight=False)
        elif d["derived"]:
            console.print(f"  paper: none; {d['derived']}", highlight=False)
        else:
            console.print("  paper: the reference paper's baseline", highlight=False)
        if d["needs"]:
            console.print(f"  needs: {', '.join(d['needs'])}", highlight=False)
        for k, v in d["params"].items():
            console.print(f"  --param {k}={describe_params({k: v}).split('=', 1)[1]}  {PARAM_DOCS.get(k, '')}",
                          highlight=False)
        console.print("")


def parse_cap(text: str, receivers: set[str]) -> tuple[str, str, float]:
    """``NAME:NET=RATE`` (Mbit/s) -> (receiver, network, rate)."""
    from controller.policy import IFACES

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
    from controller.policy import Decision

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
    if inv.lab is None or inv.lab.switch is None:  # (an emulated inventory with lab.switch is refused when read)
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
    spec: Annotated[Path | None, typer.Argument(
        help="switch spec (YAML: listen host:port, networks' ports, receivers); or use --inventory")] = None,
    inventory: Annotated[Path | None, typer.Option(
        help="a lab inventory: the switch from its lab.switch, the receivers from its receivers")] = None,
    assign: Annotated[list[str], typer.Option(help="NAME=wifi|lte|both, applied once connected")] = [],  # noqa: B006 - typer builds a new list per call; never mutated
    cap: Annotated[list[str], typer.Option(
        help="NAME:NET=MBIT, a rate cap as an OpenFlow meter on that receiver's path (e.g. n1:wifi=8)")] = [],  # noqa: B006 - typer builds a new list per call; never mutated
    interval_s: Annotated[float, typer.Option(help="seconds between counter prints")] = 1.0,
    state_dir: Annotated[Path, typer.Option(help="where the app's spec and control socket go")] = Path(
        "/tmp/mplab-controller"),
) -> None:
    """Run the OpenFlow steering app against a switch; print per-receiver bytes until Ctrl-C."""
    from harness.errors import PreflightError
    from harness.upkeep.ofprobe import probe_switch

    from controller.steering.caps import MeterCaps
    from controller.steering.openflow import OpenFlowSteering

    sw, receivers = serve_target(spec, inventory)
    decisions = serve_decisions(assign, cap, {r.name for r in receivers})
    info = probe_switch(sw.listen, sw.answer_timeout_s)  # a clear failure now rather than the app's connect deadline
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
