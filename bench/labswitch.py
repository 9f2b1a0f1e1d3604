"""The lab switch path: the os-ken app on the controller machine driving an OVS over a management network.

    uv run python bench/labswitch.py [--rounds 20] [--seconds 5]

Rig (rigs/labswitch.py, as tests/test_lab.py's): an emulated testbed (one receiver, 30 Mbit/s channels) with a real OVS
(userspace datapath) spliced between the sender and the AP / eNB, listening ``ptcp:6653`` on every
address of its namespace, which has a management veth and an sshd (``rigs.sshrig``).
Measured in one run:

1. the preflight handshake (``harness.upkeep.ofprobe.probe_switch``: HELLO, FEATURES, METER_FEATURES)
   over the management veth, median of ``--rounds``;
2. ``apply`` (delete / add a receiver's entries, confirmed by a barrier reply), median of ``--rounds``
   alternations wifi <-> lte, with the app where a lab campaign runs it (this machine's root namespace,
   over the management veth to ``lab.switch.listen``) against the app inside the switch's namespace
   (127.0.0.1, as the emulated splice runs it): the ratio is what the lab path costs;
3. caps as ``serve --cap`` sets them (``MeterCaps`` on that steering) at 2, 4 and 8 Mbit/s: frames the AP
   sent the receiver over ``--seconds`` s after 2 s, as a ratio to the cap.

Namespace prefix ``mplab-bench-lsw-``; nothing else on the machine is touched.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness.hosts.local import NamespaceHost
from harness.upkeep.clean import clean_prefix
from harness.upkeep.ofprobe import probe_switch
from rigs.pathrate import PathTransfer

from controller.policy import Decision
from controller.setup2 import steered_receivers
from controller.steering.caps import MeterCaps
from controller.steering.openflow import OpenFlowSteering

from rigs.labswitch import lab_switch_rig

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-lsw-"


def apply_s(steering: OpenFlowSteering, rounds: int) -> float:
    out = []
    for i in range(rounds):
        steering.apply({"n1": Decision.of("lte" if i % 2 == 0 else "wifi")})
        out.append(steering.last_apply_s)
    steering.apply({"n1": Decision.of("both")})
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    try:
        with lab_switch_rig(PREFIX, [(30, 30)]) as r:
            run(r, args)
    finally:
        clean_prefix(PREFIX)


def run(r, args) -> None:
    lab, receivers = r.lab.lab.switch, steered_receivers(r.tb)
    t = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        info = probe_switch(lab.listen)
        t.append(time.perf_counter() - t0)
    print(f"handshake with {lab.listen}: median {statistics.median(t) * 1e3:.2f} ms "
          f"({args.rounds} rounds); {info.describe()}")

    with tempfile.TemporaryDirectory(prefix="mplab-bench-lsw-") as d:
        remote = OpenFlowSteering.for_lab(lab, receivers, Path(d) / "lab")
        remote.setup()
        try:
            lab_s = apply_s(remote, args.rounds)
        finally:
            remote.teardown()
        local = OpenFlowSteering(NamespaceHost("sw", r.switch.netns), "127.0.0.1:6653", lab.ports(), receivers,
                                 Path(d) / "local")
        local.setup()
        try:
            local_s = apply_s(local, args.rounds)
        finally:
            local.teardown()
        print(f"apply (barrier-confirmed), median of {args.rounds}: app here over the management veth "
              f"{lab_s * 1e3:.2f} ms, app in the switch's namespace {local_s * 1e3:.2f} ms "
              f"(ratio {lab_s / local_s:.2f})")

        steering = OpenFlowSteering.for_lab(lab, receivers, Path(d) / "caps")
        steering.setup()
        caps = MeterCaps(steering)
        try:
            assert caps.unsupported() is None
            for cap in (2.0, 4.0, 8.0):
                caps.apply({"n1": Decision(frozenset({"wifi"}), {"wifi": cap})})
                with PathTransfer(r.tb, "n1", "wifi", 2 + args.seconds) as tr:
                    rate = tr.frame_rate(2.0, 2.0 + args.seconds)
                caps.apply({"n1": Decision.of("both")})
                print(f"cap {cap:g} Mbit/s (meter on the lab switch): the AP sent {rate:.2f} Mbit/s over "
                      f"{args.seconds} s (ratio {rate / cap:.3f})")
        finally:
            caps.clear()
            steering.teardown()

if __name__ == "__main__":
    main()
