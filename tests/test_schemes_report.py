"""The schemes side by side in the report: numbers against a hand computation, losers named, headlines checked.

Fixture: tests/analysis_fixtures.py ``SCHEMES_CELLS`` (hand-chosen per-receiver throughput and energy,
two samples per case, 32 Mbit per transfer). The hand computations are written out in each test.
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
from analysis_fixtures import paper_campaign, schemes_campaign

from analysis.headlines import HEADLINES_FILE, load_headlines
from analysis.load import load_study
from analysis.paper import load_paper
from analysis.report import build_report
from analysis.schemes import change_pct, diff_interval, headline_rows, side_by_side
from harness.errors import ConfigError

T_975_1 = 12.706204736174707   # Student t, 0.975 quantile, 1 degree of freedom (two samples)
T_975_2 = 4.302652729911275    # 2 degrees of freedom


@pytest.fixture(scope="module")
def camp(tmp_path_factory) -> Path:
    return schemes_campaign(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def table(camp) -> pd.DataFrame:
    return side_by_side(load_study([camp]).frame, load_headlines()).set_index(["n_receivers", "policy"])


def test_table_numbers_equal_a_hand_computation(table):
    es = table.loc[(2, "es-mptcp")]
    # throughput: per-sample means (10+10)/2 = 10 and (9+9)/2 = 9 -> mean 9.5, sd sqrt(0.5), t interval with n = 2
    assert es["n_samples"] == 2
    assert es["throughput_mbit_mean"] == pytest.approx(9.5)
    half = T_975_1 * math.sqrt(0.5) / math.sqrt(2)
    assert (es["throughput_mbit_ci_low"], es["throughput_mbit_ci_high"]) == pytest.approx((9.5 - half, 9.5 + half))
    # energy: samples (13+13)/2 = 13 and (13+15)/2 = 14 -> 13.5 J; J/Mbit 13.5 / 32
    assert es["energy_j_mean"] == pytest.approx(13.5)
    assert es["j_per_mbit_mean"] == pytest.approx(13.5 / 32)
    # all-both: throughput (10+12)/2 = 11, (11+13)/2 = 12 -> 11.5; energy 10, 12 -> 11 J
    assert table.loc[(2, "all-both"), "throughput_mbit_mean"] == pytest.approx(11.5)
    assert table.loc[(2, "all-both"), "energy_j_mean"] == pytest.approx(11.0)
    assert es["throughput_mbit_vs_all_both_pct"] == pytest.approx((9.5 / 11.5 - 1) * 100)
    assert es["energy_j_vs_all_both_pct"] == pytest.approx((13.5 / 11 - 1) * 100)       # +22.7 %
    assert es["j_per_mbit_vs_all_both_pct"] == pytest.approx((13.5 / 11 - 1) * 100)
    # best single path = the lower J/Mbit of all-wifi (21 J) and all-lte (14.5 J): all-lte
    assert es["best_single"] == "all-lte"
    assert es["energy_j_vs_best_single_pct"] == pytest.approx((13.5 / 14.5 - 1) * 100)  # -6.9 %
    assert es["throughput_mbit_vs_best_single_pct"] == pytest.approx((9.5 / 8.5 - 1) * 100)
    # 4 receivers: es-mptcp 15.5 J against all-both 17 J
    assert table.loc[(4, "es-mptcp"), "energy_j_vs_all_both_pct"] == pytest.approx((15.5 / 17 - 1) * 100)
    assert table.loc[(4, "es-mptcp"), "best_single"] == "all-lte"


def test_a_scheme_worse_than_the_baseline_is_said_to_lose(table):
    es = table.loc[(2, "es-mptcp")]
    # ES-MPTCP is judged on its paper's headline metric (energy): 13.5 J against 11 J loses; two samples on
    # each side whose Welch interval includes zero, so it says so.
    assert es["deciding_metric"] == "energy"
    assert es["verdict_all_both"] == "loses"
    assert es["verdict_all_both_text"] == "loses to all-both (+22.7 % energy, within noise)"
    assert es["verdict_best_single"] == "wins"                       # 13.5 J < all-lte's 14.5 J
    # MP-SDN is judged on throughput: 20.5 against 11.5, Welch interval [5.96, 12.04] excludes zero.
    sdn = table.loc[(2, "mp-sdn")]
    assert (sdn["deciding_metric"], sdn["verdict_all_both"]) == ("throughput", "wins")
    assert sdn["verdict_all_both_text"].endswith("beyond noise)")
    # marginal-efficiency has no paper headline: judged on J/Mbit, 16/32 against all-lte's 14.5/32
    me = table.loc[(2, "marginal-efficiency")]
    assert me["deciding_metric"] == "j_per_mbit"
    assert me["verdict_best_single"] == "loses"
    assert me["verdict_best_single_text"].startswith("loses to all-lte (+10.3 % J/Mbit")
    assert table.loc[(2, "all-both"), "verdict_all_both"] == "baseline"
    assert table.loc[(2, "all-lte"), "verdict_best_single"] == "baseline"
    assert table.loc[(4, "es-mptcp"), "verdict_all_both"] == "wins"


def test_welch_interval_of_the_difference():
    lo, hi = diff_interval(np.array([20.0, 21.0]), np.array([11.0, 12.0]))
    half = T_975_2 * math.sqrt(0.25 + 0.25)     # se^2 = 0.5/2 + 0.5/2, Welch dof = 2
    assert (lo, hi) == pytest.approx((9 - half, 9 + half))
    assert all(math.isnan(x) for x in diff_interval(np.array([1.0]), np.array([1.0, 2.0])))


def test_efficiency_change_is_bits_per_joule():
    # 0.08 J/Mbit against 0.1 J/Mbit: 12.5 Mbit/J against 10 Mbit/J = +25 % efficiency
    assert change_pct("efficiency", 0.08, 0.1) == pytest.approx(25.0)
    assert change_pct("energy", 0.08, 0.1) == pytest.approx(-20.0)


def test_each_headline_sits_beside_the_same_kind_of_change(camp, table):
    assert table.loc[(2, "es-mptcp"), "paper_headline"].startswith("-16.2 % energy vs lowRTT")
    assert table.loc[(2, "es-mptcp"), "mplab_same_kind"] == "+22.7 % energy vs all-both"
    assert table.loc[(2, "mp-sdn"), "mplab_same_kind"] == f"{(20.5 / 11.5 - 1) * 100:+.1f} % throughput vs all-both"
    h = headline_rows(load_study([camp]).frame, load_headlines())
    es2 = h[(h["policy"] == "es-mptcp") & (h["n_receivers"] == 2)].set_index("metric")
    assert es2.loc["energy", "direction"] == "opposite"
    # efficiency vs lowRTT: (11/32) / (13.5/32) - 1 in bits per joule
    eff = es2[es2["mplab_baseline"] == "all-both"].loc["efficiency"]
    assert eff["mplab_change_pct"] == pytest.approx((11 / 13.5 - 1) * 100)
    assert set(es2[es2["mplab_baseline"].isna()]["direction"]) == {"no mplab counterpart"}   # vs eMTCP
    assert set(h[h["policy"] == "eemptcp"]["direction"]) == {"not run"}
    es4 = h[(h["policy"] == "es-mptcp") & (h["n_receivers"] == 4)].set_index("metric")
    assert es4.loc["energy", "direction"] == "same"


def test_report_shows_the_tables_the_figure_and_markdown(camp, tmp_path):
    res = build_report([camp], tmp_path / "r")
    assert "setup2-schemes" in {f.name for f in res.figures}
    page = (tmp_path / "r" / "index.html").read_text()
    assert 'id="schemes"' in page and 'id="fig-setup2-schemes"' in page
    assert page.count("<h3>2 receivers, cubic") == 1 and page.count("<h3>4 receivers, cubic") == 1
    assert '<b class="lose">loses to</b> all-both (+22.7 % energy, within noise)' in page
    md = res.markdown.read_text()
    assert "## 2 receivers, cubic" in md and "![" in md and "figures/setup2-schemes.png" in md
    assert "| es-mptcp | 2 | 9.50\u00a0[3.15,\u00a015.9] | 13.5\u00a0[" in md   # means with no-break spaces
    assert "loses to all-both (+22.7 % energy, within noise)" in md
    # the summary (what README quotes): per receiver count the means, the headline's kind of change, verdicts
    assert ("| es-mptcp | -16.2 % energy | 9.50 | 0.422 | +22.7 % energy | loses (noise) / wins (noise) | 8.00 | 0.484 | "
            "-8.8 % energy | wins (noise) / wins |") in md
    csv = pd.read_csv(res.tables["schemes"]).set_index(["n_receivers", "policy"])
    assert csv.loc[(2, "es-mptcp"), "energy_j_mean"] == pytest.approx(13.5)
    svg = (tmp_path / "r" / "figures" / "setup2-schemes.svg").read_text()
    for pol in ("all-both", "es-mptcp", "mp-sdn", "marginal-efficiency", "2 receivers", "4 receivers",
                "emulated energy (profile schemes-fixture)"):
        assert pol in svg, pol


def test_without_policies_the_schemes_section_says_why(tmp_path):
    from analysis_fixtures import setup1_campaign

    res = build_report([setup1_campaign(tmp_path / "runs")], tmp_path / "r")
    assert res.schemes is None and res.markdown is None
    assert "no records carry a policy" in {s.name: s.reason for s in res.skipped}["setup2-schemes"]


def test_headlines_file_is_valid_and_refs_headline_matches_its_tables():
    h = load_headlines()
    assert {p for p, s in h.schemes.items() if s.headlines} == {"ref-is-tuned", "es-mptcp", "ee-mptcp", "eemptcp",
                                                                 "mp-sdn"}
    unverified = [(p, x.metric) for p, s in h.schemes.items() for x in s.headlines if not x.verified]
    assert unverified == [("eemptcp", "power")]  # 0.85 % in the text, 0.88 % from its table: said in the caveat
    eem = next(x for x in h.of("eemptcp").headlines if x.metric == "power")
    assert "0.88" in eem.claim and "ambiguous" in eem.caveat
    # the reference paper never names its single-path columns' TCP variant: nothing calls them Cubic
    for x in h.of("ref-is-tuned").headlines:
        if x.baseline.mplab in ("all-lte", "all-wifi"):
            assert "cubic" not in x.baseline.paper.lower() and "not name" in x.baseline.paper
    # REF's "19 % less energy, 8 % more throughput than MPTCP" against its Tables 2-3 (per-CC means over N)
    paper = load_paper()
    e, t = paper.wide("energy_j"), paper.wide("throughput_mbit")
    saving = {cc: ((e[f"sdn-{cc}"] / e[f"mptcp-{cc}"] - 1) * 100).mean() for cc in ("balia", "cubic")}
    gain = {cc: ((t[f"sdn-{cc}"] / t[f"mptcp-{cc}"] - 1) * 100).mean() for cc in ("balia", "cubic")}
    ref = {x.metric: x.change_pct for x in h.of("ref-is-tuned").headlines if x.baseline.mplab == "all-both"}
    assert all(abs(v - ref["energy"]) < 0.5 for v in saving.values()), saving     # -18.7, -19.1
    assert min(abs(v - ref["throughput"]) for v in gain.values()) < 0.5, gain      # +8.4 (Cubic)
    # against single-path TCP: mplab's arithmetic on the same tables, the mean of the BALIA and Cubic columns
    for x in h.of("ref-is-tuned").headlines:
        if x.baseline.mplab in ("all-lte", "all-wifi"):
            col = x.baseline.mplab.removeprefix("all-") + "-sptcp"
            w = e if x.metric == "energy" else t
            got = sum(((w[f"sdn-{cc}"] / w[col] - 1) * 100).mean() for cc in ("balia", "cubic")) / 2
            assert abs(got - x.change_pct) < 0.05, (x.claim, got)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "headlines.yaml"
    p.write_text(text)
    return p


GOOD = HEADLINES_FILE.read_text()


@pytest.mark.parametrize("broken, expect", [
    ("schemes: {es-mptcp: [unclosed", "not valid YAML"),
    (GOOD.replace("metric: energy\n", "metric: joules\n", 1), "schemes.ref-is-tuned.headlines.0.metric"),
    (GOOD.replace("mplab: all-both", "mplab: all-mptcp", 1), "baseline.mplab must be one of"),
    (GOOD.replace("change_pct: 100.5", "change_pct: 80", 1), "disagrees with paper_value/baseline_value"),
    (GOOD.replace("    note: the paper's", "    notes: the paper's", 1), "schemes.ref-is.notes: malformed headlines: "
                                                                      "Extra inputs are not permitted"),
])
def test_bad_headlines_file_is_one_clear_line(tmp_path, broken, expect):
    path = _write(tmp_path, broken)
    with pytest.raises(ConfigError) as e:
        load_headlines(path)
    assert e.value.exit_code == 2 and expect in str(e.value) and str(path) in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text, expect", [
    ("schema_version: 1\nsource: x\nschemes:\n  es-mptcp: {paper: x, setting: y, headlines: "
     "[{claim: c, metric: speed}]}\n", "schemes.es-mptcp.headlines.0.metric"),
    ("schemes:\n  es-mptcp: [\n  - a: b: c\n", "not valid YAML"),
])
def test_cli_exits_2_on_a_bad_headlines_file_before_writing_anything(tmp_path, text, expect):
    camp = paper_campaign(tmp_path / "runs")
    bad = _write(tmp_path, text)
    cp = subprocess.run([sys.executable, "-m", "mplab", "report", str(camp), "-o", str(tmp_path / "out"),
                         "--headlines", str(bad)], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 2, cp.stderr
    lines = [x for x in cp.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0], cp.stderr
    assert expect in lines[0], lines[0]
    assert not (tmp_path / "out").exists()
