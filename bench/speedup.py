"""Faster than real time, validated cell by cell: throughput and energy at speedup S against S = 1.

Run as root on a machine with kernel MPTCP and iperf3 (`make bpf` for the coupled algorithms):

    uv run python bench/speedup.py [--inventory emulated|paper-lab] [--receivers 1,3,9] [--modes wifi,lte,both]
        [--ccs cubic,lia] [--speedups 1,4,8,16] [--runs 3] [--file-size 6M] [--loss 0,1] [--out FILE [--merge]]
        [--scenario scenarios/paper-setup1.yaml] [--testbeds K] [--levers on,off] [--label TEXT]
        [--baseline KEPT_S1_CAMPAIGN]
    uv run python bench/speedup.py --reestimate bench/results/speedup_slice_cubic.json

A grid too long for one run is split across runs with ``--merge`` (each run has its own S = 1 baseline, or
reuses one an earlier run kept: ``--baseline``; the table keeps every run's cells, arguments and machine
figures, the 1-minute load among them).

For each inventory, loss setting and S, one campaign (``start_campaign``, the real runner) runs every
cell (receiver count x mode x congestion control) ``--runs`` times, shuffled with one seed. Per cell and
S: the median over runs of the network total throughput (Mbit/s, the receivers' sum per sample) and of
the total energy (J, the receivers' sum per sample), both in testbed (real) time as records hold them;
their ratio to S = 1; flagged records (meter gaps, tails) and failed samples; and, per campaign, what
the machine sustained: achieved / configured rate and CPU busy (the manifest's interference section),
and its wall time against the estimate `mplab run --dry-run` prints for it (on ``--testbeds`` K copies: the
samples dealt out from one queue in plan order, as the runner deals them; set-up is not in the estimate, it is
in the wall), with where the time went per sample (``sample_timing``: the transfer against the sharing
model's, and the runner's overhead between samples against the estimate's).

``--scenario``: a slice of that scenario (its settle, timeout, retries, seed and shuffle; the grid
options, where given, narrow its congestion controls, receiver counts, modes, samples and file size).

Energies are taken from samples none of whose records was flagged (a meter gap or an unsettled tail makes a
sample's energy untrusted). A cell holds at S when every sample does: each sample's throughput and each
unflagged energy within 3 % of the S = 1 median (``mbit_worst``, ``energy_worst``: the sample furthest from it),
no sample failed, and at least two samples gave unflagged energy. Where S = 1's own samples lie further than 3 %
from their median (a bistable cell, which would fail the 3 % rule against a second S = 1 campaign as well), that
spread is the bound of each sample instead (``judged_by_spread``; the summary counts these cells apart), and the
cell's medians must still lie within 3 % of S = 1's: a spread wide enough to hold every sample would otherwise
let a shift of the whole cell through. A sample flagged ``cc-fault`` (a subflow ran without a slow-start threshold,
which the kernel causes at every S, and which no dataset keeps) is held out on both sides and counted
(``cc_fault``); more of them at S than at S = 1 beyond chance (one-sided Fisher exact test, p < 0.05) fail the
cell. At S > 1 on one testbed, the testbed's own CPU cores per sample are measured too (``TestbedCpu``); the
heaviest cell's median is what ``auto`` weighs at ``--testbeds`` K. Reported: the table, and per congestion
control the highest S at which every one of its cells held at that S and every lower one (written to ``--out``
as JSON; ``mplab run --speedup auto`` reads it).

``--levers on,off``: each S > 1 also run with the kernel's clocks left unscaled (``MPLAB_KERNEL_SCALING=off``:
no TCP timer program, the kernel's own Cubic), against the same S = 1 campaign; those cells go to the
table's ``cells_levers_off``, which ``auto`` never reads (a run uses the levers).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from scipy.stats import fisher_exact

from harness.campaign.campaign import (RunHooks, between_samples_s, queue_makespan_s, sample_estimates_s,
                                       start_campaign)
from harness.campaign.runner import CC_FAULT, SampleOutcome
from harness.cc.timers import cgroup2_mount, cgroup_path
from harness.campaign.plan import plan_campaign
from harness.campaign.store import Campaign
from harness.config.inventory import Inventory, load_inventory
from harness.config.load import parse_model
from harness.config.scenario import Scenario, load_scenario
from harness.errors import ConfigError, Interrupted
from harness.upkeep.clean import clean_prefix

from harness.emulation.speedup import KERNEL_SCALING_ENV, highest_holding

REPO = Path(__file__).resolve().parent.parent

#: A cell holds when throughput and energy are within this of S = 1.
TOLERANCE = 0.03
INVENTORIES = {"emulated": REPO / "inventory" / "emulated.yaml", "paper-lab": REPO / "inventory" / "paper-lab.yaml"}


def _inventory(name: str, prefix: str, loss_pct: float) -> Inventory:
    data = load_inventory(INVENTORIES[name]).model_dump(mode="json")
    data["emulation"]["namespace_prefix"] = prefix
    if loss_pct:
        for rx in data["receivers"]:
            for intf in rx["interfaces"].values():
                if intf.get("channel"):
                    intf["channel"]["loss_pct"] = loss_pct
    return Inventory.model_validate(data)


def slice_scenario(args: argparse.Namespace, s: float) -> Scenario:
    """The campaign's scenario at speedup ``s``: the grid asked for, with ``--scenario``'s settle, timeout,
    retries, seed and shuffle."""
    base = ({k: v for k, v in args.scenario.model_dump(mode="json").items()
             if k in ("settle_s", "transfer_timeout_s", "retries", "seed", "shuffle")} if args.scenario
            else {"transfer_timeout_s": 600, "retries": 1, "seed": 11})
    return parse_model(Scenario, {**base, "name": "speedup", "congestion_controls": args.ccs,
                                  "receiver_counts": args.receivers, "modes": args.modes,
                                  "samples_per_case": args.runs, "file_size": args.file_size, "speedup": s}, "bench")


def reestimate(table: Path) -> int:
    """A recorded table's wall times against today's estimator (the same plans: the same grid and seed), and,
    where a run kept its campaigns (``--keep``) and they are still there, where each one's time went."""
    data = json.loads(table.read_text())
    seen: set[str] = set()
    for run in reversed(data["runs"]):  # a key merged twice holds its last run's figures
        args = argparse.Namespace(**{**run, "scenario": None})
        if run.get("scenario"):
            args.scenario = load_scenario(REPO / "scenarios" / f"{run['scenario']}.yaml")
        k = run.get("testbeds", 1)
        for inv_name in run["inventory"].split(","):
            for loss in (float(x) for x in str(run["loss"]).split(",")):
                for s in sorted({float(x) for x in str(run["speedups"]).split(",")} | {1.0}):
                    key = f"{inv_name} loss {loss:g}% s{s:g}"
                    m = data["machine"].get(key)
                    if not m or key in seen:
                        continue
                    seen.add(key)
                    sc = slice_scenario(args, s)
                    inv = _inventory(inv_name, "mplab-sp-", loss)
                    plans = plan_campaign(sc, inv)
                    per = sample_estimates_s(plans, sc, inv)
                    est = queue_makespan_s(per, k)
                    then = (f"; recorded then {m['estimate_s']:.0f} s (x{m['wall_over_estimate']:.3f})"
                            if "estimate_s" in m else "")
                    print(f"{key} K={k}: wall {m['wall_s']:.0f} s, estimate {est:.0f} s (x{m['wall_s'] / est:.3f})"
                          f"{then}; evenly shared {sum(per) / k:.0f} s", flush=True)
                    kept = Path(run["keep"] or "/nonexistent") / f"{inv_name}-l{loss:g}-s{s:g}" / "samples.jsonl"
                    if kept.exists():
                        records = [json.loads(line) for line in kept.read_text().splitlines() if line.strip()]
                        timing = sample_timing(group_by_sample(records), dict(zip((p.sample_id for p in plans), per)),
                                               s, between_samples_s(sc, emulated=True))
                        print(f"  kept campaign: {timing}")
    return 0


