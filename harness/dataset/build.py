"""Datasets: campaign records turned into one tidy, validated, split table.

A dataset (``datasets/<name>/``) has one row per receiver per sample of one or more
campaigns (``runs/<campaign>/samples.jsonl``), and these files::

    data/train.parquet,      one Parquet file per split, as Hugging Face datasets lay them out (the card's
    data/test.parquet        ``configs``); text columns categorical, every field with its unit and description
    data.csv                 the whole table, both splits (columns: ``ROW_COLUMNS``, units and meaning in
                             ``COLUMN_DOCS``); canonical: its sha256 is the dataset's digest
    schema.json              the row schema (JSON Schema of ``DatasetRow``) and the dataset's schema_version
    dataset.json             provenance, split parameters, per-case counts, excluded records, digest
    croissant.json           Croissant 1.0 metadata (JSON-LD) for dataset search engines and loaders

A dataset has a version (semantic versioning: ``1.0.0`` for a new folder; a rebuild over an existing
one keeps its version when the rows are the same and bumps the minor version when they differ;
``--version`` sets it) and a URL (where it lives: ``--url``, default the folder's ``file://`` URI).
    README.md                the dataset card (``huggingface_hub``'s DatasetCard: front matter, then Markdown)
    SHA256SUMS               sha256 of every other file (``harness.artifacts``), written last

Every input record is validated (``harness.campaign.records.SampleRecord``, the one record
schema); a malformed one stops the build with
the file, line, field and reason. Records that are well formed but unusable (failed
samples, missing energy, flagged measurements) are excluded and counted by reason in the
card. The train/test split is made per case and per *sample* (all receivers of one sample
land in the same split, so a sample never leaks across), by a seeded hash of the sample id:
it does not depend on record order, and adding a campaign does not move existing samples.

The digest is a sha256 over the canonical CSV bytes (the dataset's identity: the same rows give
the same digest); ``SHA256SUMS`` covers every file, the Parquet one included. ``load_dataset``
checks both and the schema again, so a model always names exactly the data it was trained on. This module knows
datasets only; it never imports ``training`` (data flows one way).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd
from pydantic import Field, ValidationError

import harness
from harness.artifacts import (SUMS_NAME, ChecksumMismatch, FolderPolicy, check_output, staged_folder, verify_sums,
                               write_sums)
from harness.errors import ConfigError, StoreError
from harness.files import atomic_write
from harness.campaign.records import SampleKey, SampleRecord, unusable_reason
from harness.campaign.store import Campaign
from harness.config.scenario import parse_size
from harness.dataset.columns import CATEGORICAL_COLUMNS, COLUMN_DOCS, FLOAT_COLUMNS, INT_COLUMNS

SCHEMA_VERSION = 1
SPLITS = ("train", "test")
#: Semantic version (MAJOR.MINOR.PATCH, optional -pre and +build), as Croissant asks for.
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
ORIGIN_NAME = ".origin.json"  # written by `mplab dataset pull`: registry name, version, URI


class DatasetRow(SampleKey):
    """One row of a dataset: one receiver in one sample. Units are in the names."""

    split: Literal["train", "test"]
    wifi_bytes: int = Field(ge=0)
    lte_bytes: int = Field(ge=0)
    wifi_throughput_mbit: float = Field(ge=0)
    lte_throughput_mbit: float = Field(ge=0)
    bytes: int = Field(ge=0)
    throughput_mbit: float = Field(ge=0)
    duration_s: float = Field(gt=0)
    energy_j: float = Field(ge=0)
    mean_power_w: float | None = Field(default=None, ge=0)
    #: Energy of the radio tail after the transfer window, until the receiver was idle again (None: not recorded).
    tail_energy_j: float | None = Field(default=None, ge=0)
    #: How much of energy_j rests on where the power changed at the window's edges (None: not recorded).
    energy_edge_j: float | None = Field(default=None, ge=0)
    meter_kind: str
    energy_source: str
    testbed_kind: str
    kernel: str | None = None
    cc_impl: str | None = None
    flags: str = ""  # "; "-joined; only non-empty when the build kept flagged records


ROW_COLUMNS: tuple[str, ...] = tuple(DatasetRow.model_fields)
# Column types and documentation live in harness.dataset.columns (the card and the Croissant
# file read them without importing the builder); tests check they list DatasetRow's fields.

#: What the ``energy_j`` column is (written into dataset.json and the card; a model card repeats it).
ENERGY_DEFINITION = ("energy_j: the receiver's energy over its transfer window only (first to last byte); the "
                     "radio tail after it, until the receiver was idle again, is in tail_energy_j and not included")

#: Campaign properties a dataset refuses to mix unless asked (``allow_mixed``): joules of different
#: testbeds, power profiles or energy sources are not the same quantity.
MIX_KEYS = ("testbed_kind", "power_profile", "energy_source")


@dataclass(frozen=True)
class SplitSpec:
    """Per-case split: ``train`` then ``test`` samples; cases with fewer samples keep the ratio."""

    train: int = 30
    test: int = 15
    seed: int = 2023

    def __post_init__(self) -> None:
        if self.train < 1 or self.test < 1:
            raise ConfigError(f"split must have at least one train and one test sample per case "
                              f"(got train={self.train}, test={self.test})", field="--train/--test")

    def counts(self, n_samples: int) -> tuple[int, int]:
        """(train, test) sample counts for a case with ``n_samples`` usable samples.

        With at least train+test samples: exactly train and test (the rest are spare, as the
        paper keeps 30 + 15 of each case). With fewer: the same ratio, at least one test sample
        as soon as there are two samples (a one-sample case goes to train).
        """
        if n_samples >= self.train + self.test:
            return self.train, self.test
        if n_samples < 2:
            return n_samples, 0
        n_test = max(1, round(n_samples * self.test / (self.train + self.test)))
        return n_samples - n_test, n_test


@dataclass
class BuildResult:
    """What ``build_dataset`` wrote."""

    path: Path
    digest: str
    rows: int
    excluded: Counter = field(default_factory=Counter)
    meta: dict = field(default_factory=dict)
    sums_digest: str = ""  # sha256 of SHA256SUMS
    previous: Path | None = None  # where the old dataset went (keep-previous)


def validate_record(raw: dict, where: str) -> SampleRecord:
    """Parse one campaign record or raise ``ConfigError`` naming the file:line, field and reason."""
    try:
        return SampleRecord.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"]) or "(record)"
        more = f" (and {len(exc.errors()) - 1} more problem(s))" if len(exc.errors()) > 1 else ""
        raise ConfigError(f"malformed record: {err['msg']} (got {err.get('input')!r}){more}; "
                          "fix or remove the line, or rebuild from an intact campaign",
                          source=where, field=loc) from None


def exclusion_reason(rec: SampleRecord, keep_flagged: bool) -> str | None:
    """Why a well-formed record cannot be a dataset row, or None if it can."""
    if rec.policy is not None:
        return "controller sample"  # Setup II evaluates a model; it does not feed one
    return unusable_reason(rec, keep_flagged)


def split_rank(seed: int, sample_id: str) -> str:
    """The order of a sample within its case: a seeded hash, independent of record order."""
    return hashlib.sha256(f"{seed}:{sample_id}".encode()).hexdigest()


def sample_key(campaign: str, sample_id: str) -> str:
    """A sample's key across campaigns (two campaigns of one scenario share sample ids)."""
    return f"{campaign}/{sample_id}"


