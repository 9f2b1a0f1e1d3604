"""The recorder: polls every meter concurrently and integrates energy over windows.

One thread per meter polls at the configured rate (the slowest device's limit by
default) and keeps the full trace. A reading that fails is recorded as a fault
(when the failed poll started, when it gave up, and why) and the meter is reopened,
with a growing back-off while it stays away. Energy over a window that overlaps a
fault, or contains a gap longer than ``gap_factor`` poll periods, is flagged rather
than silently integrated across it (for an integrating device, only a gap that the window's
edges cut: ``judged_gap``). An optional sink (``TraceWriter``) receives every
reading and fault as it happens, so nothing recorded is lost if the process dies.
"""
from __future__ import annotations

import bisect
import csv
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from harness.errors import MeterError
from harness.meters.base import Meter, Reading

log = logging.getLogger("mplab.meters")


@dataclass(frozen=True)
class Fault:
    """A failed poll: it started at ``since_s`` and gave up at ``wall_s`` (wall clock)."""

    wall_s: float
    reason: str
    since_s: float | None = None

    def overlaps(self, t0: float, t1: float) -> bool:
        start = self.since_s if self.since_s is not None else self.wall_s
        return start <= t1 and self.wall_s >= t0


#: Called from the polling threads with (meter name, Reading or Fault).
Sink = Callable[[str, "Reading | Fault"], None]


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
    #: How much of ``energy_j`` rests on where, inside the readings' intervals that straddle the window's
    #: edges, the power changed (J, ``edge_uncertainty``): small when a reading is pinned at each edge,
    #: larger when a pin came late (a busy machine). None when the energy is unknown.
    edge_j: float | None = None


def integrate(readings: list[Reading], t0: float, t1: float) -> tuple[float, int, float]:
    """Trapezoidal energy (J) of ``readings`` (sorted by ``wall_s``) over [t0, t1].

    Window edges are interpolated linearly between the readings either side. Returns
    (energy_j, readings inside, largest stretch of the window without a reading, in seconds: between
    consecutive readings inside it, or between an edge and the nearest reading inside).
    """
    ts, lo, hi = _window(readings, t0, t1)

    def at(t: float) -> float:
        i = bisect.bisect_left(ts, t)
        if ts[i] == t:
            return readings[i].watts
        a, b = readings[i - 1], readings[i]
        return a.watts + (b.watts - a.watts) * (t - a.wall_s) / (b.wall_s - a.wall_s)

    pts = [(t0, at(t0))] + [(readings[i].wall_s, readings[i].watts) for i in range(lo, hi)] + [(t1, at(t1))]
    energy = 0.0
    gap = 0.0
    for (ta, pa), (tb, pb) in zip(pts, pts[1:]):
        energy += (pa + pb) / 2 * (tb - ta)
        gap = max(gap, tb - ta)
    # Only the part of the window without a reading counts: from t0 to the first reading inside it, between
    # readings, from the last one to t1 (the points above). A meter that was away *before* the window and back
    # just after t0 left the window uncovered only until its first reading; measuring from the last reading
    # before the outage flagged a restored meter's next sample with the whole outage (e.g. 37 s).
    return energy, hi - lo, gap


def integrate_means(readings: list[Reading], t0: float, t1: float) -> tuple[float, int, float]:
    """Energy (J) over [t0, t1] of readings that are each the mean power since the previous one.

    An integrating device (``Meter.interval_mean``) answers with its mean over (previous reading,
    this reading]; that mean is held over its interval and cut at the window's edges, so the energy
    between two readings is exactly what the device integrated. Returns what ``integrate`` returns.
    """
    ts, lo, hi = _window(readings, t0, t1)
    edges = [t0] + ts[lo:hi] + [t1]
    # Each stretch (a, b] is covered by the first reading at or after b: the one whose mean spans it.
    energy = sum(readings[bisect.bisect_left(ts, b)].watts * (b - a) for a, b in zip(edges, edges[1:]))
    return energy, hi - lo, max(b - a for a, b in zip(edges, edges[1:]))