def summary(table: Path) -> int:
    """A recorded table as Markdown: per S and levers setting, the cells holding per congestion control, and the
    highest S per control with the levers on and off."""
    doc = json.loads(table.read_text())
    ccs = sorted({c.split("-")[0] for sec in ("cells", "cells_levers_off") for rows in doc.get(sec, {}).values()
                  for c in rows})
    print("| S | levers | " + " | ".join(ccs) + " | all | of them by S = 1's spread | throughput alone "
          "| worst throughput, median cell | wall s | CPU busy | testbed cores, heaviest cell | rate ratio |")
    print("|---|---|" + "---|" * (len(ccs) + 8))
    keys = [(k, "on", doc["cells"][k]) for k in doc.get("cells", {})]
    keys += [(k, "off", doc["cells_levers_off"][k]) for k in doc.get("cells_levers_off", {})]
    for key, lever, rows in sorted(keys, key=lambda x: (x[0].rsplit(" s", 1)[0].replace(" levers-off", ""),
                                                        float(x[0].rsplit(" s", 1)[1]), x[1] == "off")):
        m = doc.get("machine", {}).get(key, {})
        per = []
        for cc in ccs:
            mine = [r for c, r in rows.items() if c.startswith(f"{cc}-")]
            per.append(f"{sum(r['holds'] for r in mine)}/{len(mine)}" if mine else "")
        held = sum(r["holds"] for r in rows.values())
        # Throughput alone (every sample within the tolerance): what the TCP levers change, apart from the
        # energy that the machine's lag flags (speedup-lag) at a high S on a busy machine.
        worst = [abs(r["mbit_worst"] - 1) for r in rows.values() if r.get("mbit_worst") is not None]
        tput = sum(1 for r in rows.values() if r.get("mbit_worst") is not None
                   and abs(r["mbit_worst"] - 1) <= max(TOLERANCE, r.get("base_spread") or 0.0))
        by_spread = sum(1 for r in rows.values() if r["holds"] and r.get("judged_by_spread"))
        busy, rate, cores = m.get("cpu_busy_mean"), m.get("rate_ratio"), m.get("cores_peak_cell")
        print(f"| {key.rsplit(' s', 1)[1]} | {lever} | " + " | ".join(per) + f" | {held}/{len(rows)} | {by_spread} "
              f"| {tput}/{len(rows)} | {statistics.median(worst) if worst else float('nan'):.3f} | "
              f"{m.get('wall_s', '')} | {'' if busy is None else f'{busy:.2f}'} | "
              f"{'' if cores is None else f'{cores:.2f}'} | {'' if rate is None else f'{rate:.2f}'} |")
    print("\nhighest S, levers on:", highest_holding(doc.get("cells", {}), ccs))
    if doc.get("cells_levers_off"):
        print("highest S, levers off:", highest_holding(doc["cells_levers_off"], ccs))
    print("\nwhy cells failed (levers on), per S:")
    for key, lever, rows in keys:
        bad = {c: r["why"] + (f" [S = 1 itself spreads {r['base_spread']:.3f}]"
                              if (r.get("base_spread") or 0) > TOLERANCE else "")
               for c, r in sorted(rows.items()) if not r["holds"]}
        if bad:
            print(f"- {key} ({lever}): " + "; ".join(f"{c}: {w}" for c, w in bad.items()))
    return 0


