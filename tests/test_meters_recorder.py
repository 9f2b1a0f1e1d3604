"""The recorder: trapezoidal energy, a known transfer's energy through the real protocol, and faults."""
from __future__ import annotations

import csv
import time

import pytest
from meter_devices import DeviceProcess, default_profile, script_start

from harness.config.inventory import RadioPower
from harness.meters.base import Reading
from harness.meters.drivers import open_meter
from harness.meters.emulated import SCRIPT_STEP_S, Device, ScriptRates
from harness.meters.recorder import (Recorder, TraceWriter, edge_uncertainty, integrate, integrate_means,
                                     judged_gap)
from harness.emulation.speedup import METER_HZ, POLL_CAP_HZ, scale_profile


def _r(t: float, w: float) -> Reading:
    return Reading(t, t, 5.0, w / 5.0, w)


def test_integrate_trapezoid_with_interpolated_edges_is_exact_on_piecewise_linear_power():
    rs = [_r(0.0, 1.0), _r(1.0, 3.0), _r(2.0, 3.0), _r(4.0, 1.0)]
    # window [0.5, 3.0]: 0.5..1 (2 -> 3): 1.25; 1..2: 3; 2..3 (3 -> 2): 2.5
    e, n, gap = integrate(rs, 0.5, 3.0)
    assert e == pytest.approx(1.25 + 3.0 + 2.5)
    assert n == 2
    assert gap == pytest.approx(1.0)  # 1..2 inside, and 2..3 (the window ends before the next reading, at 4)


def test_a_meter_restored_just_after_the_window_starts_is_not_flagged_with_its_outage():
    """A meter away for 37 s before a sample and reading again 0.05 s into its window: the window lacked a
    reading for 0.05 s only, so no meter-gap (it used to say "meter-gap: 37.05 s", the outage before the
    window). Restored 2 s into the window, the flag says 2 s, the part of the window without readings."""
    period = 0.1
    before = [_r(t * period, 2.0) for t in range(0, 100)]           # until 9.9 s
    t0 = 9.9 + 37.0

    def after(start: float) -> list[Reading]:
        return [_r(start + i * period, 3.0) for i in range(60)]

    _, _, gap = integrate(before + after(t0 + 0.05), t0, t0 + 3.0)
    assert gap == pytest.approx(0.1)
    _, _, gap = integrate(before + after(t0 + 2.0), t0, t0 + 3.0)
    assert gap == pytest.approx(2.0)


def test_integrate_means_holds_each_mean_over_its_interval_and_cuts_it_at_the_edges():
    # an integrating device: 2 W over (0, 1], 4 W over (1, 2], 1 W over (2, 4]
    rs = [_r(0.0, 9.0), _r(1.0, 2.0), _r(2.0, 4.0), _r(4.0, 1.0)]
    e, n, gap = integrate_means(rs, 0.5, 3.0)
    assert e == pytest.approx(0.5 * 2.0 + 4.0 + 1.0)  # the first reading's own value (9 W) is no interval's
    assert n == 2 and gap == pytest.approx(1.0)
    # a reading that comes late (the recorder starved): its mean covers the stretch, and the gap says so
    _, _, gap = integrate_means([_r(0.0, 1.0), _r(0.1, 1.0), _r(2.1, 1.0), _r(2.2, 1.0)], 0.05, 2.15)
    assert gap == pytest.approx(2.0)
    with pytest.raises(ValueError, match="do not cover"):
        integrate_means(rs, -1.0, 3.0)


def test_an_integrating_meters_late_poll_inside_the_window_is_no_gap_but_one_cut_by_an_edge_is():
    """2 W, then 6 W from t = 1: readings every 0.1 s but none in (0.5, 1.5] (the recorder starved). An
    integrating device's reading at 1.5 carries the mean over (0.5, 1.5], so the window [0.25, 1.75] is exact and
    judged without a gap; an instantaneous meter's same stretch is unknown power, so its gap counts. A
    window whose edge falls inside the stretch is judged by it for both."""
    ts = [round(0.1 * k, 3) for k in range(6)] + [round(1.5 + 0.1 * k, 3) for k in range(6)]
    means = [_r(t, 2.0 if t <= 0.5 else (2.0 * 0.5 + 6.0 * 0.5) / 1.0 if t == 1.5 else 6.0) for t in ts]
    e, _, gap = integrate_means(means, 0.25, 1.75)
    assert e == pytest.approx(2.0 * 0.75 + 6.0 * 0.75)                     # what the device integrated
    assert gap == pytest.approx(1.0)                                         # the longest stretch, still reported
    assert judged_gap(means, 0.25, 1.75, True, gap) == pytest.approx(0.1)  # only the edges' intervals
    assert judged_gap(means, 0.25, 1.75, False, gap) == pytest.approx(1.0)
    _, _, gap = integrate_means(means, 1.0, 1.8)                         # t0 inside the stretch
    assert judged_gap(means, 1.0, 1.8, True, gap) == pytest.approx(1.0)
    _, _, gap = integrate_means(means, 0.25, 1.0)                        # t1 inside it
    assert judged_gap(means, 0.25, 1.0, True, gap) == pytest.approx(1.0)
    assert judged_gap(means, 0.5, 1.5, True, 1.0) == 0.0                 # readings on both edges: nothing cut


