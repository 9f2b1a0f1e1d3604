"""Datasets key rows by campaign, and refuse to mix testbeds, power profiles or energy sources unless asked
(issue 14 item 3)."""
from __future__ import annotations

import pytest

from harness.dataset.build import build_dataset, load_dataset
from harness.errors import ConfigError
from harness.campaign.store import Campaign
from harness.testing.synthetic import synthetic_records


def _campaign(root, cid, profile=None, kind="synthetic", source="synthetic"):
    recs = synthetic_records(cid, ccs=("cubic",), counts=(1, 2), samples=3, file_bytes=1_000_000)
    for r in recs:
        r.update(testbed_kind=kind, energy_source=source)
    manifest = {"testbed": {"kind": kind}, "plan": sorted({r["sample_id"] for r in recs})}
    if profile:
        manifest["inventory"] = {"emulation": {"power_profile": {"name": profile, "base_w": 2.4}}}
    c = Campaign.create(root, cid, manifest)
    by: dict[str, list] = {}
    for r in recs:
        by.setdefault(r["sample_id"], []).append(r)
    for rs in by.values():
        c.append(rs)
    return c, recs


def test_two_campaigns_of_one_scenario_merge(tmp_path):
    a, ra = _campaign(tmp_path / "runs", "A")
    b, rb = _campaign(tmp_path / "runs", "B")
    assert {r["sample_id"] for r in ra} == {r["sample_id"] for r in rb}  # the same sample ids
    res = build_dataset([a.path, b.path], tmp_path / "d")
    df = load_dataset(tmp_path / "d").frame
    assert len(df) == res.rows and set(df["campaign"]) == {"A", "B"}
    assert len(df) + sum(res.excluded.values()) == len(ra) + len(rb)
    # every receiver of one campaign's sample is in one split
    assert (df.groupby(["campaign", "sample_id"])["split"].nunique() == 1).all()


@pytest.mark.parametrize("other", [dict(kind="emulated", source="emulated", profile="sbc-huang2012"),
                                   dict(kind="lab", source="measured")])
def test_mixed_testbeds_or_sources_are_refused_unless_asked(tmp_path, other):
    a, _ = _campaign(tmp_path / "runs", "A")
    b, _ = _campaign(tmp_path / "runs", "B", **other)
    with pytest.raises(ConfigError, match="allow-mixed"):
        build_dataset([a.path, b.path], tmp_path / "d")
    build_dataset([a.path, b.path], tmp_path / "d", allow_mixed=True)
    card = (tmp_path / "d" / "README.md").read_text()
    assert "mixed campaigns" in card and "A" in card and "B" in card


def test_different_power_profiles_are_refused_unless_asked(tmp_path):
    a, _ = _campaign(tmp_path / "runs", "A", profile="sbc-huang2012", kind="emulated", source="emulated")
    b, _ = _campaign(tmp_path / "runs", "B", profile="paper-lab", kind="emulated", source="emulated")
    with pytest.raises(ConfigError, match="power_profile"):
        build_dataset([a.path, b.path], tmp_path / "d")
    res = build_dataset([a.path, b.path], tmp_path / "d", allow_mixed=True)
    assert set(res.meta["mixed"]["power_profile"]) == {"sbc-huang2012", "paper-lab"}
    assert "paper-lab (B)" in (tmp_path / "d" / "README.md").read_text()


def test_the_dataset_says_which_energy_it_holds(tmp_path):
    a, _ = _campaign(tmp_path / "runs", "A")
    res = build_dataset([a.path], tmp_path / "d")
    assert "tail_energy_j" in res.meta["energy"] and "transfer window" in res.meta["energy"]
    assert "tail_energy_j" in (tmp_path / "d" / "README.md").read_text()
