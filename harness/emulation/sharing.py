"""How an emulated access network shares its downlink among the receivers active on it.

Pure functions, no kernel: given the stations active on one access network right now
(each with its own link rate when alone, ``r_i``) they return each station's rate. The
radio loop (``harness.emulation.radiolink``) applies them to the HTB classes on the AP's
and the eNB's downlinks as stations start and finish; the calibration
(``harness.emulation.calibration``) runs the same functions in a fluid simulation of a
sample to predict what the testbed will measure.

Models (MP-SDN's capacity models, docs/reference/papers.md §5.1):

``dcf`` (WiFi default)
    802.11 DCF gives every backlogged station the same number of transmissions, so
    every station gets the same throughput ``x = 1 / sum(1/r_i)`` and the AP's total is
    ``N / sum(1/r_i)``: one slow station slows everyone (the performance anomaly).
``airtime`` (WiFi)
    Airtime fairness: each station gets ``1/N`` of the time, ``x_i = r_i / N``.
``proportional-fair`` (LTE default)
    In a static channel PF settles on equal time shares, i.e. throughput proportional to
    link quality: ``x_i = C(N) * r_i / sum(r_j)``, capped at ``r_i``.
``equal`` (LTE)
    Equal throughput (round robin in bytes): max-min fair split of ``C(N)``, capped at ``r_i``.

Every model is capped by the access network's capacity ``C(N)``, which may depend on
the number ``N`` of active stations (``capacity_by_active``: scheduler and contention
overhead; the calibrated ``paper-lab`` cell needs it). A receiver active on both radios
gets ``coexistence_factor`` times its share on each (in-device interference between a
2.4 GHz WiFi dongle and a band-7 LTE modem: the same airtime or PRBs carry fewer bits);
a table of factors by the number of receivers active on both is accepted too.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

WifiSharing = Literal["dcf", "airtime"]
LteSharing = Literal["proportional-fair", "equal"]
Sharing = Literal["dcf", "airtime", "proportional-fair", "equal"]
SHARING_MODELS: tuple[str, ...] = ("dcf", "airtime", "proportional-fair", "equal")


@dataclass(frozen=True)
class AccessNetwork:
    """One access network as the sharing models see it."""

    sharing: Sharing
    capacity_mbit: float
    #: Capacity with exactly N stations active (N -> Mbit/s); counts outside the table use the nearest entry.
    capacity_by_active: Mapping[int, float] | None = None

    def capacity(self, n_active: int) -> float:
        """``C(N)``: the network's total with ``n_active`` stations active."""
        table = self.capacity_by_active
        if not table or n_active <= 0:
            return self.capacity_mbit
        if n_active in table:
            return table[n_active]
        nearest = min(table, key=lambda k: (abs(k - n_active), k))
        return table[nearest]


def _water_fill(total: float, caps: dict[str, float], weights: dict[str, float]) -> dict[str, float]:
    """Split ``total`` in proportion to ``weights``, none above its cap; what a capped one leaves goes to the rest."""
    out: dict[str, float] = {}
    left = dict(caps)
    remaining = total
    while left:
        wsum = sum(weights[s] for s in left)
        if wsum <= 0:
            break
        capped = {s for s in left if remaining * weights[s] / wsum >= left[s]}
        if not capped:
            for s in left:
                out[s] = remaining * weights[s] / wsum
            return out
        for s in capped:
            out[s] = left.pop(s)
            remaining -= out[s]
    for s in left:
        out[s] = 0.0
    return out


def share_rates(net: AccessNetwork, link_mbit: Mapping[str, float]) -> dict[str, float]:
    """Each active station's rate (Mbit/s) on ``net``.

    Args:
        net: the access network (model and capacity).
        link_mbit: the active stations, each with its own link rate when alone (``r_i``, > 0).

    Returns:
        station -> rate; the rates never exceed ``r_i`` and their sum never exceeds ``C(N)``.
    """
    active = {s: r for s, r in link_mbit.items() if r > 0}
    n = len(active)
    if n == 0:
        return {s: 0.0 for s in link_mbit}
    cap = net.capacity(n)
    if net.sharing == "dcf":
        x = 1.0 / sum(1.0 / r for r in active.values())
        x = min(x, cap / n)
        out = {s: x for s in active}
    elif net.sharing == "airtime":
        out = {s: r / n for s, r in active.items()}
        total = sum(out.values())
        if total > cap:
            out = {s: x * cap / total for s, x in out.items()}
    elif net.sharing == "proportional-fair":
        out = _water_fill(min(cap, sum(active.values())), dict(active), dict(active))
    elif net.sharing == "equal":
        out = _water_fill(min(cap, sum(active.values())), dict(active), {s: 1.0 for s in active})
    else:
        raise ValueError(f"unknown sharing model {net.sharing!r} (known: {', '.join(SHARING_MODELS)})")
    return {s: out.get(s, 0.0) for s in link_mbit}


