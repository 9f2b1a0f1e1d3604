"""The built guide in a real browser (Debian's Chromium through Playwright): every page loads without a console
error, a failed request or an undecoded image and is no wider than a 1280 px window; the home page, the runbook
and the generated command reference also keep every table inside its box. The check refuses a planted page
that overflows. Screenshots for docs/figures/: docs/figures/capture_guide.py.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from conftest import REPO
from rigs.browser import CHROMIUM

pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} missing (apt-get install chromium)")


def _capture():
    spec = importlib.util.spec_from_file_location("capture_guide", REPO / "docs" / "figures" / "capture_guide.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_built_guide_renders_without_overflow(tmp_path):
    site = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=REPO,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    capture = _capture()
    results = capture.check_site(site, tmp_path)
    assert len(results) > 30
    bad = [f"{r.path}: overflow {r.overflow_px} px, cut {r.cut_tables}, {r.problems}" for r in results
           if r.problems or r.overflow_px > 0 or r.cut_tables]
    assert bad == [], "\n".join(bad)
    shots = [r for r in results if r.screenshot]
    assert sorted(r.screenshot.name for r in shots) == sorted(capture.SHOTS.values())
    assert all(r.non_white_share > 0.02 for r in shots), [(r.path, r.non_white_share) for r in shots]


def test_the_check_refuses_a_page_wider_than_the_window(tmp_path):
    (tmp_path / "wide.html").write_text('<!doctype html><html><body><pre style="white-space:pre">'
                                        + "x" * 600 + "</pre></body></html>")
    (tmp_path / "broken.html").write_text('<!doctype html><html><body><img src="missing.png"></body></html>')
    res = {r.path: r for r in _capture().check_site(tmp_path, None, pages=["wide.html", "broken.html"])}
    assert res["wide.html"].overflow_px > 0
    assert res["broken.html"].problems
