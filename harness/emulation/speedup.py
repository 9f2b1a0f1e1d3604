"""Faster than real time: the emulated testbed scaled by a factor S.

Time dilation (Gupta et al., "To Infinity and Beyond: Time-Warped Network Emulation", NSDI 2006)
slows a guest's clock so that the network looks faster. The kernel's clock cannot be dilated
here, so the testbed is scaled instead, and the records are scaled back:

- every link rate and shared capacity x S (the radio loop re-shares at S x its rate, its
  activity window / S);
- every base delay, buffer depth in time, radio promotion and tail, and the emulated meter's
  counter-sampling period / S (the recorder's poll period too, down to ``POLL_CAP_HZ``);
- buffers unchanged in bytes, so the bandwidth-delay product in packets is unchanged;
- the power model's per-Mbit/s coefficients / S (the same power at the same testbed-time
  throughput), its activity threshold x S;
- file sizes unchanged.

A sample then takes 1/S of the wall time; the runner writes its record in testbed (real) time:
durations x S, throughputs / S, energies x S (power is unchanged), and ``speedup`` = S.

The kernel's own clock does not scale. Where the kernel lets BPF act per socket, what reads it is
scaled instead (``kernel_scaling``): the minimum RTO and the delayed-ACK ceiling / S on the testbed's
sockets (``harness.cc.timers``, whole jiffies, at least two), and Cubic's clock x S (``harness.cc.cubic``).
What stays at real time: TCP pacing and TSQ (bytes per wall-clock interval) and the MPTCP path
manager's timers. Each matters only where the scaled RTT approaches it; ``bench/speedup.py`` measures,
cell by cell, where a factor still holds. Only Setup I mode samples are scaled: a controller's probe windows
and epochs are not, and a real srsRAN cell runs in real time, so both are refused.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.resources import package_path

if TYPE_CHECKING:  # only annotations: `mplab run`'s --speedup-table default must not load the inventory models
    from harness.config.inventory import Inventory, PowerProfile, RadioPower, SharedCapacity

#: The largest factor accepted (the radio loop then runs at S x its rate; beyond this nothing held).
MAX_SPEEDUP = 64.0
#: Where ``mplab run --speedup auto`` reads this machine's validation (``bench/speedup.py --out``).
DEFAULT_TABLE = package_path("harness", "emulation", "speedup-validation.json")
#: The emulated UM25C's poll rate at S = 1 (libsigrok's 100 ms), scaled with the rest up to ``POLL_CAP_HZ``.
METER_HZ = 10.0
#: The recorder's poll rate stops growing here (S = 2 and above): the emulated device integrates its model
#: at 10 x S Hz and answers with its mean since the previous poll, and the runner pins a reading at each
#: window's edges, so slower polls lose no energy, while nine meters polled at 10 x S Hz in Python were the
#: first limit at S = 8 and 16. A gap is judged against the capped period (``Recorder.gap_factor``).
POLL_CAP_HZ = 20.0
#: Set to ``off`` to leave the kernel's clocks unscaled at S > 1 (no timer program, the kernel's own Cubic):
#: the validation bench's levers-off column (``bench/speedup.py --levers off``). Records say what ran either
#: way (``tcp_timers`` null, ``cc_impl`` ``kernel:cubic``).
KERNEL_SCALING_ENV = "MPLAB_KERNEL_SCALING"
#: ``auto`` at ``--testbeds`` K > 1: the share of this machine's cores K testbeds may fill, each at what its
#: heaviest validated cell used on one testbed (``sustained``); the rest is the machine's own (the kernel's
#: softirqs outside the testbeds' processes, the orchestrator's other threads, the recorder) and headroom.
CPU_BUDGET = 0.8


def kernel_scaling(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a testbed at S > 1 scales the kernel's clocks: the TCP timers per socket
    (``harness.cc.timers``) and Cubic's clock (``harness.cc.cubic``). On unless ``KERNEL_SCALING_ENV`` is ``off``."""
    return environ.get(KERNEL_SCALING_ENV, "on").strip().lower() not in ("off", "0", "no")


