"""The emulated testbed's meters: real namespaces, real transfers, energies only through the UM driver."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, small_inventory

from harness.campaign.campaign import start_campaign
from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.hosts.local import LocalHost
from harness.meters.um import UMMeter
from harness.config.scenario import Scenario

pytestmark = pytest.mark.root


def test_campaign_records_energy_read_through_the_um_driver(tmp_path, prefix, monkeypatch):
    inv = small_inventory(prefix, [(10, 8)])
    sc = Scenario(name="meters", congestion_controls=["cubic"], receiver_counts=[1], modes=["lte"],
                  samples_per_case=1, file_size="2M", transfer_timeout_s=30, retries=0, settle_s=0)
    opened: list[UMMeter] = []
    real_open = UMMeter.open

    def spy(self):  # every meter the campaign reads is a UMMeter on the device's pty
        opened.append(self)
        return real_open(self)

    monkeypatch.setattr(UMMeter, "open", spy)
    try:
        campaign = start_campaign(sc, inv, tmp_path, campaign_id="c1")
    finally:
        clean_prefix(prefix)
    (rec,) = campaign.records()
    assert rec["status"] == "ok", rec
    assert rec["meter_kind"] == "emulated-um25c" and rec["energy_source"] == "emulated"
    assert [m.kind for m in opened] == ["emulated-um25c"]
    assert opened[0].port.endswith("meter-n1") and opened[0].stats.frames > 10
    assert not [f for f in rec["flags"] if f.startswith("meter-")], rec["flags"]
    base = inv.emulation.power_profile.base_w
    lte = inv.emulation.power_profile.lte
    # LTE carried the file: power is above base by at least the radio's active power.
    assert rec["mean_power_w"] > base + lte.active_mw / 1000 * 0.8
    assert rec["energy_j"] == pytest.approx(rec["mean_power_w"] * rec["duration_s"])
    assert rec["meter_counter_j"] is not None
    raw = tmp_path / "c1" / "raw" / rec["sample_id"] / f"attempt-{rec['attempts']}" / "meter-n1.csv"
    assert raw.exists() and len(raw.read_text().splitlines()) > 10
    (session,) = (tmp_path / "c1" / "meters").glob("trace-*.csv")   # the whole session's trace, as read
    assert len(session.read_text().splitlines()) >= len(raw.read_text().splitlines())
    assert not list_namespaces(LocalHost("root"), prefix)


def test_meters_check_brings_up_the_emulated_devices_and_tears_them_down(tmp_path, prefix):
    inv = small_inventory(prefix, [(10, 8), (6, 12)])
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv.model_dump(mode="json", exclude_none=True)))
    try:
        res = subprocess.run([sys.executable, "-m", "mplab", "meters", "check", "-i", str(path), "--duration-s", "1"],
                             cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    finally:
        leftovers = list_namespaces(LocalHost("root"), prefix)
        clean_prefix(prefix)
    assert res.returncode == 0, res.stderr
    rows = [ln for ln in res.stdout.splitlines() if ln.startswith("│ n")]
    assert len(rows) == 2
    idle = inv.emulation.power_profile.base_w
    for row in rows:
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[1] == "emulated-um25c", row
        # The idle power to the UM25C's resolution: each reading rounds to 1 mV and 0.1 mA (at 5.1 V and 0.47 A,
        # within 0.5 mW) and the table prints mW, so 2.400 W can read 2.401. On a loaded machine the recorder
        # may also rightly flag a gap, which weighs the readings around it differently; the figure stays within it.
        assert abs(float(cells[6]) - idle) <= 0.001 + 1e-9, row
    assert leftovers == []
    state = json.dumps(res.stdout)
    assert "bringing up emulated testbed" in state


def _lte_bytes(ns: str) -> int:
    res = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show", "lte0"], capture_output=True, text=True)
    try:
        return int(json.loads(res.stdout)[0]["stats64"]["rx"]["bytes"])
    except (ValueError, IndexError, KeyError):
        return 0


def test_meter_vanishing_during_a_transfer_flags_that_record(tmp_path, prefix):
    inv = small_inventory(prefix, [(10, 8)])
    sc = Scenario(name="vanish", congestion_controls=["cubic"], receiver_counts=[1], modes=["lte"],
                  samples_per_case=1, file_size="6M", transfer_timeout_s=40, retries=0, settle_s=0)
    control = Path("/run/mplab") / prefix.rstrip("-") / "meter-n1.control"
    done = threading.Event()
    events: list[str] = []

    def saboteur():  # once the file is flowing over LTE, pull the meter out for a moment
        while not done.is_set():
            if _lte_bytes(f"{prefix}n1") > 1_000_000:
                control.write_text("vanish\n")
                events.append("vanish")
                time.sleep(0.8)
                control.write_text("ok\n")
                events.append("ok")
                return
            time.sleep(0.05)

    t = threading.Thread(target=saboteur, daemon=True)
    t.start()
    try:
        campaign = start_campaign(sc, inv, tmp_path, campaign_id="c2")
    finally:
        done.set()
        t.join(5)
        clean_prefix(prefix)
    assert events == ["vanish", "ok"]
    (rec,) = campaign.records()
    assert rec["status"] == "ok"                       # the transfer itself was fine ...
    faults = [f for f in rec["flags"] if f.startswith("meter-fault")]
    assert faults, rec["flags"]                        # ... but its energy is flagged, with the reason
    assert any("read failed" in f or "reopen failed" in f for f in faults)
    (trace,) = (tmp_path / "c2" / "meters").glob("trace-*.csv")
    rows = list(csv.DictReader(trace.read_text().splitlines()))
    assert any(r["fault"] for r in rows) and sum(1 for r in rows if not r["fault"]) > 20


def test_meters_record_reads_a_testbed_that_is_already_up_and_leaves_it_up(tmp_path, prefix):
    from harness.testbeds.emulated import EmulatedTestbed

    inv = small_inventory(prefix, [(10, 8)])
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv.model_dump(mode="json", exclude_none=True)))
    tb = EmulatedTestbed(inv)
    try:
        tb.setup([])
        out = tmp_path / "trace.csv"
        res = subprocess.run([sys.executable, "-m", "mplab", "meters", "record", "-i", str(path), "--duration-s", "1",
                              "-o", str(out)], cwd=REPO, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "COLUMNS": "200"})
        still_up = set(tb.ns.values()) <= set(list_namespaces(LocalHost("root"), prefix))
    finally:
        tb.teardown()
    assert res.returncode == 0, res.stderr
    assert "is up: reading its meter devices" in res.stdout
    assert still_up
    rows = list(csv.DictReader(Path(out).read_text().splitlines()))
    assert len(rows) >= 8 and {r["meter_kind"] for r in rows} == {"emulated-um25c"}
    assert all(abs(float(r["watts"]) - inv.emulation.power_profile.base_w) < 0.01 for r in rows)
    assert not list_namespaces(LocalHost("root"), prefix)


def test_meters_check_refuses_a_prefix_that_would_remove_another_testbed(tmp_path, prefix):
    from harness.testbeds.emulated import EmulatedTestbed

    other = EmulatedTestbed(small_inventory(prefix + "x-", [(10, 8)]))
    inv = small_inventory(prefix, [(10, 8)])              # its prefix is a prefix of the other's
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv.model_dump(mode="json", exclude_none=True)))
    try:
        other.setup([])
        res = subprocess.run([sys.executable, "-m", "mplab", "meters", "check", "-i", str(path)], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
        survived = set(other.ns.values()) <= set(list_namespaces(LocalHost("root"), prefix))
    finally:
        other.teardown()
    assert res.returncode == 2 and "give this inventory its own prefix" in res.stderr.lower()
    assert survived
    assert not list_namespaces(LocalHost("root"), prefix)
