"""Synthetic campaigns: ``SampleRecord``s (the runner's own schema) from a simple power model.

For benchmarks and unit tests that need the paper's sweep size (5 congestion controls x 9
receiver counts x 3 modes x 45 samples, one record per receiver: 30,375 rows) without two days
on a testbed. Every record says ``testbed_kind: synthetic`` and ``energy_source: synthetic``.
The model: each receiver has its own WiFi and LTE channel rate; n receivers share a WiFi AP
and an LTE cell; congestion controls scale the achieved rate; power is the linear model of
docs/reference/papers.md §6 (base + θ + b·x per interface) plus an LTE tail, with
multiplicative noise. Not a substitute for measurements: it only has to be learnable.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from harness.campaign.plan import case_id
from harness.campaign.records import SampleRecord
from harness.campaign.store import Campaign
from harness.config.scenario import MODES

PAPER_CCS = ("lia", "olia", "balia", "wvegas", "cubic")
PAPER_COUNTS = tuple(range(1, 10))
CC_EFFICIENCY = {"lia": 0.95, "olia": 0.93, "balia": 0.94, "wvegas": 0.85, "cubic": 1.0, "reno": 0.97}
# (theta mW, b mW per Mbit/s): Huang et al. 2012 downlink, as in the seed papers.
RADIO = {"wifi": (132.86, 137.01), "lte": (1288.04, 51.97)}
BASE_W = 2.4
LTE_TAIL_J = 11.576 * 1.060
AP_MBIT, CELL_MBIT = 40.0, 36.0


def synthetic_records(campaign: str, ccs=PAPER_CCS, counts=PAPER_COUNTS, modes=MODES, samples: int = 45,
                      file_bytes: int = 60_000_000, seed: int = 0) -> list[dict]:
    """One record per receiver per sample (``SampleRecord.to_json``, as the runner writes them)."""
    rng = np.random.default_rng(seed)
    max_n = max(counts)
    wifi_rate = rng.uniform(4, 20, max_n)
    lte_rate = rng.uniform(6, 14, max_n)
    out = []
    for cc in ccs:
        for n in counts:
            for mode in modes:
                cid = case_id(cc, n, mode)
                for s in range(1, samples + 1):
                    sid = f"{cid}-s{s:03d}"
                    for i in range(n):
                        eff = CC_EFFICIENCY.get(cc, 0.9) * rng.uniform(0.9, 1.05)
                        xw = min(wifi_rate[i], AP_MBIT / n) * eff if mode in ("wifi", "both") else 0.0
                        xl = min(lte_rate[i], CELL_MBIT / n) * eff if mode in ("lte", "both") else 0.0
                        if mode == "both":  # coupled congestion control gives up some of each path
                            xw, xl = 0.9 * xw, 0.9 * xl
                        total = xw + xl
                        dur = file_bytes * 8 / 1e6 / total
                        p_mw = BASE_W * 1000 + sum(RADIO[r][0] + RADIO[r][1] * x
                                                   for r, x in (("wifi", xw), ("lte", xl)) if x > 0)
                        energy = p_mw / 1000 * dur * rng.normal(1.0, 0.02) + (LTE_TAIL_J if xl > 0 else 0.0)
                        share_w = xw / total
                        ib = {"wifi": int(file_bytes * share_w), "lte": int(file_bytes * (1 - share_w))}
                        out.append(SampleRecord(
                            campaign=campaign, sample_id=sid, case_id=cid, cc=cc, n_receivers=n, mode=mode,
                            sample_index=s, receiver=f"n{i + 1}", status="ok", sample_status="ok", attempts=1,
                            flags=[], file_bytes=file_bytes, bytes=file_bytes, duration_s=dur,
                            throughput_mbit=total, retransmits=0, iface_bytes=ib,
                            iface_throughput_mbit={"wifi": xw, "lte": xl}, energy_j=energy,
                            mean_power_w=energy / dur, meter_readings=int(dur * 10) + 1, meter_kind="synthetic",
                            energy_source="synthetic", testbed_kind="synthetic", cc_impl=f"synthetic:{cc}",
                        ).to_json())
    return out


def write_synthetic_campaign(root: Path, campaign: str = "synthetic", **kw) -> Campaign:
    """A campaign directory (manifest + samples.jsonl) holding ``synthetic_records``."""
    recs = synthetic_records(campaign, **kw)
    # the scenario part a dataset card reads (its name and file size), as a real manifest carries it whole
    scenario = {"name": f"{campaign}-scenario", "file_size": str(kw.get("file_bytes", 60_000_000))}
    c = Campaign.create(root, campaign, {"created_at": time.time(), "testbed": {"kind": "synthetic"},
                                         "scenario": scenario,
                                         "plan": sorted({r["sample_id"] for r in recs}), "synthetic": kw and
                                         {k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}})
    c.append(recs)  # one write: thousands of fsyncs (one per sample) would only slow benchmarks down
    return c
