"""Contract: every registered meter driver goes through the same open/poll/close path.

Each kind is served by the emulated device speaking that kind's protocol over a real
pty; a new driver must add its device protocol here (the test fails for an unknown kind).
"""
from __future__ import annotations

import math

import pytest
from meter_devices import DeviceProcess, default_profile

from harness.errors import MeterError
from harness.config.inventory import LineFormat
from harness.config.inventory import MeterSpec
from harness.meters.base import Meter, Reading
from harness.meters.drivers import DRIVERS, meter_from_inventory

LINE = LineFormat(fields=["volts_v", "amps_a", "watts_w"], separator=",")
#: Meter kind -> (emulated device protocol, inventory entry without its port).
DEVICE = {
    "um24c": ("um24c", {}),
    "um25c": ("um25c", {}),
    "um34c": ("um34c", {}),
    "emulated-um25c": ("um25c", {}),
    "ina-line": ("ina-line", {"line_format": LINE}),
}


def test_every_driver_has_a_contract_device():
    assert set(DRIVERS) == set(DEVICE), "add the new meter kind (and its emulated protocol) to DEVICE"


def test_inventory_kinds_match_the_registry():
    kinds = set(MeterSpec.model_fields["kind"].annotation.__args__)
    assert kinds == set(DRIVERS)


@pytest.mark.parametrize("kind", sorted(DEVICE))
def test_driver_contract(tmp_path, kind):
    protocol, extra = DEVICE[kind]
    dev = DeviceProcess(tmp_path, model=protocol, line_format=extra.get("line_format"),
                        profile=default_profile(base_w=3.0))
    spec = MeterSpec(kind=kind, port=None if kind == "emulated-um25c" else "set-below", **extra)
    with dev:
        m = meter_from_inventory(spec, dev.link)
        assert isinstance(m, Meter)
        assert m.kind == kind and m.port == dev.link and m.max_rate_hz > 0
        with pytest.raises(MeterError):
            m.poll()                                   # not open yet: an error, not a crash
        m.open()
        try:
            rs = [m.poll() for _ in range(3)]
        finally:
            m.close()
        m.close()                                      # idempotent
    for r in rs:
        assert isinstance(r, Reading)
        assert r.wall_s > 1e9 and r.mono_s > 0
        assert math.isfinite(r.watts) and r.watts == pytest.approx(3.0, abs=0.02)
    assert rs[0].mono_s < rs[1].mono_s < rs[2].mono_s
    with pytest.raises(MeterError):
        m.poll()                                       # closed again
