"""Every bandwidth and band srsRAN 4G supports: the rendered cell obeys srsenb's PUCCH/PRACH/SI rules, and
each EARFCN is checked against its band (TS 36.101) with the valid range in the error."""
from __future__ import annotations

import io
import re

import libconf
import pytest
import yaml

from harness.config.bands import BANDS, PRB_BANDWIDTH_MHZ, earfcn_range, fdd_band
from harness.config.inventory import Inventory, load_inventory
from harness.errors import ConfigError
from lte import cell
from lte.render import check_cell_files, render_srsenb
from rigs.ltelab import lab_data

PRBS = (6, 15, 25, 50, 75, 100)

#: srsRAN 4G 23.04's lte_bands[] (lib/src/phy/common/phy_common.c), FDD entries: band -> (fd_low_mhz,
#: dl_earfcn_offset, ul_earfcn_offset, duplex_mhz). srsenb derives the UL EARFCN and both frequencies from these.
SRSRAN_FDD = {1: (2110, 0, 18000, 190), 2: (1930, 600, 18600, 80), 3: (1805, 1200, 19200, 95),
              4: (2110, 1950, 19950, 400), 5: (869, 2400, 20400, 45), 6: (875, 2650, 20650, 45),
              7: (2620, 2750, 20750, 120), 8: (925, 3450, 21450, 45), 9: (1844.9, 3800, 21800, 95),
              10: (2110, 4150, 22150, 400), 11: (1475.9, 4750, 22750, 48), 12: (729, 5010, 23010, 30),
              13: (746, 5180, 23180, -31), 14: (758, 5280, 23280, -30), 17: (734, 5730, 23730, 30),
              18: (860, 5850, 23850, 45), 19: (875, 6000, 24000, 45), 20: (791, 6150, 24150, -41),
              21: (1495.9, 6450, 24450, 48), 22: (3500, 6600, 24600, 100), 23: (2180, 7500, 25500, 180),
              24: (1525, 7700, 25700, -101.5), 25: (1930, 8040, 26040, 80), 26: (859, 8690, 26690, 45),
              27: (852, 9040, 27040, 45), 28: (758, 9210, 27210, 55), 30: (2350, 9770, 27660, 45),
              31: (462.5, 9870, 27760, 10), 65: (2110, 65536, 131072, 190), 66: (2110, 66436, 131972, 400),
              68: (753, 67536, 132672, 55), 70: (1995, 68336, 132972, 300), 71: (617, 68586, 133122, -46)}
#: Its TDD and supplementary-downlink entries (no uplink offset).
SRSRAN_OTHER = {29, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 67, 69}
FDD = sorted(b for b in SRSRAN_FDD if b != 22)


def test_band_table_covers_srsran_and_agrees_with_its_offsets():
    assert set(BANDS) == set(SRSRAN_FDD) | SRSRAN_OTHER
    for n, (fd_low, dl_offs, ul_offs, duplex) in SRSRAN_FDD.items():
        b = BANDS[n]
        assert b.duplex == "FDD" and (b.n_offs_dl, b.n_offs_ul) == (dl_offs, ul_offs), n
        if n != 22:                                   # srsRAN's band 22 is 10 MHz off TS 36.101
            assert b.dl_low_mhz == fd_low and b.ul_low_mhz == pytest.approx(fd_low - duplex), n
    assert all(BANDS[n].duplex in ("TDD", "SDL") for n in SRSRAN_OTHER)


@pytest.mark.parametrize("band, n_dl", [(1, (0, 599)), (3, (1200, 1949)), (7, (2750, 3449)), (8, (3450, 3799)),
                                        (20, (6150, 6449)), (28, (9210, 9659)), (66, (66436, 67335)),
                                        (71, (68586, 68935))])
def test_band_earfcn_ranges_are_ts_36_101s(band, n_dl):
    assert BANDS[band].dl_earfcns == n_dl


def _inv(band: int, n_prb: int, dl_earfcn: int) -> Inventory:
    data = lab_data()
    data["lte"]["enb"].update(band=band, n_prb=n_prb, dl_earfcn=dl_earfcn)
    return Inventory.model_validate(data)


def _cases():
    for band in FDD:
        for n_prb in PRBS:
            rng = earfcn_range(band, n_prb)
            if rng is not None:
                yield band, n_prb, rng


