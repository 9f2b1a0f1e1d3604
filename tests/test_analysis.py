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
from analysis_fixtures import (FAILED_SAMPLE, FLAGGED, paper_campaign, paper_records, quick_slice,
                               setup1_campaign, write_campaign)

from analysis.load import load_study
from analysis.paper import analog_table, checks_table, load_paper, run_checks
from analysis.report import build_report
from analysis.stats import case_stats, interval
from analysis.tables import sig3
from harness.errors import ConfigError

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


# ---------------------------------------------------------------- like with like, bounds, readability

def test_network_totals_sum_every_receiver_of_a_sample(runs):
    frame = load_study([runs["paper"]]).frame
    tot = case_stats(frame, "throughput_mbit", how="total").set_index(["cc", "n_receivers", "scheme"])
    ok = frame[(frame["sample_status"] == "ok") & (frame["status"] == "ok") & (frame["flags"] == "")]
    sums = ok.groupby(["cc", "n_receivers", "scheme", "sample_id"])["throughput_mbit"].agg(["sum", "count"])
    sums = sums[sums["count"] == sums.index.get_level_values("n_receivers")]
    want = sums.groupby(["cc", "n_receivers", "scheme"])["sum"].mean()
    np.testing.assert_allclose(tot.loc[want.index, "mean"], want, rtol=1e-12)
    # The sample with a flagged receiver has no total: counted, not averaged in as a two-receiver sum.
    flagged = tot.loc[("cubic", 3, "all-lte")]
    assert flagged["samples_incomplete"] == 1 and flagged["n_samples"] == 2
    # A total is N per-receiver means, not one (the fixture's receivers are alike).
    per_rx = case_stats(frame, "throughput_mbit").set_index(["cc", "n_receivers", "scheme"])
    assert tot.loc[("balia", 8, "all-both"), "mean"] == pytest.approx(8 * per_rx.loc[("balia", 8, "all-both"), "mean"],
                                                                      rel=0.01)


def test_table2_analog_puts_totals_beside_the_papers_totals(full_report):
    out, _ = full_report
    t2 = pd.read_csv(out / "tables" / "paper-table2-throughput.csv")
    t2 = t2[t2["energy_label"] == "emulated energy (profile paper-fixture)"].set_index(["column", "n_receivers"])
    # The fixture's receivers share Table 2's total: ours beside the paper is the same number, not a third of it.
    assert t2.loc[("mptcp-balia", 3), "paper"] == 45.25
    assert t2.loc[("mptcp-balia", 3), "ours_mean"] == pytest.approx(45.25, rel=0.02)
    assert t2.loc[("wifi-sptcp", 8), "ours_mean"] == pytest.approx(16.5, rel=0.02)
    page = (out / "index.html").read_text()
    assert "Table 2 analog: throughput (Mbit/s, network total, the sum over a sample&#39;s N receivers" in page


def test_intervals_never_go_below_zero():
    raw = interval(np.array([0.2, 5.0]), "t")
    assert raw[2] < 0                                   # Student t with two samples reaches below zero
    bounded = interval(np.array([0.2, 5.0]), "t", lower=0.0)
    assert bounded[2] == 0.0 and bounded[3] == raw[3] and bounded[0] == raw[0]
    frame = pd.DataFrame({"energy_label": "x", "cc": "cubic", "n_receivers": 1, "scheme": "wifi", "campaign": "c",
                          "sample_id": ["s1", "s2"], "sample_status": "ok", "status": "ok", "flags": "",
                          "throughput_mbit": [0.2, 5.0]})
    assert case_stats(frame, "throughput_mbit")["ci_low"].iloc[0] == 0.0


def test_three_significant_digits_never_in_exponent_form():
    assert [sig3(x) for x in (1.296e-05, 45.25, 0.95, 1234.5, 3.0, -6.328, float("nan"), 7)] == [
        "0.000013", "45.2", "0.95", "1,230", "3", "-6.33", "–", "7"]


def test_page_tables_are_for_readers(full_report):
    """Human headers, no raw column names, no exponents, no energy label repeated on every row, no tracker words."""
    import re

    out, _ = full_report
    page = (out / "index.html").read_text()
    tables = "".join(re.findall(r"<table.*?</table>", page, flags=re.S))
    for raw in ("<th>ci_low</th>", "<th>ci_high</th>", "<th>energy_label</th>", "<th>n_samples</th>",
                "<th>samples_failed</th>", "<th>cc</th>"):
        assert raw not in tables, raw
    assert "95% interval (J)" in tables and "congestion control" in tables
    assert not re.search(r"\d[eE][-+]\d", tables), re.search(r".{30}\d[eE][-+]\d.{10}", tables)
    assert tables.count("emulated energy (profile paper-fixture)") == 0
    assert " issue" not in page.lower().replace("tissue", "")


def test_setup1_heading_says_the_receiver_count_drawn(full_report):
    _, res = full_report
    titles = {f.name: f.title for f in res.figures}
    assert "N = 3 receivers" in titles["setup1-one-receiver-2"] and "one receiver" not in titles["setup1-one-receiver-2"]
    assert titles["setup1-one-receiver-3"].startswith("Setup I: one receiver")       # the synthetic campaign has N = 1