def test_edge_uncertainty_is_the_most_a_step_inside_the_straddling_interval_can_move_the_energy():
    """2 W until a step to 6 W at t = 1; an integrating device polled every 0.1 s, the reading meant for the
    step's edge 30 ms late. Held uniform over (0.9, 1.03], that reading's mean dilutes the window's start:
    the window [1, 2] reads 0.0923 J low, and that is exactly x·y/(x+y)·ΔP = 0.1·0.03/0.13·4 (a step at the
    edge is the worst case). Pinned on the edge, nothing is unsure."""
    def readings(pin: float) -> list[Reading]:
        rs = [_r(0.9, 2.0), _r(pin, (2.0 * (1.0 - 0.9) + 6.0 * (pin - 1.0)) / (pin - 0.9))]
        return rs + [_r(round(1.1 + 0.1 * k, 3), 6.0) for k in range(11)]
    late = readings(1.03)
    e, _, _ = integrate_means(late, 1.0, 2.0)
    assert 6.0 - e == pytest.approx(0.1 * 0.03 / 0.13 * 4.0)
    assert edge_uncertainty(late, 1.0, 2.0) == pytest.approx(6.0 - e)
    on_time = readings(1.0 + 1e-9)
    assert edge_uncertainty(on_time, 1.0, 2.0) < 1e-6
    assert integrate_means(on_time, 1.0, 2.0)[0] == pytest.approx(6.0)
    # flat power: wherever the edge falls, nothing is unsure
    assert edge_uncertainty([_r(0.05 * k, 3.0) for k in range(60)], 0.33, 2.01) == 0.0


def test_a_reply_read_late_is_covered_by_the_edge_uncertainty_through_its_polls_round_trip():
    """A loaded machine's case, seen in a loaded `make test` (the S = 8 window read 3.03 % low with 2.43 %
    announced): the device measures when it answers the poll, but the reading is stamped when its reply has
    been read, which can be milliseconds later. A window of 0.25 s at 6 W in 2 W, polled at 10 Hz with pins
    40 ms after each step, replies read 0.3 ms late mostly and up to 8 ms late sometimes, one poll at a time:
    the energy's error must never exceed the edge uncertainty. Without the polls' times the uncertainty
    misses the error in many of the same sequences (by up to 2 % of the window)."""
    import dataclasses
    import random
    p0, p1, t0, t1 = 2.0, 6.0, 10.0, 10.25

    def truth(a: float, b: float) -> float:
        return p0 * (b - a) + (p1 - p0) * max(0.0, min(b, t1) - max(a, t0))

    rng = random.Random(1)
    kept = old_under = 0
    worst_old = 0.0
    for _ in range(3000):
        phase = rng.uniform(0, 0.1)
        taus = sorted([9.6 + phase + 0.1 * k for k in range(12)]
                      + [t0 + 0.04 + rng.uniform(0, 0.01), t1 + 0.04 + rng.uniform(0, 0.01)])
        rs = []
        for a, b in zip(taus, taus[1:]):   # measured at b, over (a, b]; polled 0.2 ms before, read d after
            late = rng.choice([0.0003, 0.0003, 0.0003, rng.uniform(0, 0.008)])
            w = truth(a, b) / (b - a)
            rs.append(Reading(0.0, b + late, 5.0, w / 5.0, w, polled_wall_s=b - 0.0002))
        if any(r.wall_s >= nxt.polled_wall_s for r, nxt in zip(rs, rs[1:])):
            continue   # one poll at a time: the next goes out after the last reply was read
        kept += 1
        err = abs(integrate_means(rs, t0, t1)[0] - truth(t0, t1))
        assert err <= edge_uncertainty(rs, t0, t1) + 1e-12, rs
        unpolled = [dataclasses.replace(r, polled_wall_s=None) for r in rs]
        old_under += err > edge_uncertainty(unpolled, t0, t1) + 1e-12
        worst_old = max(worst_old, err - edge_uncertainty(unpolled, t0, t1))
    assert kept > 2000
    assert old_under > kept // 10 and worst_old > 0.01 * truth(t0, t1)


