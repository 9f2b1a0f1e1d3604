"""One sample up close: each receiver's meter power over time with its goodput, windows marked.

Reads ``runs/<campaign>/raw/<sample_id>/attempt-<k>/`` (the last attempt): ``meter-<rx>.csv``
(every reading from 1 s before to 1 s after the transfer) and ``iperf3-<rx>.json`` (goodput per
reporting interval). The transfer window is the record's ``window_start``..``window_end`` (what
``energy_j`` integrates); the tail window follows it for as long as the radios in use stay in
their high-power tail: the record's ``idle_wait_s`` when it has one, else the power profile's
``tail_s`` (emulated testbeds), else it is not drawn and the caption says so.

Per-interface goodput over time is drawn for single-interface modes (all traffic is on that
interface). Campaigns record per-interface byte counters only for the whole transfer, so an
MPTCP (``both``) sample shows its total goodput over time and the per-interface split in the
legend; the caption says so.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis.load import Source
from analysis.style import Palette, Saved, Skipped, label_energy, save

NAME, TITLE = "sample-closeup", "One sample up close: power and goodput over time"
RADIOS = {"wifi": ("wifi",), "lte": ("lte",), "both": ("wifi", "lte")}


def pick_sample(frame: pd.DataFrame, campaign: str, raw: Path) -> str | None:
    """An ok sample of ``campaign`` with raw output under ``raw``: MPTCP or a policy first, then the most
    receivers, then by id."""
    f = frame[(frame["campaign"] == campaign) & (frame["sample_status"] == "ok")]
    f = f[[(raw / sid).is_dir() for sid in f["sample_id"]]]
    if f.empty:
        return None
    g = f.groupby("sample_id").agg(mode=("mode", "first"), n=("n_receivers", "first"), pol=("policy", "first"))
    g["rank"] = [(0 if (m == "both" or pd.notna(p)) else 1) for m, p in zip(g["mode"], g["pol"])]
    g = g.reset_index().sort_values(["rank", "n", "sample_id"], ascending=[True, False, True])
    return str(g.iloc[0]["sample_id"])


def last_attempt(raw: Path) -> Path | None:
    tries = sorted((p for p in raw.glob("attempt-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
    return tries[-1] if tries else None


def read_meter(path: Path) -> pd.DataFrame:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return pd.DataFrame({"wall_s": [float(r["wall_s"]) for r in rows], "watts": [float(r["watts"]) for r in rows]})


def read_goodput(path: Path, start_wall_s: float) -> pd.DataFrame:
    """iperf3 intervals as (t0, t1, Mbit/s) in wall-clock seconds, anchored at the window start."""
    doc = json.loads(path.read_text())
    rows = []
    for iv in doc.get("intervals") or []:
        s = iv.get("sum") or {}
        if "start" in s and "end" in s:
            rows.append((start_wall_s + float(s["start"]), start_wall_s + float(s["end"]),
                         float(s.get("bits_per_second", 0.0)) / 1e6))
    return pd.DataFrame(rows, columns=["t0", "t1", "mbit"])


def tail_seconds(rec: dict, manifest: dict) -> float | None:
    """How long the tail lasts after the transfer for this record's radios (None: unknown)."""
    if rec.get("idle_wait_s") is not None and pd.notna(rec.get("idle_wait_s")):
        return float(rec["idle_wait_s"])
    prof = ((manifest.get("testbed") or {}).get("emulation") or {}).get("power_profile") or {}
    tails = [float((prof.get(r) or {}).get("tail_s", 0.0)) for r in RADIOS.get(rec.get("mode"), ("wifi", "lte"))]
    return max(tails) if prof and tails else None