def judged_gap(readings: list[Reading], t0: float, t1: float, interval_mean: bool, gap: float) -> float:
    """The stretch without a reading that decides a window's ``meter-gap`` flag (s); ``gap`` is what the
    integration returned (the window's longest stretch without a reading).

    A meter that reports instantaneous power (``integrate``) leaves the power unknown over a stretch without
    readings: the whole ``gap`` counts. An integrating device (``Meter.interval_mean``) answers each poll with
    its exact mean since the previous one, so a late poll inside the window loses nothing: the energy of the
    stretch arrives with the next reading. Only the intervals that the window's edges cut rest on an
    assumption (where inside them the power changed, ``edge_uncertainty``), so only those count: the reading
    interval around ``t0`` and around ``t1`` (0 for an edge with a reading on it).
    """
    if not interval_mean:
        return gap
    ts = [r.wall_s for r in readings]
    cut = []
    for te in (t0, t1):
        i = bisect.bisect_left(ts, te)  # ts[i - 1] < te <= ts[i] (the window is covered: _window)
        cut.append(0.0 if ts[i] == te or i == 0 else ts[i] - ts[i - 1])
    return max(cut)


def edge_uncertainty(readings: list[Reading], t0: float, t1: float) -> float:
    """The energy (J) of a window over [t0, t1] that depends on where the power changed near its edges.

    An edge te inside the interval between two readings (a, b] is placed by assumption: a held mean
    (``integrate_means``) or a straight line (``integrate``) splits the interval's energy at te in
    proportion. If the power stepped inside the interval instead, the split is off by at most
    x·y/(x+y)·ΔP, with x = te - a, y = b - te and ΔP the power's range over the readings around the
    interval (the one before, the one covering it, the one after). A reading exactly at the edge
    gives 0; a pin that came 10 ms late after a step gives about 10 ms x ΔP.

    The two readings that bound the interval are themselves placed only to within their poll's round trip
    (``Reading.time_unsure_s``: the device measured between the poll and the receipt), so each adds that
    long x ΔP: on a loaded machine a reply that waited 3 ms to be read moves a 0.25 s window's energy by
    about 1 % at a 2 W step. The sum over both edges.
    """
    ts, _, _ = _window(readings, t0, t1)
    total = 0.0
    for te in (t0, t1):
        i = bisect.bisect_left(ts, te)  # ts[i - 1] < te <= ts[i]
        near = [r.watts for r in readings[max(i - 1, 0):i + 2]]
        dp = max(near) - min(near)
        if ts[i] != te and i > 0:
            x, y = te - ts[i - 1], ts[i] - te
            total += x * y / (x + y) * dp
        total += sum(r.time_unsure_s for r in readings[max(i - 1, 0):i + 1]) * dp
    return total


def _window(readings: list[Reading], t0: float, t1: float) -> tuple[list[float], int, int]:
    """The readings' times, and the index range of those strictly inside (t0, t1); ``ValueError`` when the
    window is empty or the readings do not reach both of its edges."""
    if t1 <= t0:
        raise ValueError(f"empty window [{t0}, {t1}]")
    ts = [r.wall_s for r in readings]
    if not ts or ts[0] > t0 or ts[-1] < t1:
        raise ValueError("readings do not cover the window")
    return ts, bisect.bisect_right(ts, t0), bisect.bisect_left(ts, t1)


class _Track:
    def __init__(self, name: str, meter: Meter) -> None:
        self.name = name
        self.meter = meter
        self.readings: list[Reading] = []
        self.faults: list[Fault] = []
        self.reconnects = 0
        self.lock = threading.Lock()
        #: Set to poll at once (``Recorder.poll_now``) or to stop.
        self.wake = threading.Event()


