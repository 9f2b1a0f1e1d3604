"""Dataset builder: validation, per-case split, exclusions, files, digest (no root needed).

Records are synthetic but shaped exactly like ``Runner._record`` and stored through the real
campaign store; the emulated end-to-end path is in test_training_emulated.py.
"""
from __future__ import annotations

import json
import random
import subprocess
import sys

import pandas as pd
import pytest

from harness.dataset.build import SplitSpec, build_dataset, load_dataset
from harness.errors import ConfigError
from harness.campaign.store import Campaign
from harness.testing.synthetic import synthetic_records, write_synthetic_campaign

from conftest import REPO


def _campaign(root, records, cid="c1"):
    c = Campaign.create(root, cid, {"testbed": {"kind": "synthetic"}, "plan": []})
    by: dict[str, list] = {}
    for r in records:
        by.setdefault(r["sample_id"], []).append(r)
    for rs in by.values():
        c.append(rs)
    return c


def _records(samples=9, **kw):
    return synthetic_records("c1", ccs=("cubic", "lia"), counts=(1, 2), samples=samples, file_bytes=1_000_000, **kw)


def test_split_is_per_case_per_sample_and_deterministic(tmp_path):
    recs = _records(samples=9)
    c = _campaign(tmp_path / "runs", recs)
    spec = SplitSpec(train=4, test=2, seed=5)
    a = build_dataset([c.path], tmp_path / "a", spec)
    df = load_dataset(tmp_path / "a").frame
    for cid, g in df.groupby("case_id"):
        assert g.loc[g.split == "train", "sample_id"].nunique() == 4, cid
        assert g.loc[g.split == "test", "sample_id"].nunique() == 2, cid
    # every receiver of a sample is in the same split
    assert (df.groupby("sample_id")["split"].nunique() == 1).all()
    # 3 spare samples per case, counted as excluded
    n_cases = df["case_id"].nunique()
    spare_rows = sum(3 * n for n in (1, 2) for _ in ("cubic", "lia") for _ in ("wifi", "lte", "both"))
    assert a.excluded["spare (beyond train + test per case)"] == spare_rows
    assert n_cases == 12

    # the same records appended in another order give the same dataset, byte for byte
    shuffled = list(recs)
    random.Random(1).shuffle(shuffled)
    c2 = _campaign(tmp_path / "runs2", shuffled)
    b = build_dataset([c2.path], tmp_path / "b", spec)
    assert b.digest == a.digest
    assert (tmp_path / "a" / "data.csv").read_bytes() == (tmp_path / "b" / "data.csv").read_bytes()

    # another seed gives another split (the seed matters), with the same counts
    other = build_dataset([c.path], tmp_path / "c", SplitSpec(train=4, test=2, seed=6))
    assert other.digest != a.digest


def test_small_cases_keep_the_ratio(tmp_path):
    c = _campaign(tmp_path / "runs", _records(samples=3))
    build_dataset([c.path], tmp_path / "d")  # default 30 / 15
    meta = json.loads((tmp_path / "d" / "dataset.json").read_text())
    assert {(x["train_samples"], x["test_samples"]) for x in meta["cases"]} == {(2, 1)}
    assert SplitSpec().counts(45) == (30, 15) and SplitSpec().counts(60) == (30, 15)
    assert SplitSpec().counts(1) == (1, 0)


@pytest.mark.parametrize("field,value,needle", [
    ("mode", "wlan", "mode"),
    ("energy_j", "lots", "energy_j"),
    ("energy_j", -3.0, "energy_j"),
    ("iface_throughput_mbit", {"wifi": 1.0, "5g": 2.0}, "iface_throughput_mbit"),
    ("n_receivers", 0, "n_receivers"),
])
def test_malformed_record_is_rejected_with_file_line_and_field(tmp_path, field, value, needle):
    recs = _records(samples=2)
    bad_index = 7
    recs[bad_index] = {**recs[bad_index], field: value}
    c = _campaign(tmp_path / "runs", recs)
    with pytest.raises(ConfigError) as ei:
        build_dataset([c.path], tmp_path / "d")
    msg = str(ei.value)
    assert f"samples.jsonl:{bad_index + 1}" in msg
    assert needle in msg and "malformed record" in msg
    assert not (tmp_path / "d" / "dataset.json").exists()


