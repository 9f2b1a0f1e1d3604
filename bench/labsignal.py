"""MP-SDN's congestion signal on a lab: the lab switch's port towards the network, read over OpenFlow.

    uv run python bench/labsignal.py [--rounds 20] [--seconds 4]

Rig (rigs/labswitch.py, as tests/test_lab.py's): one receiver, WiFi 20 / LTE 10 Mbit/s channels,
a real OVS (userspace datapath) between the sender and the AP / eNB, the os-ken app where a lab campaign
runs it (this machine, over the management veth). The lab inventory's capacities are the channels'.
Measured in one run:

1. what one read of the signal costs: the app's ``ports`` op (OFPMP_PORT_STATS + the meters' stats)
   against its ``counters`` op (flow stats, read every EI already), median of ``--rounds`` each, and the
   ratio;
2. what the signal reads (``controller.congestion.SwitchPortSignal``, over ``--seconds`` after 2 s of
   a single-path TCP transfer on LTE): idle, the path saturated (expected ~1), and the transfer held
   by a meter at half the capacity (expected ~0.5), each beside the rate the AP sent the receiver
   (its frames, ``PathTransfer.frame_rate``).

Namespace prefix ``mplab-bench-lsig-``; nothing else on the machine is touched.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.upkeep.clean import clean_prefix
from rigs.pathrate import PathTransfer

from controller.congestion import SwitchPortSignal
from controller.policy import Decision
from controller.setup2 import steered_receivers
from controller.steering.caps import MeterCaps
from controller.steering.openflow import OpenFlowSteering

from rigs.labswitch import lab_switch_rig

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-lsig-"
LTE_MBIT = 10.0


def op_s(steering: OpenFlowSteering, op: str, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        steering.request({"op": op})
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def reading(r, signal: SwitchPortSignal, seconds: int, transfer: bool) -> tuple[dict, float | None]:
    """The signal over ``seconds`` (after 2 s of the transfer, if any), and the AP's frame rate then."""
    if not transfer:
        signal.start()
        time.sleep(seconds)  # a measurement window, not a readiness wait
        return signal.read().detail["lte"], None
    with PathTransfer(r.tb, "n1", "lte", 3 + seconds) as tr:
        tr.wait_until(2.0)
        signal.start()
        rate = tr.frame_rate(2.0, 2.0 + seconds)  # the same window as the signal's, give or take a read
        got = signal.read().detail["lte"]
    return got, rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=4)
    args = ap.parse_args()
    try:
        with lab_switch_rig(PREFIX, [(20, LTE_MBIT)]) as r:
            run(r, args)
    finally:
        clean_prefix(PREFIX)


def run(r, args) -> None:
    sw = r.lab.lab.switch
    print(f"lab.switch capacities: {sw.capacity_mbit()}")
    with tempfile.TemporaryDirectory(prefix=PREFIX) as d:
        steering = OpenFlowSteering.for_lab(sw, steered_receivers(r.tb), Path(d) / "app")
        steering.setup()
        caps = MeterCaps(steering)
        try:
            ports, counters = op_s(steering, "ports", args.rounds), op_s(steering, "counters", args.rounds)
            print(f"one read, median of {args.rounds}: ports {ports * 1e3:.2f} ms, counters {counters * 1e3:.2f} ms "
                  f"(ratio {ports / counters:.2f})")
            signal = SwitchPortSignal(steering.request, sw.capacity_mbit())
            for label, cap, transfer, want in (("idle", None, False, 0.0), ("saturated", None, True, 1.0),
                                               ("meter at half", LTE_MBIT / 2, True, 0.5)):
                if cap is not None:
                    caps.apply({"n1": Decision(frozenset({"wifi", "lte"}), {"lte": cap})})
                got, rate = reading(r, signal, args.seconds, transfer)
                caps.apply({"n1": Decision.of("both")})
                sent = f", the AP sent {rate:.2f} Mbit/s" if rate is not None else ""
                print(f"{label:>14}: port tx {got['tx_mbit']:.2f} Mbit/s over {got['interval_s']:.2f} s, utilisation "
                      f"{got['utilisation']:.3f} (expected ~{want}), tx_dropped {got['tx_dropped']}, meter dropped "
                      f"{got['meter_dropped_bytes']} B{sent}")
        finally:
            caps.clear()
            steering.teardown()


if __name__ == "__main__":
    main()
