"""Bench: sustained poll rate of N emulated UM25C meters read at once, and the recorder's CPU use.

    uv run python bench/meters.py [--meters 9] [--seconds 10]

Starts N emulated devices (real processes, real ptys, no namespaces needed), opens
them with the UM driver and runs the recorder twice: at the devices' limit (10 Hz,
what campaigns use) and unthrottled (the ceiling). Reports per-meter achieved rates,
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.inventory import PowerProfile  # noqa: E402
from harness.meters import open_meter  # noqa: E402
from harness.meters.emulated import device_argv  # noqa: E402
from harness.meters.recorder import Recorder  # noqa: E402


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_phase(meters: dict, rate_hz: float | None, seconds: float, devices: list[subprocess.Popen]) -> dict:
    dev0 = sum(_cpu_s(p.pid) for p in devices)
    with Recorder(meters, rate_hz=rate_hz) as rec:
        rec.wait_first()
        c0, w0 = time.process_time(), time.monotonic()
        n0 = {n: s["readings"] for n, s in rec.stats().items()}
        time.sleep(seconds)
        c1, w1 = time.process_time(), time.monotonic()
        stats = rec.stats()
    wall = w1 - w0
    rates = {n: (s["readings"] - n0[n]) / wall for n, s in stats.items()}
    dev1 = sum(_cpu_s(p.pid) for p in devices)
    return {"rate_hz_configured": rate_hz or "device limit (10)", "seconds": round(wall, 2),
            "per_meter_hz_min": round(min(rates.values()), 2), "per_meter_hz_mean": round(sum(rates.values()) / len(rates), 2),
            "faults": sum(s["faults"] for s in stats.values()),
            "recorder_cpu_pct_of_one_core": round(100 * (c1 - c0) / wall, 2),
            "devices_cpu_pct_of_one_core_total": round(100 * (dev1 - dev0) / wall, 2)}


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
            for label, rate in (("default", None), ("unthrottled", 1000.0)):
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
    results["meters"] = args.meters
    results["cpus"] = os.cpu_count()
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
