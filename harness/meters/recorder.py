"""The recorder: polls every meter concurrently and integrates energy over windows.

One thread per meter polls at the configured rate and keeps the full trace. A
reading that fails is recorded as a fault (time and reason) and the meter is
reopened; energy over a window that contains a gap longer than ``gap_factor``
poll periods, or a fault, is flagged rather than silently integrated across it.
"""
from __future__ import annotations

import bisect
import logging
import threading
import time
from dataclasses import dataclass

from harness.errors import MeterError
from harness.meters.base import Meter, Reading

log = logging.getLogger("mplab.meters")


@dataclass(frozen=True)
class Fault:
    wall_s: float
    reason: str


@dataclass(frozen=True)
class WindowEnergy:
    """Energy over one window of one meter."""

    energy_j: float | None
    mean_power_w: float | None
    n_readings: int
    max_gap_s: float | None
    #: Empty when the energy can be trusted; otherwise reasons ("meter-gap ...", "meter-fault ...").
    flags: tuple[str, ...]
    #: The device's own counter difference over the window (Wh), when it has one.
    counter_wh: float | None


def integrate(readings: list[Reading], t0: float, t1: float) -> tuple[float, int, float]:
    """Trapezoidal energy (J) of ``readings`` (sorted by ``wall_s``) over [t0, t1].

    Window edges are interpolated linearly between the readings either side. Returns
    (energy_j, readings inside, largest gap between consecutive points in seconds).
    """
    if t1 <= t0:
        raise ValueError(f"empty window [{t0}, {t1}]")
    ts = [r.wall_s for r in readings]
    if not ts or ts[0] > t0 or ts[-1] < t1:
        raise ValueError("readings do not cover the window")

    def at(t: float) -> float:
        i = bisect.bisect_left(ts, t)
        if ts[i] == t:
            return readings[i].watts
        a, b = readings[i - 1], readings[i]
        return a.watts + (b.watts - a.watts) * (t - a.wall_s) / (b.wall_s - a.wall_s)

    lo = bisect.bisect_right(ts, t0)
    hi = bisect.bisect_left(ts, t1)
    pts = [(t0, at(t0))] + [(readings[i].wall_s, readings[i].watts) for i in range(lo, hi)] + [(t1, at(t1))]
    energy = 0.0
    gap = 0.0
    for (ta, pa), (tb, pb) in zip(pts, pts[1:]):
        energy += (pa + pb) / 2 * (tb - ta)
        gap = max(gap, tb - ta)
    # The gap that matters is between real readings, so measure from the readings either side of each edge.
    real = ts[max(0, lo - 1):min(len(ts), hi + 1)]
    for a, b in zip(real, real[1:]):
        gap = max(gap, b - a)
    return energy, hi - lo, gap


class _Track:
    def __init__(self, name: str, meter: Meter) -> None:
        self.name = name
        self.meter = meter
        self.readings: list[Reading] = []
        self.faults: list[Fault] = []
        self.lock = threading.Lock()


class Recorder:
    """Polls meters concurrently at ``rate_hz`` and answers energy questions about any window.

    Example:
        >>> with Recorder({"n1": meter}, rate_hz=10) as rec:     # doctest: +SKIP
        ...     t0 = time.time(); work(); t1 = time.time()
        ...     rec.wait_covered(t1); rec.energy("n1", t0, t1)
    """

    def __init__(self, meters: dict[str, Meter], rate_hz: float | None = None, gap_factor: float = 3.0) -> None:
        self.rate_hz = rate_hz or min(m.max_rate_hz for m in meters.values())
        self.period_s = 1.0 / self.rate_hz
        self.gap_factor = gap_factor
        self._tracks = {n: _Track(n, m) for n, m in meters.items()}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Start one polling thread per meter (meters must already be open)."""
        for track in self._tracks.values():
            t = threading.Thread(target=self._loop, args=(track,), name=f"meter-{track.name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop polling and close the meters."""
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        for track in self._tracks.values():
            track.meter.close()

    def _loop(self, track: _Track) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            try:
                r = track.meter.poll()
                with track.lock:
                    track.readings.append(r)
            except MeterError as exc:
                with track.lock:
                    track.faults.append(Fault(time.time(), str(exc)))
                log.warning("meter %s: %s; reopening", track.name, exc)
                self._reopen(track)
            next_t += self.period_s
            delay = next_t - time.monotonic()
            if delay < 0:  # the device is slower than the rate: poll back to back, do not burst
                next_t = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def _reopen(self, track: _Track) -> None:
        track.meter.close()
        try:
            track.meter.open()
        except MeterError as exc:
            with track.lock:
                track.faults.append(Fault(time.time(), f"reopen failed: {exc}"))
            self._stop.wait(min(1.0, 5 * self.period_s))

    def trace(self, name: str, t0: float | None = None, t1: float | None = None) -> list[Reading]:
        """A copy of the readings of meter ``name`` (optionally between t0 and t1, wall clock)."""
        track = self._tracks[name]
        with track.lock:
            rs = list(track.readings)
        if t0 is not None:
            rs = [r for r in rs if r.wall_s >= t0]
        if t1 is not None:
            rs = [r for r in rs if r.wall_s <= t1]
        return rs

    def faults(self, name: str, t0: float, t1: float) -> list[Fault]:
        track = self._tracks[name]
        with track.lock:
            return [f for f in track.faults if t0 <= f.wall_s <= t1]

    def wait_covered(self, t: float, timeout_s: float | None = None) -> bool:
        """Wait until every meter has a reading after wall time ``t`` (or a fault after it)."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else 3 * self.period_s + 1.5)
        while time.monotonic() < deadline:
            if all(self._covered(tr, t) for tr in self._tracks.values()):
                return True
            time.sleep(self.period_s / 4)
        return False

    @staticmethod
    def _covered(track: _Track, t: float) -> bool:
        with track.lock:
            return bool((track.readings and track.readings[-1].wall_s >= t) or
                        (track.faults and track.faults[-1].wall_s >= t))

    def energy(self, name: str, t0: float, t1: float) -> WindowEnergy:
        """Energy of meter ``name`` over wall-clock window [t0, t1], with flags for anything untrustworthy."""
        track = self._tracks[name]
        with track.lock:
            readings = list(track.readings)
        flags = [f"meter-fault at +{f.wall_s - t0:.2f} s: {f.reason}" for f in self.faults(name, t0, t1)]
        try:
            e, n, gap = integrate(readings, t0, t1)
        except ValueError as exc:
            return WindowEnergy(None, None, 0, None, tuple(flags + [f"meter-gap: {exc}"]), None)
        if gap > self.gap_factor * self.period_s:
            flags.append(f"meter-gap: {gap:.2f} s without a reading (poll period {self.period_s:.2f} s)")
        counter = None
        inside = [r for r in readings if t0 <= r.wall_s <= t1 and r.counter_wh is not None]
        if len(inside) >= 2:
            counter = inside[-1].counter_wh - inside[0].counter_wh
        return WindowEnergy(e, e / (t1 - t0), n, gap, tuple(flags), counter)

    def discard_before(self, t: float) -> None:
        """Forget readings and faults older than wall time ``t`` (after they have been saved)."""
        for track in self._tracks.values():
            with track.lock:
                i = bisect.bisect_left([r.wall_s for r in track.readings], t)
                # keep one reading before t so that a window starting at t can be interpolated
                del track.readings[:max(0, i - 1)]
                track.faults = [f for f in track.faults if f.wall_s >= t]