class Recorder:
    """Polls meters concurrently at ``rate_hz`` and answers energy questions about any window.

    Example:
        >>> with Recorder({"n1": meter}, rate_hz=10) as rec:     # doctest: +SKIP
        ...     t0 = time.time(); work(); t1 = time.time()
        ...     rec.wait_covered(t1); rec.energy("n1", t0, t1)
    """

    def __init__(self, meters: dict[str, Meter], rate_hz: float | None = None, gap_factor: float = 3.0,
                 sink: Sink | None = None, max_backoff_s: float = 2.0) -> None:
        if not meters:
            raise MeterError("no meters to record")
        self.rate_hz = rate_hz or min(m.max_rate_hz for m in meters.values())
        self.period_s = 1.0 / self.rate_hz
        self.gap_factor = gap_factor
        self.sink = sink
        #: The first failure of the sink (then it is no longer called); owners raise it after the run.
        self.sink_error: str | None = None
        #: ... and the exception itself (a full disk is told apart from other failures).
        self.sink_exception: Exception | None = None
        self.max_backoff_s = max_backoff_s
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
        for track in self._tracks.values():
            track.wake.set()
        for t in self._threads:
            t.join(timeout=5)
        for track in self._tracks.values():
            track.meter.close()

    def _emit(self, track: _Track, item: Reading | Fault) -> None:
        with track.lock:
            (track.readings if isinstance(item, Reading) else track.faults).append(item)
        if self.sink is not None and self.sink_error is None:
            try:
                self.sink(track.name, item)
            except Exception as exc:  # noqa: BLE001 - the recording in memory goes on; the owner must check
                self.sink_error = f"trace sink failed for meter {track.name}: {exc}"
                self.sink_exception = exc
                log.error("%s", self.sink_error)

    def _loop(self, track: _Track) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            since = time.time()
            try:
                self._emit(track, track.meter.poll())
            except Exception as exc:  # noqa: BLE001 - a driver bug must become a fault, not a dead thread
                reason = str(exc) if isinstance(exc, MeterError) else f"{type(exc).__name__}: {exc}"
                self._emit(track, Fault(time.time(), reason, since))
                log.warning("meter %s: %s; reopening", track.name, reason)
                self._reopen(track)
                next_t = time.monotonic()
            next_t += self.period_s
            delay = next_t - time.monotonic()
            if delay < 0:  # the device is slower than the rate: poll back to back, do not burst
                next_t = time.monotonic()
                delay = 0
            if track.wake.wait(delay) and not self._stop.is_set():
                track.wake.clear()  # polled now (poll_now): the regular schedule restarts from here
                next_t = time.monotonic()

    def _reopen(self, track: _Track) -> None:
        """Reconnect until the meter answers again (or the recorder stops), backing off while it stays away."""
        backoff = self.period_s
        down_since = time.time()
        while not self._stop.is_set():
            track.meter.close()
            since = time.time()
            try:
                track.meter.open()
            except MeterError as exc:
                self._emit(track, Fault(time.time(), f"reopen failed: {exc}", since))
                self._stop.wait(backoff)
                backoff = min(self.max_backoff_s, backoff * 2)
                continue
            track.reconnects += 1
            log.warning("meter %s: reconnected after %.1f s", track.name, time.time() - down_since)
            return

    def poll_now(self, names: Sequence[str] | None = None) -> None:
        """Poll every meter (or those of ``names``) at once, off the regular schedule (then the schedule
        restarts from that poll).

        The runner calls it at the edges of what it measures (a transfer's release, first data and exit, a
        tail's fast-forward): a reading there pins the edge, so the part of a poll period the window cuts off
        does not depend on the poll rate. That lets the poll rate stay low at a speed-up.
        """
        for name, track in self._tracks.items():
            if names is None or name in names:
                track.wake.set()

    def stats(self) -> dict[str, dict]:
        """Per meter: readings, faults and reconnects so far, and the achieved poll rate (Hz)."""
        out = {}
        for name, track in self._tracks.items():
            with track.lock:
                rs = track.readings
                span = rs[-1].mono_s - rs[0].mono_s if len(rs) >= 2 else 0.0
                out[name] = {"readings": len(rs), "faults": len(track.faults), "reconnects": track.reconnects,
                             "rate_hz": (len(rs) - 1) / span if span > 0 else None}
        return out

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
        """Faults of meter ``name`` whose failed poll overlaps [t0, t1]."""
        track = self._tracks[name]
        with track.lock:
            return [f for f in track.faults if f.overlaps(t0, t1)]

    def wait_covered(self, t: float, timeout_s: float | None = None) -> bool:
        """Wait until every meter has a reading after wall time ``t`` (or a fault after it)."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else 3 * self.period_s + 1.5)
        while time.monotonic() < deadline:
            if all(self._covered(tr, t) for tr in self._tracks.values()):
                return True
            time.sleep(self.period_s / 4)
        return False

    def wait_first(self, timeout_s: float = 5.0) -> float | None:
        """Wait until every meter has a reading; the wall time from which all are covered (None: timed out)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            firsts = []
            for tr in self._tracks.values():
                with tr.lock:
                    if tr.readings:
                        firsts.append(tr.readings[0].wall_s)
            if len(firsts) == len(self._tracks):
                return max(firsts)
            time.sleep(self.period_s / 4)
        return None

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
        if len(flags) > 5:  # a long outage: keep the first ones, count the rest
            flags = flags[:5] + [f"meter-fault: {len(flags) - 5} more"]
        try:
            e, n, gap = (integrate_means if track.meter.interval_mean else integrate)(readings, t0, t1)
        except ValueError as exc:
            return WindowEnergy(None, None, 0, None, tuple(flags + [f"meter-gap: {exc}"]), None)
        judged = judged_gap(readings, t0, t1, track.meter.interval_mean, gap)
        if judged > self.gap_factor * self.period_s:
            at = " across an edge of the window" if track.meter.interval_mean else ""
            flags.append(f"meter-gap: {judged:.2f} s without a reading{at} (poll period {self.period_s:.2f} s)")
        counter = None
        inside = [r for r in readings if t0 <= r.wall_s <= t1 and r.counter_wh is not None]
        if len(inside) >= 2:
            counter = inside[-1].counter_wh - inside[0].counter_wh
        return WindowEnergy(e, e / (t1 - t0), n, gap, tuple(flags), counter, edge_uncertainty(readings, t0, t1))

    def discard_before(self, t: float) -> None:
        """Forget readings and faults older than wall time ``t`` (after they have been saved)."""
        for track in self._tracks.values():
            with track.lock:
                i = bisect.bisect_left([r.wall_s for r in track.readings], t)
                # keep one reading before t so that a window starting at t can be interpolated
                del track.readings[:max(0, i - 1)]
                track.faults = [f for f in track.faults if f.wall_s >= t]


