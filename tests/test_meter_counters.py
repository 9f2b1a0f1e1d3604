"""The emulated meter's byte counters (``harness.meters.emulated.SysfsRates``): read through files kept open.

At S x 10 Hz per meter, opening the counter files on every tick was most of an emulated meter's CPU
(``bench/speedup_cpu.py``); the files are opened once and read again from offset 0, and a file whose
device went away is opened again.
"""
from __future__ import annotations

import builtins
import os
import subprocess

import pytest

from harness.meters import emulated


def _lo_bytes() -> int:
    return sum(int(open(f"/sys/class/net/lo/statistics/{d}").read()) for d in ("rx_bytes", "tx_bytes"))


def test_ticks_open_no_file_and_still_see_the_counters_move(monkeypatch):
    rates = emulated.SysfsRates({"wifi": "lo"})
    opened = []
    real_open, real_os_open = builtins.open, os.open
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_os_open(*a, **k))
    before = rates.last_bytes["wifi"]
    subprocess.run(["ping", "-c", "3", "-i", "0.01", "-q", "127.0.0.1"], capture_output=True, check=False)
    monkeypatch.undo()
    now_bytes = _lo_bytes()
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_os_open(*a, **k))
    for _ in range(5):
        rates.measure(rates.last_t + 0.01)
    monkeypatch.undo()
    assert opened == [], f"a tick opened {opened}"
    assert rates.last_bytes["wifi"] >= now_bytes > before  # fresh values, not the first read's


def test_a_counter_file_that_stops_reading_is_opened_again():
    rates = emulated.SysfsRates({"wifi": "lo"})
    for fd in list(rates._fds.values()):
        os.close(fd)  # the kept descriptor no longer reads (EBADF), as after its device went away
    rates.measure(rates.last_t + 0.01)
    assert rates.last_bytes["wifi"] == pytest.approx(_lo_bytes(), abs=100_000)
