"""A small campaign through the real srsRAN cell (``interfaces.lte.real_cell``) and through the emulated channel.

One receiver, modes lte and both, cubic, N samples of a file each: first with its LTE path through
srsepc + srsenb + srsUE over ZMQ (srsUE's tun is lte0), then with the emulated LTE channel set to
the rate the real cell achieved in the lte samples. Prints the testbed set-up time (the cell's
start and attach included), and per mode the median throughput, duration, LTE share of the bytes
and energy. Numbers are from this run. Needs root, the srsRAN programs ($MPLAB_LTE_BIN or PATH)
and, without kernel SCTP, clang for the test rigs' shim. About 1.5 of 2 cores while the cell is up.

    MPLAB_LTE_BIN=<srsenb dir>:<srsue dir>:<srsepc dir> uv run python bench/realcell_campaign.py [--prb 50]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness.campaign.campaign import start_campaign
from harness.config.inventory import Inventory, load_inventory
from harness.config.scenario import Scenario
from harness.upkeep.clean import clean_prefix
from rigs.sctpshim import build_shim, kernel_has_sctp
from lte.realcell import ACCESS_KINDS, realcell_checks

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-rcell-"


def one_receiver(real_cell: dict | None, lte_rate_mbit: float | None = None) -> Inventory:
    data = load_inventory(REPO / "inventory" / "emulated.yaml").model_dump(mode="json")
    rx = data["receivers"][0]
    if real_cell:
        rx["interfaces"]["lte"]["real_cell"] = real_cell
    if lte_rate_mbit:
        rx["interfaces"]["lte"]["channel"]["rate_mbit"] = round(lte_rate_mbit, 1)
        data["emulation"]["lte_cell"]["capacity_mbit"] = max(round(lte_rate_mbit, 1), 1.0)
    data["receivers"] = [rx]
    data["emulation"]["namespace_prefix"] = PREFIX
    return Inventory.model_validate(data)


def campaign(inv: Inventory, sc: Scenario, runs: Path, cid: str) -> tuple[float, list[dict]]:
    t0 = time.monotonic()
    try:
        c = start_campaign(sc, inv, runs, campaign_id=cid, access_kinds=ACCESS_KINDS)
    finally:
        clean_prefix(PREFIX)
    return time.monotonic() - t0, c.records()


def summary(recs: list[dict], mode: str) -> dict:
    rs = [r for r in recs if r["mode"] == mode and r["status"] == "ok"]
    if not rs:
        return {"n": 0}
    return {"n": len(rs), "mbit": statistics.median(r["throughput_mbit"] for r in rs),
            "dur": statistics.median(r["duration_s"] for r in rs),
            "lte_share": statistics.median(r["iface_bytes"]["lte"] / sum(r["iface_bytes"].values()) for r in rs),
            "energy": statistics.median(r["energy_j"] for r in rs), "access": rs[0]["lte_access"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prb", type=int, default=50, choices=[25, 50])
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--file", default="8M")
    a = ap.parse_args()
    missing = [c.name for c in realcell_checks("root") if c.name.startswith("real cell: program") and not c.ok]
    if missing:
        raise SystemExit(f"missing: {', '.join(missing)} (PATH or $MPLAB_LTE_BIN)")
    sc = Scenario(name="rcell", congestion_controls=["cubic"], receiver_counts=[1], modes=["lte", "both"],
                  samples_per_case=a.samples, file_size=a.file, settle_s=1, seed=1, retries=0)
    with tempfile.TemporaryDirectory(prefix="mplab-bench-rcell-") as tmp:
        if not kernel_has_sctp():
            os.environ["MPLAB_SCTP_SHIM"] = str(build_shim(Path(tmp) / "shim"))
        wall_real, real = campaign(one_receiver({"kind": "srsran-zmq", "n_prb": a.prb}), sc, Path(tmp), "real")
        rate = summary(real, "lte")["mbit"]
        wall_emu, emu = campaign(one_receiver(None, rate), sc, Path(tmp), "emu")
    print(f"{len(real)} + {len(emu)} samples of {a.file}, 1 receiver, cubic; real cell {a.prb} PRB over ZMQ; "
          f"emulated LTE channel at the real cell's lte rate ({rate:.1f} Mbit/s)")
    print(f"campaign wall time: real cell {wall_real:.1f} s, emulated {wall_emu:.1f} s")
    print(f"{'mode':5}{'':9}{'lte_access':>18}{'n':>3}{'Mbit/s':>9}{'dur s':>8}{'LTE share':>11}{'energy J':>10}")
    for mode in ("lte", "both"):
        for name, recs in (("real", real), ("emulated", emu)):
            s = summary(recs, mode)
            if s["n"] == 0:
                print(f"{mode:5}{name:>9}  no ok sample")
                continue
            print(f"{mode:5}{name:>9}{s['access']:>18}{s['n']:>3}{s['mbit']:9.1f}{s['dur']:8.2f}"
                  f"{s['lte_share']:11.2f}{s['energy']:10.2f}")


if __name__ == "__main__":
    main()
