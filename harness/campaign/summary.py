"""Per-case summaries of a campaign's records (what `mplab run` and `mplab status` print)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class CaseSummary:
    case_id: str
    cc: str
    n_receivers: int
    mode: str
    samples_ok: int
    samples_failed: int
    flagged_records: int
    mean_throughput_mbit: float | None
    mean_energy_j: float | None
    mean_power_w: float | None
    #: 95% intervals of the per-receiver means (Student's t; the lower end never below 0, as neither
    #: quantity can be negative); None with fewer than two values.
    throughput_ci_mbit: tuple[float, float] | None = None
    energy_ci_j: tuple[float, float] | None = None
    #: How many per-receiver values each mean is over.
    n_throughput: int = 0
    n_energy: int = 0


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def mean_interval(xs: list[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` t-interval of the mean of ``xs``, clipped at 0 (non-negative quantities); None if n < 2."""
    if len(xs) < 2:
        return None
    from scipy.stats import t  # over a second of CPU to import: only when there is an interval to compute

    m = statistics.fmean(xs)
    half = t.ppf(0.5 + level / 2, len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5
    return max(0.0, m - half), m + half


def summarize(records: list[dict], intervals: bool = True) -> list[CaseSummary]:
    """One row per case: samples ok/failed, and per-receiver means over the ok records.

    ``intervals``: also the 95% intervals of the means (scipy's t quantiles); without them (the command
    line's tables, which print none) the ``*_ci_*`` fields are None and scipy is never imported.
    """
    cases: dict[str, list[dict]] = {}
    for r in records:
        cases.setdefault(r["case_id"], []).append(r)
    out = []
    for cid in sorted(cases, key=lambda c: (cases[c][0]["cc"], cases[c][0]["n_receivers"], cases[c][0]["mode"])):
        rs = cases[cid]
        samples: dict[str, str] = {}
        for r in rs:
            samples[r["sample_id"]] = r["sample_status"]
        ok = [r for r in rs if r["sample_status"] == "ok"]
        clean = [r for r in ok if not r["flags"]]
        rates = [r["throughput_mbit"] for r in ok if r["throughput_mbit"] is not None]
        energies = [r["energy_j"] for r in clean if r["energy_j"] is not None]
        out.append(CaseSummary(
            cid, rs[0]["cc"], rs[0]["n_receivers"], rs[0]["mode"],
            sum(1 for s in samples.values() if s == "ok"), sum(1 for s in samples.values() if s != "ok"),
            sum(1 for r in ok if r["flags"]),
            _mean(rates), _mean(energies),
            _mean([r["mean_power_w"] for r in clean if r["mean_power_w"] is not None]),
            mean_interval(rates) if intervals else None, mean_interval(energies) if intervals else None,
            len(rates), len(energies),
        ))
    return out
