"""E-UTRA operating bands and channel numbers (3GPP TS 36.101), for the bands srsRAN 4G knows.

The list of bands is srsRAN 4G's own (its ``lte_bands`` table in lib/src/phy/common/phy_common.c,
unchanged from 22.04 to 23.11); the numbers are TS 36.101's: table 5.5-1 (operating bands: uplink and
downlink frequency ranges) and table 5.7.3-1 (F_DL_low, N_Offs-DL and the N_DL range; the same for the
uplink). A carrier is centred on its EARFCN: F_DL = F_DL_low + 0.1 (N_DL - N_Offs-DL) MHz, and must fit
inside the band with half its channel bandwidth (table 5.6-1) on either side.

mplab renders FDD cells (srsenb 4G writes FDD frame structures): TDD and supplementary-downlink bands
are in the table so that an inventory naming one gets a reason, not "unknown band".
Pure arithmetic: nothing here touches a host.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

#: PRBs -> channel bandwidth (MHz), TS 36.101 table 5.6-1.
PRB_BANDWIDTH_MHZ: dict[int, float] = {6: 1.4, 15: 3.0, 25: 5.0, 50: 10.0, 75: 15.0, 100: 20.0}


@dataclass(frozen=True)
class Band:
    """One E-UTRA operating band: its downlink (and, for FDD, uplink) frequencies and channel numbers."""

    number: int
    duplex: Literal["FDD", "TDD", "SDL"]
    dl_low_mhz: float
    dl_high_mhz: float
    n_offs_dl: int
    ul_low_mhz: float | None = None
    ul_high_mhz: float | None = None
    n_offs_ul: int | None = None

    @property
    def dl_earfcns(self) -> tuple[int, int]:
        """The band's whole N_DL range (table 5.7.3-1)."""
        return self.n_offs_dl, self.n_offs_dl + round((self.dl_high_mhz - self.dl_low_mhz) * 10) - 1


def _fdd(n: int, dl: tuple[float, float], n_dl: int, ul: tuple[float, float], n_ul: int) -> Band:
    return Band(n, "FDD", dl[0], dl[1], n_dl, ul[0], ul[1], n_ul)


def _tdd(n: int, f: tuple[float, float], n_dl: int, duplex: Literal["TDD", "SDL"] = "TDD") -> Band:
    return Band(n, duplex, f[0], f[1], n_dl)


#: Every band of srsRAN 4G's table (its placeholder band 64 and the dummy 72 that bounds band 71 are not bands).
BANDS: dict[int, Band] = {b.number: b for b in (
    _fdd(1, (2110, 2170), 0, (1920, 1980), 18000),
    _fdd(2, (1930, 1990), 600, (1850, 1910), 18600),
    _fdd(3, (1805, 1880), 1200, (1710, 1785), 19200),
    _fdd(4, (2110, 2155), 1950, (1710, 1755), 19950),
    _fdd(5, (869, 894), 2400, (824, 849), 20400),
    _fdd(6, (875, 885), 2650, (830, 840), 20650),
    _fdd(7, (2620, 2690), 2750, (2500, 2570), 20750),
    _fdd(8, (925, 960), 3450, (880, 915), 21450),
    _fdd(9, (1844.9, 1879.9), 3800, (1749.9, 1784.9), 21800),
    _fdd(10, (2110, 2170), 4150, (1710, 1770), 22150),
    _fdd(11, (1475.9, 1495.9), 4750, (1427.9, 1447.9), 22750),
    _fdd(12, (729, 746), 5010, (699, 716), 23010),
    _fdd(13, (746, 756), 5180, (777, 787), 23180),
    _fdd(14, (758, 768), 5280, (788, 798), 23280),
    _fdd(17, (734, 746), 5730, (704, 716), 23730),
    _fdd(18, (860, 875), 5850, (815, 830), 23850),
    _fdd(19, (875, 890), 6000, (830, 845), 24000),
    _fdd(20, (791, 821), 6150, (832, 862), 24150),
    _fdd(21, (1495.9, 1510.9), 6450, (1447.9, 1462.9), 24450),
    _fdd(22, (3510, 3590), 6600, (3410, 3490), 24600),
    _fdd(23, (2180, 2200), 7500, (2000, 2020), 25500),
    _fdd(24, (1525, 1559), 7700, (1626.5, 1660.5), 25700),
    _fdd(25, (1930, 1995), 8040, (1850, 1915), 26040),
    _fdd(26, (859, 894), 8690, (814, 849), 26690),
    _fdd(27, (852, 869), 9040, (807, 824), 27040),
    _fdd(28, (758, 803), 9210, (703, 748), 27210),
    _tdd(29, (717, 728), 9660, "SDL"),
    _fdd(30, (2350, 2360), 9770, (2305, 2315), 27660),
    _fdd(31, (462.5, 467.5), 9870, (452.5, 457.5), 27760),
    _tdd(32, (1452, 1496), 9920, "SDL"),
    _tdd(33, (1900, 1920), 36000), _tdd(34, (2010, 2025), 36200), _tdd(35, (1850, 1910), 36350),
    _tdd(36, (1930, 1990), 36950), _tdd(37, (1910, 1930), 37550), _tdd(38, (2570, 2620), 37750),
    _tdd(39, (1880, 1920), 38250), _tdd(40, (2300, 2400), 38650), _tdd(41, (2496, 2690), 39650),
    _tdd(42, (3400, 3600), 41590), _tdd(43, (3600, 3800), 43590), _tdd(44, (703, 803), 45590),
    _tdd(45, (1447, 1467), 46590), _tdd(46, (5150, 5925), 46790), _tdd(47, (5855, 5925), 54540),
    _tdd(48, (3550, 3700), 55240), _tdd(49, (3550, 3700), 56740), _tdd(50, (1432, 1517), 58240),
    _tdd(51, (1427, 1432), 59090), _tdd(52, (3300, 3400), 59140),
    _fdd(65, (2110, 2200), 65536, (1920, 2010), 131072),
    _fdd(66, (2110, 2200), 66436, (1710, 1780), 131972),
    _tdd(67, (738, 758), 67336, "SDL"),
    _fdd(68, (753, 783), 67536, (698, 728), 132672),
    _tdd(69, (2570, 2620), 67836, "SDL"),
    _fdd(70, (1995, 2020), 68336, (1695, 1710), 132972),
    _fdd(71, (617, 652), 68586, (663, 698), 133122),
)}