def assign_splits(rows: Sequence[dict], spec: SplitSpec) -> tuple[dict[str, str], Counter]:
    """Map sample key (``sample_key``) -> "train" / "test" / "spare", per case. Returns the map and spare counts.

    Samples are ranked by ``split_rank(seed, sample_id)``, ties (the same id in two campaigns) by campaign,
    so a one-campaign dataset splits as it always did.
    """
    by_case: dict[str, set[tuple[str, str]]] = {}
    for r in rows:
        by_case.setdefault(r["case_id"], set()).add((r["campaign"], r["sample_id"]))
    out: dict[str, str] = {}
    spare: Counter = Counter()
    for cid, units in by_case.items():
        ordered = sorted(units, key=lambda u: (split_rank(spec.seed, u[1]), u[0]))
        n_train, n_test = spec.counts(len(ordered))
        for i, (campaign, sid) in enumerate(ordered):
            out[sample_key(campaign, sid)] = "train" if i < n_train else "test" if i < n_train + n_test else "spare"
        spare[cid] = max(0, len(ordered) - n_train - n_test)
    return out, spare


def to_row(rec: SampleRecord, split: str) -> dict:
    ib = rec.iface_bytes or {}
    it = rec.iface_throughput_mbit or {}
    row = DatasetRow(
        campaign=rec.campaign, sample_id=rec.sample_id, case_id=rec.case_id, cc=rec.cc,
        n_receivers=rec.n_receivers, mode=rec.mode, sample_index=rec.sample_index, receiver=rec.receiver,
        split=split, wifi_bytes=ib.get("wifi", 0), lte_bytes=ib.get("lte", 0),
        wifi_throughput_mbit=it.get("wifi", 0.0), lte_throughput_mbit=it.get("lte", 0.0),
        bytes=rec.bytes, throughput_mbit=rec.throughput_mbit, duration_s=rec.duration_s,
        energy_j=rec.energy_j, mean_power_w=rec.mean_power_w, tail_energy_j=rec.tail_energy_j,
        energy_edge_j=rec.energy_edge_j,
        meter_kind=rec.meter_kind,
        energy_source=rec.energy_source, testbed_kind=rec.testbed_kind, kernel=rec.kernel,
        cc_impl=rec.cc_impl, flags="; ".join(rec.flags))
    return row.model_dump()