def test_a_scripted_device_changes_its_power_exactly_when_its_script_does():
    """The emulated device steps its power model every SCRIPT_STEP_S, and a step breaks at each script
    entry: a transfer that starts between two steps is metered from its start, not from the next step (at
    S = 8, 5 ms of idle power at the start of a 0.25 s window is 2 % of its energy; beside a loaded machine's
    late pins that once took the S = 8 energy past what its edges announce)."""
    profile = default_profile(lte=RadioPower(active_mw=1000.0, mw_per_mbit=0.0))   # no promotion, no tail
    dev = Device(profile, script=ScriptRates([]), noise_ma=0.0, noise_mv=0.0)
    start = dev.t + 1.0
    end = start + 0.25
    dev.script = ScriptRates([[start + dev.wall_offset, {"lte": 10.0}], [end + dev.wall_offset, {}]])
    dev.tick(start - 0.6 * SCRIPT_STEP_S)         # the device's last step before the start: it starts between two
    e0 = dev.energy_j(start)                      # idle power held up to the start
    dev.tick(end)
    e1 = dev.energy_j(end)
    # (wall times near 1.8e9 s carry about 2e-7 s of rounding; a missed step is 2e-3 J here)
    assert e1 - e0 == pytest.approx((profile.base_w + 1.0) * 0.25, rel=1e-6)
    dev.tick(end + 1.0)
    assert dev.energy_j(end + 1.0) - e1 == pytest.approx(profile.base_w, rel=1e-6)   # idle from the end on


def _speedup_transfer_j(tmp_path, s: float, rate_hz: float, late_s: float = 0.0) -> tuple[float, float, tuple, dict]:
    """One scripted WiFi + LTE transfer worth 2 s in testbed time, on a device at speed-up ``s``, polled at
    ``rate_hz`` with readings pinned at its start and end as the runner pins them (``late_s`` after each);
    its energy and the energy its edges leave unsure (``edge_uncertainty``) in testbed time (J x S), the
    flags, and the recorder's stats."""
    profile = scale_profile(default_profile(), s)
    start = script_start()  # the device is up by then
    end = start + 2.0 / s
    script = [[start, {"lte": 12.0 * s, "wifi": 20.0 * s}], [end, {"lte": 0.0, "wifi": 0.0}]]
    with DeviceProcess(tmp_path, f"s{s:g}", profile=profile, script=script, noise_ma=0.2, noise_mv=1.0) as dev:
        meter = open_meter("emulated-um25c", dev.link, rate_hz=rate_hz)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            time.sleep(max(0.0, start + late_s - time.time()))
            rec.poll_now()
            time.sleep(max(0.0, end + late_s - time.time()))
            rec.poll_now()
            time.sleep(0.3)
            assert rec.wait_covered(end)
            e = rec.energy("n1", start, end)
            stats = rec.stats()["n1"]
    return e.energy_j * s, e.edge_j * s, e.flags, stats


@pytest.mark.machine  # holds a 0.25 s window to 1 %: run alone (see `make test`)
def test_energy_at_speedup_8_with_capped_polls_is_the_energy_at_1(tmp_path):
    """The recorder polls at POLL_CAP_HZ at S = 8 (not 80 Hz): the same transfer's energy must still be the
    S = 1 energy. Point readings at the capped rate, or no pinned edges, lose 2-4 % (measured): the device
    answers its mean since the last poll, and the edges are pinned.

    Among three other workers' testbeds and two busy loops it read 3.3 % low (13.87 J against 14.34 J): a
    pin that comes late after the device's step takes a diluted mean, and at S = 8 the window is 0.25 s, so
    10 ms of scheduling delay is 3 %. That is the speed-up's limit on a busy machine, and the recorder
    measures it: ``edge_j`` is the most a late pin can move the energy. So the S = 8 energy must be the S = 1
    energy within 1 % plus what both windows' edges leave unsure, never further off unannounced."""
    e1, edge1, flags1, _ = _speedup_transfer_j(tmp_path, 1, METER_HZ)
    e8, edge8, flags8, stats8 = _speedup_transfer_j(tmp_path, 8, POLL_CAP_HZ)
    assert flags1 == () and flags8 == ()
    assert abs(e8 - e1) <= 0.01 * e1 + edge1 + edge8, (e8, e1, edge1, edge8)
    assert stats8["rate_hz"] <= 1.5 * POLL_CAP_HZ  # capped: 8 x 10 Hz would be 80


