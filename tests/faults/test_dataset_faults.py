"""Datasets key rows by campaign, and refuse to mix testbeds, power profiles or energy sources unless asked."""
from __future__ import annotations

import pytest

from harness.dataset.build import build_dataset, load_dataset
from harness.errors import ConfigError, StoreError
from harness.campaign.store import Campaign
from rigs.synthetic import synthetic_records


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


def _edit_line(c: Campaign, lineno: int, old: str, new: str) -> bytes:
    lines = c.samples_path.read_bytes().splitlines(keepends=True)
    assert old.encode() in lines[lineno - 1]
    lines[lineno - 1] = lines[lineno - 1].replace(old.encode(), new.encode(), 1)
    c.samples_path.write_bytes(b"".join(lines))
    return lines[lineno - 1]


@pytest.mark.parametrize("edit", ["sample_id", "energy"])
def test_a_damaged_record_is_named_never_counted_and_left_out_only_on_request(tmp_path, edit):
    """An edited record (a changed sample_id, or a changed value under a correct id) fails its checksum:
    `mplab status` names the line, the sample counts as not recorded (resume runs it once: the plan never
    gets two sound records), and `mplab dataset build` refuses naming the line unless --skip-damaged."""
    import json

    from harness.campaign.status import campaign_status

    from .conftest import mplab

    c, recs = _campaign(tmp_path / "runs", "A")
    first = json.loads(c.samples_path.read_bytes().splitlines()[0])
    sid = first["sample_id"]
    if edit == "sample_id":  # another planned sample's id: without a checksum this would pass as that sample
        other = next(r["sample_id"] for r in recs if r["sample_id"] != sid and r["n_receivers"] == 1)
        _edit_line(c, 1, f'"sample_id":"{sid}"', f'"sample_id":"{other}"')
    else:
        _edit_line(c, 1, '"energy_j":', '"energy_j":1')
    c = Campaign.open(c.path)
    damaged = c.damaged()
    assert [(d.line, d.reason.split(":")[0]) for d in damaged] == [(1, "checksum mismatch")]
    assert sid not in c.completed() and all(r["sample_id"] != sid or r["receiver"] != first["receiver"]
                                            for r in c.records())
    st = campaign_status(c)
    assert st["damaged"][0]["line"] == 1 and st["pending"] == 1
    res = mplab("status", str(c.path))
    assert res.returncode == 0 and f"{c.samples_path}:1: checksum mismatch" in res.stdout.replace("\n", ""), res.stdout
    with pytest.raises(StoreError, match=r"samples.jsonl:1: checksum mismatch.*--skip-damaged"):
        build_dataset([c.path], tmp_path / "d")
    res = mplab("dataset", "build", str(c.path), "-o", str(tmp_path / "d"))
    assert res.returncode == 4 and "samples.jsonl:1:" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "d").exists()
    built = build_dataset([c.path], tmp_path / "d", skip_damaged=True)
    assert built.excluded["damaged record (checksum or plan)"] == 1
    df = load_dataset(tmp_path / "d").frame
    assert not ((df["sample_id"] == sid) & (df["receiver"] == first["receiver"])).any() or edit == "sample_id"
    keys = list(zip(df["sample_id"], df["receiver"]))
    assert len(keys) == len(set(keys))


def test_schema_1_records_are_still_read_and_checked_against_the_plan(tmp_path):
    import json

    c, recs = _campaign(tmp_path / "runs", "A")
    lines = []
    for line in c.samples_path.read_bytes().splitlines():
        r = json.loads(line)
        r.pop("checksum")
        r["schema_version"] = 1
        r["repairs"] = ["route default via 10.10.1.1 dev wlan0 table main restored"] if not lines else []
        lines.append(json.dumps(r))
    lines[1] = lines[1].replace(f'"sample_id": "{json.loads(lines[1])["sample_id"]}"', '"sample_id": "nope-s001"')
    c.samples_path.write_text("\n".join(lines) + "\n")
    c = Campaign.open(c.path)
    assert [(d.line, d.reason) for d in c.damaged()] == [(2, "sample_id 'nope-s001' is not in the campaign's plan")]
    r0 = c.records()[0]
    assert r0["repairs"] == [{"attempt": None, "what": "route default via 10.10.1.1 dev wlan0 table main restored"}]
    res = build_dataset([c.path], tmp_path / "d", skip_damaged=True)
    assert res.rows > 0


def test_a_sample_run_again_after_damage_counts_one_run_and_a_third_run_is_a_duplicate(tmp_path):
    """Two receivers, one record edited: the sample is incomplete, so resume runs it again (simulated by the same
    append). Its sound records then all come from the second run (never one receiver of each), and a further
    complete run of it is damaged as a second record: resume never yields two sound records of one sample."""
    import json

    c, recs = _campaign(tmp_path / "runs", "A")
    lines = c.samples_path.read_bytes().splitlines()
    two = [i for i, ln in enumerate(lines, start=1) if json.loads(ln)["n_receivers"] == 2]
    first = json.loads(lines[two[0] - 1])
    sid = first["sample_id"]
    _edit_line(c, two[0], '"energy_j":', '"energy_j":1')
    c = Campaign.open(c.path)
    assert sid not in c.completed()
    again = [{k: v for k, v in r.items() if k != "checksum"} for r in recs if r["sample_id"] == sid]
    for r in again:
        r["energy_j"] = 99.0  # the rerun measured something else
    c.append(again)
    c = Campaign.open(c.path)
    mine = [r for r in c.records() if r["sample_id"] == sid]
    assert len(mine) == 2 and {r["energy_j"] for r in mine} == {99.0}
    reasons = {d.line: d.reason for d in c.damaged()}
    assert reasons[two[0]].startswith("checksum mismatch") and reasons[two[1]].startswith("superseded")
    c.append(again)
    c = Campaign.open(c.path)
    assert len([r for r in c.records() if r["sample_id"] == sid]) == 2
    assert sum(d.reason.startswith("a second record") for d in c.damaged()) == 2
