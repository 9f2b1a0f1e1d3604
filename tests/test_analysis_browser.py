"""The report opened in a real headless browser: Debian's Chromium driven by Playwright (no browser download).

Checked (``rigs.browser``): no console error, no page error, no failed request, every image
decoded (naturalWidth > 0), nothing wider than the window at 1280 px (no horizontal overflow, no table
cut off on the right), a screenshot that is not blank. A plain ``chromium --headless --screenshot`` exits 0 on a page whose
images fail, so the checker listens to the page's events instead; the planted-fault test shows that
it catches a broken embedded image, a missing file and a script error.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from analysis_fixtures import paper_campaign, quick_slice, schemes_campaign

from analysis.report import build_report
from rigs.browser import CHROMIUM, CHROMIUM_ARGS, open_in_chromium

playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing (apt-get install chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    out = root / "report"
    build_report([paper_campaign(root / "runs"), quick_slice(root / "runs"), schemes_campaign(root / "runs")], out)
    return out


def test_report_loads_cleanly_in_chromium(report, tmp_path):
    got = open_in_chromium(report / "index.html", tmp_path / "shot.png")
    assert got.problems == []
    assert got.overflow_px <= 0, f"the page is {got.overflow_px} px wider than the window"
    assert got.cut_tables == [], got.cut_tables
    assert got.images == len(list((report / "figures").glob("*.png"))) >= 6
    assert got.non_white_share > 0.02, "the screenshot is blank"
    # the schemes side by side: one throughput-energy figure per energy label (the paper and schemes fixtures; the slice has none)
    assert {"fig-setup2-schemes-1", "fig-setup2-schemes-3", "fig-setup2-scatter-1"} <= set(got.decoded_figures)


def test_schemes_section_renders_its_tables_and_figure(report, tmp_path):
    """The side-by-side section in the browser: its tables laid out, its figure decoded and on screen."""
    from PIL import Image

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((report / "index.html").resolve().as_uri(), wait_until="load", timeout=60_000)
            rows = page.eval_on_selector_all("#schemes ~ div.wrapcells table tbody tr", "els => els.length")
            fig = page.locator("#fig-setup2-schemes-3 img")
            fig.scroll_into_view_if_needed()
            box = fig.bounding_box()
            shot = tmp_path / "schemes.png"
            fig.screenshot(path=str(shot))
        finally:
            browser.close()
    assert rows >= 12, rows                            # the fixture's policy cases, and more
    assert box is not None and box["width"] > 400 and box["height"] > 200, box
    with Image.open(shot) as im:
        g = im.convert("L")
        assert 1 - sum(g.histogram()[245:]) / (g.width * g.height) > 0.05, "the schemes figure is blank on screen"


def test_checker_catches_planted_faults(report, tmp_path):
    page = (report / "index.html").read_text()
    first = page.index('src="data:image/png;base64,') + len('src="data:image/png;base64,')
    broken = page[:first] + "AAAA" + page[first + 4:]                             # a corrupt embedded PNG
    broken = broken.replace("</body>", '<img src="figures/missing.png" alt="missing">'  # a file that is not there
                                       "<script>undefinedFunction()</script></body>")  # a script error
    bad = report / "broken.html"
    bad.write_text(broken)
    try:
        got = open_in_chromium(bad, tmp_path / "shot.png")
    finally:
        bad.unlink()
    assert len(got.broken_images) == 2, got.broken_images
    assert any("missing.png" in r for r in got.failed_requests), (got.failed_requests, got.console_errors, got.page_errors)
    assert any("undefinedFunction" in e for e in got.page_errors)


def test_blank_page_is_caught(tmp_path):
    (tmp_path / "blank.html").write_text("<!doctype html><html><body></body></html>")
    got = open_in_chromium(tmp_path / "blank.html", tmp_path / "shot.png")
    assert got.problems == [] and got.non_white_share < 0.02


def test_checker_catches_a_table_cut_off_on_the_right(report, tmp_path):
    """The overflow check fails on the broken thing: a table that cannot wrap (one long unbroken cell)."""
    page = (report / "index.html").read_text()
    wide = "<h3>planted wide table</h3><table><tr>" + "<td style='white-space:nowrap'>" + "x" * 400 + "</td></tr></table>"
    bad = report / "wide.html"
    bad.write_text(page.replace("</body>", wide + "</body>"))
    try:
        got = open_in_chromium(bad, tmp_path / "shot.png")
    finally:
        bad.unlink()
    assert [h for h, _ in got.cut_tables] == ["planted wide table"], got.cut_tables
    assert got.overflow_px > 0
