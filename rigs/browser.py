"""A page opened in a real headless browser: Debian's Chromium driven by Playwright (no browser download).

What it records: console errors and warnings, page errors, failed requests, images that did not
decode, how far the page overflows the window horizontally, and every table that is cut off (wider
than the box it sits in, so part of it needs scrolling), with the heading above it; and a screenshot
with the share of non-white pixels (a blank page is caught). A plain ``chromium --headless
--screenshot`` exits 0 on a page whose images fail, so this listens to the page's events instead.
Used by the report's browser tests and by ``docs/figures/capture_report.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: Debian's Chromium binary (``/usr/bin/chromium`` is a shell wrapper around it) and the flags every rig
#: launches it with: one place for both, so the report's and watch's browser tests run the same browser.
CHROMIUM = Path("/usr/lib/chromium/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
WIDTH, HEIGHT = 1280, 900

# Tables wider than their box (or the window): the heading (h3/h2) above each, and by how many pixels.
CUT_TABLES_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const head = t => { let e = t.closest('div') || t; for (let p = e.previousElementSibling; p; p = p.previousElementSibling)
      { if (/^H[1-4]$/.test(p.tagName)) return p.textContent.trim().slice(0, 90); } return '(no heading)'; };
  return Array.from(document.querySelectorAll('table')).map(t => {
    const box = t.parentElement; const r = t.getBoundingClientRect();
    // A table in its own box (div) is cut off when the box must scroll; any table, past the window's edge.
    const inner = box.tagName === 'DIV' ? box.scrollWidth - box.clientWidth : 0;
    const over = Math.max(r.right - vw, inner);
    return [head(t), Math.round(over)]; }).filter(x => x[1] > 1);
}"""


@dataclass
class PageCheck:
    """What the browser saw."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    decoded_figures: list[str] = field(default_factory=list)   # ids of <figure>s whose image decoded
    overflow_px: int = 0                                        # page wider than the window by
    cut_tables: list[tuple[str, int]] = field(default_factory=list)
    screenshot: Path | None = None
    non_white_share: float = 0.0

    @property
    def problems(self) -> list[str]:
        return self.console_errors + self.page_errors + self.failed_requests + self.broken_images


def _short(url: str, keep: int = 40) -> str:
    """A URL shortened in the middle: its file name stays (a deep temporary directory once cut it off)."""
    return url if len(url) <= 2 * keep else f"{url[:keep]}...{url[-keep:]}"


def non_white_share(png: Path) -> float:
    """Share of pixels darker than near-white (0 for a blank picture)."""
    from PIL import Image

    with Image.open(png) as im:
        g = im.convert("L")
        return 1 - sum(g.histogram()[245:]) / (g.width * g.height)


def open_in_chromium(page_path: Path, screenshot: Path, shots: dict[str, Path] | None = None,
                     full_page: bool = False) -> PageCheck:
    """Load ``page_path`` from file:// at 1280 px and record everything that went wrong.

    ``shots``: CSS selector -> PNG, screenshots of single elements (scrolled into view) besides the page's.
    """
    from playwright.sync_api import sync_playwright

    res = PageCheck()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            page.on("console", lambda m: res.console_errors.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: res.page_errors.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: res.failed_requests.append(f"request failed: {_short(r.url)} "
                                                                          f"({r.failure})"))
            page.goto(page_path.resolve().as_uri(), wait_until="load", timeout=60_000)
            imgs = page.eval_on_selector_all(
                "img", "els => els.map(e => [e.currentSrc.slice(0, 60), e.complete, e.naturalWidth])")
            res.images = len(imgs)
            res.broken_images = [f"image not decoded: {src}" for src, complete, w in imgs if not complete or w <= 0]
            res.decoded_figures = page.eval_on_selector_all(
                "figure", "els => els.filter(f => { const i = f.querySelector('img'); "
                          "return i && i.complete && i.naturalWidth > 0; }).map(f => f.id)")
            res.overflow_px = int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))
            res.cut_tables = [tuple(x) for x in page.evaluate(CUT_TABLES_JS)]
            page.screenshot(path=str(screenshot), full_page=full_page)
            res.screenshot = screenshot
            for selector, png in (shots or {}).items():
                el = page.locator(selector).first
                el.scroll_into_view_if_needed()
                el.screenshot(path=str(png))
        finally:
            browser.close()
    res.non_white_share = non_white_share(screenshot)
    return res
