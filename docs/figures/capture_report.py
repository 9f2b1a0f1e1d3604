"""Screenshots of a report page at 1280 px, and the browser's verdict on it.

    uv run python docs/figures/capture_report.py reports/<name>/index.html [OUT_DIR]   # default: docs/figures/

Opens the page in Debian's Chromium through Playwright (``rigs.browser``), prints what
went wrong (console errors, failed requests, undecoded images, horizontal overflow, tables cut off
on the right) and writes ``report-top.png`` (the first screen), ``report-table2.png`` (Tables 2-3
beside the paper), ``report-provenance.png`` and, when the page has one, ``report-rerun.png``
(the rerun comparison). Exit 1 when the browser saw a problem.
"""
from __future__ import annotations

import sys
from pathlib import Path

from rigs.browser import open_in_chromium


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    page = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).parent
    out.mkdir(parents=True, exist_ok=True)
    html = page.read_text()
    shots = {"#sec-tables": out / "report-table2.png", "table.prov": out / "report-provenance.png"}
    if 'id="rerun"' in html:
        shots["#sec-rerun"] = out / "report-rerun.png"
    got = open_in_chromium(page, out / "report-top.png", shots)
    print(f"images {got.images}, overflow {got.overflow_px} px, tables cut off: {got.cut_tables or 'none'}, "
          f"problems: {got.problems or 'none'}")
    for png in [out / "report-top.png", *shots.values()]:
        print(png)
    return 1 if got.problems or got.overflow_px > 0 or got.cut_tables else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
