"""`mplab meters check` / `record` on a lab inventory whose meters are emulated devices on real ptys."""
from __future__ import annotations

import csv
import os
import subprocess
import sys

import yaml
from meter_devices import REPO, DeviceProcess, default_profile

from harness.config.inventory import LineFormat

LINE = LineFormat(fields=["volts_v", "amps_a"], separator=",")


def _inventory(tmp_path, meters: list[dict]) -> str:
    inv = {"schema_version": 1, "kind": "lab", "name": "bench-lab", "sender": {"name": "snd", "address": "10.0.0.1"},
           "receivers": [{"name": f"r{i}", "meter": m,
                          "interfaces": {"wifi": {"name": "wlan0"}, "lte": {"name": "wwan0"}}}
                         for i, m in enumerate(meters, start=1)]}
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(inv))
    return str(path)


def _mplab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mplab", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "COLUMNS": "200"})


def test_check_lists_each_meter_with_idle_power(tmp_path):
    with DeviceProcess(tmp_path, "a", profile=default_profile(base_w=2.5)) as a, \
         DeviceProcess(tmp_path, "b", model="ina-line", line_format=LINE, profile=default_profile(base_w=3.5)) as b:
        inv = _inventory(tmp_path, [{"kind": "um25c", "port": a.link},
                                    {"kind": "ina-line", "port": b.link, "line_format": LINE.model_dump()}])
        res = _mplab("meters", "check", "-i", inv, "--duration-s", "0.6")
    assert res.returncode == 0, res.stderr
    lines = {ln.split()[1]: ln for ln in res.stdout.splitlines() if ln.startswith("│ r")}
    assert "um25c" in lines["r1"] and "2.500" in lines["r1"] and "ok" in lines["r1"]
    assert "ina-line" in lines["r2"] and "3.500" in lines["r2"]


def test_check_fails_with_exit_1_naming_the_dead_meter(tmp_path):
    with DeviceProcess(tmp_path, "a") as a:
        inv = _inventory(tmp_path, [{"kind": "um25c", "port": a.link},
                                    {"kind": "um34c", "port": str(tmp_path / "gone"), "timeout_s": 0.3}])
        res = _mplab("meters", "check", "-i", inv, "--duration-s", "0.3")
    assert res.returncode == 1
    assert "1 of 2 meter(s) failed: r2" in res.stderr
    assert "FAIL" in res.stdout and "cannot open" in res.stdout


def test_usage_errors_exit_2(tmp_path):
    with DeviceProcess(tmp_path, "a") as a:
        inv = _inventory(tmp_path, [{"kind": "um25c", "port": a.link}])
        res = _mplab("meters", "check", "-i", inv, "--receiver", "r9")
        assert res.returncode == 2 and "unknown receiver(s) ['r9']" in res.stderr
        res = _mplab("meters", "record", "-i", inv, "--duration-s", "1", "-o", str(tmp_path / "no" / "x.csv"))
        assert res.returncode == 2 and "--out" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"schema_version": 1, "kind": "lab", "name": "x",
                                   "sender": {"address": "10.0.0.1"},
                                   "receivers": [{"name": "r1", "meter": {"kind": "ina-line", "port": "/dev/x"},
                                                  "interfaces": {"wifi": {"name": "w"}, "lte": {"name": "l"}}}]}))
    res = _mplab("meters", "check", "-i", str(bad))
    assert res.returncode == 2 and "line_format" in res.stderr


def test_record_writes_every_reading_to_csv(tmp_path):
    out = tmp_path / "trace.csv"
    with DeviceProcess(tmp_path, "a", profile=default_profile(base_w=2.0)) as a, \
         DeviceProcess(tmp_path, "b", model="um34c", profile=default_profile(base_w=4.0)) as b:
        inv = _inventory(tmp_path, [{"kind": "um25c", "port": a.link}, {"kind": "um34c", "port": b.link}])
        res = _mplab("meters", "record", "-i", inv, "--duration-s", "1.0", "-o", str(out))
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(out.read_text().splitlines()))
    by = {k: [r for r in rows if r["receiver"] == k] for k in ("r1", "r2")}
    assert len(by["r1"]) >= 8 and len(by["r2"]) >= 8
    assert {r["meter_kind"] for r in by["r2"]} == {"um34c"}
    assert all(abs(float(r["watts"]) - 4.0) < 0.03 for r in by["r2"])
    assert f"row(s) written to {out}" in res.stdout.replace("\n", "")