def one_campaign(inv_name: str, loss: float, s: float, args: argparse.Namespace, runs: Path,
                 levers: str = "on") -> dict:
    """One campaign at speedup ``s``: per cell the totals of each sample, and the machine's figures.

    ``levers``: ``off`` leaves the kernel's clocks unscaled (``KERNEL_SCALING_ENV``) for this campaign."""
    if levers == "off" and s > 1:
        os.environ[KERNEL_SCALING_ENV] = "off"
        try:
            (runs / "levers-off").mkdir(parents=True, exist_ok=True)
            return one_campaign(inv_name, loss, s, args, runs / "levers-off")
        finally:
            os.environ.pop(KERNEL_SCALING_ENV, None)
    prefix = f"mplab-sp{uuid.uuid4().hex[:5]}-"
    inv = _inventory(inv_name, prefix, loss)
    sc = slice_scenario(args, s)
    plans = plan_campaign(sc, inv)
    per_sample = sample_estimates_s(plans, sc, inv)
    estimate = queue_makespan_s(per_sample, args.testbeds)
    t0 = time.monotonic()
    load_before = os.getloadavg()[0]
    cpu = TestbedCpu(prefix) if args.testbeds == 1 else None
    try:
        c = start_campaign(sc, inv, runs, campaign_id=f"{inv_name}-l{loss:g}-s{s:g}", testbeds=args.testbeds,
                           hooks=RunHooks(on_sample=cpu.on_sample) if cpu else None)
    finally:
        clean_prefix(prefix)
    wall = time.monotonic() - t0
    load = {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}
    by_sample = group_by_sample(c.records())
    cells = cells_of(by_sample, cpu.by_sample if cpu else {})
    cores = [v["cores"] for v in cells.values() if v["cores"]]
    impls = sorted({r["cc_impl"] for r in c.records()} | {r.get("tcp_timers") or "kernel timers" for r in c.records()})
    itf = (c.manifest.get("interference") or [{}])[-1]
    rate = [t["rate_ratio_mean"] for t in (itf.get("testbeds") or {}).values() if t.get("rate_ratio_mean")]
    return {"wall_s": round(wall, 1), "estimate_s": round(estimate, 1), "wall_over_estimate": round(wall / estimate, 3),
            "evenly_shared_s": round(sum(per_sample) / args.testbeds, 1),
            "testbeds": args.testbeds, "cells": cells, "implementations": impls, "load_1m": load,
            "cpu_busy_mean": itf.get("cpu_busy_mean"),
            "cpu_busy_max": itf.get("cpu_busy_max"), "rate_ratio": min(rate) if rate else None,
            # The testbed's own CPU (its cgroup and this process, S > 1 on one testbed): the heaviest cell's
            # median, what ``--speedup auto`` weighs against the machine's cores at ``--testbeds`` K.
            "cores_peak_cell": round(max(statistics.median(x) for x in cores), 3) if cores else None,
            "samples": sample_timing(by_sample, dict(zip((p.sample_id for p in plans), per_sample)),
                                     s, between_samples_s(sc, emulated=True))}