@pytest.mark.parametrize("band, n_prb, rng", list(_cases()))
def test_every_band_and_bandwidth_renders_a_cell_srsenb_accepts(band, n_prb, rng):
    lo, hi = rng
    fd_low, dl_offs, ul_offs, duplex = SRSRAN_FDD[band]
    for earfcn in (lo, hi):
        files = {f.path.rsplit("/", 1)[-1]: f.text for f in render_srsenb(_inv(band, n_prb, earfcn))}
        sib, rr = libconf.load(io.StringIO(files["sib.conf"])), libconf.load(io.StringIO(files["rr.conf"]))
        pucch = sib["sib2"]["rr_config_common_sib"]["pucch_cnfg"]
        prach = sib["sib2"]["rr_config_common_sib"]["prach_cnfg"]["prach_cnfg_info"]["prach_freq_offset"]
        nrb_pucch = max(pucch["n_rb_cqi"], rr["phy_cnfg"]["sched_request_cnfg"]["nof_prb"])
        # srsenb's own checks (sched_helpers.cc, enb_cfg_parser.cc), written out again independently
        if n_prb == 6:
            assert nrb_pucch <= 1 and prach == 0
        else:
            assert nrb_pucch <= prach and prach + 6 <= n_prb - nrb_pucch
        assert rr["cell_list"][0]["ul_earfcn"] == ul_offs + (earfcn - dl_offs)   # srsran_band_ul_earfcn()
        # the carrier's edges lie inside the band on both links
        half = PRB_BANDWIDTH_MHZ[n_prb] / 2
        f_dl = fd_low + 0.1 * (earfcn - dl_offs)
        b = BANDS[band]
        assert b.dl_low_mhz <= f_dl - half + 1e-9 and f_dl + half <= b.dl_high_mhz + 1e-9
        f_ul = f_dl - duplex
        assert b.ul_low_mhz <= f_ul - half + 1e-9 and f_ul + half <= b.ul_high_mhz + 1e-9
        assert f"{round(f_dl, 1)} MHz DL / {round(f_ul, 1)} MHz UL" in files["enb.conf"]


@pytest.mark.parametrize("n_prb", PRBS)
def test_derived_parameters_pass_and_planted_ones_fail(n_prb):
    good = cell.derive(n_prb)
    assert cell.violations(good) == []
    if n_prb == 6:
        planted = cell.CellParams(6, n_rb_cqi=2, sr_nof_prb=1, prach_freq_offset=0)
        assert "does not allow space for Msg3" in cell.violations(planted)[0]
        assert "outside the cell" in cell.violations(cell.CellParams(6, 1, 1, prach_freq_offset=4))[0]
    else:
        under = cell.CellParams(n_prb, n_rb_cqi=2, sr_nof_prb=1, prach_freq_offset=1)
        over = cell.CellParams(n_prb, n_rb_cqi=2, sr_nof_prb=1, prach_freq_offset=n_prb - 7)
        for bad in (under, over):
            assert re.search(rf"collides with PUCCH .*use a value between 2 and {n_prb - 8}",
                             cell.violations(bad)[0])


def test_planted_n_rb_cqi_2_at_6_prb_in_the_rendered_file_is_refused():
    files = render_srsenb(_inv(7, 6, 3100))
    sib = next(f for f in files if f.path.endswith("sib.conf"))
    assert re.search(r"n_rb_cqi = 1;", sib.text)
    planted = [type(f)(f.machine, f.path, re.sub(r"n_rb_cqi = 1;", "n_rb_cqi = 2;", f.text))
               if f is sib else f for f in files]
    with pytest.raises(ConfigError, match=r"nrb_pucch = max\(n_rb_cqi 2, sched_request nof_prb 1\) = 2 does not "
                                          r"allow space for Msg3"):
        check_cell_files(6, planted)


def test_si_windows_must_fit_the_si_period():
    p = cell.CellParams(25, 2, 1, 2, si_window_ms=40, si_periods_frames=(8, 8, 8))
    assert "do not fit in the shortest SI period (80 ms)" in cell.violations(p)[-1]
    assert "not one of" in cell.violations(cell.CellParams(25, 2, 1, 2, si_window_ms=3))[0]


def _load(tmp_path, data):
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_inventory(p)


@pytest.mark.parametrize("enb, match", [
    ({"band": 3, "dl_earfcn": 1100}, r"dl_earfcn: 1100 is outside band 3 for n_prb 50 \(valid: 1250..1900; band 3 "
                                     r"is 1805-1880 MHz DL, EARFCN 1200..1949\)"),
    ({"band": 20, "dl_earfcn": 6160, "n_prb": 100}, r"outside band 20 for n_prb 100 \(valid: 6250..6350"),
    ({"band": 6, "dl_earfcn": 2700, "n_prb": 100}, r"n_prb: 100 PRB \(20 MHz\) does not fit in band 6"),
    ({"band": 38, "dl_earfcn": 38000}, r"band 38 is a TDD band: mplab renders FDD cells only"),
    ({"band": 99, "dl_earfcn": 38000},
     r"band 99 is not an E-UTRA band srsRAN 4G knows; FDD bands mplab renders: 1, 2, 3"),
    ({"band": 22, "dl_earfcn": 7000}, r"band 22: srsRAN 4G's band table puts band 22 at 3500 MHz"),
    ({"band": 66, "dl_earfcn": 67300}, r"valid: 66486..67086"),       # the 70 MHz uplink bounds band 66
])
def test_bad_band_or_earfcn_refused_with_the_valid_range(tmp_path, enb, match):
    data = lab_data()
    data["lte"]["enb"].update(enb)
    with pytest.raises(ConfigError, match=match) as ei:
        _load(tmp_path, data)
    assert ei.value.exit_code == 2


@pytest.mark.parametrize("band", [3, 7, 20])
def test_common_lab_bands_accepted(tmp_path, band):
    lo, hi = earfcn_range(band, 50)
    data = lab_data()
    data["lte"]["enb"].update(band=band, dl_earfcn=(lo + hi) // 2)
    assert _load(tmp_path, data).lte.enb.band == fdd_band(band).number
