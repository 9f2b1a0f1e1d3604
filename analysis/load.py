"""Sources of a report: campaign directories and datasets, read into one tidy frame.

A campaign (``runs/<id>/``, read with ``harness.campaign.store.Campaign``) gives every record, failed and
flagged ones included, so the statistics can count what they leave out. A dataset
(``datasets/<name>/``, read with ``harness.dataset.build.load_dataset``) gives only the rows its build
kept (its exclusions are counted in ``dataset.json``) plus the train/test split the model
figures need. Rows of a dataset whose campaign is also given are not counted twice.

Records gain fields over time (tail energy, power profile, policy, assignment...): every
optional field is read with a default here, in one place, so the rest of the package can rely
on the columns of ``COLUMNS``. ``scheme`` is what a figure colours by: the record's ``policy``
when it has one (Setup II), else its interface ``mode`` (Setup I).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.dataset.build import Dataset, load_dataset
from harness.errors import ConfigError
from harness.campaign.store import Campaign, is_campaign_dir

log = logging.getLogger(__name__)

# Columns of the tidy frame; optional record fields default to None.
COLUMNS = (
    "source", "campaign", "sample_id", "case_id", "cc", "n_receivers", "mode", "policy", "scheme",
    "sample_index", "receiver", "status", "sample_status", "flags", "error", "file_bytes", "bytes",
    "throughput_mbit", "energy_j", "tail_energy_j", "mean_power_w", "duration_s",
    "wifi_throughput_mbit", "lte_throughput_mbit", "wifi_bytes", "lte_bytes",
    "window_start", "window_end", "energy_source", "power_profile", "meter_kind", "testbed_kind",
    "kernel", "cc_impl", "mplab_version", "split", "energy_label",
)
NUMERIC = ("n_receivers", "sample_index", "file_bytes", "bytes", "throughput_mbit", "energy_j", "tail_energy_j",
           "mean_power_w", "duration_s", "wifi_throughput_mbit", "lte_throughput_mbit", "wifi_bytes",
           "lte_bytes", "window_start", "window_end")


@dataclass(frozen=True)
class Source:
    """One input of a report and what it says about itself (the provenance header)."""

    kind: str                     # "campaign" or "dataset"
    path: Path
    name: str
    testbed_kinds: tuple[str, ...]
    inventories: tuple[str, ...]
    power_profiles: tuple[str, ...]
    energy_sources: tuple[str, ...]
    kernels: tuple[str, ...]
    cc_impls: tuple[str, ...]
    mplab_versions: tuple[str, ...]
    git: tuple[str, ...]          # "<commit>[ (dirty)]" of the checkout(s) that produced it
    records: int
    campaign: Campaign | None = None
    dataset: Dataset | None = None


@dataclass
class Study:
    """Everything a report reads: the tidy frame of records and the sources behind it."""

    frame: pd.DataFrame
    sources: list[Source] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def campaigns(self) -> list[Source]:
        return [s for s in self.sources if s.kind == "campaign"]

    @property
    def datasets(self) -> list[Source]:
        return [s for s in self.sources if s.kind == "dataset"]

    @property
    def has_policies(self) -> bool:
        return bool(self.frame["policy"].notna().any()) if len(self.frame) else False


def energy_label(energy_source: str | None, power_profile: str | None, meter_kind: str | None = None) -> str:
    """How a figure must name its energy: ``emulated energy (profile NAME)``, ``measured energy (...)``."""
    src = energy_source or "unknown"
    if src == "emulated":
        return f"emulated energy (profile {power_profile or 'unnamed'})"
    if src == "measured":
        return f"measured energy ({meter_kind})" if meter_kind else "measured energy"
    if src == "synthetic":
        return "synthetic energy (a model, not a measurement)"
    return f"{src} energy"


def _uniq(values) -> tuple[str, ...]:
    return tuple(sorted({str(v) for v in values if v is not None and v == v and str(v) != ""}))


def _profile_of_manifest(manifest: dict) -> str | None:
    emu = (manifest.get("testbed") or {}).get("emulation") or {}
    prof = emu.get("power_profile") or {}
    return prof.get("name") if isinstance(prof, dict) else None


def record_row(rec: dict, source: str, manifest_profile: str | None = None) -> dict:
    """One campaign record -> one row of the tidy frame (optional fields read defensively)."""
    ib = rec.get("iface_bytes") or {}
    it = rec.get("iface_throughput_mbit") or {}
    policy = rec.get("policy") or None
    profile = rec.get("power_profile") or manifest_profile
    row = {
        "source": source,
        **{k: rec.get(k) for k in ("campaign", "sample_id", "case_id", "cc", "n_receivers", "mode", "sample_index",
                                    "receiver", "status", "sample_status", "error", "file_bytes", "bytes",
                                    "throughput_mbit", "energy_j", "tail_energy_j", "mean_power_w", "duration_s",
                                    "window_start", "window_end", "energy_source", "meter_kind", "testbed_kind",
                                    "kernel", "cc_impl", "mplab_version")},
        "policy": policy,
        "scheme": policy or rec.get("mode"),
        "flags": "; ".join(rec.get("flags") or []),
        "wifi_throughput_mbit": it.get("wifi"), "lte_throughput_mbit": it.get("lte"),
        "wifi_bytes": ib.get("wifi"), "lte_bytes": ib.get("lte"),
        "power_profile": profile,
        "split": None,
    }
    row["energy_label"] = energy_label(row["energy_source"], profile, row["meter_kind"])
    return row


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=list(COLUMNS))
    for c in NUMERIC:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def read_campaign(path: Path) -> tuple[Source, pd.DataFrame]:
    """A campaign directory -> its ``Source`` and its rows (every record, whatever its status)."""
    c = Campaign.open(path)
    m = c.manifest
    prof = _profile_of_manifest(m)
    recs = c.records()
    df = _frame([record_row(r, c.id, prof) for r in recs])
    tb = m.get("testbed") or {}
    git = m.get("git") or {}
    src = Source(
        kind="campaign", path=path, name=c.id,
        testbed_kinds=_uniq([tb.get("kind"), *df["testbed_kind"]]),
        inventories=_uniq([(m.get("inventory") or {}).get("name")]),
        power_profiles=_uniq([prof, *df["power_profile"]]),
        # The manifest's energy_source is a sentence ("emulated: power model driven by..."): its first word.
        energy_sources=_uniq([*df["energy_source"]] or [str(tb.get("energy_source") or "").split(":")[0]]),
        kernels=_uniq([m.get("kernel"), *df["kernel"]]),
        cc_impls=_uniq(list((m.get("congestion_controls") or {}).values()) or df["cc_impl"]),
        mplab_versions=_uniq([m.get("mplab_version"), *df["mplab_version"]]),
        git=_uniq([f"{git['commit'][:12]}{' (dirty)' if git.get('dirty') else ''}"] if git.get("commit") else []),
        records=len(df), campaign=c,
    )
    return src, df


def _dataset_profiles(ds: Dataset) -> list[str | None]:
    camps = [c for c in ds.meta.get("sources") or [] if isinstance(c, dict)]
    return [c.get("power_profile", {}).get("name") if isinstance(c.get("power_profile"), dict)
            else c.get("power_profile") for c in camps]


def dataset_energy_label(ds: Dataset) -> str:
    """The energy label(s) of a dataset's rows, joined (one in a dataset built from one testbed)."""
    profiles = _dataset_profiles(ds)
    profile = profiles[0] if len(set(profiles)) == 1 else None
    f = ds.frame
    return "; ".join(sorted({energy_label(s, profile, k) for s, k in zip(f["energy_source"], f["meter_kind"])}))


