"""Setup II controller: decision latency, time to apply a steering change, time until the blocked path is quiet.

From one run:
  - decision latency of ref-is-tuned for 9 receivers with the ONNX model (p50/p95 over --decisions
    decisions; measurement windows stubbed out, so this is IS + assignments + two model calls);
    goal <= 2 ms. Uses --model (an exported model) or, when it is missing, a 5x200 ReLU MLP with
    random weights in the same ONNX layout (same compute; says so).
  - time to apply one steering change (one receiver WiFi -> blocked) with nftables (one nft
    transaction, counters read first) and with OpenFlow (os-ken app -> real ovs-vswitchd, delete
    confirmed by a barrier reply), measured by the caller around ``apply`` (p50/p95 over --changes).
  - time until the blocked path carries no data: a receiver's MPTCP transfer is steered off WiFi
    and the AP's port towards it is polled every ms; the time from ``apply`` returning to the last
    byte the AP sent it (median over --blocks).
Needs root (namespaces, OVS). Ratios, not absolute promises: the machine is shared.

Decision latency alone (no root): ``--decisions-only``. Before/after in one run: ``--against DIR``
(another checkout, e.g. ``git worktree add /tmp/main-wt main``) measures that checkout's controller
code and this one's in alternating child processes (``--rounds`` each, same model, same inputs), so
both see the same machine load, and prints the quantiles of each and their ratios, and whether the two
decide the same on 3000 fixed inputs (``decision_digest``: assignments and traces, energies bit for bit).

    uv run python bench/controller_bench.py [--decisions 2000] [--changes 40] [--blocks 5] [--model models/quick-setup2]
    uv run python bench/controller_bench.py --decisions-only [--against /tmp/main-wt --rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This file is controller_bench.py, not controller.py: `import controller` finds the package.
from _common import REPO, pct

# --code DIR (the child processes of --against): measure DIR's controller code, not this checkout's.
# _common imported this checkout's harness already: forget it, so DIR's harness and controller load.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]).resolve() if "--code" in sys.argv else REPO
if CODE != REPO:
    sys.path.insert(0, str(CODE))
    for _name in [m for m in sys.modules if m.split(".")[0] in ("harness", "controller")]:
        del sys.modules[_name]

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from harness.cc import resolve
from harness.upkeep.clean import clean_prefix
from harness.testbeds.emulated import EmulatedTestbed
from harness.config.inventory import Inventory
from harness.testbeds.base import parse_link_stats
from controller.steering.ovs import splice_switch

from controller.model import EnergyModel
from controller.policy import Context, Decision, ReceiverMeasurement, RefISTuned
from controller.setup2 import steered_receivers
from controller.steering.nftables import NftSteering
from controller.steering.openflow import OpenFlowSteering

ORDER = ["n_receivers", "cc=balia", "cc=cubic", "mode=wifi", "mode=lte", "mode=both",
         "wifi_throughput_mbit", "lte_throughput_mbit"]


def random_mlp(d: Path) -> Path:
    """A 5 x 200 ReLU MLP with random weights, written as mplab exports it (model.onnx + model.json)."""
    rng = np.random.default_rng(0)
    dims = [len(ORDER)] + [200] * 5 + [1]
    inits, nodes, prev = [], [], "features"
    for i in range(len(dims) - 1):
        inits += [numpy_helper.from_array(rng.normal(0, 0.1, (dims[i + 1], dims[i])).astype(np.float32), f"W{i}"),
                  numpy_helper.from_array(np.zeros(dims[i + 1], np.float32), f"b{i}")]
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"b{i}"], [f"g{i}"], transB=1))
        prev = f"g{i}"
        if i < len(dims) - 2:
            nodes.append(helper.make_node("Relu", [prev], [f"h{i}"]))
            prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["energy_j"]))
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", len(ORDER)])],
                          [helper.make_tensor_value_info("energy_j", TensorProto.FLOAT, ["n", 1])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.onnx").write_bytes(m.SerializeToString())
    (d / "model.json").write_text(json.dumps({"schema_version": 1, "features": {"order": ORDER}, "validity": {
        "ccs": ["balia", "cubic"], "receiver_counts": list(range(1, 10)), "file_bytes": [4 * 2**20]}}))
    return d


def decision_latency(model_dir: Path | None, n: int) -> tuple[list[float], str, float, str]:
    """Wall seconds per decision, what model, CPU ms per decision, ``decision_digest`` with that model."""
    with tempfile.TemporaryDirectory() as tmp:
        if model_dir is not None and (model_dir / "model.json").exists():
            model, what = EnergyModel.load(model_dir), str(model_dir)
        else:
            model, what = EnergyModel.load(random_mlp(Path(tmp) / "m")), "random-weight 5x200 MLP (no --model found)"
        rng = np.random.default_rng(1)
        meas = []
        for i in range(9):  # a third of the receivers within the 10 % band, so Tuning has work to do
            w = float(rng.uniform(5, 20))
            lte = w * (1.03 if i % 3 == 0 else float(rng.uniform(0.3, 0.8)))
            meas.append(ReceiverMeasurement(f"n{i + 1}", {"wifi": w, "lte": lte}))
        rates = {m.receiver: dict(m.probe_mbit) for m in meas}
        pol = RefISTuned(model.predict)
        ctx = Context("cubic", 9, 4 * 2**20)

        def measure(a: dict[str, Decision]) -> dict[str, dict[str, float]]:
            return {rx: {r: rates[rx][r] for r in d.ifaces} for rx, d in a.items()}

        for _ in range(50):  # warm-up: first ONNX Runtime calls allocate
            pol.decide(meas, ctx, measure)
        out = []
        cpu0 = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            pol.decide(meas, ctx, measure)
            out.append(time.perf_counter() - t0)
        cpu_ms = (time.process_time() - cpu0) / n * 1e3
        return out, what, cpu_ms, decision_digest(model.predict)


QUANTILES = (50, 90, 95, 99)


def decision_digest(predict, cases: int = 3000) -> str:
    """sha256 of ref-is-tuned's outcomes (assignment and whole trace, energies to the last bit) on a fixed,
    seeded set of inputs: 1-9 receivers, both ccs, three bands and bases, a few dead nodes. Two checkouts
    that print the same digest decide the same."""
    import hashlib

    from controller.policy import NodeFailed

    rng = np.random.default_rng(42)
    h = hashlib.sha256()
    for _ in range(cases):
        n = int(rng.integers(1, 10))
        cc = ("balia", "cubic")[int(rng.integers(0, 2))]
        band, base = float(rng.choice([0.05, 0.1, 0.3])), str(rng.choice(["max", "min", "mean"]))
        meas = []
        for i in range(n):
            w = float(rng.uniform(0, 40))
            lte = w * float(rng.uniform(0.7, 1.3)) if rng.random() < 0.5 else float(rng.uniform(0, 40))
            if rng.random() < 0.02:
                w = lte = 0.0
            meas.append(ReceiverMeasurement(f"n{i + 1}", {"wifi": w, "lte": lte}))
        under = {m.receiver: {"wifi": float(rng.uniform(0, 40)), "lte": float(rng.uniform(0, 40))} for m in meas}

        def measure(a: dict[str, Decision]) -> dict[str, dict[str, float]]:
            return {rx: {r: under[rx][r] * (0.9 if len(d.ifaces) == 2 else 1.0) for r in d.ifaces}  # noqa: B023 - called within this iteration, before the variable moves on
                    for rx, d in a.items()}
        try:
            out = RefISTuned(predict, band=band, base=base).decide(meas, Context(cc, n, 4 * 2**20), measure)
            rec = {"a": {rx: d.mode for rx, d in out.assignment.items()}, "t": out.trace}
        except NodeFailed as exc:
            rec = {"failed": str(exc)}
        h.update(json.dumps(rec, sort_keys=True, default=repr).encode() + b"\n")
    return h.hexdigest()


def quantiles_ms(xs: list[float]) -> dict[str, float]:
    return {**{f"p{q}": pct(xs, q) * 1e3 for q in QUANTILES}, "max": max(xs) * 1e3}


def decision_child(code: Path, args: argparse.Namespace) -> dict:
    """One --decisions-only --json run of ``code``'s controller in a fresh process (its own imports)."""
    argv = [sys.executable, __file__, "--decisions-only", "--json", "--code", str(code),
            "--decisions", str(args.decisions), "--model", str(args.model)]
    return json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout.splitlines()[-1])


