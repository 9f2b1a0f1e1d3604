"""Bench: sustained poll rate of N emulated UM25C meters read at once, and the recorder's CPU use.

    uv run python bench/meters.py [--meters 9] [--seconds 10]

Starts N emulated devices (real processes, real ptys, no namespaces needed), opens
them with the UM driver and runs the recorder twice: at the devices' limit (10 Hz,
what campaigns use) and asking for 1000 Hz (the ceiling). Then N devices each play
one scripted LTE transfer, and the integrated energies are compared with the power
model's closed form (the accuracy of the whole protocol + recorder path). Reports per-meter achieved rates,
the recorder process's CPU as a share of one core (``time.process_time``: all its
threads, nothing else), and the devices' CPU for context. Targets: >= 10 Hz per meter
at the default rate, recorder < 5 % of one core. Prints one JSON object at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from harness.config.inventory import PowerProfile
from harness.meters.drivers import open_meter
from harness.meters.emulated import device_argv
from harness.meters.recorder import Recorder

REPO = Path(__file__).resolve().parent.parent


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phase(meters: dict, rate_hz: float | None, seconds: float, devices: list[subprocess.Popen]) -> dict:
    dev0 = sum(_cpu_s(p.pid) for p in devices)
    with Recorder(meters, rate_hz=rate_hz) as rec:
        rec.wait_first()
        c0, w0 = time.process_time(), time.monotonic()
        time.sleep(seconds)
        c1, w1 = time.process_time(), time.monotonic()
        stats = rec.stats()
        traces = {n: [r.mono_s for r in rec.trace(n) if w0 <= r.mono_s <= w1] for n in meters}
    wall = w1 - w0
    # Readings per second between each meter's first and last reading in the phase (no edge effects).
    rates = {n: (len(ts) - 1) / (ts[-1] - ts[0]) for n, ts in traces.items()}
    dev1 = sum(_cpu_s(p.pid) for p in devices)
    return {"rate_hz_configured": rate_hz or "device limit (10)", "seconds": round(wall, 2),
            "per_meter_hz_min": round(min(rates.values()), 2), "per_meter_hz_mean": round(sum(rates.values()) / len(rates), 2),
            "faults": sum(s["faults"] for s in stats.values()),
            "recorder_cpu_pct_of_one_core": round(100 * (c1 - c0) / wall, 2),
            "devices_cpu_pct_of_one_core_total": round(100 * (dev1 - dev0) / wall, 2)}


def accuracy(profile: PowerProfile, n: int, tmp: str, rate: float = 12.0, dur: float = 6.0) -> dict:
    """Integrated energy of a known transfer vs the power model's closed form, on n meters at once."""
    lte = profile.lte.model_copy(update={"tail_s": 1.5})   # a short tail keeps the run short
    profile = profile.model_copy(update={"lte": lte})
    start = time.time() + 5.0   # after every device is up (python start-up on a busy 2-core machine)
    script = [[start, {"lte": rate}], [start + dur, {"lte": 0.0}]]
    devices, links = [], []
    try:
        for i in range(n):
            link = f"{tmp}/acc-{i}"
            devices.append(subprocess.Popen(device_argv(link, profile, script=script, seed=100 + i), cwd=REPO))
            links.append(link)
        while not all(os.path.lexists(x) for x in links):
            time.sleep(0.02)
        meters = {f"n{i}": open_meter("emulated-um25c", link) for i, link in enumerate(links, 1)}
        for m in meters.values():
            m.open()
        with Recorder(meters) as rec:
            first = rec.wait_first()
            if first > start - 0.5:
                raise SystemExit("devices started too late for the scripted transfer; rerun on a quieter machine")
            t0 = start - 0.5
            t1 = start + dur + lte.tail_s + 0.5
            time.sleep(max(0.0, t1 - time.time()))
            rec.wait_covered(t1)
            energies = {name: rec.energy(name, t0, t1) for name in meters}
    finally:
        for p in devices:
            p.terminate()
        for p in devices:
            p.wait(5)
    expected = profile.base_w * (t1 - t0)
    for a, b, w in ((start, start + lte.promotion_s, lte.promotion_mw + lte.mw_per_mbit * rate),
                    (start + lte.promotion_s, start + dur, lte.active_mw + lte.mw_per_mbit * rate),
                    (start + dur, start + dur + lte.tail_s, lte.tail_mw)):
        expected += w / 1000 * max(0.0, min(b, t1) - max(a, t0))
    errs = [abs(e.energy_j / expected - 1) * 100 for e in energies.values()]
    cerrs = [abs(e.counter_wh * 3600 - expected) for e in energies.values() if e.counter_wh is not None]
    return {"transfer_s": dur, "rate_mbit": rate, "tail_s": lte.tail_s, "expected_j": round(expected, 3),
            "max_abs_error_pct": round(max(errs), 4), "mean_abs_error_pct": round(sum(errs) / len(errs), 4),
            "max_counter_error_j": round(max(cerrs), 2) if cerrs else None,
            "flagged": sum(1 for e in energies.values() if e.flags)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--meters", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    profile = PowerProfile.model_validate(
        yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())["emulation"]["power_profile"])
    with tempfile.TemporaryDirectory(prefix="mplab-bench-meters-") as tmp:
        devices = []
        try:
            links = []
            for i in range(args.meters):
                link = f"{tmp}/meter-{i}"
                devices.append(subprocess.Popen(device_argv(link, profile, seed=i), cwd=REPO))
                links.append(link)
            deadline = time.monotonic() + 15
            while not all(os.path.lexists(x) for x in links):
                if time.monotonic() > deadline:
                    raise SystemExit("devices did not start")
                time.sleep(0.02)
            results = {}
            for label, rate in (("default", None), ("1000Hz-asked", 1000.0)):
                meters = {f"n{i}": open_meter("emulated-um25c", link) for i, link in enumerate(links, 1)}
                for m in meters.values():
                    m.open()
                results[label] = run_phase(meters, rate, args.seconds, devices)
                print(f"{label:12} per-meter rate min {results[label]['per_meter_hz_min']:.1f} Hz "
                      f"(mean {results[label]['per_meter_hz_mean']:.1f}), recorder CPU "
                      f"{results[label]['recorder_cpu_pct_of_one_core']:.2f}% of one core, devices "
                      f"{results[label]['devices_cpu_pct_of_one_core_total']:.1f}%, faults {results[label]['faults']}")
        finally:
            for p in devices:
                p.terminate()
            for p in devices:
                p.wait(5)
        results["accuracy"] = accuracy(profile, args.meters, tmp)
        a = results["accuracy"]
        print(f"accuracy     {args.meters} meters, one scripted LTE transfer each ({a['transfer_s']} s at "
              f"{a['rate_mbit']} Mbit/s, tail {a['tail_s']} s): |error| max {a['max_abs_error_pct']:.3f}%, "
              f"mean {a['mean_abs_error_pct']:.3f}% of {a['expected_j']:.1f} J; device counters within "
              f"{a['max_counter_error_j']:.1f} J (1 mWh = 3.6 J)")
    results["meters"] = args.meters
    results["cpus"] = os.cpu_count()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
