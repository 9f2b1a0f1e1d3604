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
from rigs.synthetic import synthetic_records, write_synthetic_campaign

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
    for f in ("data/train.parquet", "data/test.parquet", "data.csv", "schema.json", "dataset.json", "README.md"):
        assert (d / f).exists(), f
    pq = pd.concat([pd.read_parquet(d / "data" / f"{s}.parquet") for s in ("train", "test")])
    assert set(pd.read_parquet(d / "data" / "test.parquet")["split"]) == {"test"}  # one file per split
    ds = load_dataset(d)
    assert len(pq) == len(ds.frame) == res.rows == 6 * 4 * 3
    assert list(pq.columns) == list(ds.frame.columns)
    assert sorted(pq["energy_j"].tolist()) == pytest.approx(sorted(ds.frame["energy_j"].tolist()), rel=1e-9)
    card = (d / "README.md").read_text()
    assert res.digest in card and "| cubic | 3 | both | 4 | 2 | 12 | 6 |" in card
    assert "Summary statistics" in card and "Excluded records" in card
    # the energy of a row depends on the file downloaded: the card states it and the scenario that asked
    assert ("- transfer: 2000000 (2000000 bytes) per receiver per sample (scenario `synthetic-scenario`: synthetic)"
            in card), card[:1500]
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


def test_card_front_matter_and_the_real_split_counts(tmp_path):
    from huggingface_hub import DatasetCard

    c = _campaign(tmp_path / "runs", _records(samples=2))
    res = build_dataset([c.path], tmp_path / "d", license="cc-by-4.0")  # asks for 30 + 15, each case has 2
    card = DatasetCard.load(tmp_path / "d" / "README.md")  # as the Hub reads it
    head = card.data.to_dict()
    n_train, n_test = res.meta["splits"]["train"], res.meta["splits"]["test"]
    assert {s["name"]: s["num_examples"] for s in head["dataset_info"]["splits"]} == {"train": n_train,
                                                                                    "test": n_test}
    assert head["configs"][0]["data_files"] == [{"split": "train", "path": "data/train.parquet"},
                                                {"split": "test", "path": "data/test.parquet"}]
    assert head["license"] == "cc-by-4.0" and head["task_categories"] == ["tabular-regression"]
    assert head["size_categories"] == ["n<1K"] and head["version"] == "1.0.0"
    assert [f["name"] for f in head["dataset_info"]["features"]] == list(load_dataset(tmp_path / "d").frame.columns)
    text = card.text
    assert "1 train and 1 test sample(s) per case" in text
    assert "30 train and 15 test samples per case" not in text
    assert "12 of 12 case(s) had fewer samples" in text
    # the reference paper cited by title and authors, from harness/data/paper/citations.yaml
    assert "Managing Energy Consumption of Devices with Multiconnectivity" in text and "Ramiza Shams" in text
    assert "doi = {10.3390/s23187699}" in text and "not recorded" not in text


def test_hugging_face_datasets_loads_the_folder(tmp_path):
    """`datasets.load_dataset(<folder>)` reads both splits from the card's configs, with the card's features."""
    import datasets

    c = write_synthetic_campaign(tmp_path / "runs", ccs=("cubic", "lia"), counts=(1, 3), samples=6,
                                 file_bytes=2_000_000)
    build_dataset([c.path], tmp_path / "ds", SplitSpec(train=4, test=2))
    ours = load_dataset(tmp_path / "ds")
    hf = datasets.load_dataset(str(tmp_path / "ds"), cache_dir=str(tmp_path / "hf-cache"))
    assert set(hf) == {"train", "test"}
    for split in ("train", "test"):
        want = ours.part(split)
        got = hf[split].to_pandas()
        assert len(got) == len(want) > 0 and set(got["split"]) == {split}
        key = ["campaign", "sample_id", "receiver"]
        a, b = got.sort_values(key).reset_index(drop=True), want.sort_values(key).reset_index(drop=True)
        assert a["energy_j"].tolist() == pytest.approx(b["energy_j"].tolist(), rel=1e-9)  # the CSV keeps 10 digits
        assert a["sample_id"].tolist() == b["sample_id"].tolist()
    feats = hf["train"].features
    assert feats["n_receivers"].dtype == "int64" and feats["energy_j"].dtype == "float64"
    assert feats["cc"].dtype == "string"  # categorical in Parquet, a plain string to Hugging Face