def _cell() -> dict:
    return {"mbit": [], "energy_j": [], "flagged": 0, "failed": 0, "cc_fault": 0, "samples": 0, "cores": []}


def cells_of(by_sample: dict[str, list[dict]], cores: dict[str, float] | None = None) -> dict[str, dict]:
    """Per cell (case id): each ok sample's total throughput, each unflagged sample's total energy, counts, and
    the testbed's CPU cores while each sample ran (``cores``: per sample id, where measured). A sample flagged
    ``cc-fault`` (a subflow ran without a slow-start threshold: the kernel's doing, at every S) is counted
    apart and judged neither way: no dataset keeps it (``compare`` holds its rate to S = 1's)."""
    cells: dict[str, dict] = {}
    for sample_id, recs in by_sample.items():
        cell = cells.setdefault(recs[0]["case_id"], _cell())
        cell["samples"] += 1
        if (cores or {}).get(sample_id) is not None:
            cell["cores"].append(cores[sample_id])
        if any(r["status"] != "ok" for r in recs):
            cell["failed"] += 1
            continue
        if any(f.startswith(CC_FAULT) for r in recs for f in r["flags"]):
            cell["cc_fault"] += 1
            continue
        cell["mbit"].append(sum(r["throughput_mbit"] for r in recs))
        if any(r["flags"] for r in recs):
            cell["flagged"] += 1  # a meter gap or an unsettled tail: its energy is not trusted
        elif all(r["energy_j"] is not None for r in recs):
            cell["energy_j"].append(sum(r["energy_j"] for r in recs))
    return cells


class TestbedCpu:
    """The CPU cores one testbed used per sample: its cgroup's usage (every process its hosts started, the kernel's
    packet work done in their context included; ``harness.cc.timers`` makes the cgroup at S > 1 with the levers
    on) and this process's own (the runner, the recorder's polls), over the wall time since the previous sample
    ended (the runner's set-up between samples included). None where the testbed has no cgroup."""

    def __init__(self, prefix: str) -> None:
        mount = cgroup2_mount()
        self.stat = cgroup_path(prefix, mount) / "cpu.stat" if mount else None
        self.by_sample: dict[str, float | None] = {}
        self.last = (time.monotonic(), self.cpu_s(absent=0.0))  # made with the testbed, after this

    def cpu_s(self, absent: float | None = None) -> float | None:
        """The cgroup's CPU seconds and this process's; ``absent`` stands for a cgroup not there (None: unknown)."""
        try:
            usage = next(int(line.split()[1]) for line in self.stat.read_text().splitlines()
                         if line.startswith("usage_usec ")) / 1e6 if self.stat else absent
        except (OSError, StopIteration):
            usage = absent
        if usage is None:
            return None
        own = resource.getrusage(resource.RUSAGE_SELF)
        return usage + own.ru_utime + own.ru_stime

    def on_sample(self, outcome: SampleOutcome) -> None:
        now, cpu = time.monotonic(), self.cpu_s()
        then, before = self.last
        ok = cpu is not None and before is not None and cpu >= before and now > then
        self.by_sample[outcome.plan.sample_id] = round((cpu - before) / (now - then), 3) if ok else None
        self.last = (now, cpu)


