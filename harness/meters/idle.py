"""Waiting until receivers are idle again, and measuring the radio tail on the way.

A radio stays in a high-power state for a while after its last byte (LTE: ~11.6 s in the
emulated profile, and as long on a real modem). A sample that starts before the previous
sample's tail has ended is charged for it: its energy then depends on what ran before. So
between samples the runner waits until every receiver reads its idle power again, and the
energy from the end of a receiver's transfer window until that moment is its sample's
``tail_energy_j`` (docs/records.md). Where the testbed owns the tail (the emulated power
model: ``Testbed.skip_tails``), the runner fast-forwards it first and this wait only confirms
that the meters read idle power, from the fast-forward on.

Idle means: the mean power over the last ``hold_s`` is within ``tolerance_w`` of the
receiver's idle power. The idle power comes from the testbed when it knows it (emulated:
the profile's base power) or else from the meter itself (the lowest ``hold_s`` mean seen in
the session, first measured before the first sample). When the testbed says how long a tail
lasts (``expected_s``: the profile's tail), polling starts only then; everything is bounded
by a deadline, after which the records are flagged ``tail-unsettled``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from harness.meters.recorder import Recorder


@dataclass(frozen=True)
class IdleSettings:
    """How idleness is judged."""

    #: Mean power within this of the idle power counts as idle (W).
    tolerance_w: float = 0.05
    #: Window of that mean (s): long enough to smooth meter noise, short next to an LTE tail.
    hold_s: float = 0.5
    #: Longest wait after the end of a transfer (s); beyond it the records are flagged.
    timeout_s: float = 30.0


@dataclass(frozen=True)
class IdleResult:
    """When a receiver was idle again after a transfer that ended at ``since`` (wall time)."""

    receiver: str
    since: float
    idle_at: float
    settled: bool
    reference_w: float | None

    @property
    def wait_s(self) -> float:
        """How long after the end of the transfer window the receiver was idle again."""
        return max(0.0, self.idle_at - self.since)


class IdleWaiter:
    """Waits for receivers to read their idle power; remembers measured idle powers across samples."""

    def __init__(self, recorder: Recorder, settings: IdleSettings = IdleSettings(),
                 known_w: dict[str, float | None] | None = None) -> None:
        self.recorder = recorder
        self.settings = settings
        self.known_w = dict(known_w or {})
        #: Idle power learnt from the meter (lowest hold-window mean seen) where the testbed gives none.
        self.learnt_w: dict[str, float] = {}

    def reference_w(self, name: str) -> float | None:
        known = self.known_w.get(name)
        return known if known is not None else self.learnt_w.get(name)

    def _mean_w(self, name: str, t1: float) -> float | None:
        e = self.recorder.energy(name, t1 - self.settings.hold_s, t1)
        return e.mean_power_w

    def learn(self, names: list[str]) -> None:
        """Measure the idle power of receivers the testbed knows none for (call while they are idle)."""
        todo = [n for n in names if self.known_w.get(n) is None]
        if not todo:
            return
        # Meters that started just now have no hold window behind them yet: measure the first full one
        # (learning nothing here left the idle power unknown and every later wait ran to its deadline).
        first = self.recorder.wait_first()
        t1 = max(time.time(), (first or 0.0) + self.settings.hold_s)
        self.recorder.wait_covered(t1, max(0.0, t1 - time.time()) + 3 * self.recorder.period_s + 1.5)
        for n in todo:
            self._learn(n, t1)

    def _learn(self, name: str, t1: float) -> None:
        mean = self._mean_w(name, t1)
        if mean is not None and (name not in self.learnt_w or mean < self.learnt_w[name]):
            self.learnt_w[name] = mean

    def wait(self, since: dict[str, float], expected_s: float = 0.0) -> dict[str, IdleResult]:
        """Wait until each receiver in ``since`` (name -> end of its transfer window) is idle again.

        Each receiver is judged on its own readings from its own window end on (the recorder keeps
        them), so one that finished early is found idle when it was, not when the slowest one is.

        Args:
            since: wall time each receiver's transfer window ended.
            expected_s: how long the testbed expects the tail to last (0: unknown, look at once).

        Returns:
            Per receiver: when it was idle again (the start of the first hold window whose mean
            power is within the tolerance), or ``settled=False`` at the deadline.
        """
        s = self.settings
        step = max(self.recorder.period_s, 0.05)
        out: dict[str, IdleResult] = {}
        cursor = {name: t_end + expected_s for name, t_end in since.items()}
        deadline = max(since.values()) + max(s.timeout_s, expected_s + 5 * s.hold_s)
        while cursor:
            delay = min(cursor.values()) + s.hold_s - time.time()
            if delay > 0:
                time.sleep(min(delay, max(0.0, deadline - time.time())) or step)
            now = time.time()
            self.recorder.wait_covered(now)
            for name in list(cursor):
                ref = self.reference_w(name)
                t = cursor[name]
                while ref is not None and t + s.hold_s <= now:
                    mean = self._mean_w(name, t + s.hold_s)
                    if mean is not None and mean <= ref + s.tolerance_w:
                        out[name] = IdleResult(name, since[name], t, True, ref)
                        if self.known_w.get(name) is None:
                            self._learn(name, t + s.hold_s)
                        del cursor[name]
                        break
                    t += step
                else:
                    cursor[name] = t
            if cursor and now > deadline:
                for name in cursor:
                    out[name] = IdleResult(name, since[name], now, False, self.reference_w(name))
                break
        return out
