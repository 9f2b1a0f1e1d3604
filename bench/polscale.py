"""Policy scenarios at scale: one controller per testbed copy (`mplab run SCENARIO --testbeds K` with `policies:`).

Run as root on a machine with kernel MPTCP, iperf3 and (for openflow) Open vSwitch:

    uv run python bench/polscale.py [--samples-per-case 2] [--file-size 2M] [--steering nftables openflow]

One small policy campaign (the default emulated inventory, 2 receivers per sample, cubic; fixed
policies, ``ref-is`` (probes) and ``mp-sdn`` (probes, then a periodic loop that re-decides every
epoch during the transfer); the same seeded plan) runs through ``start_campaign`` at K = 1 and
K = 2 with nftables steering, and at K = 2 with each further steering named. Reported per run,
in one run of this script:

* samples/hour over the sweep (set-up of the copies excluded), the speed-up over K = 1;
* per case (policy), the decisions (assignment per receiver) and mean throughput and energy per
  receiver at K divided by the same at K = 1;
* records per testbed, periodic-policy epochs recorded per record (``mp-sdn`` with a 0.5 s epoch),
  and path leaks (bytes on a
  network the decision blocked);
* what was left running afterwards: namespaces under the prefix, and iperf3, Open vSwitch or
  os-ken processes this script started (marked with ``MPLAB_TEST_PREFIX``).

The machine is shared with other engineers: runs are small and the numbers indicative.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from harness.campaign.campaign import start_campaign
from harness.config.inventory import Inventory, load_inventory
from harness.config.scenario import Scenario
from harness.hosts.local import LocalHost
from harness.upkeep.clean import clean_prefix, list_namespaces
from rigs import leaks

from controller.setup2 import control_factory

REPO = Path(__file__).resolve().parent.parent

POLICIES = ["all-wifi", "all-lte", "all-both", "ref-is", "mp-sdn"]
#: mp-sdn's epoch (EI) cut from 2 s so that its loop runs during these short transfers.
PARAMS = {"mp-sdn": {"ei_s": 0.5}}
#: Programs a controller (or a transfer) starts: none may outlive the campaign.
PROGRAMS = ("iperf3", "ovs-vswitchd", "ovsdb-server", "python", "python3")


def _inventory(prefix: str) -> Inventory:
    data = load_inventory(REPO / "inventory" / "emulated.yaml").model_dump(mode="json")
    data["emulation"]["namespace_prefix"] = prefix
    return Inventory.model_validate(data)


def _scenario(samples: int, file_size: str, steering: str) -> Scenario:
    return Scenario(name="polscale", congestion_controls=["cubic"], receiver_counts=[2], modes=[],
                    policies=[{"name": p, "params": PARAMS.get(p, {})} for p in POLICIES],
                    samples_per_case=samples, file_size=file_size, transfer_timeout_s=90,
                    retries=1, settle_s=0.2, seed=20,
                    control={"steering": steering, "probe_s": 1.5, "warm_s": 0.5})


def one_run(k: int, steering: str, scenario: Scenario, runs: Path) -> dict:
    prefix = f"mplab-ps{uuid.uuid4().hex[:5]}-"
    os.environ[leaks.MARK] = prefix  # every process started from here carries it (leaks.marked_processes)
    inv = _inventory(prefix)
    t0 = time.monotonic()
    try:
        c = start_campaign(scenario, inv, runs, campaign_id=f"{steering}-k{k}", testbeds=k, force=True,
                           control_factory=control_factory)
    finally:
        left_ns = list_namespaces(LocalHost("root"), prefix)
        left_procs = [(pid, cmd) for pid, cmd in leaks.marked_processes(prefix, PROGRAMS) if pid != os.getpid()]
        clean_prefix(prefix)
    wall = time.monotonic() - t0
    itf = c.manifest["interference"][-1]
    sweep = itf["ended_at"] - itf["started_at"]
    recs = c.records()
    samples = {r["sample_id"] for r in recs}
    cases: dict[str, dict] = {}
    for pol in POLICIES:
        rs = [r for r in recs if r["policy"] == pol and r["status"] == "ok"]
        cases[pol] = {
            "decisions": collections.Counter(tuple(sorted((r["receiver"], r["assignment"]) for r in recs
                                                          if r["sample_id"] == sid))
                                             for sid in sorted({r["sample_id"] for r in rs})),
            "mbit": statistics.fmean(r["throughput_mbit"] for r in rs) if rs else None,
            "energy_j": statistics.fmean(r["energy_j"] for r in rs) if rs else None,
        }
    leaks_ = [r for r in recs if any(f.startswith("path-leak") for f in r["flags"])]
    epochs = [len(r["control_epochs"] or []) for r in recs if r["policy"] == "mp-sdn"]
    return {"k": k, "steering": steering, "samples": len(samples),
            "ok": len({r["sample_id"] for r in recs if r["sample_status"] == "ok"}),
            "wall_s": wall, "sweep_s": sweep, "samples_per_hour": len(samples) / sweep * 3600,
            "load_start": itf["loadavg_1m_start"], "by_testbed": collections.Counter(r["testbed"] for r in recs),
            "path_leaks": len(leaks_), "mp_sdn_epochs": epochs, "cases": cases,
            "left_namespaces": left_ns, "left_processes": left_procs,
            "control": c.manifest.get("control", {}).get("instances")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples-per-case", type=int, default=2)
    ap.add_argument("--file-size", default="2M")
    ap.add_argument("--steering", nargs="+", default=["nftables", "openflow"],
                    help="the first runs at K = 1 and 2, the others at K = 2")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (network namespaces)")
    out = []
    with tempfile.TemporaryDirectory(prefix="mplab-bench-polscale-") as tmp:
        runs = Path(tmp)
        plan = [(1, args.steering[0]), (2, args.steering[0])] + [(2, s) for s in args.steering[1:]]
        for k, steering in plan:
            res = one_run(k, steering, _scenario(args.samples_per_case, args.file_size, steering), runs)
            out.append(res)
            print(f"K={k} {steering}: {res['ok']}/{res['samples']} samples ok, sweep {res['sweep_s']:.0f} s "
                  f"(wall {res['wall_s']:.0f} s), {res['samples_per_hour']:.0f} samples/h, load at start "
                  f"{res['load_start']:.1f}; records per testbed {dict(res['by_testbed'])}; path leaks "
                  f"{res['path_leaks']}; mp-sdn epochs per record {res['mp_sdn_epochs']}; control: {res['control']}; "
                  f"left: {len(res['left_namespaces'])} namespaces, {len(res['left_processes'])} processes "
                  f"{res['left_processes'] or ''}", flush=True)
    base = out[0]
    print("\n| run | samples/h | x K=1 | policy | decisions (receiver: assignment) x samples | "
          "throughput / K=1 | energy / K=1 |")
    print("|---|---|---|---|---|---|---|")
    for res in out:
        for pol, case in res["cases"].items():
            b = base["cases"][pol]
            thr = f"{case['mbit'] / b['mbit']:.2f}" if case["mbit"] and b["mbit"] else "-"
            en = f"{case['energy_j'] / b['energy_j']:.2f}" if case["energy_j"] and b["energy_j"] else "-"
            dec = "; ".join(f"{', '.join(f'{rx}: {a}' for rx, a in d)} x{n}" for d, n in case["decisions"].items())
            print(f"| K={res['k']} {res['steering']} | {res['samples_per_hour']:.0f} | "
                  f"{res['samples_per_hour'] / base['samples_per_hour']:.2f} | {pol} | {dec} | {thr} | {en} |")
    bad = [r for r in out if r["ok"] < r["samples"] or r["path_leaks"] or r["left_namespaces"] or r["left_processes"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
