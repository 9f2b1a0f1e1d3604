"""The power model of an emulated receiver.

P = P0 + sum over radios of (theta_r + b_r * x_r while radio r is active), with an
optional promotion phase when a radio wakes up and a tail after its traffic stops, and
an optional extra cost while both radios carry data (``both``: theta + b * total).
Constants come from the inventory's power profile (by default Huang et al.'s LTE and
WiFi downlink coefficients on top of an assumed board base power). Everything this
model produces is labelled emulated wherever it is recorded.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

from harness.config.metering import RADIOS, PowerProfile, RadioPower


@dataclass
class _RadioState:
    active: bool = False
    promotion_until: float = float("-inf")
    last_active: float = float("-inf")


@dataclass
class PowerModel:
    """Turns per-radio throughput over time into board power; feed it samples in time order."""

    profile: PowerProfile
    _state: dict[str, _RadioState] = field(default_factory=lambda: {r: _RadioState() for r in RADIOS})

    def _radio_mw(self, spec: RadioPower, st: _RadioState, now_s: float, rate_mbit: float) -> float:
        busy = rate_mbit > self.profile.active_threshold_mbit
        if busy:
            if not st.active and now_s - st.last_active > spec.tail_s and spec.promotion_s > 0:
                st.promotion_until = now_s + spec.promotion_s  # woke from idle: pay the promotion
            st.active = True
            st.last_active = now_s
            if now_s < st.promotion_until:
                return spec.promotion_mw + spec.mw_per_mbit * rate_mbit
            return spec.active_mw + spec.mw_per_mbit * rate_mbit
        st.active = False
        if now_s < st.promotion_until:
            return spec.promotion_mw
        if now_s - st.last_active <= spec.tail_s:
            return spec.tail_mw
        return 0.0

    def power_w(self, now_s: float, rates_mbit: dict[str, float]) -> float:
        """Board power at ``now_s`` given each radio's downlink+uplink throughput (Mbit/s)."""
        mw = 0.0
        for radio in RADIOS:
            spec: RadioPower = getattr(self.profile, radio)
            mw += self._radio_mw(spec, self._state[radio], now_s, rates_mbit.get(radio, 0.0))
        both = self.profile.both
        if both is not None and all(rates_mbit.get(r, 0.0) > self.profile.active_threshold_mbit for r in RADIOS):
            mw += both.active_mw + both.mw_per_mbit * sum(rates_mbit.get(r, 0.0) for r in RADIOS)
        return self.profile.base_w + mw / 1000.0

    def tail_remaining(self, now_s: float, step_s: float = 1e-3) -> tuple[float, float]:
        """What the tail still holds if nothing moves from ``now_s`` on: (seconds until idle, joules).

        Replays this model's own rules on a copy at ``step_s`` (a millisecond: the tails are
        seconds long), so the figure is the one the device would have shown by waiting, base power
        included (as a waited tail's ``tail_energy_j``). Leaves this model untouched.
        """
        sim = copy.deepcopy(self)
        t, joules = now_s, 0.0
        limit = now_s + 2 * max(self.profile.wifi.tail_s + self.profile.wifi.promotion_s,
                                self.profile.lte.tail_s + self.profile.lte.promotion_s) + 1.0
        while t < limit:
            p = sim.power_w(t, {})
            if p <= self.profile.base_w:
                break
            joules += p * step_s
            t += step_s
        return t - now_s, joules

    def reset(self) -> None:
        """Every radio idle, as long after its last traffic as a waited-out tail leaves it."""
        self._state = {r: _RadioState() for r in RADIOS}
