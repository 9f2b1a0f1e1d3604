"""The UM-series protocol: frames, integrity checks, and the driver against the emulated device over a real pty."""
from __future__ import annotations

import struct
import time

import pytest
from meter_devices import DeviceProcess, default_profile

from harness.errors import MeterError
from harness.meters.drivers import open_meter
from harness.meters.um import FMT, FRAME_LEN, MODELS, decode_frame, encode_frame, frame_valid, um34c_checksum

# A UM25C frame as the device sends it (5.113 V, 0.4719 A, 2.412 W, 27 C, group 0 = 12 mAh / 61 mWh),
# built byte by byte from the layout table in docs/meters.md ("UM protocol"), not by encode_frame.
_REAL = bytearray(FRAME_LEN)
_REAL[0:2] = b"\x09\xc9"
_REAL[2:4] = (5113).to_bytes(2, "big")
_REAL[4:6] = (4719).to_bytes(2, "big")
_REAL[6:10] = (2412).to_bytes(4, "big")
_REAL[10:12] = (27).to_bytes(2, "big")
_REAL[16:20] = (12).to_bytes(4, "big")
_REAL[20:24] = (61).to_bytes(4, "big")
_REAL[128:130] = b"\xff\xf1"
REAL_UM25C = bytes(_REAL)


def test_decode_hand_built_um25c_frame():
    f = decode_frame(REAL_UM25C, MODELS["um25c"])
    assert f.volts == pytest.approx(5.113)
    assert f.amps == pytest.approx(0.4719)
    assert f.watts == pytest.approx(2.412)
    assert f.temp_c == 27
    assert f.groups[0] == (pytest.approx(0.012), pytest.approx(0.061))


@pytest.mark.parametrize("model", sorted(MODELS))
def test_encode_decode_within_resolution(model):
    m = MODELS[model]
    buf = encode_frame(m, volts=5.0873, amps=0.81234, watts=4.1337, groups=((0.0129, 0.0659),))
    assert len(buf) == FRAME_LEN and frame_valid(buf, m)
    f = decode_frame(buf, m)
    assert abs(f.volts - 5.0873) <= m.volt_step / 2 + 1e-12
    assert abs(f.amps - 0.81234) <= m.amp_step / 2 + 1e-12
    assert abs(f.watts - 4.1337) <= 0.0005 + 1e-12
    assert f.groups[0] == (pytest.approx(0.012), pytest.approx(0.065))  # counters truncate to whole mAh/mWh


def test_um34c_uses_checksum_and_others_trailer():
    buf = encode_frame(MODELS["um34c"], volts=5.0, amps=1.0, watts=5.0)
    assert buf[129] == um34c_checksum(buf)
    assert encode_frame(MODELS["um25c"], volts=5.0, amps=1.0, watts=5.0)[128:] == b"\xff\xf1"
    assert encode_frame(MODELS["um24c"], volts=5.0, amps=1.0, watts=5.0)[128:] == b"\xff\xf1"


@pytest.mark.parametrize("model", sorted(MODELS))
def test_frame_checks_reject_bad_frames(model):
    m = MODELS[model]
    good = encode_frame(m, volts=5.0, amps=0.5, watts=2.5)
    assert frame_valid(good, m)
    wrong_id = bytes(struct.pack(">H", next(o.model_id for o in MODELS.values() if o is not m))) + good[2:]
    assert not frame_valid(wrong_id, m)
    assert not frame_valid(good[:-1], m)                      # truncated
    bad = bytearray(good)
    bad[129] ^= 0x01                                          # trailer (UM24C/25C) or checksum (UM34C)
    assert not frame_valid(bytes(bad), m)
    if m.checksum:
        flipped = bytearray(good)
        flipped[3] ^= 0x10                                    # a voltage bit the checksum covers
        assert not frame_valid(bytes(flipped), m)
    with pytest.raises(MeterError):
        decode_frame(bytes(bad), m)


def test_struct_layout_is_130_bytes():
    assert struct.calcsize(FMT) == 130