#: Bands whose srsRAN 4G table entry puts the carrier elsewhere than TS 36.101: band 22's F_DL_low is
#: 3500 MHz there, 3510 MHz in the specification, so srsenb would transmit 10 MHz off the EARFCN's frequency.
SRSRAN_DISAGREES: dict[int, str] = {
    22: "srsRAN 4G's band table puts band 22 at 3500 MHz (TS 36.101: 3510 MHz), so srsenb would tune 10 MHz "
        "away from the EARFCN's frequency",
}


def fdd_band(number: int) -> Band:
    """The FDD band ``number``; ``ValueError`` naming why another band cannot carry an mplab cell."""
    band = BANDS.get(number)
    fdd = sorted(n for n, b in BANDS.items() if b.duplex == "FDD" and n not in SRSRAN_DISAGREES)
    if band is None:
        raise ValueError(f"band {number} is not an E-UTRA band srsRAN 4G knows; FDD bands mplab renders: "
                         f"{', '.join(map(str, fdd))}")
    if band.duplex != "FDD":
        raise ValueError(f"band {number} is a {band.duplex} band: mplab renders FDD cells only (bands "
                         f"{', '.join(map(str, fdd))})")
    if number in SRSRAN_DISAGREES:
        raise ValueError(f"band {number}: {SRSRAN_DISAGREES[number]}")
    return band


def earfcn_range(band: int, n_prb: int) -> tuple[int, int] | None:
    """Lowest and highest DL EARFCN whose carrier of ``n_prb`` PRBs fits inside ``band`` on both links
    (None when the band is narrower than the carrier)."""
    b = fdd_band(band)
    half_x10 = round(PRB_BANDWIDTH_MHZ[n_prb] / 2 * 10, 6)
    dl_width_x10 = round((b.dl_high_mhz - b.dl_low_mhz) * 10)
    assert b.ul_low_mhz is not None and b.ul_high_mhz is not None
    # The uplink carrier sits at the same offset into its own range; a narrower uplink (bands 66, 70) bounds it.
    width_x10 = min(dl_width_x10, round((b.ul_high_mhz - b.ul_low_mhz) * 10))
    lo, hi = b.n_offs_dl + math.ceil(half_x10), b.n_offs_dl + math.floor(width_x10 - half_x10)
    return (lo, hi) if lo <= hi else None


def check_earfcn(band: int, n_prb: int, dl_earfcn: int) -> None:
    """``ValueError`` naming the band's valid range unless ``dl_earfcn`` carries ``n_prb`` PRBs inside ``band``."""
    b = fdd_band(band)
    rng = earfcn_range(band, n_prb)
    mhz = PRB_BANDWIDTH_MHZ[n_prb]
    if rng is None:
        raise ValueError(f"lte.enb.n_prb: {n_prb} PRB ({mhz:g} MHz) does not fit in band {band} "
                         f"({b.dl_low_mhz:g}-{b.dl_high_mhz:g} MHz DL); use fewer PRBs or another band")
    lo, hi = rng
    if not lo <= dl_earfcn <= hi:
        raise ValueError(f"lte.enb.dl_earfcn: {dl_earfcn} is outside band {band} for n_prb {n_prb} "
                         f"(valid: {lo}..{hi}; band {band} is {b.dl_low_mhz:g}-{b.dl_high_mhz:g} MHz DL, "
                         f"EARFCN {b.dl_earfcns[0]}..{b.dl_earfcns[1]})")


def dl_freq_mhz(band: int, dl_earfcn: int) -> float:
    """Downlink centre frequency of ``dl_earfcn`` (MHz)."""
    b = BANDS[band]
    return round(b.dl_low_mhz + 0.1 * (dl_earfcn - b.n_offs_dl), 1)


def ul_earfcn(band: int, dl_earfcn: int) -> int:
    """The paired uplink EARFCN (same offset into the band)."""
    b = fdd_band(band)
    assert b.n_offs_ul is not None
    return dl_earfcn - b.n_offs_dl + b.n_offs_ul


def ul_freq_mhz(band: int, dl_earfcn: int) -> float:
    """Uplink centre frequency paired with ``dl_earfcn`` (MHz)."""
    b = fdd_band(band)
    assert b.ul_low_mhz is not None
    return round(b.ul_low_mhz + 0.1 * (dl_earfcn - b.n_offs_dl), 1)