def read_dataset(path: Path) -> tuple[Source, pd.DataFrame]:
    """A dataset directory -> its ``Source`` and its rows (only the kept ones; every row is usable)."""
    ds = load_dataset(path)
    f = ds.frame
    camps = [c for c in ds.meta.get("sources") or [] if isinstance(c, dict)]
    profiles = _dataset_profiles(ds)
    rows = []
    for r in f.to_dict("records"):
        profile = r.get("power_profile") or (profiles[0] if len(set(profiles)) == 1 else None)
        row = {"source": ds.meta.get("name", path.name), **{k: r.get(k) for k in COLUMNS if k in r},
               "policy": r.get("policy") or None, "status": "ok", "sample_status": "ok", "power_profile": profile,
               "file_bytes": r.get("file_bytes", r.get("bytes"))}
        row["scheme"] = row["policy"] or r.get("mode")
        row["flags"] = r.get("flags") or ""
        row["energy_label"] = energy_label(r.get("energy_source"), profile, r.get("meter_kind"))
        rows.append(row)
    df = _frame(rows)
    gits = [c.get("git") for c in camps if isinstance(c.get("git"), dict)]
    src = Source(
        kind="dataset", path=path, name=str(ds.meta.get("name", path.name)),
        testbed_kinds=_uniq(f["testbed_kind"]), inventories=(),
        power_profiles=_uniq(profiles + list(df["power_profile"])), energy_sources=_uniq(f["energy_source"]),
        kernels=_uniq(f["kernel"]), cc_impls=_uniq(f["cc_impl"]),
        mplab_versions=_uniq([ds.meta.get("mplab_version")]),
        git=_uniq(f"{g['commit'][:12]}{' (dirty)' if g.get('dirty') else ''}" for g in gits if g.get("commit")),
        records=len(df), dataset=ds,
    )
    return src, df


