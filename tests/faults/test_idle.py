"""Waiting for idle between samples, on a meter whose idle power nobody told us (a lab), through the real
protocol. No root: an emulated meter device on a pty, driven by a rate script."""
from __future__ import annotations

import time

import pytest

from harness.config.inventory import RadioPower
from harness.meters.drivers import open_meter
from harness.meters.idle import IdleSettings, IdleWaiter
from harness.meters.recorder import Recorder
from tests.meter_devices import SCRIPT_LEAD_S, DeviceProcess, default_profile, script_start


def test_waits_out_a_tail_it_was_not_told_about_and_measures_it(tmp_path):
    tail_s = 2.0
    profile = default_profile(lte=RadioPower(active_mw=1288.04, mw_per_mbit=51.97, tail_s=tail_s, tail_mw=1060.0))
    # The transfer begins after the device, the meter and one hold window of idle readings, even on a
    # loaded machine (with 2.5 s, beside a loaded suite, the idle window took in the transfer's first 0.1 s).
    start = script_start(SCRIPT_LEAD_S + 1.0)
    dur = 1.5
    script = [[start, {"lte": 10.0}], [start + dur, {"lte": 0.0}]]
    with DeviceProcess(tmp_path, profile=profile, script=script, noise_ma=0.2, noise_mv=1.0) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            waiter = IdleWaiter(rec, IdleSettings(tolerance_w=0.05, timeout_s=10.0), known_w={"n1": None})
            waiter.learn(["n1"])  # idle before the transfer: the meter's own idle power
            late = time.time() - start
            assert late < 0, f"the set-up ran {late:.1f} s past the transfer's start: idle not learnt before it"
            assert waiter.reference_w("n1") == pytest.approx(profile.base_w, abs=0.02)
            time.sleep(max(0.0, start + dur - time.time()))
            res = waiter.wait({"n1": start + dur})["n1"]
            assert res.settled
            # idle again when the tail ended (within the hold window and the device's 5 ms steps)
            assert tail_s - 0.1 <= res.wait_s <= tail_s + 0.7, res.wait_s
            rec.wait_covered(res.idle_at)
            tail = rec.energy("n1", start + dur, res.idle_at)
            expected = profile.base_w * res.wait_s + 1.060 * tail_s
            assert tail.energy_j == pytest.approx(expected, rel=0.03)


def test_idle_power_is_learnt_from_meters_opened_just_now(tmp_path):
    # What a campaign does: the recorder starts, and the runner learns idle powers before the first sample.
    # Learnt before the meters had one hold window of readings, it came out unknown, and every wait of the
    # session then ran to its deadline (a lab's samples all flagged tail-unsettled after 30 s).
    profile = default_profile()
    with DeviceProcess(tmp_path, profile=profile, noise_ma=0.2, noise_mv=1.0) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            waiter = IdleWaiter(rec, IdleSettings(tolerance_w=0.05, timeout_s=5.0), known_w={"n1": None})
            waiter.learn(["n1"])
            assert waiter.reference_w("n1") == pytest.approx(profile.base_w, abs=0.02)
            res = waiter.wait({"n1": time.time()})["n1"]
            assert res.settled and res.wait_s < 1.5, res


def test_a_receiver_that_never_goes_idle_is_reported_unsettled_at_the_deadline(tmp_path):
    profile = default_profile()
    start = script_start()
    script = [[start, {"wifi": 5.0}]]  # busy and never stops
    with DeviceProcess(tmp_path, profile=profile, script=script, noise_ma=0.2, noise_mv=1.0) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            rec.wait_first()
            waiter = IdleWaiter(rec, IdleSettings(timeout_s=1.5), known_w={"n1": profile.base_w})
            time.sleep(max(0.0, start + 0.5 - time.time()))
            t = time.time()
            res = waiter.wait({"n1": t})["n1"]
            assert not res.settled and res.wait_s >= 1.5