def with_recorded_cores(recorded: dict[str, dict], judged: dict[str, dict]) -> dict[str, dict]:
    """``judged`` (cells judged again from kept campaigns) with each cell's CPU cores taken from ``recorded`` where
    the judging has none: the cores are measured while a run goes (``TestbedCpu``), and a kept campaign does not
    hold them, so a re-judged cell keeps the figure its run measured (what ``auto`` weighs at K testbeds)."""
    out = {}
    for cell, row in judged.items():
        old = recorded.get(cell, {}).get("cores")
        out[cell] = {**row, "cores": old} if row.get("cores") is None and old is not None else row
    return out


def rejudge(table: Path, keep: Path, baselines: list[Path] | None = None) -> int:
    """Judge a recorded table's cells again from the campaigns its run kept (``--keep``), with today's rule,
    against ``baselines`` (pooled) or the S = 1 campaign kept beside them."""
    doc = json.loads(table.read_text())
    for section, sub in (("cells", keep), ("cells_levers_off", keep / "levers-off")):
        for key in doc.get(section, {}):
            inv, rest = key.split(" loss ", 1)
            loss, s = rest.split("%")[0], rest.rsplit(" s", 1)[1]
            base, other = baselines or [keep / f"{inv}-l{loss}-s1"], sub / f"{inv}-l{loss}-s{s}"
            if all(b.exists() for b in base) and other.exists():
                doc[section][key] = with_recorded_cores(doc[section][key],
                                                        compare(kept_baseline(base), kept_baseline([other])))
    ccs = sorted({c.split("-")[0] for rows in doc["cells"].values() for c in rows})
    doc["highest"] = highest_holding(doc["cells"], ccs)
    if doc.get("cells_levers_off"):
        doc["highest_levers_off"] = highest_holding(doc["cells_levers_off"], ccs)
    table.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return summary(table)


def kept_baseline(paths: list[Path]) -> dict:
    """S = 1 campaigns earlier runs kept (``--keep``), as ``one_campaign`` returns one (cells only), their samples
    pooled per cell: more real-time samples for a cell's reference median and spread (``compare``)."""
    cells: dict[str, dict] = {}
    for path in paths:
        for cell, v in cells_of(group_by_sample(Campaign.open(path).records())).items():
            into = cells.setdefault(cell, _cell())
            for k in ("mbit", "energy_j", "cores", "flagged", "failed", "cc_fault", "samples"):
                into[k] += v[k]
    return {"cells": cells, "kept": [str(p) for p in paths]}


def group_by_sample(records: list[dict]) -> dict[str, list[dict]]:
    """A campaign's records, per sample (one record per receiver)."""
    by_sample: dict[str, list[dict]] = {}
    for r in records:
        by_sample.setdefault(r["sample_id"], []).append(r)
    return by_sample