@pytest.mark.machine  # pins 40 ms late on purpose: the rest must still answer within milliseconds
def test_pins_late_by_40_ms_at_speedup_8_are_announced_by_the_edge_uncertainty(tmp_path):
    """The busy machine's case made certain: both pins 40 ms after the device's steps. The energy reads low
    (the first reading's mean is diluted by idle power; the last holds idle power past the end) by as
    much as 4 %, less when a regular poll (every 50 ms) falls between a step and its pin (2.1 % once).
    Whatever it is, the edges' uncertainty covers it, and a loss over 3 % is never left below the 3 %
    at which the runner flags a speed-up sample (``speedup-lag``)."""
    e1, edge1, _, _ = _speedup_transfer_j(tmp_path, 1, METER_HZ)
    e8, edge8, _, _ = _speedup_transfer_j(tmp_path, 8, POLL_CAP_HZ, late_s=0.04)
    assert abs(e1 - e8) <= 0.01 * e1 + edge1 + edge8, (e8, e1, edge1, edge8)
    assert abs(e1 - e8) <= 0.03 * e1 or edge8 > 0.03 * e8, (e8, e1, edge8)


def test_a_silent_integrating_meter_at_the_capped_rate_is_flagged_by_its_faults(tmp_path):
    """An interval mean after a stretch without readings carries the stretch's energy (2 W held over the
    window, to within the edges' split), so the stretch inside the window is no meter-gap; the failed
    polls flag it meter-fault, and a window whose edge falls in the silence is a meter-gap."""
    with DeviceProcess(tmp_path, profile=default_profile(base_w=2.0)) as dev:
        meter = open_meter("emulated-um25c", dev.link, timeout_s=0.3, rate_hz=POLL_CAP_HZ)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            t0 = rec.wait_first()
            time.sleep(0.3)
            dev.set_fault("silent")
            silent_at = time.time()
            time.sleep(0.6)
            dev.set_fault("ok")
            time.sleep(0.5)
            t1 = time.time()
            assert rec.wait_covered(t1)
            e = rec.energy("n1", t0, t1)
            cut = rec.energy("n1", silent_at + 0.3, t1)
    assert any(f.startswith("meter-fault") for f in e.flags), e.flags
    assert not any(f.startswith("meter-gap") for f in e.flags), e.flags
    assert e.energy_j == pytest.approx(2.0 * (t1 - t0), rel=0.01)
    assert any(f.startswith("meter-gap") and "edge" in f for f in cut.flags), cut.flags


def test_integrate_refuses_a_window_the_readings_do_not_cover():
    with pytest.raises(ValueError, match="do not cover"):
        integrate([_r(1.0, 1.0), _r(2.0, 1.0)], 0.5, 1.5)


def _transfer_expected_j(p, start: float, dur: float, rate: float, t0: float, t1: float) -> float:
    """Closed-form energy of the power model over [t0, t1] for one LTE transfer at ``rate`` Mbit/s."""
    lte = p.lte
    pieces = [  # (from, to, extra watts over base)
        (start, start + lte.promotion_s, (lte.promotion_mw + lte.mw_per_mbit * rate) / 1000),
        (start + lte.promotion_s, start + dur, (lte.active_mw + lte.mw_per_mbit * rate) / 1000),
        (start + dur, start + dur + lte.tail_s, lte.tail_mw / 1000),
    ]
    e = p.base_w * (t1 - t0)
    for a, b, w in pieces:
        lo, hi = max(a, t0), min(b, t1)
        if hi > lo:
            e += w * (hi - lo)
    return e