def test_model_section_shows_the_baselines(full_report):
    out, res = full_report
    t = pd.read_csv(res.tables["model-baselines"])
    assert set(t["predictor"]) >= {"MLP (5 x 200, the exported model)", "linear regression", "gradient-boosted trees"}
    mlp = t.loc[t["predictor"].str.startswith("MLP"), "mape_pct"].iloc[0]
    assert (t["against the MLP"] == "beats the MLP").sum() == (t["mape_pct"] < mlp).sum()
    assert "gradient-boosted trees" in (out / "index.html").read_text()


# ---------------------------------------------------------------- a rerun beside the run before it

def _rerun_pair(root: Path, slower: float) -> tuple[Path, Path]:
    scen = {"scenario": {"name": "fixture-scenario"}}
    a = write_campaign(root, "run-a", paper_records("run-a"), manifest=scen).path
    recs = paper_records("run-b")
    for r in recs:
        if (r["cc"], r["n_receivers"], r["policy"]) == ("balia", 3, "all-both"):
            r["throughput_mbit"] *= slower
    b = write_campaign(root, "run-b", recs, manifest={**scen, "kernel": "6.19.0-fixture"}).path
    return a, b


def test_rerun_flags_drift_beyond_noise_and_manifest_differences(tmp_path):
    a, b = _rerun_pair(tmp_path / "runs", slower=0.7)
    res = build_report([a, b], tmp_path / "r")
    c = res.rerun.set_index(["cc", "n_receivers", "scheme", "measure"])
    drift = c.loc[("balia", 3, "all-both", "throughput, network total")]
    assert drift["verdict"] == "drift" and drift["change_pct"] == pytest.approx(-30, abs=0.5)
    assert drift["diff_high"] < 0
    # Everything else is the same records: no difference, within noise.
    others = res.rerun[res.rerun["verdict"] == "drift"]
    assert len(others) == 1, others
    m = res.rerun_manifests.set_index("field")
    assert m.loc["kernel", "differs"] == "yes" and m.loc["kernel", "b"] == "6.19.0-fixture"
    assert m.loc["commit", "differs"] == "no"
    assert "campaign" not in m.index and "created_at" not in m.index    # per campaign by nature
    page = (tmp_path / "r" / "index.html").read_text()
    assert 'id="rerun"' in page and '<b class="lose">drift</b>' in page
    import os

    cli = subprocess.run([sys.executable, "-m", "mplab", "report", str(a), str(b), "-o", str(tmp_path / "r2")],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "300"})
    assert cli.returncode == 0, cli.stderr
    assert "1 of" in cli.stdout and "drift balia N=3 all-both, throughput, network total" in cli.stdout
    assert "manifest differs kernel" in cli.stdout


def test_campaigns_of_different_scenarios_are_not_a_rerun(runs, tmp_path):
    res = build_report([runs["paper"], runs["setup1"]], tmp_path / "r")
    assert res.rerun is None and 'id="rerun"' not in (tmp_path / "r" / "index.html").read_text()


def test_no_legend_sits_over_a_plot(runs, tmp_path, monkeypatch):
    """Every legend of every figure lies outside every panel (drawn, then measured in display pixels)."""
    from analysis import style
    from analysis.figures import model as model_mod, sample as sample_mod, setup1 as s1, setup2 as s2

    over: list[str] = []

    def checked_save(fig, out_dir, name, *args, **kw):
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        legends = list(fig.legends) + [a.get_legend() for a in fig.axes if a.get_legend() is not None]
        for leg in legends:
            lb = leg.get_window_extent(r)
            over.extend(f"{name}: legend over panel {i}" for i, a in enumerate(fig.axes)
                        if a.get_visible() and lb.overlaps(a.get_window_extent(r)))
        return style.save(fig, out_dir, name, *args, **kw)

    for mod in (s1, s2, model_mod, sample_mod):
        monkeypatch.setattr(mod, "save", checked_save)
    res = build_report([runs["paper"], runs["setup1"], runs["slice"]], tmp_path / "r")
    assert len(res.figures) >= 8
    assert over == [], over


def test_training_curve_of_a_model_pulled_by_alias(runs, tmp_path):
    """`mplab report --model models:/NAME@alias` resolves to <cache>/NAME/VERSION: the curve comes from the run
    the registry recorded for that version (the folder's name is the version, not the model's)."""
    from analysis.figures.model import training_curve
    from harness.dataset.build import SplitSpec, build_dataset
    from harness.model_registry import resolve_model
    from training.fit import TrainConfig
    from training.pipeline import train
    from training.registry import promote

    build_dataset([runs["setup1"]], tmp_path / "datasets" / "s1", SplitSpec(train=3, test=1))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    train(tmp_path / "datasets" / "s1", tmp_path / "models" / "s1", TrainConfig(epochs=2, precision="fp32"),
          tracking_uri=uri, register="energy", log=lambda *_: None)
    promote("energy", "1", "champion", uri)
    folder = resolve_model("models:/energy@champion", uri, cache=tmp_path / "cache")
    assert folder == tmp_path / "cache" / "energy" / "1"
    got = training_curve(folder, uri, tmp_path / "figs")
    assert getattr(got, "reason", None) is None, got.reason
    assert got.name == "model-training-curve"