def check_speedup(inventory: Inventory, speedup: float, *, policies: bool = False) -> None:
    """Refuse a factor the testbed cannot run (``ConfigError`` naming why); 1 is always accepted."""
    if speedup == 1:
        return
    if not 1 <= speedup <= MAX_SPEEDUP:
        raise ConfigError(f"speedup {speedup:g} is outside 1..{MAX_SPEEDUP:g}", field="speedup")
    if inventory.emulation is None:
        raise ConfigError(f"inventory {inventory.name!r} is a lab: real radios and meters run in real time "
                          "(speedup applies to the emulated testbed only)", field="speedup")
    real = [rx.name for rx in inventory.receivers if rx.interfaces["lte"].real_cell is not None]
    if real:
        raise ConfigError(f"receivers {', '.join(real)} use a real srsRAN cell, which runs in real time: "
                          "run this inventory with speedup 1", field="speedup")
    if policies:
        raise ConfigError("controller policies are not scaled (their probe windows and epochs run in real "
                          "time): run policy scenarios with speedup 1", field="speedup")


def _radio(p: RadioPower, s: float) -> RadioPower:
    return p.model_copy(update={"mw_per_mbit": p.mw_per_mbit / s, "promotion_s": p.promotion_s / s,
                                "tail_s": p.tail_s / s})


def scale_profile(p: PowerProfile, s: float) -> PowerProfile:
    """The power model at S x: the same power for the same testbed-time state, its time constants / S."""
    both = p.both.model_copy(update={"mw_per_mbit": p.both.mw_per_mbit / s}) if p.both else None
    return p.model_copy(update={"wifi": _radio(p.wifi, s), "lte": _radio(p.lte, s), "both": both,
                                "active_threshold_mbit": p.active_threshold_mbit * s})


def _capacity(c: SharedCapacity, s: float) -> SharedCapacity:
    by = {n: v * s for n, v in c.capacity_by_active.items()} if c.capacity_by_active else None
    return c.model_copy(update={"capacity_mbit": c.capacity_mbit * s, "capacity_by_active": by})


def scale_inventory(inventory: Inventory, s: float) -> Inventory:
    """The emulated inventory a testbed at speedup ``s`` is built from (the original is left as it is)."""
    if s == 1:
        return inventory
    emu = inventory.emulation
    assert emu is not None, "check_speedup refuses labs"
    receivers = []
    for rx in inventory.receivers:
        intfs = {}
        for radio, intf in rx.interfaces.items():
            ch = intf.channel
            if ch is not None:
                ch = ch.model_copy(update={"rate_mbit": ch.rate_mbit * s, "buffer_ms": ch.buffer_ms / s,
                                           "delay_ms": ch.delay_ms / s})
            intfs[radio] = intf.model_copy(update={"channel": ch})
        base_hz = rx.meter.rate_hz or METER_HZ
        meter = rx.meter.model_copy(update={"rate_hz": max(base_hz, min(base_hz * s, POLL_CAP_HZ))})
        receivers.append(rx.model_copy(update={"interfaces": intfs, "meter": meter}))
    scaled_emu = emu.model_copy(update={
        "wifi_ap": _capacity(emu.wifi_ap, s), "lte_cell": _capacity(emu.lte_cell, s),
        "power_profile": scale_profile(emu.power_profile, s), "radio_loop_hz": emu.radio_loop_hz * s})
    return inventory.model_copy(update={"receivers": receivers, "emulation": scaled_emu})


def _speedup_of(key: str) -> float:
    """The S of a table key (``"emulated loss 0% s8"``)."""
    return float(key.rsplit(" s", 1)[1])


def highest_holding(results: dict, ccs: list[str], mode: str | None = None) -> dict[str, float]:
    """Per congestion control: the highest S whose every cell held, at that S and every lower S tested
    (``mode``: only that interface mode's cells, ``"<cc>-n<count>-<mode>"``).

    ``results`` maps ``"<inventory> loss <pct>% s<S>"`` to cells (``"<cc>-n<count>-<mode>"``) with a
    ``holds`` verdict, as ``bench/speedup.py`` writes them. Over every run in it (merged tables too),
    an S at which any of a control's cells failed, in any inventory or loss setting, stops the climb:
    ``auto`` never picks it nor anything above it.
    """
    best = {}
    for cc in ccs:
        ok = 1.0
        for s in sorted({_speedup_of(k) for k in results}):
            cells = [row for key, rows in results.items() if _speedup_of(key) == s
                     for cell, row in rows.items()
                     if cell.startswith(f"{cc}-") and (mode is None or cell.endswith(f"-{mode}"))]
            if not cells:
                continue  # not tested at this S: the next tested S decides
            if not all(r["holds"] for r in cells):
                break
            ok = s
        best[cc] = ok
    return best


