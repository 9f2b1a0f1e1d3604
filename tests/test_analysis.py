"""analysis/: statistics against a direct pandas computation, the paper checks (and their flip), every figure.

Fixtures: tests/analysis_fixtures.py (a paper-shaped Setup II campaign with policies, a synthetic
Setup I campaign, a real two-sample slice of a quick campaign with raw output).
"""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from analysis_fixtures import (FAILED_SAMPLE, FLAGGED, paper_campaign, quick_slice,  # noqa: E402
                               setup1_campaign)

from analysis.load import load_study  # noqa: E402
from analysis.paper import analog_table, checks_table, load_paper, run_checks  # noqa: E402
from analysis.report import build_report  # noqa: E402
from analysis.stats import case_stats, interval  # noqa: E402
from harness.errors import ConfigError  # noqa: E402

ALL_FIGURES = {
    "setup1-one-receiver-2", "setup1-one-receiver-3", "setup1-receivers-3",   # quick slice (N=3 only), synthetic
    "setup2-is-vs-tuned-1", "setup2-policies-balia-1", "setup2-policies-cubic-1", "setup2-scatter-1",
    "setup2-schemes-1",
    "sample-closeup", "dataset-distributions-1", "dataset-distributions-2", "dataset-distributions-3",
    "model-predicted-vs-measured", "model-error-per-case", "model-training-curve",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {"paper": paper_campaign(root), "reversed": paper_campaign(root, "paper-reversed", reverse=True),
            "setup1": setup1_campaign(root), "slice": quick_slice(root)}


def direct_case_means(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The per-case table written out with plain pandas: usable records, per-sample means, then per case."""
    ok = frame[(frame["sample_status"] == "ok") & (frame["status"] == "ok") & (frame["flags"] == "")
               & frame[metric].notna()]
    per_sample = ok.groupby(["cc", "n_receivers", "scheme", "sample_id"])[metric].mean()
    return per_sample.groupby(["cc", "n_receivers", "scheme"]).agg(["mean", "std", "count"])


def test_t_interval_known_values():
    mean, sd, lo, hi = interval(np.array([1.0, 2.0, 3.0]), "t")
    assert (mean, sd) == (2.0, 1.0)
    assert hi - mean == pytest.approx(4.302652729911275 / math.sqrt(3))  # t(0.975, 2) * s / sqrt(n)
    assert mean - lo == pytest.approx(hi - mean)
    one = interval(np.array([5.0]), "t")
    assert one[0] == 5.0 and all(math.isnan(x) for x in one[1:])


def test_bootstrap_interval_inside_the_data_and_repeatable():
    v = np.array([10.0, 11.0, 12.5, 9.5, 10.5])
    a, b = interval(v, "bootstrap"), interval(v, "bootstrap")
    assert a == b
    assert v.min() <= a[2] < a[0] < a[3] <= v.max()


def test_case_table_equals_a_direct_pandas_computation(runs):
    frame = load_study([runs["paper"]]).frame
    for metric in ("energy_j", "throughput_mbit"):
        ours = case_stats(frame, metric).set_index(["cc", "n_receivers", "scheme"])
        want = direct_case_means(frame, metric).add_prefix("want_")
        # balia/cubic x 3 node counts x (all-both, ref-is, ref-is-tuned) + cubic x 3 x (all-wifi, all-lte)
        assert len(ours) == len(want) == 2 * 3 * 3 + 3 * 2
        joined = ours.join(want, how="inner")
        assert len(joined) == len(want)
        np.testing.assert_allclose(joined["mean"], joined["want_mean"], rtol=1e-12)
        np.testing.assert_allclose(joined["sd"], joined["want_std"], rtol=1e-12)
        assert (joined["n_samples"] == joined["want_count"]).all()


def test_failed_and_flagged_are_counted_and_left_out(runs):
    frame = load_study([runs["paper"]]).frame
    e = case_stats(frame, "energy_j").set_index(["cc", "n_receivers", "scheme"])
    failed_case = e.loc[("balia", 5, "all-both")]
    assert failed_case["samples_failed"] == 1 and failed_case["n_samples"] == 2
    flagged_case = e.loc[("cubic", 3, "all-lte")]
    assert flagged_case["records_flagged"] == 1 and flagged_case["n_records"] == 3 * 3 - 1
    # The flagged record carries 3x the energy: had it been averaged in, the mean would be far off the paper.
    assert flagged_case["mean"] == pytest.approx(47.9, rel=0.02)
    assert FAILED_SAMPLE in set(frame["sample_id"]) and FLAGGED[0] in set(frame["sample_id"])


def test_paper_checks_pass_on_the_papers_own_values():
    paper = load_paper()
    rows = []
    for metric in ("throughput_mbit", "energy_j"):
        w = paper.wide(metric)
        for col in w.columns:
            for n, v in w[col].items():
                rows.append({"metric": metric, "column": col, "n_receivers": n, "paper": v})
    t = pd.DataFrame(rows)
    checks = run_checks(paper, t[t["metric"] == "energy_j"], t[t["metric"] == "throughput_mbit"], "paper")
    assert [c.status for c in checks] == ["pass"] * 4, checks


def _checks(path: Path) -> dict[str, str]:
    frame = load_study([path]).frame
    paper = load_paper()
    e, t = case_stats(frame, "energy_j"), case_stats(frame, "throughput_mbit", how=paper.how("throughput_mbit"))
    table = checks_table(paper, analog_table(paper, e, "energy_j", 60e6),
                         analog_table(paper, t, "throughput_mbit", 60e6))
    return dict(zip(table["check"], table["status"]))


def test_checks_pass_on_the_fixture_and_flip_when_its_ordering_is_reversed(runs):
    assert _checks(runs["paper"]) == {"energy-ordering": "pass", "energy-flat": "pass",
                                      "throughput-decreasing": "pass", "sdn-mptcp-ratio": "pass"}
    assert _checks(runs["reversed"]) == {"energy-ordering": "fail", "energy-flat": "fail",
                                         "throughput-decreasing": "fail", "sdn-mptcp-ratio": "fail"}


def test_checks_say_na_without_the_data_they_need(runs):
    got = _checks(runs["slice"])  # Setup I, one node count, no policies
    assert got["energy-flat"] == got["throughput-decreasing"] == got["sdn-mptcp-ratio"] == "n/a"
    assert got["energy-ordering"] in ("pass", "fail")


def test_analog_table_puts_the_paper_beside_our_case_means(runs):
    frame = load_study([runs["paper"]]).frame
    paper = load_paper()
    e = case_stats(frame, "energy_j")
    a = analog_table(paper, e, "energy_j", 60e6).set_index(["column", "n_receivers"])
    mine = e.set_index(["cc", "n_receivers", "scheme"])
    assert a.loc[("mptcp-balia", 3), "paper"] == 57.0
    assert a.loc[("mptcp-balia", 3), "ours_mean"] == mine.loc[("balia", 3, "all-both"), "mean"]
    assert a.loc[("sdn-cubic", 8), "ours_mean"] == mine.loc[("cubic", 8, "ref-is-tuned"), "mean"]
    assert math.isnan(a.loc[("sdn-cubic", 4), "ours_mean"]) and a.loc[("sdn-cubic", 4), "paper"] == 46.3
    assert a.loc[("lte-sptcp", 3), "paper_j_per_mb"] == pytest.approx(47.9 / 60)


@pytest.fixture(scope="module")
def model_dir(runs, tmp_path_factory) -> tuple[Path, Path, str]:
    """A dataset of the Setup I fixture and a small model trained on it, tracked in a temporary MLflow store."""
    from harness.dataset.build import SplitSpec, build_dataset
    from training.fit import TrainConfig
    from training.pipeline import train

    root = tmp_path_factory.mktemp("model")
    build_dataset([runs["setup1"]], root / "datasets" / "s1", SplitSpec(train=3, test=1))
    uri = f"sqlite:///{root / 'mlflow.db'}"
    train(root / "datasets" / "s1", root / "models" / "s1", TrainConfig(epochs=2, precision="fp32"),
          tracking_uri=uri, log=lambda *_: None)
    return root / "datasets" / "s1", root / "models" / "s1", uri


@pytest.fixture(scope="module")
def full_report(runs, model_dir, tmp_path_factory):
    ds, model, uri = model_dir
    out = tmp_path_factory.mktemp("reports") / "full"
    res = build_report([runs["paper"], runs["setup1"], runs["slice"], ds], out, model=model, tracking_uri=uri)
    return out, res


def test_every_figure_is_produced(full_report):
    out, res = full_report
    assert {f.name for f in res.figures} == ALL_FIGURES, [(s.name, s.reason) for s in res.skipped]
    # The real slice has one receiver count (N=3): its Fig. 5 analog cannot be drawn, and says so.
    assert [(s.name, s.reason) for s in res.skipped] == [
        ("setup1-receivers-2", "needs at least two receiver counts; these campaigns have 3")]
    for f in res.figures:
        assert f.png.stat().st_size > 5000 and f.svg.stat().st_size > 5000
        svg = f.svg.read_text()
        if f.shows_energy:
            assert ("emulated energy (profile " in svg) or ("synthetic energy" in svg), f.name


def test_every_energy_figure_names_its_emulated_profile(full_report):
    out, res = full_report
    svg = {f.name: f.svg.read_text() for f in res.figures}
    assert "emulated energy (profile paper-fixture)" in svg["setup2-scatter-1"]
    assert "emulated energy (profile sbc-huang2012)" in svg["sample-closeup"]
    assert "synthetic energy" in svg["model-predicted-vs-measured"]


def test_report_tables_are_csv_and_equal_the_statistics(full_report, runs):
    out, res = full_report
    for key in ("case-energy", "case-throughput", "case-power", "receiver-energy", "network-throughput",
                "paper-table2-throughput", "paper-table3-energy", "checks", "excluded", "model-error-per-case"):
        assert (out / "tables" / f"{key}.csv").stat().st_size > 0, key
    csv = pd.read_csv(out / "tables" / "case-energy.csv")
    csv = csv[csv["energy_label"] == "emulated energy (profile paper-fixture)"].set_index(
        ["cc", "n_receivers", "scheme"])
    want = direct_case_means(load_study([runs["paper"]]).frame, "energy_j")
    np.testing.assert_allclose(csv.loc[want.index, "mean"], want["mean"], rtol=1e-9)


def test_page_is_self_contained_with_provenance(full_report):
    out, _ = full_report
    page = (out / "index.html").read_text()
    assert 'src="http' not in page and "<script" not in page and "<link" not in page
    assert page.count('src="data:image/png;base64,') == len(ALL_FIGURES)
    for needle in ("paper-fixture", "quick-20261124T001457", "sbc-huang2012", "bpf:mplab_balia", "kernel:cubic",
                   "6.18", "NOT MEASURED", "Student t", "sensors", "model-training-curve", "MLflow run"):
        assert needle.lower() in page.lower(), needle


def test_report_without_policies_skips_setup2_with_the_reason(runs, tmp_path):
    res = build_report([runs["slice"]], tmp_path / "r")
    skipped = {s.name: s.reason for s in res.skipped}
    assert "no records carry a policy" in skipped["setup2-is-vs-tuned"]
    assert "two receiver counts" in skipped["setup1-receivers"]
    assert {f.name for f in res.figures} == {"setup1-one-receiver", "sample-closeup", "dataset-distributions"}


def test_bad_inputs_are_refused(runs, tmp_path):
    with pytest.raises(ConfigError) as e:
        build_report([tmp_path], tmp_path / "out")
    assert e.value.exit_code == 2 and "neither a campaign" in str(e.value)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a report")
    with pytest.raises(ConfigError, match="not a report"):
        build_report([runs["slice"]], tmp_path / "mine")
    build_report([runs["slice"]], tmp_path / "r")
    with pytest.raises(ConfigError, match="--force"):
        build_report([runs["slice"]], tmp_path / "r")
    build_report([runs["slice"]], tmp_path / "r", force=True)
    with pytest.raises(ConfigError, match="--sample"):
        build_report([runs["slice"]], tmp_path / "r", force=True, sample="nope-s001")


def test_cli_exits_2_on_bad_input(tmp_path):
    cp = subprocess.run([sys.executable, "-m", "mplab", "report", str(tmp_path / "missing"), "-o",
                         str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2, cp.stderr
    assert "neither a campaign" in cp.stderr


def test_records_with_a_tail_get_an_energy_with_tail_table(tmp_path):
    from analysis_fixtures import paper_records, write_campaign

    recs = paper_records("tailed")
    for r in recs:
        r["tail_energy_j"] = 5.0  # a field of newer records (the nothing-lost issue); older ones lack it
    camp = write_campaign(tmp_path / "runs", "tailed", recs).path
    res = build_report([camp], tmp_path / "r")
    plain = pd.read_csv(res.tables["case-energy"]).set_index(["cc", "n_receivers", "scheme"])
    tailed = pd.read_csv(res.tables["case-energy-with-tail"]).set_index(["cc", "n_receivers", "scheme"])
    np.testing.assert_allclose(tailed["mean"], plain["mean"] + 5.0, rtol=1e-12)


def test_figure_captions_count_what_they_left_out(full_report):
    out, res = full_report
    captions = {f.name: f.caption for f in res.figures}
    # the fixture's failed sample (balia, 5 receivers, all-both) and flagged record (cubic, 3, all-lte)
    assert "1 failed sample(s), 0 flagged record(s)" in captions["setup2-policies-balia-1"]
    assert "0 failed sample(s), 1 flagged record(s)" in captions["setup2-policies-cubic-1"]
    assert "Left out" not in captions["setup1-receivers-3"]


def test_training_curve_is_skipped_when_the_store_is_unreachable(model_dir, tmp_path):
    from analysis.figures.model import training_curve

    _, model, _ = model_dir
    missing = tmp_path / "nowhere.db"
    got = training_curve(model, f"sqlite:///{missing}", tmp_path)
    assert got.name == "model-training-curve" and "does not exist" in got.reason
    assert not missing.exists()  # never created as a side effect
    got = training_curve(model, "http://127.0.0.1:9", tmp_path)  # nothing listens on the discard port
    assert "not reachable" in got.reason


def test_a_datasets_own_exclusions_are_listed(tmp_path):
    from analysis_fixtures import paper_records, write_campaign
    from harness.dataset.build import SplitSpec, build_dataset

    recs = paper_records("no-policy")
    for r in recs:
        del r["policy"]  # the record schema of this branch has no policy field yet (the controller issue adds it)
    camp = write_campaign(tmp_path / "runs", "no-policy", recs).path
    build_dataset([camp], tmp_path / "ds", SplitSpec(train=2, test=1))
    res = build_report([tmp_path / "ds"], tmp_path / "r")
    left = pd.read_csv(res.tables["excluded"])
    reasons = dict(zip(left["reason"], left["records"]))
    assert reasons["sample failed (at the dataset's build)"] == 5   # the failed 5-receiver sample
    assert reasons["flagged: meter-gap (at the dataset's build)"] == 1