def collect_rows(campaigns: Iterable[Campaign], spec: SplitSpec, keep_flagged: bool = False,
                 skip_damaged: bool = False) -> tuple[list[dict], Counter, Counter]:
    """Validate every record, drop unusable ones (counted by reason) and split. Returns rows, excluded, spare.

    A damaged line (``Campaign.damaged``: a failed checksum, a sample id the plan does not have) is refused
    naming its file and line, or left out and counted with ``skip_damaged``.
    """
    usable: list[SampleRecord] = []
    excluded: Counter = Counter()
    seen: dict[tuple[str, str, str], str] = {}
    for c in campaigns:
        damaged, tail = c.damaged(), c.torn_tail()
        if damaged and not skip_damaged:
            more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
            raise StoreError(f"{damaged[0].describe(c.samples_path)}{more}; rerun its sample with `mplab run "
                             f"--resume {c.path}`, or leave damaged records out with --skip-damaged")
        if tail is not None and not skip_damaged:
            raise StoreError(f"{tail.describe(c.samples_path)}; or build without it: --skip-damaged")
        if damaged:
            excluded["damaged record (checksum or plan)"] += len(damaged)
        if tail is not None:
            excluded["torn tail of samples.jsonl (its sample left out)"] += 1 + tail.lines_before
        for lineno, raw in enumerate(c.records(), start=1):
            where = f"{c.samples_path}:{lineno}"
            rec = validate_record(raw, where)
            key = (rec.campaign, rec.sample_id, rec.receiver)
            if key in seen:
                raise ConfigError(f"duplicate record for campaign {rec.campaign} sample {rec.sample_id} receiver "
                                  f"{rec.receiver} (first at {seen[key]}); was a campaign given twice?", source=where)
            seen[key] = where
            reason = exclusion_reason(rec, keep_flagged)
            if reason:
                excluded[reason] += 1
            else:
                usable.append(rec)
    splits, spare = assign_splits([r.model_dump() for r in usable], spec)
    rows = []
    for rec in usable:
        s = splits[sample_key(rec.campaign, rec.sample_id)]
        if s == "spare":
            excluded["spare (beyond train + test per case)"] += 1
            continue
        rows.append(to_row(rec, s))
    rows.sort(key=lambda r: (r["cc"], r["n_receivers"], r["mode"], r["campaign"], r["sample_index"],
                             r["sample_id"], r["receiver"]))
    return rows, excluded, spare


def to_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """The rows as a DataFrame with the dataset's column order and dtypes."""
    df = pd.DataFrame(list(rows), columns=list(ROW_COLUMNS))
    for c in INT_COLUMNS:
        df[c] = df[c].astype("int64")
    for c in FLOAT_COLUMNS:
        df[c] = df[c].astype("float64")
    for c in ROW_COLUMNS:
        if c not in INT_COLUMNS and c not in FLOAT_COLUMNS:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def validate_frame(df: pd.DataFrame, source: str) -> None:
    """Check a dataset table against the schema: columns, every row, and table-level rules."""
    missing = [c for c in ROW_COLUMNS if c not in df.columns]
    extra = [c for c in df.columns if c not in ROW_COLUMNS]
    if missing or extra:
        raise ConfigError(f"columns differ from the dataset schema: missing {missing}, unexpected {extra}",
                          source=source)
    if df.empty:
        raise ConfigError("dataset has no rows", source=source)
    for i, rec in enumerate(df.to_dict(orient="records")):
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()}
        clean["flags"] = clean["flags"] or ""
        try:
            DatasetRow.model_validate(clean)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ConfigError(f"row {i}: {err['msg']} (got {err.get('input')!r})", source=source,
                              field=".".join(str(x) for x in err["loc"])) from None
    dup = df.duplicated(["campaign", "sample_id", "receiver"])
    if dup.any():
        r = df[dup].iloc[0]
        raise ConfigError(f"duplicate row for campaign {r['campaign']} sample {r['sample_id']} receiver "
                          f"{r['receiver']}", source=source)
    mixed = df.groupby(["campaign", "sample_id"])["split"].nunique()
    if (mixed > 1).any():
        raise ConfigError(f"sample {'/'.join(mixed[mixed > 1].index[0])} is in both splits", source=source)
    if not (df["split"] == "train").any():
        raise ConfigError("dataset has no training rows", source=source)


