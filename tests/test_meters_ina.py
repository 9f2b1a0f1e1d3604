"""INA2xx line bridges: configurable line formats, and the driver against an emulated bridge over a real pty."""
from __future__ import annotations


import pytest
from meter_devices import DeviceProcess, default_profile
from pydantic import ValidationError

from harness.errors import MeterError
from harness.config.inventory import LineFormat, MeterSpec
from harness.meters.drivers import open_meter
from harness.meters.ina import format_line, parse_line


def test_parse_line_with_units_separator_and_skipped_columns():
    fmt = LineFormat(fields=["skip", "volts_mv", "amps_ma", "watts_mw"], separator=",")
    v = parse_line(" 1234, 5102.5 ,512.0, 2612.3", fmt)
    assert v == {"volts": pytest.approx(5.1025), "amps": pytest.approx(0.512), "watts": pytest.approx(2.6123)}


def test_parse_line_computes_power_when_the_bridge_prints_none():
    fmt = LineFormat(fields=["amps_a", "volts_v", "energy_mwh"])
    v = parse_line("0.5\t5.0   12", fmt)
    assert v["watts"] == pytest.approx(2.5) and v["energy_wh"] == pytest.approx(0.012)


@pytest.mark.parametrize("line,why", [
    ("5.1 0.5", "2 column"),
    ("5.1 abc 2.5", "not a number"),
    ("5.1 nan 2.5", "not finite"),
])
def test_parse_line_rejects_with_reason(line, why):
    with pytest.raises(ValueError, match=why):
        parse_line(line, LineFormat(fields=["volts_v", "amps_a", "watts_w"]))


def test_line_format_must_give_power_and_no_duplicates():
    with pytest.raises(ValidationError, match="gives no power"):
        LineFormat(fields=["volts_v", "skip"])
    with pytest.raises(ValidationError, match="appears twice"):
        LineFormat(fields=["watts_w", "watts_w"])
    with pytest.raises(ValidationError, match="needs a 'line_format'"):
        MeterSpec(kind="ina-line", port="/dev/ttyACM0")
    with pytest.raises(ValidationError, match="needs a 'port'"):
        MeterSpec(kind="um25c")


def test_format_and_parse_round_trip():
    fmt = LineFormat(fields=["watts_mw", "volts_v", "amps_ma"], separator=";")
    assert parse_line(format_line({"volts": 5.1, "amps": 0.4, "watts": 2.04}, fmt), fmt)["watts"] == \
        pytest.approx(2.04)


@pytest.mark.parametrize("fmt", [
    LineFormat(fields=["volts_v", "amps_a", "watts_w"]),                                   # streaming, spaces
    LineFormat(fields=["skip", "watts_mw", "volts_mv", "amps_ma"], separator=","),          # streaming, CSV
    LineFormat(fields=["volts_v", "amps_ma"], separator=",", poll_command="r\n"),           # on request
])
def test_driver_reads_emulated_bridge(tmp_path, fmt):
    with DeviceProcess(tmp_path, model="ina-line", line_format=fmt, profile=default_profile(base_w=2.6)) as dev:
        m = open_meter("ina-line", dev.link, line_format=fmt)
        with m:
            rs = [m.poll() for _ in range(4)]
    assert all(r.watts == pytest.approx(2.6, abs=0.003) for r in rs)
    assert m.kind == "ina-line" and m.stats.lines >= 5


def _until(poll, done, n: int = 20):
    """Poll until ``done(outcome)``: lines printed before a mode switch may still be buffered in the pty."""
    for _ in range(n):
        try:
            out = poll()
        except MeterError as exc:
            out = exc
        if done(out):
            return out
    raise AssertionError(f"not reached after {n} polls; last: {out!r}")


def test_driver_skips_garbage_and_partial_lines_then_fails_with_reason(tmp_path):
    fmt = LineFormat(fields=["volts_v", "amps_a"])
    with DeviceProcess(tmp_path, model="ina-line", line_format=fmt, profile=default_profile(base_w=2.0)) as dev:
        m = open_meter("ina-line", dev.link, line_format=fmt, timeout_s=0.4)
        with m:
            dev.set_fault("garbage 20")       # a garbage line before every good one
            r = _until(m.poll, lambda out: m.stats.bad_lines > 0)
            assert r.watts == pytest.approx(2.0, abs=0.003)      # garbage skipped, the good line read
            dev.set_fault("short 7")          # partial lines only
            err = _until(m.poll, lambda out: isinstance(out, MeterError))
            assert "no valid line" in str(err)
            dev.set_fault("bad-checksum")     # the bridge prints only unparseable lines
            err = _until(m.poll, lambda out: isinstance(out, MeterError) and "last rejected line" in str(out))
            assert "3 column(s), format has 2" in str(err)
            dev.set_fault("silent")
            err = _until(m.poll, lambda out: isinstance(out, MeterError) and "(no line)" in str(out))
            dev.set_fault("ok")
            r = _until(m.poll, lambda out: not isinstance(out, MeterError))
            assert r.watts == pytest.approx(2.0, abs=0.003)