def test_missing_field_and_cli_exit_code_2(tmp_path):
    recs = _records(samples=2)
    del recs[0]["receiver"]
    c = _campaign(tmp_path / "runs", recs)
    p = subprocess.run([sys.executable, "-m", "mplab", "dataset", "build", str(c.path), "-o", str(tmp_path / "d")],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 2, p.stderr
    assert "samples.jsonl:1" in p.stderr and "receiver" in p.stderr


def test_unusable_records_are_excluded_by_reason(tmp_path):
    recs = _records(samples=3)
    recs[0] = {**recs[0], "flags": ["meter-gap: 2.00 s without a reading"]}
    sid = recs[1]["sample_id"]
    for i, r in enumerate(recs):
        if r["sample_id"] == sid:
            recs[i] = {**r, "sample_status": "failed", "status": "failed", "energy_j": None, "error": "boom"}
    recs[-1] = {**recs[-1], "energy_j": None}
    c = _campaign(tmp_path / "runs", recs)
    res = build_dataset([c.path], tmp_path / "d")
    assert res.excluded["flagged: meter-gap"] == 1
    assert res.excluded["sample failed"] == sum(1 for r in recs if r["sample_id"] == sid)
    assert res.excluded["no energy"] == 1
    card = (tmp_path / "d" / "README.md").read_text()
    assert "flagged: meter-gap" in card and "sample failed" in card
    # keeping flagged records puts the flag text in the table
    kept = build_dataset([c.path], tmp_path / "k", keep_flagged=True)
    df = load_dataset(tmp_path / "k").frame
    assert "flagged: meter-gap" not in kept.excluded
    assert df["flags"].str.contains("meter-gap").sum() == 1


def test_files_card_digest_and_tamper_check(tmp_path):
    c = write_synthetic_campaign(tmp_path / "runs", ccs=("cubic",), counts=(1, 3), samples=6, file_bytes=2_000_000)
    res = build_dataset([c.path], tmp_path / "ds", SplitSpec(train=4, test=2))
    d = tmp_path / "ds"
    for f in ("data.parquet", "data.csv", "schema.json", "dataset.json", "README.md"):
        assert (d / f).exists(), f
    pq = pd.read_parquet(d / "data.parquet")
    ds = load_dataset(d)
    assert len(pq) == len(ds.frame) == res.rows == 6 * 4 * 3
    assert list(pq.columns) == list(ds.frame.columns)
    assert pq["energy_j"].tolist() == pytest.approx(ds.frame["energy_j"].tolist(), rel=1e-9)
    card = (d / "README.md").read_text()
    assert res.digest in card and "| cubic | 3 | both | 4 | 2 | 12 | 6 |" in card
    assert "Summary statistics" in card and "Excluded records" in card
    schema = json.loads((d / "schema.json").read_text())
    assert "energy_j" in schema["row"]["properties"]
    # a changed value is caught by the digest
    data = (d / "data.csv").read_bytes()
    (d / "data.csv").write_bytes(data.replace(b",cubic,", b",reno,", 1))
    with pytest.raises(ConfigError, match="digest"):
        load_dataset(d)
    # refuses to overwrite without force
    with pytest.raises(ConfigError, match="already holds"):
        build_dataset([c.path], d)


def test_duplicate_campaign_is_an_error(tmp_path):
    c = _campaign(tmp_path / "runs", _records(samples=2))
    with pytest.raises(ConfigError, match="given twice"):
        build_dataset([c.path, c.path], tmp_path / "d")