def canonical_csv(df: pd.DataFrame) -> bytes:
    """The CSV form of a dataset; its sha256 is the dataset digest."""
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n", float_format="%.10g")
    return buf.getvalue().encode()


def digest_bytes(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def case_counts(df: pd.DataFrame) -> list[dict]:
    """Per case: samples and rows in train and test."""
    out = []
    for (cc, n, mode), g in df.groupby(["cc", "n_receivers", "mode"], sort=True):
        out.append({"case_id": g["case_id"].iloc[0], "cc": cc, "n_receivers": int(n), "mode": mode,
                    "train_samples": int(g.loc[g.split == "train", "sample_id"].nunique()),
                    "test_samples": int(g.loc[g.split == "test", "sample_id"].nunique()),
                    "train_rows": int((g.split == "train").sum()), "test_rows": int((g.split == "test").sum())})
    return out


def campaign_mix(campaigns: Sequence[Campaign]) -> dict[str, dict[str, list[str]]]:
    """For each of ``MIX_KEYS``: value -> the campaigns with it."""
    mix: dict[str, dict[str, list[str]]] = {k: {} for k in MIX_KEYS}
    for c in campaigns:
        p = _provenance(c)
        values = {"testbed_kind": {p["testbed_kind"]}, "power_profile": {(p["power_profile"] or {}).get("name")},
                  "energy_source": {r.get("energy_source") for r in c.records()} or {None}}
        for k, vs in values.items():
            for v in sorted(vs, key=str):
                mix[k].setdefault(str(v), []).append(c.id)
    return mix


def check_mix(campaigns: Sequence[Campaign], allow_mixed: bool) -> dict[str, dict[str, list[str]]]:
    """Refuse campaigns of different testbeds, power profiles or energy sources unless ``allow_mixed``."""
    ids = [c.id for c in campaigns]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ConfigError(f"campaign(s) {twice} given twice", field="RUNS")
    mix = campaign_mix(campaigns)
    mixed = {k: v for k, v in mix.items() if len(v) > 1}
    if mixed and not allow_mixed:
        what = "; ".join(f"{k}: " + ", ".join(f"{val} ({', '.join(cs)})" for val, cs in v.items())
                         for k, v in mixed.items())
        raise ConfigError(f"these campaigns differ in {', '.join(mixed)} ({what}); their joules are not the same "
                          "quantity. Build one dataset per kind, or pass --allow-mixed to merge them (the card "
                          "lists the mix)", field="RUNS")
    return mix


def dataset_version(out: Path, digest: str, asked: str | None) -> str:
    """The version of the dataset about to be written at ``out`` (see the module docstring).

    ``asked`` wins (checked as a semantic version); else the dataset already at ``out`` decides: the
    same digest keeps its version, another one bumps its minor version; a new folder is 1.0.0.
    """
    if asked is not None:
        if not _SEMVER.match(asked):
            raise ConfigError(f"version {asked!r} is not MAJOR.MINOR.PATCH (e.g. 1.2.0)", field="--version")
        return asked
    try:
        old = json.loads((out / "dataset.json").read_text())
    except (OSError, ValueError):
        return "1.0.0"
    m = _SEMVER.match(str(old.get("version") or ""))
    if not m:  # built before datasets had versions
        return "1.0.0" if old.get("digest") == digest else "1.1.0"
    if old.get("digest") == digest:
        return str(old["version"])
    return f"{m[1]}.{int(m[2]) + 1}.0"


def build_dataset(runs: Sequence[Path], out: Path, spec: SplitSpec = SplitSpec(), keep_flagged: bool = False,
                  force: bool = False, policy: str | None = None, license: str = "unknown",
                  allow_mixed: bool = False, version: str | None = None, url: str | None = None,
                  skip_damaged: bool = False) -> BuildResult:
    """Build ``out`` (datasets/<name>) from campaign directories ``runs``.

    Args:
        runs: campaign directories (``runs/<campaign>``); at least one.
        out: the dataset directory to write.
        spec: the per-case split.
        keep_flagged: keep records whose measurement was flagged (their flags go to the ``flags`` column).
        force: replace an existing dataset directory (same as ``policy=FolderPolicy.OVERWRITE``).
        policy: what to do when ``out`` holds a dataset (``harness.artifacts.FolderPolicy``): refuse
            (default), keep the previous one as ``<out>.<UTC time>``, or overwrite.
        license: the data's license (an SPDX id or ``unknown``), for the card and Croissant file.
        allow_mixed: merge campaigns of different testbed kinds, power profiles or energy sources.
        version: the dataset's semantic version (default: ``dataset_version``).
        url: where the dataset lives, for the card and Croissant (default: the folder's ``file://`` URI).
        skip_damaged: leave damaged records out (counted in ``excluded``) instead of refusing the build.

    Returns:
        Where it was written, its digest, row count and excluded counts.
    """
    if not runs:
        raise ConfigError("no campaign given (e.g. `mplab dataset build runs/quick-... -o datasets/quick`)")
    policy = policy or (FolderPolicy.OVERWRITE if force else FolderPolicy.REFUSE)
    check_output(out, "dataset.json", policy, "dataset")
    campaigns = _open_campaigns(runs)
    mix = check_mix(campaigns, allow_mixed)
    rows, excluded, spare = collect_rows(campaigns, spec, keep_flagged, skip_damaged)
    if not rows:
        raise ConfigError(f"no usable records in {', '.join(map(str, runs))} (excluded: {dict(excluded)})")
    df = to_frame(rows)
    validate_frame(df, str(out))
    csv_bytes = canonical_csv(df)
    digest = digest_bytes(csv_bytes)
    meta = {
        "schema_version": SCHEMA_VERSION,
        "name": out.name,
        "version": dataset_version(out, digest, version),
        "url": url or out.resolve().as_uri(),
        "digest": digest,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mplab_version": harness.__version__,
        "license": license,
        "rows": len(df),
        "splits": {s: int((df["split"] == s).sum()) for s in SPLITS},
        "split_files": {s: f"data/{s}.parquet" for s in SPLITS if (df["split"] == s).any()},
        "split": {"train": spec.train, "test": spec.test, "seed": spec.seed, "unit": "sample, per case"},
        "keep_flagged": keep_flagged,
        "energy": ENERGY_DEFINITION,
        "mixed": {k: v for k, v in mix.items() if len(v) > 1},
        "sources": [_provenance(c) for c in campaigns],
        "cases": case_counts(df),
        "excluded": dict(sorted(excluded.items())),
    }
    with staged_folder(out, policy) as (folder, previous):
        meta_sums = _write_files(folder, df, csv_bytes, meta)
    res = BuildResult(out, digest, len(df), excluded, meta)
    res.sums_digest = meta_sums
    res.previous = previous[0] if previous else None
    return res


def _open_campaigns(runs: Sequence[Path]) -> list[Campaign]:
    """Each campaign directory opened; one that is not a campaign is a usage error naming it (2), a damaged or
    newer one a store error (4), as every other reader of a campaign says."""
    return [Campaign.open(r) for r in runs]


def _write_files(folder: Path, df: pd.DataFrame, csv_bytes: bytes, meta: dict) -> str:
    """The dataset's files in the staged ``folder``: CSV, per-split Parquet, schema, metadata,
    Croissant, card, and the checksum file last; returns ``write_sums``' digest."""
    from harness.dataset.card import render_card  # the card is presentation; kept apart
    from harness.dataset.croissant import croissant

    atomic_write(folder / "data.csv", csv_bytes)
    split_bytes = {}
    for s, rel in meta["split_files"].items():
        (folder / rel).parent.mkdir(exist_ok=True)
        write_parquet(df[df["split"] == s].reset_index(drop=True), folder / rel)
        split_bytes[s] = (folder / rel).stat().st_size
    schema = {"schema_version": SCHEMA_VERSION, "row": DatasetRow.model_json_schema()}
    atomic_write(folder / "schema.json", (json.dumps(schema, indent=2) + "\n").encode())
    atomic_write(folder / "dataset.json", (json.dumps(meta, indent=2) + "\n").encode())
    atomic_write(folder / "croissant.json",
                 (json.dumps(croissant(folder, meta), indent=2) + "\n").encode())
    atomic_write(folder / "README.md", render_card(df, meta, split_bytes).encode())
    return write_sums(folder)


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    """The table as Parquet: text columns categorical, every field with its unit and description."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    cat = df.copy()
    for c in CATEGORICAL_COLUMNS:
        cat[c] = cat[c].astype("category")
    table = pa.Table.from_pandas(cat, preserve_index=False)
    fields = []
    for f in table.schema:
        unit, desc = COLUMN_DOCS[f.name]
        fields.append(f.with_metadata({"unit": unit, "description": desc}))
    schema = pa.schema(fields, metadata=table.schema.metadata)
    table = pa.Table.from_arrays(table.columns, schema=schema)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)


def _provenance(c: Campaign) -> dict:
    m = c.manifest
    tb = m.get("testbed") or {}
    emulation = (m.get("inventory") or {}).get("emulation") or {}
    sc = m.get("scenario") or {}
    size = sc.get("file_size")
    return {"campaign": c.id, "path": str(c.path), "created_at": m.get("created_at"),
            # energy grows with the file each receiver downloads: the card states it, and which scenario asked
            "scenario": sc.get("name"), "file_size": size, "file_bytes": parse_size(size) if size else None,
            "inventory_digest": m.get("inventory_digest"), "scenario_digest": m.get("scenario_digest"),
            "testbed_kind": tb.get("kind"), "kernel": m.get("kernel"), "git": m.get("git"),
            "power_profile": emulation.get("power_profile") if tb.get("kind") == "emulated" else None}


@dataclass(frozen=True)
class Dataset:
    """A loaded, checked dataset."""

    path: Path
    frame: pd.DataFrame
    meta: dict

    @property
    def digest(self) -> str:
        return self.meta["digest"]

    def part(self, split: str) -> pd.DataFrame:
        return self.frame[self.frame["split"] == split].reset_index(drop=True)


def load_dataset(path: str | Path) -> Dataset:
    """Open ``datasets/<name>``: check its version, digest and schema; refuse anything else."""
    p = Path(path)
    meta_path = p / "dataset.json"
    if not meta_path.exists():
        raise ConfigError(f"{p} is not a dataset (no dataset.json); build one with `mplab dataset build`")
    meta = json.loads(meta_path.read_text())
    v = meta.get("schema_version")
    if not isinstance(v, int) or v > SCHEMA_VERSION:
        raise ConfigError(f"dataset schema_version {v!r} is not one this mplab reads (<= {SCHEMA_VERSION})",
                          source=str(meta_path))
    if (p / SUMS_NAME).exists():  # datasets built before SHA256SUMS existed have only the CSV digest
        try:
            verify_sums(p)
        except ChecksumMismatch as exc:
            raise ConfigError(f"{exc}; rebuild or pull the dataset again", source=str(p)) from None
    csv_path = p / "data.csv"
    data = csv_path.read_bytes()
    if digest_bytes(data) != meta.get("digest"):
        raise ConfigError(f"data.csv does not match the digest in dataset.json ({meta.get('digest')}); "
                          "the dataset was modified: rebuild it", source=str(csv_path))
    df = pd.read_csv(io.BytesIO(data), dtype={c: "string" for c in ROW_COLUMNS
                                               if c not in INT_COLUMNS and c not in FLOAT_COLUMNS},
                     keep_default_na=False, na_values={c: [""] for c in FLOAT_COLUMNS})
    for c in ROW_COLUMNS:
        if c not in INT_COLUMNS and c not in FLOAT_COLUMNS and c in df:
            df[c] = df[c].astype(object)
            if c in ("kernel", "cc_impl"):
                df[c] = df[c].where(df[c] != "", None)
    validate_frame(df, str(csv_path))
    origin = p / ORIGIN_NAME
    if origin.exists():  # pulled from a registry: where from (a dot-file, outside SHA256SUMS)
        meta = {**meta, "registry": json.loads(origin.read_text())}
    return Dataset(p, df, meta)