def compare(args: argparse.Namespace) -> None:
    """This checkout against ``args.against``, alternating, ``args.rounds`` times; ratios per quantile."""
    runs: dict[str, list[dict]] = {"this": [], "against": []}
    for i in range(args.rounds):
        for key, code in (("against", args.against), ("this", REPO)):
            r = decision_child(code, args)
            runs[key].append(r)
            q = "  ".join(f"p{k} {r[f'p{k}']:.3f}" for k in QUANTILES)
            print(f"round {i + 1} {key:7} ({r['code']}): {q}  max {r['max']:.2f} ms; CPU {r['cpu_ms']:.3f} ms/decision; "
                  f"load average {r['load']:.1f}", flush=True)
    digests = {r["digest"] for rs in runs.values() for r in rs}
    print("decisions on 3000 fixed inputs (assignments, traces, energies): "
          + ("identical in both checkouts" if len(digests) == 1 else f"DIFFERENT: {sorted(digests)}"))
    for k in [f"p{q}" for q in QUANTILES] + ["cpu_ms"]:
        a = statistics.median(r[k] for r in runs["against"])
        t = statistics.median(r[k] for r in runs["this"])
        print(f"median over rounds {k}: against {a:.3f} ms, this {t:.3f} ms, this/against {t / a:.2f}")


def small_inventory(prefix: str) -> Inventory:
    import yaml

    base = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    base["receivers"] = base["receivers"][:2]
    base["name"] = "bench-controller"
    base["emulation"]["namespace_prefix"] = prefix
    return Inventory.model_validate(base)