def test_dataset_version_and_url(tmp_path):
    c = _campaign(tmp_path / "runs", _records(samples=3))
    first = build_dataset([c.path], tmp_path / "d")
    assert first.meta["version"] == "1.0.0" and first.meta["url"] == (tmp_path / "d").resolve().as_uri()
    same = build_dataset([c.path], tmp_path / "d", force=True)
    assert same.meta["version"] == "1.0.0"  # the same rows: the same version
    fewer = build_dataset([c.path], tmp_path / "d", SplitSpec(train=1, test=1), force=True)
    assert fewer.digest != first.digest and fewer.meta["version"] == "1.1.0"
    asked = build_dataset([c.path], tmp_path / "e", version="2.3.4", url="https://example.org/d")
    doc = json.loads((tmp_path / "e" / "croissant.json").read_text())
    assert (doc["version"], doc["url"]) == ("2.3.4", "https://example.org/d") == (asked.meta["version"],
                                                                                    asked.meta["url"])
    with pytest.raises(ConfigError, match="MAJOR.MINOR.PATCH"):
        build_dataset([c.path], tmp_path / "f", version="v2")


def test_parquet_columns_are_categorical_with_units(tmp_path):
    import pyarrow.parquet as pq

    from harness.dataset.build import ROW_COLUMNS
    from harness.dataset.columns import COLUMN_DOCS

    assert tuple(COLUMN_DOCS) == ROW_COLUMNS  # documented in the table's order, every column

    c = _campaign(tmp_path / "runs", _records(samples=3))
    build_dataset([c.path], tmp_path / "d")
    schema = pq.read_schema(tmp_path / "d" / "data" / "train.parquet")
    assert str(schema.field("cc").type).startswith("dictionary")
    assert str(schema.field("split").type).startswith("dictionary")
    assert schema.field("energy_j").metadata[b"unit"] == b"J"
    assert schema.field("wifi_throughput_mbit").metadata[b"unit"] == b"Mbit/s"
    assert b"target" in schema.field("energy_j").metadata[b"description"]
    df = pd.read_parquet(tmp_path / "d" / "data" / "test.parquet")
    assert isinstance(df["mode"].dtype, pd.CategoricalDtype)


def test_checksums_cover_the_parquet_file(tmp_path):
    c = _campaign(tmp_path / "runs", _records(samples=3))
    build_dataset([c.path], tmp_path / "d")
    load_dataset(tmp_path / "d")
    p = tmp_path / "d" / "data" / "train.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(ConfigError, match="train.parquet"):
        load_dataset(tmp_path / "d")


def test_croissant_file_validates_and_reads_the_rows(tmp_path):
    mlc = pytest.importorskip("mlcroissant")
    c = _campaign(tmp_path / "runs", _records(samples=3))
    res = build_dataset([c.path], tmp_path / "d")
    path = tmp_path / "d" / "croissant.json"
    ds = mlc.Dataset(jsonld=str(path))
    rows = list(ds.records("rows"))
    assert len(rows) == res.rows
    assert {r["rows/split"] for r in rows} == {b"train", b"test"}
    doc = json.loads(path.read_text())
    assert doc["version"] == res.meta["version"] == "1.0.0" and doc["url"].startswith("file:///")
    assert "Shams" in doc["citeAs"] and "10.3390/s23187699" in doc["citeAs"]
    # the validator is not a rubber stamp: a field without a type is refused
    doc = json.loads(path.read_text())
    del doc["recordSet"][0]["field"][0]["dataType"]
    path.write_text(json.dumps(doc))
    with pytest.raises(mlc.ValidationError):
        mlc.Dataset(jsonld=str(path))


def test_rebuild_refuses_or_keeps_the_previous_version(tmp_path):
    from harness.artifacts import FolderPolicy

    c = _campaign(tmp_path / "runs", _records(samples=3))
    first = build_dataset([c.path], tmp_path / "d")
    with pytest.raises(ConfigError, match="--keep-previous"):
        build_dataset([c.path], tmp_path / "d")
    again = build_dataset([c.path], tmp_path / "d", policy=FolderPolicy.KEEP_PREVIOUS)
    assert again.previous is not None and again.previous.name.startswith("d.")
    assert load_dataset(again.previous).digest == first.digest == again.digest
    over = build_dataset([c.path], tmp_path / "d", force=True)
    assert over.previous is None and len(list(tmp_path.glob("d.*"))) == 1
    # a failed build leaves the existing dataset alone
    with pytest.raises(ConfigError):
        build_dataset([tmp_path / "nowhere"], tmp_path / "d", force=True)
    assert load_dataset(tmp_path / "d").digest == first.digest
    assert not list(tmp_path.glob(".d.building-*"))