def load_study(paths: list[Path]) -> Study:
    """Read every campaign or dataset directory in ``paths``; refuse anything else (exit 2).

    Rows a dataset shares with a campaign also given (same campaign, sample and receiver) are
    counted once, from the campaign (which also knows the records the dataset left out).
    """
    if not paths:
        raise ConfigError("no campaign or dataset given; pass runs/<campaign> or datasets/<name>")
    sources, frames, notes = [], [], []
    for p in paths:
        p = Path(p)
        if is_campaign_dir(p):  # a damaged one too (its manifest missing): Campaign.open names what is wrong (4)
            src, df = read_campaign(p)
            unused = src.campaign.unused()
            if unused:
                # Never silently: the report counts what it left out, on the page and on the terminal.
                note = (f"campaign {src.name}: {len(unused)} line(s) of samples.jsonl left out (not counted): "
                        + "; ".join(unused[:3]) + (f"; and {len(unused) - 3} more" if len(unused) > 3 else ""))
                notes.append(note)
                log.warning("%s", note)
        elif (p / "dataset.json").exists():
            src, df = read_dataset(p)
        else:
            raise ConfigError(f"{p} is neither a campaign (manifest.json) nor a dataset (dataset.json)",
                              field="RUNS_OR_DATASETS")
        if any(s.path.resolve() == p.resolve() for s in sources):
            raise ConfigError(f"{p} is given twice", field="RUNS_OR_DATASETS")
        sources.append(src)
        frames.append(df)
    camp_frames = [f for s, f in zip(sources, frames) if s.kind == "campaign"]
    seen = set()
    for f in camp_frames:
        seen |= set(zip(f["campaign"], f["sample_id"], f["receiver"]))
    kept = []
    for s, f in zip(sources, frames):
        if s.kind == "dataset" and seen:
            dup = pd.Series([k in seen for k in zip(f["campaign"], f["sample_id"], f["receiver"])], index=f.index,
                            dtype=bool)
            if dup.any():
                notes.append(f"dataset {s.name}: {int(dup.sum())} row(s) come from a campaign also given; "
                             "counted once, from the campaign")
            f = f[~dup]
        kept.append(f)
    frame = pd.concat(kept, ignore_index=True) if kept else _frame([])
    dup_keys = frame.duplicated(subset=["campaign", "sample_id", "receiver"], keep="first")
    if dup_keys.any():
        notes.append(f"{int(dup_keys.sum())} duplicate record(s) (same campaign, sample, receiver) counted once")
        frame = frame[~dup_keys].reset_index(drop=True)
    return Study(frame, sources, notes)


def read_json(path: Path) -> dict:
    """A JSON file, or ``ConfigError`` naming it."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