@pytest.mark.machine  # holds a 10 Hz meter to no gap and 0.5 %: run alone (see `make test`)
def test_known_transfer_integrates_to_expected_energy_within_half_a_percent(tmp_path):
    """Beside three other workers' testbeds and two busy loops the recorder once went 0.32 s without a
    reading (three poll periods) and flagged the window meter-gap, as it should: a starved recorder is the
    machine's limit, announced, not an integration error. So the test runs with the `machine` tests."""
    # A short-tailed LTE profile so the whole promotion/active/tail cycle fits in a few seconds.
    profile = default_profile(lte=RadioPower(active_mw=1288.04, mw_per_mbit=51.97, promotion_s=0.26,
                                             promotion_mw=1210.4, tail_s=1.5, tail_mw=1060.0))
    start = script_start()   # the device is up by then (its start-up is not part of the test)
    rate, dur = 12.0, 6.0
    script = [[start, {"lte": rate}], [start + dur, {"lte": 0.0}]]
    with DeviceProcess(tmp_path, profile=profile, script=script, noise_ma=0.2, noise_mv=1.0) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            t0 = max(rec.wait_first(), start - 0.5)
            t1 = start + dur + profile.lte.tail_s + 0.5
            time.sleep(max(0.0, t1 - time.time()))
            assert rec.wait_covered(t1)
            e = rec.energy("n1", t0, t1)
    expected = _transfer_expected_j(profile, start, dur, rate, t0, t1)
    assert e.flags == ()
    assert e.energy_j == pytest.approx(expected, rel=0.005)
    # the device's own mWh counter agrees to its resolution (1 mWh = 3.6 J, both ends truncated)
    assert e.counter_wh is not None and abs(e.counter_wh * 3600 - expected) <= 2 * 3.6


@pytest.mark.machine  # holds a clean window to no gap at 10 Hz: run alone (as the known transfer)
def test_meter_vanishing_mid_sample_flags_the_sample_reconnects_and_loses_nothing(tmp_path):
    with DeviceProcess(tmp_path, profile=default_profile(base_w=2.0)) as dev:
        meter = open_meter("emulated-um25c", dev.link, timeout_s=0.3)
        meter.open()
        writer = TraceWriter(tmp_path / "trace.csv", {"n1": "emulated-um25c"})
        with Recorder({"n1": meter}, sink=writer) as rec:
            t0 = rec.wait_first()
            time.sleep(0.5)
            dev.set_fault("vanish")                # the device disappears mid-sample
            dev.wait_link(present=False)
            time.sleep(0.6)
            dev.set_fault("ok")                    # and comes back on the same path
            dev.wait_link(present=True)
            time.sleep(1.5)
            t1 = time.time()
            rec.wait_covered(t1)
            sample = rec.energy("n1", t0, t1)
            later = rec.energy("n1", t1 - 0.5, t1)
            stats = rec.stats()["n1"]
            trace = rec.trace("n1")
        writer.close()
    assert any(f.startswith("meter-fault") for f in sample.flags), sample.flags
    # The device integrated through its absence: the first reading after the reconnect carries the outage's
    # energy, so the window is no meter-gap (an integrating meter's), only meter-fault.
    assert not any("meter-gap" in f for f in sample.flags), sample.flags
    assert sample.energy_j == pytest.approx(2.0 * (t1 - t0), rel=0.01)
    assert stats["reconnects"] >= 1
    assert later.flags == () and later.mean_power_w == pytest.approx(2.0, abs=0.01)
    rows = list(csv.DictReader((tmp_path / "trace.csv").read_text().splitlines()))
    assert sum(1 for r in rows if r["fault"]) >= 1
    assert len([r for r in rows if not r["fault"]]) == len(trace)  # every reading is on disk


@pytest.mark.machine  # holds a clean window to no gap at 10 Hz: run alone (as the known transfer)
def test_garbage_burst_is_not_a_fault_but_a_silent_meter_is(tmp_path):
    with DeviceProcess(tmp_path, profile=default_profile(base_w=2.0)) as dev:
        meter = open_meter("emulated-um25c", dev.link, timeout_s=0.3)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            t0 = rec.wait_first()
            dev.set_fault("garbage 90")
            time.sleep(0.8)
            t_mid = time.time()
            dev.set_fault("silent")
            time.sleep(1.0)
            dev.set_fault("ok")
            time.sleep(0.8)
            t1 = time.time()
            rec.wait_covered(t1)
            clean = rec.energy("n1", t0, t_mid - 0.2)
            gap = rec.energy("n1", t0, t1)
    assert clean.flags == () and clean.mean_power_w == pytest.approx(2.0, abs=0.01)
    assert any("no valid frame" in f for f in gap.flags), gap.flags


def test_a_failing_trace_sink_is_reported_not_swallowed(tmp_path):
    def sink(name, item):
        raise OSError(28, "No space left on device")

    with DeviceProcess(tmp_path, profile=default_profile(base_w=2.0)) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}, sink=sink) as rec:
            rec.wait_first()
            time.sleep(0.3)
            n = rec.stats()["n1"]["readings"]
    assert n >= 2                                   # recording in memory went on
    assert "No space left on device" in rec.sink_error