def coexistence(factor: float | Mapping[int, float], n_both: int) -> float:
    """The coexistence factor with ``n_both`` receivers active on both radios (a table: nearest entry)."""
    if isinstance(factor, (int, float)):
        return float(factor)
    if not factor:
        return 1.0
    return factor[min(factor, key=lambda k: (abs(k - n_both), k))]


def radio_rates(wifi: AccessNetwork, lte: AccessNetwork, wifi_link: Mapping[str, float],
                lte_link: Mapping[str, float], active: Mapping[str, frozenset[str]],
                coexistence_factor: float | Mapping[int, float] = 1.0) -> dict[str, dict[str, float]]:
    """Rates of every receiver on both access networks, given which radios each has active.

    Args:
        wifi, lte: the two access networks.
        wifi_link, lte_link: every receiver's link rate alone on each.
        active: receiver -> the radios ("wifi", "lte") carrying its data now.
        coexistence_factor: share kept on each radio by a receiver active on both; a table
            (receivers active on both -> factor) when it depends on how many are.

    Returns:
        receiver -> {"wifi": Mbit/s, "lte": Mbit/s} (0 for an inactive radio).
    """
    w = share_rates(wifi, {s: wifi_link[s] for s, radios in active.items() if "wifi" in radios})
    lt = share_rates(lte, {s: lte_link[s] for s, radios in active.items() if "lte" in radios})
    out = {}
    k_both = coexistence(coexistence_factor, sum(1 for radios in active.values() if len(radios) == 2))
    for s, radios in active.items():
        k = k_both if len(radios) == 2 else 1.0
        out[s] = {"wifi": w.get(s, 0.0) * k, "lte": lt.get(s, 0.0) * k}
    return out


@dataclass(frozen=True)
class FluidResult:
    """What a fluid simulation of one sample predicts for one receiver."""

    duration_s: float
    mbit: dict[str, float]  # per radio

    @property
    def throughput_mbit(self) -> float:
        return sum(self.mbit.values()) / self.duration_s


def simulate_sample(file_mbit: float, receivers: list[str], mode: str, wifi: AccessNetwork, lte: AccessNetwork,
                    wifi_link: Mapping[str, float], lte_link: Mapping[str, float],
                    coexistence_factor: float | Mapping[int, float] = 1.0,
                    efficiency: Mapping[str, float] | None = None,
                    ) -> dict[str, FluidResult]:
    """Every receiver pulls ``file_mbit`` at once in ``mode``; rates re-shared whenever one finishes.

    ``efficiency`` (per mode, default 1) scales each receiver's rates: payload per link bit
    and what the transport achieves of its share (measured by ``bench/fidelity.py``).
    """
    radios = {"wifi": frozenset({"wifi"}), "lte": frozenset({"lte"}), "both": frozenset({"wifi", "lte"})}[mode]
    eff = (efficiency or {}).get(mode, 1.0)
    left = {r: file_mbit for r in receivers}
    moved = {r: {"wifi": 0.0, "lte": 0.0} for r in receivers}
    done: dict[str, float] = {}
    t = 0.0
    while left:
        rates = radio_rates(wifi, lte, wifi_link, lte_link, {r: radios for r in left}, coexistence_factor)
        total = {r: eff * sum(rates[r].values()) for r in left}
        if any(v <= 0 for v in total.values()):
            raise ValueError(f"a receiver gets no rate in mode {mode}: {total}")
        dt = min(left[r] / total[r] for r in left)
        for r in list(left):
            for radio in ("wifi", "lte"):
                moved[r][radio] += eff * rates[r][radio] * dt
            left[r] -= total[r] * dt
            if left[r] <= file_mbit * 1e-9:
                done[r] = t + dt
                del left[r]
        t += dt
    return {r: FluidResult(done[r], moved[r]) for r in receivers}
