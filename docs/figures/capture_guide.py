"""Screenshots of the user guide at 1280 px, and the browser's verdict on every page of it.

    uv run --frozen mkdocs build --strict -d site
    uv run --frozen python docs/figures/capture_guide.py site [OUT_DIR]     # default: docs/figures/

Serves the built site on 127.0.0.1 (as `mkdocs serve` or any web server would: the search index is
fetched, which file:// does not allow) and opens it in Debian's Chromium through Playwright (the
browser and flags of ``rigs.browser``). Every page is checked for console errors, failed requests,
images that did not decode and horizontal overflow (a page wider than the window); the three pages
photographed (``guide-home.png``, ``guide-runbook.png``, ``guide-reference-cli.png``) also for tables
cut off on the right. Exit 1 when the browser saw a problem.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rigs.browser import CHROMIUM, CHROMIUM_ARGS, CUT_TABLES_JS, HEIGHT, WIDTH, non_white_share

#: The pages photographed: site path -> PNG name.
SHOTS = {"index.html": "guide-home.png", "runbook.html": "guide-runbook.png",
         "reference/cli.html": "guide-reference-cli.png"}


@dataclass
class GuidePage:
    """What the browser saw on one page of the guide."""

    path: str
    problems: list[str] = field(default_factory=list)
    overflow_px: int = 0
    cut_tables: list[tuple[str, int]] = field(default_factory=list)
    screenshot: Path | None = None
    non_white_share: float = 0.0


@contextlib.contextmanager
def serving(site: Path) -> Iterator[str]:
    """The site on http://127.0.0.1:<free port>/ for the duration of the block."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="guide-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the base class logs every request to stderr
        pass


def check_site(site: Path, out: Path | None, pages: list[str] | None = None) -> list[GuidePage]:
    """Open every page of ``site`` (or ``pages``) and photograph those of SHOTS into ``out``."""
    from playwright.sync_api import sync_playwright

    paths = pages or sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                            if p.name != "404.html" and "assets" not in p.parts)
    results = []
    with serving(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            current: list[GuidePage] = []
            page.on("console", lambda m: current[-1].problems.append(f"console {m.type}: {m.text}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: current[-1].problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: current[-1].problems.append(f"request failed: {r.url} ({r.failure})"))
            for path in paths:
                res = GuidePage(path)
                current.append(res)
                page.goto(base + path, wait_until="networkidle", timeout=60_000)
                imgs = page.eval_on_selector_all("img", "els => els.map(e => [e.currentSrc, e.complete, e.naturalWidth])")
                res.problems += [f"image not decoded: {src}" for src, done, w in imgs if not done or w <= 0]
                res.overflow_px = int(page.evaluate("document.documentElement.scrollWidth - window.innerWidth"))
                if path in SHOTS:
                    res.cut_tables = [tuple(x) for x in page.evaluate(CUT_TABLES_JS)]
                    if out is not None:
                        res.screenshot = out / SHOTS[path]
                        page.screenshot(path=str(res.screenshot))
                        res.non_white_share = non_white_share(res.screenshot)
                results.append(res)
        finally:
            browser.close()
    return results


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    site = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    out.mkdir(parents=True, exist_ok=True)
    results = check_site(site, out)
    bad = [r for r in results if r.problems or r.overflow_px > 0 or r.cut_tables]
    for r in bad:
        print(f"{r.path}: overflow {r.overflow_px} px, tables cut off: {r.cut_tables or 'none'}, "
              f"problems: {r.problems or 'none'}")
    print(f"{len(results)} pages, {len(bad)} with a problem")
    for r in results:
        if r.screenshot:
            print(r.screenshot)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
