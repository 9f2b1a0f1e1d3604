"""Fixture campaigns for the analysis tests.

- ``paper_campaign``: a Setup II campaign whose records carry ``policy`` (what a controller's
  campaign records), shaped after the reference paper's Tables 2-3 in mplab's reading of them: for
  every paper column (policy, cc) and node count in ``NODES``, ``SAMPLES`` samples whose per-receiver
  throughput is Table 2's network total / N and whose energy is Table 3's per-node value, each times
  a small deterministic spread; ``ref-is`` sits between
  IS + Tuning and MPTCP. One sample fails and one record is flagged (``meter-gap``), so the
  statistics must leave them out and count them. ``reverse=True`` reverses the orderings the
  reproduction checks test: the policies swap energies (SDN <-> MPTCP, LTE <-> WiFi), energy
  grows 6% per node, and throughput rises with the node count.
- ``setup1_campaign``: a Setup I campaign from the synthetic generator (``rigs/synthetic.py``):
  records without ``policy``, several receiver counts, every mode.
- ``QUICK_SLICE``: two real samples of a quick campaign with their raw output (tests/data/analysis).
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from analysis.paper import load_paper
from harness.campaign.store import SCHEMA_VERSION, Campaign

QUICK_SLICE = Path(__file__).parent / "data" / "analysis" / "quick-slice"
NODES = (3, 5, 8)
SAMPLES = 3
FILE_BYTES = 60_000_000
FAILED_SAMPLE = "balia-n5-all-both-s002"
FLAGGED = ("cubic-n3-all-lte-s001", "n2")
MIRROR = {"sdn-balia": "mptcp-balia", "mptcp-balia": "sdn-balia", "sdn-cubic": "mptcp-cubic",
          "mptcp-cubic": "sdn-cubic", "lte-sptcp": "wifi-sptcp", "wifi-sptcp": "lte-sptcp"}


def _spread(i: int, s: int) -> float:
    """A small deterministic spread around 1 (receiver i, sample s): within +-1.5%."""
    return 1.0 + 0.005 * (((i * 7 + s * 3) % 7) - 3)


def paper_records(campaign: str, reverse: bool = False) -> list[dict]:
    paper = load_paper()
    thr, en = paper.wide("throughput_mbit"), paper.wide("energy_j")
    arms = [(key, c.policy, c.cc, c.mode) for key, c in paper.columns.items()]
    arms += [(f"sdn-{cc}", "ref-is", cc, "policy") for cc in ("balia", "cubic")]
    out = []
    for key, policy, cc, mode in arms:
        for n in NODES:
            src = MIRROR[key] if reverse else key
            e = float(en.at[n, src]) * (1 + 0.06 * (n - 3) if reverse else 1.0)
            x = float(thr.at[11 - n if reverse else n, key]) / n   # Table 2 holds network totals
            if policy == "ref-is":
                e, x = e * 1.05, x * 0.98
            for s in range(1, SAMPLES + 1):
                cid = f"{cc}-n{n}-{policy}"
                sid = f"{cid}-s{s:03d}"
                failed = sid == FAILED_SAMPLE
                for i in range(1, n + 1):
                    rx = f"n{i}"
                    k = _spread(i, s)
                    dur = FILE_BYTES * 8 / 1e6 / (x * k)
                    xw = x * k if mode in ("wifi",) else 0.0 if mode == "lte" else 0.5 * x * k
                    flagged = (sid, rx) == FLAGGED
                    out.append({
                        "schema_version": SCHEMA_VERSION, "campaign": campaign, "sample_id": sid, "case_id": cid,
                        "cc": cc, "n_receivers": n, "mode": "both" if mode == "policy" else mode,
                        "policy": policy, "sample_index": s, "receiver": rx,
                        "status": "failed" if failed and i == 1 else "ok",
                        "sample_status": "failed" if failed else "ok",
                        "error": "timeout" if failed and i == 1 else None, "attempts": 3 if failed else 1,
                        "flags": ["meter-gap: 0.6 s without readings"] if flagged else [],
                        "file_bytes": FILE_BYTES, "bytes": None if failed and i == 1 else FILE_BYTES,
                        "duration_s": dur, "throughput_mbit": x * k,
                        "iface_bytes": {"wifi": int(FILE_BYTES * xw / (x * k)),
                                        "lte": FILE_BYTES - int(FILE_BYTES * xw / (x * k))},
                        "iface_throughput_mbit": {"wifi": xw, "lte": x * k - xw},
                        "energy_j": None if failed and i == 1 else e * k * (3.0 if flagged else 1.0),
                        "mean_power_w": e * k / dur, "meter_kind": "emulated-um25c", "energy_source": "emulated",
                        "testbed_kind": "emulated", "kernel": "6.18.0-fixture", "cc_impl": f"bpf:mplab_{cc}",
                        "mplab_version": "0.1.0", "power_profile": "paper-fixture",
                    })
    return out


def write_campaign(root: Path, name: str, records: list[dict], testbed: dict | None = None,
                   manifest: dict | None = None) -> Campaign:
    """A campaign of ``records``; ``manifest`` adds or replaces manifest fields (a scenario, another kernel...)."""
    c = Campaign.create(root, name, {"created_at": time.time(), "mplab_version": "0.1.0",
                                     "testbed": testbed or {"kind": "emulated", "energy_source": "emulated"},
                                     "plan": sorted({r["sample_id"] for r in records}), "kernel": "6.18.0-fixture",
                                     "congestion_controls": {"balia": "bpf:mplab_balia", "cubic": "kernel:cubic"},
                                     "git": {"commit": "0" * 40, "dirty": False}, **(manifest or {})})
    c.append(records)
    return c


def paper_campaign(root: Path, name: str = "paper-fixture", reverse: bool = False) -> Path:
    """Write the Setup II fixture campaign under ``root``; returns its directory."""
    return write_campaign(root, name, paper_records(name, reverse)).path


def setup1_campaign(root: Path, name: str = "setup1-fixture") -> Path:
    """A synthetic Setup I campaign: 3 ccs x 1..3 receivers x 3 modes x 4 samples, 4 MB transfers."""
    from rigs.synthetic import synthetic_records

    recs = synthetic_records(name, ccs=("balia", "cubic", "lia"), counts=(1, 2, 3), samples=4,
                             file_bytes=4_000_000, seed=3)
    return write_campaign(root, name, recs, {"kind": "synthetic", "energy_source": "synthetic"}).path


def quick_slice(root: Path) -> Path:
    """A writable copy of the real two-sample slice."""
    dst = root / QUICK_SLICE.name
    shutil.copytree(QUICK_SLICE, dst)
    return dst


# A small campaign of scheme policies with hand-chosen numbers (tests/test_schemes_report.py computes the
# side-by-side table from these by hand). Per (receivers, policy): two samples, each a list of per-receiver
# (throughput Mbit/s, energy J); every transfer moves SCHEMES_FILE_BYTES (32 Mbit), so J/Mbit = energy / 32.
SCHEMES_FILE_BYTES = 4_000_000
SCHEMES_CELLS: dict[tuple[int, str], list[list[tuple[float, float]]]] = {
    (2, "all-wifi"): [[(5, 20), (5, 22)], [(6, 20), (6, 22)]],          # energy 21, 21  -> 0.65625 J/Mbit
    (2, "all-lte"): [[(8, 14), (8, 16)], [(9, 14), (9, 14)]],           # energy 15, 14  -> 14.5 J
    (2, "all-both"): [[(10, 10), (12, 10)], [(11, 12), (13, 12)]],      # thr 11, 12; energy 10, 12 -> 11 J
    (2, "es-mptcp"): [[(10, 13), (10, 13)], [(9, 13), (9, 15)]],        # energy 13, 14 -> 13.5 J: worse
    (2, "mp-sdn"): [[(20, 9), (20, 9)], [(21, 9), (21, 9)]],            # thr 20, 21: far better
    (2, "marginal-efficiency"): [[(9, 16), (9, 16)], [(9, 16), (9, 16)]],  # 16 J: worse than all-lte
    (4, "all-wifi"): [[(3, 30)] * 4, [(3, 32)] * 4],
    (4, "all-lte"): [[(6, 20)] * 4, [(6, 21)] * 4],
    (4, "all-both"): [[(8, 16)] * 4, [(8, 18)] * 4],
    (4, "es-mptcp"): [[(8, 15)] * 4, [(8, 16)] * 4],
    (4, "mp-sdn"): [[(7, 17)] * 4, [(7, 17)] * 4],
    (4, "marginal-efficiency"): [[(8, 16)] * 4, [(8, 18)] * 4],
}


def schemes_records(campaign: str) -> list[dict]:
    out = []
    for (n, policy), samples in SCHEMES_CELLS.items():
        cid = f"cubic-n{n}-policy-{policy}"
        for s, rxs in enumerate(samples, start=1):
            assert len(rxs) == n
            for i, (thr, energy) in enumerate(rxs, start=1):
                dur = SCHEMES_FILE_BYTES * 8 / 1e6 / thr
                out.append({
                    "schema_version": SCHEMA_VERSION, "campaign": campaign, "sample_id": f"{cid}-s{s:03d}",
                    "case_id": cid, "cc": "cubic", "n_receivers": n, "mode": "policy", "policy": policy,
                    "sample_index": s, "receiver": f"n{i}", "status": "ok", "sample_status": "ok", "error": None,
                    "attempts": 1, "flags": [], "file_bytes": SCHEMES_FILE_BYTES, "bytes": SCHEMES_FILE_BYTES,
                    "duration_s": dur, "throughput_mbit": float(thr),
                    "iface_bytes": {"wifi": SCHEMES_FILE_BYTES // 2, "lte": SCHEMES_FILE_BYTES // 2},
                    "iface_throughput_mbit": {"wifi": thr / 2, "lte": thr / 2}, "energy_j": float(energy),
                    "mean_power_w": energy / dur, "meter_kind": "emulated-um25c", "energy_source": "emulated",
                    "testbed_kind": "emulated", "kernel": "6.18.0-fixture", "cc_impl": "kernel:cubic",
                    "mplab_version": "0.1.0", "power_profile": "schemes-fixture",
                })
    return out


def schemes_campaign(root: Path, name: str = "schemes-fixture") -> Path:
    """Write the scheme-policy fixture campaign under ``root``; returns its directory."""
    return write_campaign(root, name, schemes_records(name)).path
