"""Start skew across 9 SSH hosts, and per-sample orchestration overhead over SSH vs namespaces.

Run as root on a machine with kernel MPTCP, iperf3 and openssh-server:

    uv run python bench/skew.py [--rounds 40] [--samples 6]

What it measures, in one run on one machine:

* **start skew**: the emulated testbed's 9 receiver namespaces each run a real sshd
  (``rigs.sshrig``); per round, a gated command is pre-spawned on every receiver
  through its ``SSHHost`` and all are released as the runner releases iperf3 clients.
  Each gate stamps its own release time (receiver clock mapped to the orchestrator's
  with the measured offset); skew = latest - earliest release in the round. The same
  rounds run through ``NamespaceHost``s for reference. Reported: p50/p95/max (ms).
* **orchestration overhead per sample**: the same 3-receiver sample (small file, so
  transfer time does not dominate) through ``start_campaign`` on the emulated
  inventory (namespace hosts) and on a lab inventory pointing at the sshds (SSH hosts).
  Overhead = sample wall time - longest transfer; reported as medians and their ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from harness.campaign.campaign import RunHooks, start_campaign
from harness.cc import resolve
from harness.upkeep.clean import clean_prefix
from harness.testbeds.emulated import EmulatedTestbed
from harness.hosts.local import Host
from harness.config.inventory import Inventory
from harness.config.scenario import Scenario
from rigs.sshrig import SshdRig, lab_inventory

REPO = Path(__file__).resolve().parent.parent


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def skew_rounds(hosts: list[Host], rounds: int, loops: list[float] | None = None) -> list[float]:
    """Per round: spread (s) of the gate-stamped release times of one gated command per host.

    ``loops`` collects the orchestrator's own part: first to last ``release()`` call.
    """
    out = []
    for _ in range(rounds):
        procs = [h.start(["true"], gated=True, label=f"skew:{h.name}") for h in hosts]
        for p in procs:
            p.wait_ready(20)  # as the runner does: every gate blocked before the first release
        t0 = time.perf_counter()
        for p in procs:
            p.release()
        if loops is not None:
            loops.append(time.perf_counter() - t0)
        results = [p.wait(10) for p in procs]
        starts = [r.released_at for r in results]
        if None in starts:
            raise RuntimeError(f"a gate reported no release time: {[r.stderr for r in results]}")
        out.append(max(starts) - min(starts))
    return out


def scenario(name: str, samples: int) -> Scenario:
    return Scenario.model_validate({
        "schema_version": 1, "name": name, "congestion_controls": ["cubic"], "receiver_counts": [3],
        "modes": ["both"], "samples_per_case": samples, "file_size": "256K", "transfer_timeout_s": 30,
        "retries": 1, "settle_s": 0, "shuffle": False, "seed": 1})


def overheads(sc: Scenario, inv: Inventory, runs: Path) -> list[float]:
    outs = []
    start_campaign(sc, inv, runs, campaign_id=f"{sc.name}-{uuid.uuid4().hex[:4]}",
                   hooks=RunHooks(on_sample=lambda o: outs.append(o)))
    bad = [o.plan.sample_id for o in outs if o.status != "ok"]
    if bad:
        print(f"warning: {sc.name}: samples not ok: {bad}", file=sys.stderr)
    # The first sample pays one-off costs (connections, server warm-up): leave it out of both.
    return [o.wall_s - o.idle_s - o.transfer_s for o in outs[1:] if o.status == "ok"]  # tails are not overhead


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=40, help="skew rounds per host kind")
    ap.add_argument("--samples", type=int, default=6, help="samples per overhead run")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--login-rc", action="store_true",
                    help="let the rig's shells source root's ~/.bashrc (see rigs.sshrig.SKIP_RC)")
    args = ap.parse_args()

    prefix = f"mplab-b{uuid.uuid4().hex[:5]}-"
    data = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    data["emulation"]["namespace_prefix"] = prefix
    inv = Inventory.model_validate(data)
    runs = Path(tempfile.mkdtemp(prefix="mplab-bench-"))
    figures: dict = {"receivers": len(inv.receivers), "rounds": args.rounds, "login_rc": args.login_rc}
    try:
        ns_over = overheads(scenario("bench-ns", args.samples), inv, runs)
        tb = EmulatedTestbed(inv)
        rig = None
        try:
            tb.setup([resolve("cubic")])
            rig = SshdRig(prefix, skip_rc=not args.login_rc)
            rig.add("snd", tb.ns["snd"])
            for name in tb.nodes:
                rig.add(name, tb.ns[name])
            ssh_hosts = [rig.ssh_host(name) for name in tb.nodes]
            for h in ssh_hosts:
                h.orchestrator_offset_s = h.clock_offset_s()
            ns_hosts = [node.host for node in tb.nodes.values()]
            skew_rounds(ssh_hosts, 2)  # warm up: connections open, sshd forks cached
            ssh_loop: list[float] = []
            ssh_skew = skew_rounds(ssh_hosts, args.rounds, ssh_loop)
            ns_skew = skew_rounds(ns_hosts, args.rounds)
            for h in ssh_hosts:
                h.close()
            print(f"skew p95: SSH {1000 * percentile(ssh_skew, 0.95):.2f} ms, "
                  f"namespaces {1000 * percentile(ns_skew, 0.95):.2f} ms", flush=True)
            lab = Inventory.model_validate(lab_inventory(tb, rig, name="bench-lab"))
            ssh_over = overheads(scenario("bench-ssh", args.samples), lab, runs)
        finally:
            if rig is not None:
                rig.close()
            tb.teardown()
    finally:
        clean_prefix(prefix)
        import shutil
        shutil.rmtree(runs, ignore_errors=True)

    def ms(xs: list[float]) -> dict:
        return {"p50_ms": 1000 * percentile(xs, 0.5), "p95_ms": 1000 * percentile(xs, 0.95),
                "max_ms": 1000 * max(xs)}

    figures["skew_ssh"] = ms(ssh_skew)
    figures["skew_netns"] = ms(ns_skew)
    figures["release_loop_ssh"] = ms(ssh_loop)
    figures["overhead_ssh_s"] = statistics.median(ssh_over)
    figures["overhead_netns_s"] = statistics.median(ns_over)
    figures["overhead_ratio_ssh_vs_netns"] = figures["overhead_ssh_s"] / figures["overhead_netns_s"]
    s, n = figures["skew_ssh"], figures["skew_netns"]
    print(f"start skew across {len(inv.receivers)} receivers, {args.rounds} rounds (gate-stamped release times):")
    print(f"  SSH hosts:       p50 {s['p50_ms']:.2f} ms  p95 {s['p95_ms']:.2f} ms  max {s['max_ms']:.2f} ms"
          f"  (target p95 <= 10 ms: {'met' if s['p95_ms'] <= 10 else 'NOT met'})")
    print(f"  namespace hosts: p50 {n['p50_ms']:.2f} ms  p95 {n['p95_ms']:.2f} ms  max {n['max_ms']:.2f} ms")
    rl = figures["release_loop_ssh"]
    print(f"  orchestrator's release loop over SSH (first to last release): p50 {rl['p50_ms']:.2f} ms  "
          f"p95 {rl['p95_ms']:.2f} ms")
    print(f"  (load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; all 9 'hosts' share them)")
    print(f"orchestration overhead per 3-receiver sample (wall - transfer, median of {args.samples - 1}):")
    print(f"  SSH {figures['overhead_ssh_s']:.3f} s, namespaces {figures['overhead_netns_s']:.3f} s, "
          f"ratio SSH/namespaces {figures['overhead_ratio_ssh_vs_netns']:.2f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