def sample_timing(by_sample: dict[str, list[dict]], estimates: dict[str, float], s: float, overhead_s: float) -> dict:
    """Where a campaign's wall time went against its estimate, per sample (wall seconds, medians and ranges).

    A sample's slot is from its release to the next release on the same testbed (the last one of each testbed
    has none); its transfer is its slowest receiver's (records hold ``duration_s`` in testbed time, S x the
    wall); the rest of the slot is the runner's overhead (tails, idle hold, settle, set-up of the transfer).
    Against the estimate's transfer (the sharing model's) and its overhead (``between_samples_s``).
    """
    by_bed: dict[str, list[tuple[float, str, float]]] = {}
    for sid, recs in by_sample.items():
        if any(r["status"] != "ok" or r.get("started_at") is None for r in recs):
            continue
        transfer = max(r["duration_s"] for r in recs) / s
        by_bed.setdefault(recs[0].get("testbed") or "", []).append((min(r["started_at"] for r in recs), sid, transfer))
    transfer_ratio, overhead, slot_ratio = [], [], []
    for rows in by_bed.values():
        rows.sort()
        for (t0, sid, transfer), (t1, _, _) in zip(rows, rows[1:]):
            model_transfer = estimates[sid] - overhead_s
            transfer_ratio.append(transfer / model_transfer)
            overhead.append(t1 - t0 - transfer)
            slot_ratio.append((t1 - t0) / estimates[sid])

    def spread(xs: list[float]) -> list[float] | None:
        return [round(statistics.median(xs), 3), round(min(xs), 3), round(max(xs), 3)] if xs else None
    return {"n": len(slot_ratio), "slot_over_estimate": spread(slot_ratio),
            "transfer_over_model": spread(transfer_ratio), "overhead_s": spread(overhead),
            "model_overhead_s": round(overhead_s, 3)}


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _spread(xs: list[float], median: float | None) -> float | None:
    """How far the furthest of ``xs`` lies from ``median``, as a fraction of it."""
    return round(max(abs(x / median - 1) for x in xs), 4) if (median and xs) else None


#: A cell fails when its samples at S are cc-fault more often than at S = 1 at this significance (one-sided).
FAULT_P = 0.05


def more_faults_p(faults: int, samples: int, base_faults: int, base_samples: int) -> float:
    """One-sided Fisher exact test: the chance of at least this many cc-fault samples at S were the rate S = 1's
    (1.0 when either side has no samples)."""
    if samples <= 0 or base_samples <= 0 or faults == 0:
        return 1.0
    return round(float(fisher_exact([[faults, samples - faults], [base_faults, base_samples - base_faults]],
                                    alternative="greater").pvalue), 4)


def compare(base: dict, other: dict) -> dict[str, dict]:
    """Per cell: ratios of the medians to S = 1, and whether the cell holds."""
    out = {}
    for cell, b in base["cells"].items():
        o = other["cells"].get(cell)
        row = {"mbit_ratio": None, "energy_ratio": None, "mbit_worst": None, "energy_worst": None,
               "holds": False, "why": ""}
        if o is None or not o["mbit"]:
            row["why"] = "no ok sample"
            out[cell] = row
            continue
        bm, om = _median(b["mbit"]), _median(o["mbit"])
        be, oe = _median(b["energy_j"]), _median(o["energy_j"])
        # How far S = 1's own samples lie from their median. A cell whose real-time samples spread past the
        # tolerance (a bistable cell: which subflow grows first sticks) would fail the every-sample rule against
        # another S = 1 campaign too, so such a cell is judged against its own spread: no sample at S may lie
        # further from the S = 1 median than S = 1's own furthest sample did. Cells within the tolerance at
        # S = 1 keep the tolerance. ``judged_by_spread`` says which rule a cell was held to.
        row["base_spread"] = _spread(b["mbit"], bm)
        row["base_energy_spread"] = _spread(b["energy_j"], be)
        tol = {"mbit": max(TOLERANCE, row["base_spread"] or 0.0),
               "energy": max(TOLERANCE, row["base_energy_spread"] or 0.0)}
        row["judged_by_spread"] = tol["mbit"] > TOLERANCE or tol["energy"] > TOLERANCE
        row["cores"] = _median(o.get("cores", []))
        row["mbit_ratio"] = round(om / bm, 4) if bm else None
        row["energy_ratio"] = round(oe / be, 4) if (be and oe) else None
        # Every sample, not only the median: a failing S shows as whole low samples, not a uniform shift.
        row["mbit_worst"] = round(max((x / bm for x in o["mbit"]), key=lambda r: abs(r - 1)), 4) if bm else None
        row["energy_worst"] = (round(max((x / be for x in o["energy_j"]), key=lambda r: abs(r - 1)), 4)
                               if (be and o["energy_j"]) else None)
        why = []
        for name in ("mbit_worst", "energy_worst"):
            v = row[name]
            if v is None:
                why.append(f"{name.split('_')[0]} unknown")
            elif abs(v - 1) > tol[name.split("_")[0]]:
                why.append(f"{name.split('_')[0]} x{v:.3f} (a sample"
                           + (f"; S = 1 spread {tol[name.split('_')[0]]:.3f})" if tol[name.split("_")[0]] > TOLERANCE
                              else ")"))
        # Where each sample is held to S = 1's wider spread, the cell's centre is still held to the tolerance
        # (with the tolerance as each sample's bound this follows from the samples).
        for name in ("mbit_ratio", "energy_ratio"):
            v = row[name]
            if v is not None and abs(v - 1) > TOLERANCE:
                why.append(f"{name.split('_')[0]} median x{v:.3f}")
        if o["failed"]:
            why.append(f"{o['failed']} failed")
        # A sample whose subflow ran without a threshold is no sample of the cell's at any S; but more of them at
        # S than at S = 1, beyond chance, would be the speed-up's doing (or the S > 1 implementation's).
        row["cc_fault"], row["base_cc_fault"] = o.get("cc_fault", 0), b.get("cc_fault", 0)
        row["cc_fault_p"] = more_faults_p(row["cc_fault"], o.get("samples", 0), row["base_cc_fault"],
                                          b.get("samples", 0))
        if row["cc_fault_p"] < FAULT_P:
            why.append(f"{row['cc_fault']} of {o.get('samples', 0)} samples cc-fault (S = 1: "
                       f"{row['base_cc_fault']} of {b.get('samples', 0)}; p = {row['cc_fault_p']:.3f})")
        if len(o["energy_j"]) < 2:
            why.append(f"{len(o['energy_j'])} sample(s) with unflagged energy")
        row["holds"], row["why"] = not why, "; ".join(why)
        out[cell] = row
    return out


