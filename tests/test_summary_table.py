"""The end-of-run table (`mplab run`, `mplab status`): case names are never cut, whatever the terminal's width."""
from __future__ import annotations

import pytest
from rich.console import Console

from mplab.commands.campaign import flag_kinds, summary_table


def _records() -> list[dict]:
    out = []
    for pol in ("ref-is", "ref-is-tuned"):
        for n in (1, 9):
            case = f"wvegas-n{n}-policy-{pol}"
            out.append({"schema_version": 1, "sample_id": f"{case}-s001", "case_id": case, "cc": "wvegas",
                        "n_receivers": n, "mode": None, "policy": pol, "receiver": "n1", "status": "ok",
                        "sample_status": "ok", "flags": [], "throughput_mbit": 12.345, "energy_j": 51.23,
                        "mean_power_w": 3.456, "energy_source": "emulated (profile paper-lab-calibrated)"})
    return out


@pytest.mark.parametrize("width", [70, 80, 120])
def test_case_names_that_differ_at_their_end_stay_apart(width):
    console = Console(width=width, record=True, color_system=None)
    console.print(summary_table(_records(), "campaign x: 4 samples"))
    text = console.export_text()
    # the case column's cells, a folded name joined back
    names, cur = [], ""
    for ln in text.splitlines():
        cells = ln.split("│")
        if len(cells) < 3:
            continue
        cell, first = cells[1].strip(), cells[2].strip()
        if first:          # a row starts (its "ok" count is on its first line)
            if cur:
                names.append(cur)
            cur = cell
        else:
            cur += cell
    names.append(cur)
    assert not [n for n in names if "…" in n], text
    assert sorted(names) == sorted(r["case_id"] for r in _records()), text


def test_the_caption_counts_flagged_records_by_kind_of_flag():
    """A record with two flags of one kind counts once for it: the caption tells how many records each kind
    keeps out of datasets, not how many flags were written."""
    recs = _records()
    recs[0]["flags"] = ["cc-fault: n1's wifi subflow (to 10.10.1.2) had slow-start threshold 0x81104110, which no "
                        "callback returned, for 3 ACKs", "cc-fault: n1's lte subflow (to 10.20.1.2) had congestion "
                        "window 0x81104110, which no callback returned, for 1 ACKs"]
    recs[1]["flags"] = ["cc-fault: n1's wifi subflow (to 10.10.1.2) had slow-start threshold 0x81104110, which no "
                        "callback returned, for 2 ACKs", "meter-gap: 1.2 s without a reading"]
    assert flag_kinds(recs) == {"cc-fault": 2, "meter-gap": 1}
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(recs, "campaign x"))
    caption = " ".join(console.export_text().split())  # the caption wraps at the table's width
    assert "flagged records, by flag (left out of datasets): cc-fault 2, meter-gap 1" in caption
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(_records(), "campaign x"))
    assert "by flag" not in console.export_text()