@pytest.mark.parametrize("model", sorted(MODELS))
def test_driver_decodes_device_state_within_resolution(tmp_path, model):
    # Constant 3.2 W at 5.1 V, no noise: the device's true state is known exactly.
    profile = default_profile(base_w=3.2)
    with DeviceProcess(tmp_path, model=model, profile=profile) as dev:
        m = open_meter(model, dev.link)
        with m:
            rs = [m.poll() for _ in range(5)]
    um = MODELS[model]
    for r in rs:
        assert abs(r.volts - 5.1) <= um.volt_step / 2 + 1e-9
        assert abs(r.amps - 3.2 / 5.1) <= um.amp_step / 2 + 1e-9
        assert abs(r.device_watts - 3.2) <= 0.0005 + 1e-9   # the device's own power field: 1 mW
        # power: V x I on the UM25C (finer than 1 mW), the device's 1 mW field on the 1 mA models
        assert abs(r.watts - 3.2) <= (5.1 * um.amp_step / 2 + 1e-6 if um.host_power else 0.0005 + 1e-9)
        assert r.counter_wh is not None and r.counter_wh >= 0
    assert m.stats.frames >= 6 and m.stats.bad_frames == 0


def test_device_counts_energy_in_mwh(tmp_path):
    profile = default_profile(base_w=7.2)   # 2 mWh per second
    with DeviceProcess(tmp_path, profile=profile) as dev:
        with open_meter("um25c", dev.link) as m:
            t0 = time.monotonic()
            first = m.poll()
            time.sleep(2.2)
            last = m.poll()
            dt = time.monotonic() - t0
    gained_mwh = (last.counter_wh - first.counter_wh) * 1000
    assert abs(gained_mwh - 2.0 * dt) <= 1.0 + 0.2  # whole mWh on both ends, plus poll latency


@pytest.mark.parametrize("model,fault,expect_bad", [
    ("um25c", "garbage 53", False),
    ("um25c", "bad-trailer+good", True),
    ("um25c", "wrong-id+good", False),
    ("um34c", "bad-checksum+good", True),
    ("um34c", "garbage 200", False),
])
def test_reader_resynchronises_after_garbage_and_bad_frames(tmp_path, model, fault, expect_bad):
    with DeviceProcess(tmp_path, model=model, profile=default_profile(base_w=3.0)) as dev:
        with open_meter(model, dev.link) as m:
            dev.set_fault(fault)
            rs = [m.poll() for _ in range(3)]
    um = MODELS[model]
    assert all(abs(r.amps - 3.0 / 5.1) <= um.amp_step / 2 + 1e-9 for r in rs)
    assert m.stats.skipped_bytes > 0
    assert (m.stats.bad_frames > 0) == expect_bad


@pytest.mark.parametrize("model,fault,reason", [
    ("um25c", "short 90", "truncated frame (90 of 130"),
    ("um25c", "bad-trailer", "bad trailer"),
    ("um34c", "bad-checksum", "bad checksum"),
    ("um25c", "wrong-id", "without the model id 09c9"),
    ("um25c", "silent", "no answer"),
])
def test_bad_frames_are_rejected_with_reason_then_recovered(tmp_path, model, fault, reason):
    with DeviceProcess(tmp_path, model=model) as dev:
        m = open_meter(model, dev.link, timeout_s=0.5)
        with m:
            dev.set_fault(fault)
            with pytest.raises(MeterError, match=reason.replace("(", r"\(")):
                m.poll()
            dev.set_fault("ok")
            r = m.poll()   # the same open port reads valid frames again
    assert abs(r.volts - 5.1) < 0.011


def test_open_fails_loudly_on_missing_port(tmp_path):
    m = open_meter("um25c", str(tmp_path / "nothing"))
    with pytest.raises(MeterError, match="cannot open"):
        m.open()


def test_open_fails_when_device_never_answers(tmp_path):
    with DeviceProcess(tmp_path) as dev:
        dev.set_fault("silent")
        m = open_meter("um25c", dev.link, timeout_s=0.3)
        with pytest.raises(MeterError, match="no answer"):
            m.open()


def test_unknown_kind_is_named():
    with pytest.raises(KeyError, match="unknown meter kind 'um99c'"):
        open_meter("um99c", "/dev/null")