def merge(old: dict, results: dict, machine: dict, section: str = "cells") -> tuple[dict, dict]:
    """An earlier table's cells (``section``) and machine figures with this run's added (this run's win per cell)."""
    cells = {k: dict(v) for k, v in old.get(section, {}).items()}
    for key, rows in results.items():
        cells.setdefault(key, {}).update(rows)
    return cells, {**old.get("machine", {}), **machine}


def grid(ap: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The campaign's grid: the options given, else the scenario's (``--scenario``), else the defaults."""
    sc = None
    if args.scenario:
        try:
            sc = args.scenario = load_scenario(args.scenario)
        except ConfigError as e:
            ap.error(str(e))
    args.receivers = ([int(x) for x in args.receivers.split(",")] if args.receivers
                      else sc.receiver_counts if sc else [1, 3, 9])
    args.modes = args.modes.split(",") if args.modes else sc.modes if sc else ["wifi", "lte", "both"]
    args.ccs = args.ccs.split(",") if args.ccs else sc.congestion_controls if sc else ["cubic", "lia"]
    args.runs = args.runs or (sc.samples_per_case if sc else 3)
    args.file_size = args.file_size or (sc.file_size if sc else "6M")
    if args.testbeds < 1:
        ap.error("--testbeds must be 1 or more")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default="emulated", help="comma list of " + ", ".join(INVENTORIES))
    ap.add_argument("--scenario", type=Path, default=None, help="run a slice of this scenario (its settle, timeout, "
                    "retries, seed, shuffle; by default its grid too)")
    ap.add_argument("--receivers", default=None, help="comma list (default 1,3,9, or the scenario's)")
    ap.add_argument("--modes", default=None, help="comma list (default wifi,lte,both, or the scenario's)")
    ap.add_argument("--ccs", default=None, help="comma list (default cubic,lia, or the scenario's)")
    ap.add_argument("--speedups", default="1,4,8,16")
    ap.add_argument("--runs", type=int, default=None, help="samples per cell (default 3, or the scenario's)")
    ap.add_argument("--file-size", default=None, help="default 6M, or the scenario's")
    ap.add_argument("--testbeds", type=int, default=1, help="run each campaign on K parallel testbeds")
    ap.add_argument("--loss", default="0", help="comma list of loss_pct on every channel")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    ap.add_argument("--keep", type=Path, default=None, help="keep the campaigns here (default: a scratch dir)")
    ap.add_argument("--merge", action="store_true",
                    help="add this run's cells to those already in --out (a grid split across runs)")
    ap.add_argument("--levers", default="on", help="comma list: on (the kernel's clocks scaled with S, as runs do), "
                    "off (left unscaled: the table's cells_levers_off)")
    ap.add_argument("--baseline", type=Path, action="append", default=None, metavar="CAMPAIGN",
                    help="compare with this kept S = 1 campaign (an earlier run's --keep) instead of running one; "
                         "given twice or more, their samples are pooled; one inventory and loss setting only "
                         "(with --summary and --keep: the S = 1 reference the kept campaigns are judged against)")
    ap.add_argument("--label", default="", help="a note kept with this run's arguments (e.g. 'partial grid')")
    ap.add_argument("--summary", type=Path, default=None, metavar="TABLE",
                    help="run nothing: print a recorded table as Markdown (cells holding per S, levers on and off); "
                         "with --keep, judge its cells again from the campaigns that run kept first")
    ap.add_argument("--reestimate", type=Path, default=None, metavar="TABLE",
                    help="run nothing: print a recorded table's wall times against today's estimate")
    args = ap.parse_args()
    if args.reestimate:
        return reestimate(args.reestimate)
    if args.summary:
        return rejudge(args.summary, args.keep, args.baseline) if args.keep else summary(args.summary)
    grid(ap, args)
    speedups = sorted({float(x) for x in args.speedups.split(",")} | {1.0})
    levers = [x for x in args.levers.split(",") if x]
    if not set(levers) <= {"on", "off"}:
        ap.error("--levers: a comma list of on, off")
    results: dict[str, dict] = {}
    results_off: dict[str, dict] = {}
    machine: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mplab-speedup-") as scratch:
        tmp = args.keep or scratch
        for inv_name in args.inventory.split(","):
            for loss in (float(x) for x in args.loss.split(",")):
                base = (kept_baseline(args.baseline) if args.baseline
                        else one_campaign(inv_name, loss, 1.0, args, Path(tmp)))
                for lever in levers:
                    runs = {s: (base if s == 1 else one_campaign(inv_name, loss, s, args, Path(tmp), lever))
                            for s in speedups}
                    for s, res in runs.items():
                        if s == 1 and args.baseline:
                            continue  # its machine figures are the run's that kept it
                        tag = " levers-off" if lever == "off" and s > 1 else ""
                        key = f"{inv_name} loss {loss:g}%{tag} s{s:g}"
                        machine[key] = {k: res[k] for k in ("wall_s", "estimate_s", "wall_over_estimate",
                                                            "evenly_shared_s", "testbeds", "load_1m", "cpu_busy_mean",
                                                            "cpu_busy_max", "rate_ratio", "cores_peak_cell", "implementations",
                                                            "samples")}
                        print(f"{key}: {machine[key]}", flush=True)
                        if s > 1:
                            (results_off if lever == "off" else results)[key] = compare(runs[1.0], res)
    print(f"\n{'inventory / loss / S':34} {'cell':18} {'Mbit/s':>8} {'energy':>8}  holds")
    for key, rows in {**results, **results_off}.items():
        for cell, row in sorted(rows.items()):
            print(f"{key:34} {cell:18} {row['mbit_ratio'] or float('nan'):8.3f} "
                  f"{row['energy_ratio'] or float('nan'):8.3f}  {'yes' if row['holds'] else 'no: ' + row['why']}")
    this_run = {k: (v.name if k == "scenario" and v else v) for k, v in vars(args).items() if k not in ("out", "merge")}
    runs_args = [this_run]
    if args.merge and args.out and args.out.exists():
        old = json.loads(args.out.read_text())
        results_off, _ = merge(old, results_off, {}, "cells_levers_off")
        results, machine = merge(old, results, machine)
        runs_args = old.get("runs", [old.get("args", {})]) + runs_args
    ccs = sorted({cell.split("-")[0] for rows in results.values() for cell in rows} | set(args.ccs))
    best = highest_holding(results, ccs)
    print("\nhighest S that holds, per congestion control:", best)
    if results_off:
        print("... with the kernel's clocks unscaled (levers off):", highest_holding(results_off, ccs))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"tolerance": TOLERANCE, "runs": runs_args, "machine": machine,
                                        "cells": results, "highest": best, "cells_levers_off": results_off,
                                        "highest_levers_off": highest_holding(results_off, ccs) if results_off else {}},
                                       indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Interrupted as e:   # SIGTERM/SIGHUP: the campaign under way has torn its testbeds down
        print(f"speedup: {e}; nothing written to --out", file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("speedup: interrupted by Ctrl-C; nothing written to --out", file=sys.stderr)
        sys.exit(130)