def closeup(frame: pd.DataFrame, source: Source, palette: Palette, out: Path,
            sample_id: str | None = None) -> Saved | Skipped:
    """Draw ``sample_id`` (or a chosen one) of the campaign ``source``."""
    camp = source.campaign
    if camp is None:
        return Skipped(NAME, TITLE, f"{source.name} is a dataset; the close-up needs a campaign's raw/ output")
    sid = sample_id or pick_sample(frame, camp.id, camp.path / "raw")
    if sid is None:
        return Skipped(NAME, TITLE, f"campaign {camp.id} has no ok sample with raw output")
    att = last_attempt(camp.path / "raw" / sid)
    if att is None:
        return Skipped(NAME, TITLE, f"no raw output for {sid} in {camp.path / 'raw'}")
    recs = frame[(frame["campaign"] == camp.id) & (frame["sample_id"] == sid)].sort_values("receiver")
    if recs.empty:
        return Skipped(NAME, TITLE, f"sample {sid} has no records in {camp.id}")
    fig, axes = plt.subplots(len(recs), 1, figsize=(8, 2.3 * len(recs) + 0.6), sharex=True, squeeze=False)
    t0 = min(float(r) for r in recs["window_start"].dropna()) if recs["window_start"].notna().any() else None
    tail_known = True
    legend: dict[str, object] = {}
    for ax, rec in zip(axes[:, 0], recs.to_dict("records")):
        rx = rec["receiver"]
        meter, iperf = att / f"meter-{rx}.csv", att / f"iperf3-{rx}.json"
        if not meter.exists() or t0 is None:
            ax.text(0.5, 0.5, f"{rx}: no meter trace", transform=ax.transAxes, ha="center")
            continue
        m = read_meter(meter)
        t = m["wall_s"] - t0
        ax.plot(t, m["watts"], color="#333333", lw=1.1, label="meter power (W)")
        ax.set_ylabel(f"{rx}\npower (W)")
        ax.set_xlim(float(t.min()), float(t.max()))
        ws, we = rec["window_start"] - t0, rec["window_end"] - t0
        ax.axvspan(ws, we, color="#9ecae1", alpha=0.35, label="transfer window (energy_j)")
        if pd.notna(rec["energy_j"]):
            ax.text(0.01, 0.95, f"{rec['energy_j']:.3g} J in the transfer window", transform=ax.transAxes,
                    va="top", fontsize=7.5)
        tail = tail_seconds(rec, camp.manifest)
        if tail:
            beyond = we + tail > float(t.max())
            ax.axvspan(we, min(we + tail, float(t.max())), color="#fdae6b", alpha=0.3, hatch="//",
                       label="tail after the transfer")
            ax.text(0.99, 0.04, f"tail {tail:.3g} s" + (" (runs past the trace)" if beyond else ""),
                    transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5)
        else:
            tail_known = False
        ax2 = ax.twinx()
        ax2.grid(False)
        mode = rec.get("policy") or rec["mode"]
        if iperf.exists():
            g = read_goodput(iperf, rec["window_start"])
            if rec["mode"] in ("wifi", "lte"):
                lab, col = f"goodput over {'LTE' if rec['mode'] == 'lte' else 'WiFi'} (Mbit/s)", \
                    palette.colour(rec["mode"])
            else:
                lab, col = "goodput, both interfaces (Mbit/s)", palette.colour(mode)
                ax.text(0.36, 0.04, f"whole transfer: WiFi {(rec.get('wifi_bytes') or 0) / 1e6:.2f} MB, "
                        f"LTE {(rec.get('lte_bytes') or 0) / 1e6:.2f} MB", transform=ax.transAxes, ha="center",
                        fontsize=7.5, color=col)
            for row in g.itertuples():
                ax2.hlines(row.mbit, row.t0 - t0, row.t1 - t0, color=col, lw=2.2, label=lab)
        ax2.set_ylabel("goodput (Mbit/s)")
        ax2.set_ylim(bottom=0)
        for a in (ax, ax2):
            for h, lab in zip(*a.get_legend_handles_labels()):
                legend.setdefault(lab, h)
    fig.legend(list(legend.values()), list(legend), loc="upper center", ncols=min(5, len(legend)),
               bbox_to_anchor=(0.5, 0.955))
    axes[-1, 0].set_xlabel("time since the first receiver's transfer started (s)")
    first = recs.iloc[0]
    fig.suptitle(f"{sid} ({camp.id}): {first['cc']}, {int(first['n_receivers'])} receiver(s), "
                 f"{first['policy'] if pd.notna(first['policy']) else first['mode']}")
    label_energy(fig, recs["energy_label"])
    caption = (f"Sample {sid} of {camp.id} ({att.name}): each receiver's meter power (black), its goodput from "
               "iperf3's 1 s intervals (colour of the mode/policy), the transfer window whose energy the record "
               "holds (blue) and the tail after it (orange). ")
    if first["mode"] == "both" or pd.notna(first["policy"]):
        caption += ("Per-interface byte counters are recorded for the whole transfer only, so an MPTCP sample "
                    "shows its total goodput over time and the per-interface split in the legend. ")
    if not tail_known:
        caption += "The tail window is not drawn where neither the record nor a power profile gives its length."
    return save(fig, out, NAME, TITLE, caption.strip(), shows_energy=True)
