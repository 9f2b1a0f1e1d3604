"""Fast-forwarding the emulated radio tail: what the model says is left, and the device that skips it.

On the emulated testbed the tail is the power model's state, not a radio: the runner asks each device
to drop it and accounts the skipped part from the device's answer instead of waiting ~11.6 s.
These tests hold the two facts that makes safe: the answer is what waiting would have metered, and a
later transfer sees exactly what it would have seen after a waited tail.
"""
from __future__ import annotations

import json
import os
import time

import pytest
from meter_devices import DeviceProcess, default_profile, script_start

from harness.config.inventory import RadioPower
from harness.meters.drivers import open_meter
from harness.meters.power import PowerModel
from harness.meters.recorder import Recorder

LTE = RadioPower(active_mw=1288.04, mw_per_mbit=51.97, promotion_s=0.26, promotion_mw=1210.4,
                 tail_s=6.0, tail_mw=1060.0)


def _busy_until(model: PowerModel, t_end: float, radios: dict[str, float]) -> None:
    for k in range(int(t_end * 10) + 1):
        model.power_w(k / 10, radios)


def test_tail_remaining_is_the_closed_form_tail_and_leaves_the_model_alone():
    p = default_profile(lte=LTE)
    m = PowerModel(p)
    _busy_until(m, 3.0, {"lte": 10.0})
    before = m.power_w(3.5, {})
    s, j = m.tail_remaining(5.0)
    # last traffic at 3.0: the tail runs to 9.0, at base + tail power
    assert s == pytest.approx(4.0, abs=2e-3)
    assert j == pytest.approx((p.base_w + LTE.tail_mw / 1000) * 4.0, rel=1e-3)
    # the model itself was not advanced: still in its tail, and idle after it
    assert m.power_w(5.0, {}) == pytest.approx(before)
    assert m.power_w(9.01, {}) == pytest.approx(p.base_w)


def test_tail_remaining_covers_the_longest_radio_and_both_tails():
    p = default_profile(lte=LTE)
    m = PowerModel(p)
    _busy_until(m, 2.0, {"lte": 10.0, "wifi": 10.0})
    s, j = m.tail_remaining(2.0)
    wifi = p.wifi
    assert s == pytest.approx(max(LTE.tail_s, wifi.tail_s), abs=2e-3)
    short = min(LTE.tail_s, wifi.tail_s)
    expected = (p.base_w * LTE.tail_s + LTE.tail_mw / 1000 * LTE.tail_s + wifi.tail_mw / 1000 * wifi.tail_s)
    assert short < LTE.tail_s and j == pytest.approx(expected, rel=1e-3)


def test_reset_leaves_the_model_as_a_waited_tail_would():
    p = default_profile(lte=LTE)
    waited, skipped = PowerModel(p), PowerModel(p)
    for m in (waited, skipped):
        _busy_until(m, 2.0, {"lte": 10.0})
    skipped.reset()
    for k in range(21, int((2.0 + LTE.tail_s + 1.0) * 10)):  # the device ticks through the waited tail
        waited.power_w(k / 10, {})
    assert skipped.power_w(2.5, {}) == pytest.approx(p.base_w)
    assert skipped.tail_remaining(2.5) == (0.0, 0.0)
    # the next transfer: after the reset at once, after the waited tail much later; same power, promotion paid
    t_next = 2.0 + LTE.tail_s + 1.0
    for k in range(5):
        dt = k * 0.1
        assert skipped.power_w(2.6 + dt, {"lte": 8.0}) == pytest.approx(waited.power_w(t_next + dt, {"lte": 8.0}))


def _skip(dev: DeviceProcess, token: str, timeout_s: float = 5.0) -> dict:
    req = dev.tail
    tmp = req.with_suffix(".tmp")
    tmp.write_text(token + "\n")
    os.replace(tmp, req)
    done = req.with_name(req.name + ".done")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = json.loads(done.read_text())
            if answer["token"] == token:
                return answer
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.01)
    raise AssertionError("the device did not answer the fast-forward request")