def testbed_cores(doc: dict, s: float, mode: str | None = None) -> float | None:
    """What one testbed's heaviest cell used at ``s`` (cores, measured by ``bench/speedup.py`` with the levers on;
    the largest over the table's runs at that S), or None where the table has no such figure. ``mode``: the
    heaviest of that interface mode's cells (each cell's median over its samples)."""
    if mode is not None:
        cores = [row["cores"] for key, rows in doc.get("cells", {}).items() if _speedup_of(key) == s
                 for cell, row in rows.items() if cell.endswith(f"-{mode}") and row.get("cores") is not None]
        return max(cores) if cores else None
    peaks = [m["cores_peak_cell"] for key, m in doc.get("machine", {}).items()
             if "levers-off" not in key and _speedup_of(key) == s and m.get("cores_peak_cell") is not None]
    return max(peaks) if peaks else None


def sustained(doc: dict, s: float, testbeds: int, cpus: int, mode: str | None = None) -> str | None:
    """Why ``testbeds`` testbeds at ``s`` would overrun ``cpus`` cores (None: they fit, or nothing to weigh).

    The cells were validated on one testbed; K of them each need what the heaviest cell used, and together
    they may fill ``CPU_BUDGET`` of the machine. S = 1 and one testbed are what the table measured."""
    if s == 1 or testbeds == 1:
        return None
    one = testbed_cores(doc, s, mode)
    of = f"{mode} " if mode else ""
    if one is None:
        return f"S = {s:g}: the table has no CPU figure of its {of}cells to weigh {testbeds} testbeds against"
    if testbeds * one > CPU_BUDGET * cpus:
        return (f"S = {s:g}: {testbeds} testbeds x {one:.2f} cores (the heaviest {of}cell, measured) exceed "
                f"{CPU_BUDGET:g} of this machine's {cpus} cores")
    return None


def validated_speedup(ccs: list[str], table: Path, testbeds: int = 1,
                      cpus: int | None = None, mode: str | None = None) -> tuple[float, str]:
    """The highest S that held for every one of ``ccs`` in a ``bench/speedup.py`` table and that ``testbeds``
    copies sustain on ``cpus`` cores (default: this process's), and why. ``mode``: judged on that interface
    mode's cells only (their own CPU figures too), for a campaign that runs each mode at its own S.

    A congestion control the table does not cover runs at 1 (never an S nobody validated); a missing or
    unreadable table is a ``ConfigError`` naming it (run ``bench/speedup.py --out FILE``).
    """
    try:
        doc = json.loads(table.read_text())
        # Judged again from the cells when the table has them: a hand-edited "highest" cannot pick an S that failed.
        highest = (highest_holding(doc["cells"], sorted({c.split("-")[0] for rows in doc["cells"].values()
                                                          for c in rows}), mode)
                   if "cells" in doc else doc["highest"])
    except FileNotFoundError:
        raise ConfigError(f"no validation table at {table}: run `uv run python bench/speedup.py --out {table}` "
                          "on this machine first, or give a number", field="speedup") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{table}: not a bench/speedup.py table ({exc})", field="speedup") from None
    per_cc = {cc: float(highest.get(cc, 1.0)) for cc in ccs}
    s = min(per_cc.values())
    limiting = sorted(cc for cc, v in per_cc.items() if v == s)
    unvalidated = sorted(cc for cc in ccs if cc not in highest)
    why = f"highest validated S for {', '.join(limiting)}{f' on {mode}' if mode else ''} in {table}"
    if unvalidated:
        why += f" ({', '.join(unvalidated)} not validated there: 1)"
    n = cpus if cpus is not None else len(os.sched_getaffinity(0))
    # Every tested S up to the validated one held (``highest_holding``): step down until the testbeds fit.
    tested = {_speedup_of(k) for k in doc.get("cells", {})} | {1.0, s}
    reasons = {t: sustained(doc, t, testbeds, n, mode) for t in tested if t <= s}
    picked = max(t for t, reason in reasons.items() if reason is None)  # S = 1 always is
    over = [reason for t, reason in sorted(reasons.items(), reverse=True) if t > picked and reason]
    return picked, "; ".join([why, *over])
