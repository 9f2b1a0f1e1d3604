"""The cell's PUCCH, PRACH and SI-scheduling parameters for each bandwidth, by srsRAN 4G's own rules.

srsenb keeps running on a cell it cannot serve: with a PUCCH region that leaves no room for Msg3 at 6 PRB
it prints "Invalid PUCCH configuration: nrb_pucch=2 does not allow space for Msg3 transmission", its MAC
refuses the cell, and yet S1 Setup succeeds and UEs see the cell and never attach. So mplab derives these
values per bandwidth (``derive``) and checks them, and any sib.conf/rr.conf it reads back, against the
rules srsenb applies (``violations``), before anything is pushed. The rules, as in srsRAN 4G 22.04-23.11:

- PUCCH size: ``nrb_pucch = max(sched_request_cnfg.nof_prb, pucch_cnfg.n_rb_cqi)`` (srsenb/src/stack/rrc/rrc.cc).
- 6 PRB: ``nrb_pucch <= 1``, or no PRBs are left for Msg3 (srsenb/src/stack/mac/sched_helpers.cc,
  ``sched_cell_params_t::set_cfg``); the PRACH must fit: ``prach_freq_offset + 6 <= 6``. srsenb "patches"
  a larger offset to 0 with an ERROR line (srsenb/src/enb_cfg_parser.cc); mplab writes 0.
- more than 6 PRB: the PRACH sits between the two PUCCH regions:
  ``nrb_pucch <= prach_freq_offset`` and ``prach_freq_offset + 6 <= n_prb - nrb_pucch`` (both files).
- SI scheduling (TS 36.331 5.2.3, srsenb's bc_sched): every SI message gets its own window, one after the
  other within the shortest SI periodicity; srsenb refuses a window of 0 ms.

mplab's values: the PUCCH region of srsRAN's example sib.conf (``n_rb_cqi = 1``, one SR PRB) at 6 PRB, two
CQI PRBs from 15 PRB up (room for more UEs' periodic CQI: srsenb puts at most 12 users on one PRB and
subframe); the PRACH right next to the lower PUCCH region (lowest legal offset).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: SI window lengths (ms) and SI periodicities (radio frames) sib.conf may name (TS 36.331 SIB1).
SI_WINDOWS_MS = (1, 2, 5, 10, 15, 20, 40)
SI_PERIODS_FRAMES = (8, 16, 32, 64, 128, 256, 512)
PRACH_PRB = 6


@dataclass(frozen=True)
class CellParams:
    """What sib.conf and rr.conf say about the cell's uplink control region and system information."""

    n_prb: int
    n_rb_cqi: int
    sr_nof_prb: int
    prach_freq_offset: int
    si_window_ms: int = 20
    si_periods_frames: tuple[int, ...] = (16,)

    @property
    def nrb_pucch(self) -> int:
        """PRBs at each band edge srsenb keeps for PUCCH."""
        return max(self.sr_nof_prb, self.n_rb_cqi)


def derive(n_prb: int) -> CellParams:
    """mplab's parameters for a cell of ``n_prb`` PRBs (they pass ``violations``)."""
    if n_prb == 6:
        return CellParams(n_prb, n_rb_cqi=1, sr_nof_prb=1, prach_freq_offset=0)
    n_rb_cqi = 2
    return CellParams(n_prb, n_rb_cqi=n_rb_cqi, sr_nof_prb=1, prach_freq_offset=n_rb_cqi)


def violations(p: CellParams) -> list[str]:
    """Each srsRAN rule ``p`` breaks, as a line naming the value and the range that would work."""
    out = []
    if p.n_prb == 6:
        if p.nrb_pucch > 1:
            out.append(f"6 PRB: nrb_pucch = max(n_rb_cqi {p.n_rb_cqi}, sched_request nof_prb {p.sr_nof_prb}) = "
                       f"{p.nrb_pucch} does not allow space for Msg3 (srsenb: 'Invalid PUCCH configuration'); "
                       "use n_rb_cqi = 1 and nof_prb = 1")
        if p.prach_freq_offset + PRACH_PRB > p.n_prb:
            out.append(f"6 PRB: prach_freq_offset {p.prach_freq_offset} puts the PRACH outside the cell (use 0)")
    else:
        lo, hi = p.nrb_pucch, p.n_prb - p.nrb_pucch - PRACH_PRB
        if not lo <= p.prach_freq_offset <= hi:
            where = f"a value between {lo} and {hi}" if lo <= hi else "none fits: shrink the PUCCH region"
            out.append(f"{p.n_prb} PRB: prach_freq_offset {p.prach_freq_offset} collides with PUCCH "
                       f"(nrb_pucch {p.nrb_pucch} at each edge); use {where}")
    if p.si_window_ms not in SI_WINDOWS_MS:
        out.append(f"si_window_length {p.si_window_ms} ms is not one of {SI_WINDOWS_MS}")
    bad = [t for t in p.si_periods_frames if t not in SI_PERIODS_FRAMES]
    if bad:
        out.append(f"si_periodicity {bad} not among {SI_PERIODS_FRAMES}")
    elif p.si_periods_frames and len(p.si_periods_frames) * p.si_window_ms > min(p.si_periods_frames) * 10:
        out.append(f"{len(p.si_periods_frames)} SI message(s) x {p.si_window_ms} ms windows do not fit in the "
                   f"shortest SI period ({min(p.si_periods_frames) * 10} ms)")
    return out


def _int(text: str, key: str, where: str) -> int:
    m = re.search(rf"^\s*{key}\s*=\s*(-?\d+)\s*;", text, re.MULTILINE)
    if m is None:
        raise ValueError(f"{where}: no '{key} = <number>;'")
    return int(m.group(1))


def read_back(n_prb: int, sib_conf: str, rr_conf: str) -> CellParams:
    """The parameters a rendered (or hand-edited) sib.conf and rr.conf give a cell of ``n_prb`` PRBs."""
    periods = tuple(int(v) for v in re.findall(r"^\s*si_periodicity\s*=\s*(\d+)\s*;", sib_conf, re.MULTILINE))
    sr = re.search(r"sched_request_cnfg\s*=\s*\{(?P<body>[^}]*)\}", rr_conf)
    return CellParams(n_prb, n_rb_cqi=_int(sib_conf, "n_rb_cqi", "sib.conf"),
                      sr_nof_prb=_int(sr.group("body") if sr else "", "nof_prb", "rr.conf sched_request_cnfg"),
                      prach_freq_offset=_int(sib_conf, "prach_freq_offset", "sib.conf"),
                      si_window_ms=_int(sib_conf, "si_window_length", "sib.conf"), si_periods_frames=periods)