def ap_sent(tb: EmulatedTestbed) -> int:
    return parse_link_stats(tb.ap.run(["ip", "-j", "-s", "link", "show", "dev", "rx1"]).stdout, "ap")["rx1"].tx_bytes


def apply_times(steering, changes: int) -> list[float]:
    out = []
    for i in range(changes):
        mode = "lte" if i % 2 == 0 else "both"
        t0 = time.perf_counter()
        steering.apply({"n1": Decision.of(mode)})
        out.append(time.perf_counter() - t0)
    steering.apply({"n1": Decision.of("both")})
    return out


def quiet_times(tb: EmulatedTestbed, steering, blocks: int) -> list[float]:
    """Seconds from apply() returning to the last byte the AP sent the blocked receiver."""
    n1 = tb.nodes["n1"]
    out = []
    for _ in range(blocks):
        steering.apply({"n1": Decision.of("both")})
        tb.ensure_servers(["n1"])
        argv = n1.iperf3.client_argv(tb.server_address, n1.port, None, bind=n1.interfaces["wifi"].address,
                                     mptcp=True, cc=None, duration_s=6)
        proc = n1.host.start(argv, label="iperf3:n1")
        try:
            start = ap_sent(tb)
            deadline = time.monotonic() + 10
            while ap_sent(tb) - start < 1_000_000 and time.monotonic() < deadline:
                time.sleep(0.01)
            steering.apply({"n1": Decision.of("lte")})
            t_applied = time.perf_counter()
            last, t_last = ap_sent(tb), t_applied
            while time.perf_counter() - t_last < 0.5:  # quiet for 0.5 s: done
                now = ap_sent(tb)
                if now != last:
                    last, t_last = now, time.perf_counter()
                time.sleep(0.001)
            out.append(t_last - t_applied)
        finally:
            proc.stop()
    steering.apply({"n1": Decision.of("both")})
    return out


def ms(xs: list[float]) -> str:
    return f"p50 {statistics.median(xs) * 1e3:.2f} ms, p95 {pct(xs, 95) * 1e3:.2f} ms (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--decisions", type=int, default=2000)
    ap.add_argument("--changes", type=int, default=40)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--model", type=Path, default=REPO / "models" / "quick-setup2")
    ap.add_argument("--decisions-only", action="store_true", help="skip the steering measurements (no root)")
    ap.add_argument("--against", type=Path, help="another checkout: its decision latency beside this one's")
    ap.add_argument("--rounds", type=int, default=3, help="with --against: alternating runs of each")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--code", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.against is not None:
        compare(args)
        return
    lat, what, cpu_ms, digest = decision_latency(args.model, args.decisions)
    q = quantiles_ms(lat)
    if args.json:
        print(json.dumps({**q, "cpu_ms": cpu_ms, "load": os.getloadavg()[0], "model": what, "digest": digest,
                          "code": sys.modules[EnergyModel.__module__].__file__}))
        return
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"decision latency, ref-is-tuned, 9 receivers, {what}: "
          + ", ".join(f"p{k} {q[f'p{k}']:.3f}" for k in QUANTILES) + f", max {q['max']:.2f} ms "
          f"(n={len(lat)}); CPU {cpu_ms:.3f} ms per decision (goal p95 <= 2 ms; load average {load} on "
          f"{os.cpu_count()} CPUs: the tail is preemption when the machine is busy); decisions on fixed inputs: "
          f"sha256 {digest[:16]}")
    if args.decisions_only:
        return

    prefix = "mplab-bench-ctl-"
    tb = EmulatedTestbed(small_inventory(prefix))
    cubic = resolve("cubic")
    tb.preflight([cubic])
    try:
        tb.setup([cubic])
        nft = NftSteering({"wifi": tb.ap, "lte": tb.enb}, steered_receivers(tb))
        nft.setup()
        try:
            nft_apply = apply_times(nft, args.changes)
            nft_quiet = quiet_times(tb, nft, args.blocks)
        finally:
            nft.teardown()
        rig = splice_switch(tb)
        of = OpenFlowSteering.for_switch(rig, steered_receivers(tb))
        try:
            of.setup()
            of_apply = apply_times(of, args.changes)
            of_quiet = quiet_times(tb, of, args.blocks)
        finally:
            of.teardown()
            rig.stop()
    finally:
        tb.teardown()
        clean_prefix(prefix)
    print(f"apply one steering change, nftables: {ms(nft_apply)}")
    print(f"apply one steering change, OpenFlow (barrier-confirmed): {ms(of_apply)}")
    print(f"  ratio OpenFlow / nftables (p50): {statistics.median(of_apply) / statistics.median(nft_apply):.2f}")
    print(f"blocked path quiet after apply returned, nftables: {ms(nft_quiet)}")
    print(f"blocked path quiet after apply returned, OpenFlow: {ms(of_quiet)}")


if __name__ == "__main__":
    main()
