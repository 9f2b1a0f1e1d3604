"""The bad-input table: every kind of rigs/bad_input.py's corpus run through the real command line.

    uv run --frozen python bench/bad_inputs.py [-k WORD] [--skip WORD] [--timeout S] [--json out.json]

Against an older checkout (the "before" column): --pythonpath <its tree> makes the `mplab` processes run it
while the cases are made by this one. Leave out kinds an old version would act on for real (`--skip
watch-port --skip cluster`: it ran the campaign, or waited minutes for Ray), and cap its memory (ulimit -v).

One row per kind: exit code (expected), the first line of the message, wall seconds, peak resident MB of the
`mplab` process, files created or changed, and what the kind got wrong (empty when refused as it should be:
the right code, its words, no traceback, nothing created, within 2 s and 200 MB). Ends with the count of
kinds and failures. Every kind runs in its own scratch directory, one at a time.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from rigs.bad_input import corpus, run_case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", help="only kinds containing this text")
    ap.add_argument("--skip", action="append", default=[], help="leave out kinds containing this text (repeatable)")
    ap.add_argument("--timeout", type=float, default=120.0, help="kill a case's mplab after this many seconds")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    ap.add_argument("--pythonpath", help="run the `mplab` processes from this tree (an older checkout's)")
    args = ap.parse_args()
    if args.pythonpath:  # the children's only: this process keeps making the cases with its own code
        os.environ["PYTHONPATH"] = args.pythonpath
    cases = [c for c in corpus() if (not args.k or args.k.lower() in c.kind.lower())
             and not any(s.lower() in c.kind.lower() for s in args.skip)]
    rows, failed = [], 0
    root = Path(tempfile.mkdtemp(prefix="mplab-bad-input-"))
    try:
        print(f"{'code':>9} {'s':>5} {'MB':>5} {'new':>3}  kind: first line of the message")
        for i, case in enumerate(cases):
            o = run_case(case, root / f"c{i:03d}", timeout=args.timeout)
            bad = o.failures(case)
            failed += bool(bad)
            rows.append({"kind": case.kind, "code": o.code, "expected": case.code, "first_line": o.first_line,
                         "seconds": round(o.seconds, 2), "cpu_s": round(o.cpu_s, 2), "peak_mb": round(o.peak_mb, 1),
                         "created": o.created, "failures": bad})
            print(f"{o.code:>4} ({case.code:>2}) {o.seconds:5.2f} {o.peak_mb:5.0f} {len(o.created):>3}  "
                  f"{case.kind}: {o.first_line[:150]}" + (f"\n{'':>26}FAILED: {'; '.join(bad)}" if bad else ""),
                  flush=True)
            shutil.rmtree(root / f"c{i:03d}", ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    worst_s = max((r["seconds"] for r in rows), default=0)
    worst_mb = max((r["peak_mb"] for r in rows), default=0)
    print(f"{len(rows)} kinds, {failed} failed; slowest {worst_s:.2f} s, largest {worst_mb:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