class TraceWriter:
    """A sink that appends every reading and fault to one CSV file as it arrives (thread-safe).

    Columns: receiver, meter_kind, wall_s, mono_s, volts, amps, watts, device_watts,
    counter_wh, fault (empty for a reading; the reason for a fault, whose wall_s is
    when it gave up and mono_s empty), polled_wall_s (when the poll went out; empty for a
    pushed reading or a fault).
    """

    COLUMNS = ("receiver", "meter_kind", "wall_s", "mono_s", "volts", "amps", "watts", "device_watts",
               "counter_wh", "fault", "polled_wall_s")

    def __init__(self, path: Path, kinds: dict[str, str]) -> None:
        self.path = Path(path)
        self.kinds = kinds
        self._lock = threading.Lock()
        self._f: IO[str] = open(self.path, "w", newline="", buffering=1)  # noqa: SIM115 - kept open for the recording, closed in close()
        self._w = csv.writer(self._f)
        self._w.writerow(self.COLUMNS)
        self.rows = 0

    def __call__(self, name: str, item: Reading | Fault) -> None:
        if isinstance(item, Reading):
            row = [name, self.kinds.get(name, ""), f"{item.wall_s:.6f}", f"{item.mono_s:.6f}", f"{item.volts:.4f}",
                   f"{item.amps:.5f}", f"{item.watts:.6f}", _opt(item.device_watts, ".3f"),
                   _opt(item.counter_wh, ".3f"), "", _opt(item.polled_wall_s, ".6f")]
        else:
            row = [name, self.kinds.get(name, ""), f"{item.wall_s:.6f}", "", "", "", "", "", "", item.reason, ""]
        with self._lock:
            self._w.writerow(row)
            self.rows += 1

    def close(self) -> None:
        with self._lock:
            if not self._f.closed:
                self._f.close()


def _opt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)