def test_device_skips_its_tail_and_the_metered_plus_skipped_tail_is_the_waited_one(tmp_path):
    p = default_profile(lte=LTE)
    start = script_start()
    end = start + 1.0
    script = [[start, {"lte": 12.0}], [end, {"lte": 0.0}]]
    with DeviceProcess(tmp_path, profile=p, script=script, tail_control=True) as dev:
        meter = open_meter("emulated-um25c", dev.link)
        meter.open()
        with Recorder({"n1": meter}) as rec:
            time.sleep(max(0.0, end + 1.0 - time.time()))
            answer = _skip(dev, "t1")
            at = answer["at_wall"]
            assert at - end == pytest.approx(1.0, abs=0.3)
            # what the tail still held at the skip: the rest of its 6 s at tail power
            assert answer["remaining_s"] == pytest.approx(LTE.tail_s - (at - end), abs=0.12)
            assert answer["remaining_j"] == pytest.approx((p.base_w + LTE.tail_mw / 1000) * answer["remaining_s"],
                                                          rel=0.01)
            time.sleep(1.0)
            assert rec.wait_covered(at + 0.9)
            metered = rec.energy("n1", end, at)
            after = rec.energy("n1", at + 0.2, at + 0.9)
    # from the skip on the meter reads idle power (no noise in this device)
    assert after.mean_power_w == pytest.approx(p.base_w, abs=0.01)
    # metered part + skipped part = the whole waited tail
    waited_j = (p.base_w + LTE.tail_mw / 1000) * LTE.tail_s
    assert metered.energy_j + answer["remaining_j"] == pytest.approx(waited_j, rel=0.02)


def test_an_idle_device_skips_nothing(tmp_path):
    with DeviceProcess(tmp_path, profile=default_profile(lte=LTE), tail_control=True) as dev:
        answer = _skip(dev, "idle")
    assert answer["remaining_s"] == 0.0 and answer["remaining_j"] == 0.0


def test_queued_bytes_reads_a_real_tc_dump_and_refuses_what_it_cannot_read():
    from pathlib import Path

    from harness.testbeds.base import queued_bytes
    full = (Path(__file__).parent / "data" / "tc-qdisc-bfifo-backlog.json").read_text()
    drained = full.replace('"backlog":29808', '"backlog":0')
    assert queued_bytes({"ap": full, "enb": drained}) > 0
    assert queued_bytes({"ap": drained, "enb": drained}) == 0
    assert queued_bytes({}) == 0  # nothing to measure (a lab): nothing to wait for
    assert queued_bytes({"ap": "error: tc failed"}) is None


def test_testbed_keeps_the_answers_of_the_devices_that_answered(tmp_path, monkeypatch):
    """One dead device must not lose the others' answers: their tails are already dropped, so without
    the answer their skipped energy would be missing from the record."""
    from conftest import small_inventory

    from harness.testbeds.emulated import EmulatedTestbed

    tb = EmulatedTestbed(small_inventory("mplab-tailp-", [(10, 10), (10, 10)]))  # built, never set up
    monkeypatch.setattr(tb, "state_dir", tmp_path)
    monkeypatch.setattr(tb, "SKIP_TAIL_S", 1.5)
    p = default_profile(lte=LTE)
    start = script_start()
    script = [[start, {"lte": 12.0}], [start + 0.5, {"lte": 0.0}]]
    # n1's device answers at tb.tail_control("n1"); n2 has no device (dead)
    with DeviceProcess(tmp_path, "meter-n1", profile=p, script=script, tail_control=True) as dev:
        assert dev.tail == tb.tail_control("n1")
        time.sleep(max(0.0, start + 1.0 - time.time()))
        answers = tb.skip_tails(["n1", "n2"])
    assert set(answers) == {"n1"}
    assert answers["n1"].remaining_s > 1.0 and answers["n1"].remaining_j > 0
