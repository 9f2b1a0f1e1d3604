"""Configured vs achieved on the emulated testbed: per path, MPTCP aggregates, sharing, loss, coupling.

1. Each receiver of inventory/emulated.yaml alone, in each mode (wifi, lte: one path; both:
   MPTCP over both, configured = sum of the two channel rates), then all nine receivers at
   once on one access network (configured = what the sharing model gives them together).
2. One slow and two fast WiFi stations under ``dcf`` and ``airtime``: measured totals while
   all three are active vs the models; the same at a radio-loop rate of 2 Hz (its effect:
   how far each receiver's duration lands from the instant re-share of the fluid model).
3. Proportional-fair shares of three LTE receivers (30/20/10 Mbit/s links, 30 Mbit/s cell).
4. Loss configured vs measured (the sender's retransmissions) on one WiFi path.
5. A shared bottleneck on a router (rigs/bottleneck.py): coupled LIA against one TCP
   flow and uncoupled cubic against one TCP flow, as ratios (theory: about 1 and 2).
Prints ratios measured in this one run. Needs root.

    uv run python bench/fidelity.py [--file-size 4M] [--only sharing,loss,bottleneck,paths]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import yaml
from _common import REPO, plan, runner

from harness.config.scenario import Scenario
from harness.emulation.sharing import share_rates, simulate_sample


def shared_rate(records: list[dict], raw: Path) -> float:
    """Aggregate Mbit/s while every receiver was active, from iperf3's per-second intervals.

    Averaging over first start to last finish would count the time when only the slowest
    receivers are left and the shared capacity is no longer the bottleneck.
    """
    return sum(per_receiver_rates(records, raw).values())


def custom_inventory(path: Path, receivers: list[tuple[float, float, float]], wifi: dict, lte: dict,
                     hz: float = 20.0) -> Path:
    """inventory/emulated.yaml with other receivers (wifi Mbit/s, lte Mbit/s, wifi loss %) and networks."""
    base = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    base["receivers"] = [{"name": f"n{i}", "meter": {"kind": "emulated-um25c"}, "interfaces": {
        "wifi": {"name": "wlan0", "channel": {"rate_mbit": w, "buffer_ms": 10, "loss_pct": loss}},
        "lte": {"name": "lte0", "channel": {"rate_mbit": lt, "buffer_ms": 60}}}}
        for i, (w, lt, loss) in enumerate(receivers, start=1)]
    base["emulation"]["wifi_ap"] = wifi
    base["emulation"]["lte_cell"] = lte
    base["emulation"]["radio_loop_hz"] = hz
    path.write_text(yaml.safe_dump(base))
    return path


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench_paths(args, rows) -> None:
    sc = Scenario(name="fidelity", congestion_controls=[args.cc], receiver_counts=[1], modes=["wifi", "lte", "both"],
                  samples_per_case=1, file_size=args.file_size, settle_s=0, retries=1)
    with runner("mplab-bench-fid-", sc) as (r, tb):
        inv = tb.inventory
        for rx in inv.receivers:
            w = rx.interfaces["wifi"].channel.rate_mbit
            lte = rx.interfaces["lte"].channel.rate_mbit
            want = {"wifi": min(w, tb.access_network("wifi").capacity(1)),
                    "lte": min(lte, tb.access_network("lte").capacity(1))}
            want["both"] = want["wifi"] + want["lte"]
            for mode in ("wifi", "lte", "both"):
                out = r.run_sample(plan(args.cc, mode, (rx.name,), 1))
                got = out.records[0]["throughput_mbit"] or 0.0
                rows.append((rx.name, mode, want[mode], got))
        names = tuple(x.name for x in inv.receivers)
        for mode in ("wifi", "lte"):
            net = tb.access_network(mode)
            cap = sum(share_rates(net, {x.name: x.interfaces[mode].channel.rate_mbit for x in inv.receivers}).values())
            p = plan(args.cc, mode, names, 2)
            out = r.run_sample(p)
            raw = r.campaign.path / "raw" / p.sample_id / f"attempt-{out.attempts}"
            rows.append((f"all {len(names)}", f"{mode} shared", cap, shared_rate(out.records, raw)))


def _sample(r, tb, cc: str, mode: str, names: tuple[str, ...], index: int):
    p = plan(cc, mode, names, index)
    out = r.run_sample(p)
    return out, r.campaign.path / "raw" / p.sample_id / f"attempt-{out.attempts}"


def bench_sharing(args, tmp: Path) -> list[str]:
    lines = []
    sc = Scenario(name="fidelity", congestion_controls=[args.cc], receiver_counts=[3], modes=["wifi", "lte"],
                  samples_per_case=1, file_size=args.file_size, settle_s=0.3, retries=1)
    stations = [(30.0, 30.0, 0.0), (30.0, 20.0, 0.0), (6.0, 10.0, 0.0)]
    names = ("n1", "n2", "n3")
    for sharing, hz in (("dcf", 20.0), ("airtime", 20.0), ("airtime", 2.0)):
        inv = custom_inventory(tmp / f"{sharing}-{hz}.yaml", stations, {"capacity_mbit": 60, "sharing": sharing},
                               {"capacity_mbit": 30, "sharing": "proportional-fair"}, hz)
        with runner("mplab-bench-fsh-", sc, inv) as (r, tb):
            net = tb.access_network("wifi")
            model = share_rates(net, {n: w for n, (w, _, _) in zip(names, stations)})
            fluid = simulate_sample(sc.file_bytes * 8 / 1e6, list(names), "wifi", net, tb.access_network("lte"),
                                    {n: s[0] for n, s in zip(names, stations)},
                                    {n: s[1] for n, s in zip(names, stations)}, efficiency={"wifi": 1448 / 1514})
            cpu0 = _cpu_s(tb._radiolink.pid)
            out, raw = _sample(r, tb, args.cc, "wifi", names, 1)
            cpu = _cpu_s(tb._radiolink.pid) - cpu0
            got = shared_rate(out.records, raw) / (1448 / 1514)
            want = sum(model.values())
            dur = {x["receiver"]: x["duration_s"] for x in out.records}
            err = max(abs(dur[n] / fluid[n].duration_s - 1) for n in names)
            lines.append(f"WiFi {sharing:8} loop {hz:4.0f} Hz: total while all active {got:6.2f} Mbit/s link vs "
                         f"model {want:6.2f} (ratio {got / want:.3f}); durations vs fluid model: worst "
                         f"{err:.1%}; loop CPU {cpu / out.wall_s:.1%} of a core")
            if sharing == "dcf":
                out, raw = _sample(r, tb, args.cc, "lte", names, 2)
                lnet = tb.access_network("lte")
                want = share_rates(lnet, {n: s[1] for n, s in zip(names, stations)})
                got = per_receiver_rates(out.records, raw)
                lines.append("LTE proportional-fair shares while all active (link Mbit/s, measured/model): " +
                             ", ".join(f"{n} {got[n] / (1448 / 1514):.2f}/{want[n]:.2f}" for n in names))
    return lines


def bench_loss(args, tmp: Path) -> list[str]:
    lines = []
    sc = Scenario(name="fidelity", congestion_controls=["cubic"], receiver_counts=[1], modes=["wifi"],
                  samples_per_case=1, file_size="16M", settle_s=0, retries=1, transfer_timeout_s=120)
    for loss in (1.0, 3.0):
        inv = custom_inventory(tmp / f"loss{loss}.yaml", [(20.0, 10.0, loss)], {"capacity_mbit": 40},
                               {"capacity_mbit": 36})
        with runner("mplab-bench-flo-", sc, inv) as (r, tb):
            out, _ = _sample(r, tb, "cubic", "wifi", ("n1",), 1)
            rec = out.records[0]
            segs = rec["bytes"] / 1448
            measured = rec["retransmits"] / (segs + rec["retransmits"]) * 100
            drops = tb.radio_loss_counters()["n1"]["wifi"].lost_pkts
            lines.append(f"loss {loss:.1f}% configured on n1 WiFi: retransmissions {measured:.2f}% of segments "
                         f"(ratio {measured / loss:.2f}); nft dropped {drops} packets; {rec['throughput_mbit']:.1f} Mbit/s")
    return lines


def bench_bottleneck(args) -> list[str]:
    from harness.cc import resolve
    from rigs.bottleneck import SharedBottleneck

    lia, cubic = resolve("lia"), resolve("cubic")
    lines = []
    for delay_ms, buffer_bytes in ((0.0, 75_000), (args.bottleneck_delay_ms, 75_000)):
        coupled, uncoupled = [], []
        with SharedBottleneck("mplab-bench-fbn-", [lia, cubic], rate_mbit=50, buffer_bytes=buffer_bytes,
                              base_delay_ms=delay_ms) as bn:
            for _ in range(args.rounds):
                coupled.append(bn.compete(lia, duration_s=8, omit_s=3).ratio)
                uncoupled.append(bn.compete(cubic, duration_s=8, omit_s=3).ratio)
        lm, cm = statistics.median(coupled), statistics.median(uncoupled)
        lines.append(f"shared bottleneck (router, 50 Mbit/s, {buffer_bytes // 1000} kB FIFO, base delay {delay_ms:g} ms), "
                     f"MPTCP over one TCP flow, {args.rounds} rounds: LIA median {lm:.2f} ({min(coupled):.2f}-"
                     f"{max(coupled):.2f}), uncoupled cubic median {cm:.2f} ({min(uncoupled):.2f}-{max(uncoupled):.2f}); "
                     f"cubic/LIA {cm / lm:.2f} (theory: about 1 and 2)")
    return lines


def per_receiver_rates(records: list[dict], raw: Path) -> dict[str, float]:
    """Each receiver's Mbit/s while every receiver was active (iperf3 intervals in the common window)."""
    spans = [(r["window_start"], r["window_end"]) for r in records]
    w0, w1 = max(s for s, _ in spans), min(e for _, e in spans)
    out = {}
    for r in records:
        doc = json.loads((raw / f"iperf3-{r['receiver']}.json").read_text())
        bits = 0.0
        for iv in doc["intervals"]:
            s = iv["sum"]
            a, b = r["window_start"] + s["start"], r["window_start"] + s["end"]
            overlap = max(0.0, min(b, w1) - max(a, w0))
            if overlap > 0 and b > a:
                bits += s["bytes"] * 8 * overlap / (b - a)
        out[r["receiver"]] = bits / (w1 - w0) / 1e6
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file-size", default="4M")
    ap.add_argument("--cc", default="cubic")
    ap.add_argument("--rounds", type=int, default=4, help="shared-bottleneck rounds per algorithm")
    ap.add_argument("--bottleneck-delay-ms", type=float, default=20.0,
                    help="base one-way delay of the second shared-bottleneck run (delay line)")
    ap.add_argument("--only", default="paths,sharing,loss,bottleneck")
    args = ap.parse_args()
    only = set(args.only.split(","))
    rows: list = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mplab-bench-fid-") as tmp:
        if "paths" in only:
            bench_paths(args, rows)
        if "sharing" in only:
            notes += bench_sharing(args, Path(tmp))
        if "loss" in only:
            notes += bench_loss(args, Path(tmp))
    if "bottleneck" in only:
        notes += bench_bottleneck(args)
    if rows:
        print(f"{'receiver':10} {'mode':12} {'configured':>10} {'achieved':>9} {'ratio':>6}")
        for name, mode, want, got in rows:
            print(f"{name:10} {mode:12} {want:10.2f} {got:9.2f} {got / want:6.3f}")
        for mode in ("wifi", "lte", "both"):
            ratios = [g / w for _, m, w, g in rows if m == mode]
            print(f"median ratio {mode:5}: {statistics.median(ratios):.3f}  (min {min(ratios):.3f}, "
                  f"max {max(ratios):.3f})")
        for mode in ("wifi shared", "lte shared"):
            print(f"ratio {mode}: " + ", ".join(f"{g / w:.3f}" for _, m, w, g in rows if m == mode))
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
