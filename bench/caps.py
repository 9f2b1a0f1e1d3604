"""Rate caps on the emulated testbed: OpenFlow meters (OVS userspace datapath + the os-ken app) vs HTB.

    uv run python bench/caps.py                    # caps 2..15 Mbit/s each way, the burst sweep, the figure
    uv run python bench/caps.py --figure docs/caps-accuracy.png

One receiver (30 Mbit/s channels) behind a real OVS spliced into the sender's links (OpenFlow
steering allowing everything). Per cap and enforcer, one iperf3 TCP (cubic) transfer on its WiFi
path: ``--warm`` s, then ``--seconds`` s counted two ways: frames the AP sent it (Ethernet header
included, the unit both enforcers count) and iperf3's goodput (TCP payload; at most 1448/1514 of a
frame). Enforcers: ``openflow-meter`` (``MeterCaps``: a kbit/s DROP meter, burst ``METER_BURST_S``
of the rate, on the downlink entry) and ``htb`` (``HtbCaps``: an HTB class over a 50 ms byte FIFO
on the AP's port towards the receiver). Then the meter's burst swept at 8 Mbit/s (why 0.25 s).
One run, numbers as they came out; namespace prefix ``mplab-bench-caps-``.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from harness.cc import resolve
from harness.upkeep.clean import clean_prefix
from harness.testbeds.emulated import EmulatedTestbed
from rigs.pathrate import PAYLOAD_SHARE, PathTransfer

from controller.policy import Decision
from controller.setup2 import gateway_caps, steered_receivers
from controller.steering.caps import METER_BURST_S, MeterCaps
from controller.steering.openflow import OpenFlowSteering
from controller.steering.ovs import splice_switch

from rigs.inventories import small_inventory

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-caps-"
WIFI = frozenset({"wifi"})


def measure(tb, caps, cap_mbit: float, warm_s: float, seconds: float) -> dict:
    """One transfer through ``cap_mbit`` set by ``caps``; the cap lifted after."""
    caps.apply({"n1": Decision(WIFI, {"wifi": cap_mbit})})
    try:
        with PathTransfer(tb, "n1", "wifi", int(warm_s + seconds)) as t:
            frames = t.frame_rate(warm_s, warm_s + seconds)
            drops = caps.stats()["n1"]["wifi"]["dropped_packets"] if isinstance(caps, MeterCaps) else None
            t.finish()
    finally:
        caps.apply({"n1": Decision(WIFI)})
    return {"frames": frames, "goodput": t.goodput(warm_s, warm_s + seconds),
            "seconds": t.per_second(warm_s, warm_s + seconds), "drops": drops}


def err(x: float, cap: float) -> str:
    return f"{x:.2f} ({x / cap - 1:+.1%})"


def spread(row: dict) -> str:
    return f"{min(row['seconds']):.2f}..{max(row['seconds']):.2f}"


def figure(path: Path, rates: list[float], rows: dict, bursts: list[float], sweep: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, marker, color in (("openflow-meter", "o", "tab:blue"), ("htb", "s", "tab:green")):
        a.plot(rates, [rows[(name, r)]["frames"] / r for r in rates], marker=marker, color=color,
               label=f"{name}: frames")
        a.plot(rates, [rows[(name, r)]["goodput"] / r for r in rates], marker=marker, color=color, linestyle="--",
               label=f"{name}: goodput")
        lo = [min(rows[(name, r)]["seconds"]) / r for r in rates]
        hi = [max(rows[(name, r)]["seconds"]) / r for r in rates]
        a.fill_between(rates, lo, hi, color=color, alpha=0.12)
    a.axhline(1.0, color="grey", linewidth=0.8)
    a.axhline(PAYLOAD_SHARE, color="grey", linewidth=0.8, linestyle=":")  # goodput's ceiling
    a.set_xlabel("cap (Mbit/s)")
    a.set_ylabel("measured / cap")
    a.set_title("cap accuracy (shaded: goodput of single seconds)")
    a.legend(fontsize=7)
    b.plot(bursts, [sweep[x]["frames"] / 8.0 for x in bursts], marker="o", label="frames")
    b.plot(bursts, [sweep[x]["goodput"] / 8.0 for x in bursts], marker="o", linestyle="--", label="goodput")
    b.axvline(METER_BURST_S, color="grey", linewidth=0.8)
    b.set_xlabel("meter burst (s at the rate)")
    b.set_ylabel("measured / cap (8 Mbit/s)")
    b.set_title("meter burst")
    b.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="2,4,6,8,10,12,15")
    ap.add_argument("--bursts", default="0.1,0.15,0.2,0.25,0.5,1.0")
    ap.add_argument("--warm", type=float, default=2.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--figure", type=Path)
    args = ap.parse_args()
    rates = [float(x) for x in args.rates.split(",")]
    bursts = [float(x) for x in args.bursts.split(",")]

    tb = EmulatedTestbed(small_inventory(PREFIX, [(30, 30)]))
    cubic = resolve("cubic")
    tb.preflight([cubic])
    rig = steering = None
    rows, sweep = {}, {}
    try:
        tb.setup([cubic])
        rig = splice_switch(tb)
        steering = OpenFlowSteering.for_switch(rig, steered_receivers(tb))
        steering.setup()
        meters, htb = MeterCaps(steering), gateway_caps(tb)
        print(f"meter features: {steering.request({'op': 'meter_features'})}")
        print(f"HTB enforcer: {type(htb).__name__}")
        for r in rates:
            for name, caps in (("openflow-meter", meters), ("htb", htb)):
                rows[(name, r)] = measure(tb, caps, r, args.warm, args.seconds)
        for x in bursts:
            sweep[x] = measure(tb, MeterCaps(steering, burst_s=x), 8.0, args.warm, args.seconds)
    finally:
        if steering is not None:
            steering.teardown()
        if rig is not None:
            rig.stop()
        tb.teardown()
        clean_prefix(PREFIX)

    print(f"\nCap accuracy, Mbit/s over {args.seconds:.0f} s after {args.warm:.0f} s (error vs the cap); goodput's "
          f"ceiling is {PAYLOAD_SHARE:.3f} of the cap; per-second goodput min..max")
    print("| cap | meter: frames | meter: goodput | meter: 1 s goodput | meter drops | HTB: frames | HTB: goodput "
          "| HTB: 1 s goodput |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rates:
        m, h = rows[("openflow-meter", r)], rows[("htb", r)]
        print(f"| {r:g} | {err(m['frames'], r)} | {err(m['goodput'], r)} | {spread(m)} | {m['drops']} "
              f"| {err(h['frames'], r)} | {err(h['goodput'], r)} | {spread(h)} |")
    for name in ("openflow-meter", "htb"):
        fe = [abs(rows[(name, r)]["frames"] / r - 1) for r in rates]
        ge = [rows[(name, r)]["goodput"] / r for r in rates]
        print(f"{name}: worst |frame error| {max(fe):.1%} (mean {statistics.mean(fe):.1%}); goodput/cap "
              f"{min(ge):.3f}..{max(ge):.3f}")
    print("\nMeter burst at 8 Mbit/s")
    print("| burst (s at the rate) | burst (kbit) | frames | goodput | 1 s goodput | drops |")
    print("|---|---|---|---|---|---|")
    for x in bursts:
        s = sweep[x]
        print(f"| {x:g} | {round(8000 * x)} | {err(s['frames'], 8.0)} | {err(s['goodput'], 8.0)} | {spread(s)} "
              f"| {s['drops']} |")
    if args.figure:
        figure(args.figure, rates, rows, bursts, sweep)
        print(f"\nfigure: {args.figure}")


if __name__ == "__main__":
    main()
