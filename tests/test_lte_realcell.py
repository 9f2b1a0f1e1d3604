"""A real srsRAN cell for one receiver of the emulated testbed (``interfaces.lte.real_cell``).

The inventory option and the preflight messages run anywhere. The campaign test is marked
``root`` and ``real_lte``: it starts srsepc, srsenb and srsUE (from $MPLAB_LTE_BIN or PATH) and
skips, naming the missing programs, when they are absent (as in CI).
"""
from __future__ import annotations

import json
import shutil

import pytest
from pydantic import ValidationError

from conftest import small_inventory
from harness.config.inventory import Inventory
from harness.emulation.access import EMULATED_CHANNEL, EmulatedChannel, MissingAccess
from harness.testbeds.emulated import EmulatedTestbed
from lte import realcell
from lte.realcell import ACCESS_KINDS, SrsranZmqCell, realcell_checks, sctp_situation
from rigs.ltelab import lab_data


def _with_cell(prefix: str, n: int = 1, which: tuple[str, ...] = ("n1",), radio: str = "lte",
               cell: dict | None = None) -> dict:
    data = small_inventory(prefix, [(20, 10)] * n).model_dump(mode="json")
    for rx in data["receivers"]:
        if rx["name"] in which:
            rx["interfaces"][radio]["real_cell"] = cell or {"kind": "srsran-zmq", "n_prb": 25}
    return data


# ------------------------------------------------------------ inventory option

def test_real_cell_option_is_validated(prefix):
    inv = Inventory.model_validate(_with_cell(prefix))
    assert inv.receivers[0].interfaces["lte"].real_cell.n_prb == 25
    assert Inventory.model_validate(_with_cell(prefix, cell={"kind": "srsran-zmq"})).receivers[0] \
        .interfaces["lte"].real_cell.n_prb == 50
    with pytest.raises(ValidationError, match="srsran-zmq"):
        Inventory.model_validate(_with_cell(prefix, cell={"kind": "usrp"}))
    with pytest.raises(ValidationError, match="n_prb"):
        Inventory.model_validate(_with_cell(prefix, cell={"kind": "srsran-zmq", "n_prb": 40}))


def test_real_cell_only_on_lte_one_receiver_emulated_only(prefix):
    with pytest.raises(ValidationError, match="only the lte interface"):
        Inventory.model_validate(_with_cell(prefix, radio="wifi"))
    with pytest.raises(ValidationError, match="exactly one UE"):
        Inventory.model_validate(_with_cell(prefix, n=2, which=("n1", "n2")))
    Inventory.model_validate(_with_cell(prefix, n=2, which=("n2",)))  # one of two: fine
    lab = lab_data()
    lab["receivers"][0]["interfaces"]["lte"]["real_cell"] = {"kind": "srsran-zmq"}
    with pytest.raises(ValidationError, match="emulated testbed option"):
        Inventory.model_validate(lab)


# ------------------------------------------------------------ wiring and preflight

def test_real_cell_receiver_is_left_out_of_the_shaping(prefix):
    inv = Inventory.model_validate(_with_cell(prefix, n=2, which=("n2",)))
    tb = EmulatedTestbed(inv, access_kinds=ACCESS_KINDS)
    assert isinstance(tb.lte_access["n1"], EmulatedChannel) and isinstance(tb.lte_access["n2"], SrsranZmqCell)
    cfg = tb.link_config()
    assert set(cfg.stations["lte"]) == {"n1"} and set(cfg.stations["wifi"]) == {"n1", "n2"}
    assert tb.shaped("n2", "wifi") and not tb.shaped("n2", "lte") and tb.shaped("n1", "lte")
    assert tb.lte_access["n1"].describe() == {"kind": EMULATED_CHANNEL}
    assert tb.lte_access["n2"].describe()["radio"].startswith("srsRAN 4G over ZeroMQ")


def test_unregistered_kind_fails_preflight_saying_so(prefix):
    tb = EmulatedTestbed(Inventory.model_validate(_with_cell(prefix)))  # no access_kinds: harness alone
    assert isinstance(tb.lte_access["n1"], MissingAccess)
    bad = [c for c in tb.preflight([]) if c.name == "LTE access srsran-zmq"]
    assert len(bad) == 1 and not bad[0].ok and "lte.realcell" in bad[0].fix


def test_preflight_names_each_missing_program(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("MPLAB_LTE_BIN", "")
    monkeypatch.setattr("harness.deploy.trial.SYSTEM_SBIN", ())
    checks = {c.name: c for c in realcell_checks("root", env={})}
    for prog in ("srsepc", "srsenb", "srsue"):
        c = checks[f"real cell: program {prog}"]
        assert not c.ok and c.detail == "not found" and "MPLAB_LTE_BIN" in c.fix
    # a program present under $MPLAB_LTE_BIN is found there
    (tmp_path / "bin").mkdir()
    fake = tmp_path / "bin" / "srsue"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MPLAB_LTE_BIN", str(tmp_path / "bin"))
    checks = {c.name: c for c in realcell_checks("root", env={})}
    assert checks["real cell: program srsue"].ok and checks["real cell: program srsue"].detail == str(fake)
    assert not checks["real cell: program srsenb"].ok


def test_sctp_situation_kernel_or_shim(tmp_path, monkeypatch):
    monkeypatch.setattr(realcell, "kernel_has_sctp", lambda: True)
    assert sctp_situation({}) == (True, "kernel SCTP", None)
    monkeypatch.setattr(realcell, "kernel_has_sctp", lambda: False)
    ok, what, shim = sctp_situation({})
    assert not ok and shim is None and "no SCTP" in what and "MPLAB_SCTP_SHIM unset" in what
    ok, what, _ = sctp_situation({"MPLAB_SCTP_SHIM": str(tmp_path / "nope.so")})
    assert not ok and "is not a file" in what
    so = tmp_path / "shim.so"
    so.write_bytes(b"")
    ok, what, shim = sctp_situation({"MPLAB_SCTP_SHIM": str(so)})
    assert ok and shim == str(so) and "shim of the test rigs" in what
    check = next(c for c in realcell_checks("root", env={}) if c.name == "real cell: S1 SCTP")
    assert not check.ok and "modprobe sctp" in check.fix


# ------------------------------------------------------------ the real thing

@pytest.mark.root
@pytest.mark.real_lte
@pytest.mark.parametrize("n_prb", [6, 25, 100])
def test_tiny_lte_campaign_through_the_real_cell(prefix, tmp_path, monkeypatch, n_prb):
    from harness.campaign.campaign import start_campaign
    from harness.config.scenario import Scenario
    from harness.upkeep.clean import clean_prefix
    from rigs.sctpshim import build_shim, kernel_has_sctp

    missing = [c.name.rsplit(" ", 1)[1] for c in realcell_checks("root", env={})
               if c.name.startswith("real cell: program") and not c.ok]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (not on PATH or under $MPLAB_LTE_BIN)")
    if not kernel_has_sctp():
        if shutil.which("clang") is None:
            pytest.skip("no kernel SCTP and no clang for the test rigs' SCTP-over-UDP shim")
        monkeypatch.setenv("MPLAB_SCTP_SHIM", str(build_shim(tmp_path / "shim")))
    inv = Inventory.model_validate(_with_cell(prefix, cell={"kind": "srsran-zmq", "n_prb": n_prb}))
    sc = Scenario(name="cell", congestion_controls=["cubic"], receiver_counts=[1], modes=["lte"],
                  samples_per_case=1, file_size="2M", settle_s=0, seed=1, retries=0)
    try:
        campaign = start_campaign(sc, inv, tmp_path / "runs", campaign_id="cell", access_kinds=ACCESS_KINDS)
        recs = campaign.records()
        assert len(recs) == 1, recs
        r = recs[0]
        assert r["status"] == "ok" and r["sample_status"] == "ok", r
        assert r["bytes"] == 2 * 2**20
        # the bytes came in over srsUE's tun (lte0), not the WiFi veth
        assert r["iface_bytes"]["lte"] > 2 * 2**20 and r["iface_bytes"]["wifi"] < 65536, r["iface_bytes"]
        assert r["lte_access"] == "srsran-zmq"
        tb = json.loads((campaign.path / "manifest.json").read_text())["testbed"]
        cell = tb["lte_access"]["n1"]
        assert cell["kind"] == "srsran-zmq" and cell["n_prb"] == n_prb and "not emulated radio" in cell["radio"]
        # the attach time: in each record (the manifest is written before the testbed, and its cell, is up)
        assert r["lte_attach_s"] > 0, r
        assert cell["s1_sctp"] == "kernel SCTP" if kernel_has_sctp() else "shim of the test rigs" in cell["s1_sctp"]
    finally:
        clean_prefix(prefix)


def test_cli_registers_the_real_cell_driver(prefix, tmp_path):
    import os
    import subprocess
    import sys

    import yaml

    from rigs.ltelab import REPO
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(_with_cell(prefix)))
    env = {**os.environ, "MPLAB_LTE_BIN": "", "COLUMNS": "250"}
    res = subprocess.run([sys.executable, "-m", "mplab", "preflight", "--inventory", str(inv)], capture_output=True,
                         text=True, cwd=REPO, timeout=120, env=env)
    # the CLI passed lte.realcell's driver in: its checks appear, not the "no driver" one of harness alone
    assert "real cell: program srsepc" in res.stdout, res.stdout + res.stderr
    assert "real cell: S1 SCTP" in res.stdout
    assert "no driver for real_cell" not in res.stdout


def test_wait_line_ends_when_the_program_exits_naming_it():
    """The readiness wait of the cell's programs: a line seen, or at once the program's exit with its output."""
    from harness.errors import NotReady
    from harness.hosts.local import LocalHost
    from lte.realcell import wait_line

    here = LocalHost("here")
    up = here.start(["sh", "-c", "echo 'Built in Release mode'; echo '==== eNodeB started ==='; exec sleep 30"],
                    label="srsenb")
    try:
        assert wait_line(up, r"==== eNodeB started ===", 30) < 30
    finally:
        up.stop()
    bad = here.start(["sh", "-c", "echo 'Error parsing rr.conf'; exit 2"], label="srsenb")
    with pytest.raises(NotReady, match=r"(?s)real cell: srsenb printing /eNodeB started/: srsenb exited \(2\).*"
                                       r"Error parsing rr.conf"):
        wait_line(bad, r"eNodeB started", 60)


def test_real_cell_health_between_samples(tmp_path):
    """The health check a campaign runs before each sample: every cell process alive and the UE's address
    still on its interface; otherwise a reason, which flags the sample (``Health.broken``)."""
    from harness.hosts.local import LocalHost
    from harness.emulation.access import LteLink
    from harness.config.inventory import RealCell
    from lte.realcell import SrsranZmqCell

    here = LocalHost("here")
    cell = SrsranZmqCell(RealCell(kind="srsran-zmq", n_prb=6), None)
    assert cell.health() == "real cell: not up"
    link = LteLink("n1", 1, here, "enb", "rx", here, "lo", "127.0.0.1", "127.0.0.2", tmp_path)
    procs = [here.start(["sleep", "30"], label=name) for name in ("srsepc", "srsenb", "srsue")]
    cell._procs, cell._link, cell.attach_s = list(procs), link, 0.4412
    try:
        assert cell.health() is None
        assert cell.describe()["attach_s"] == 0.441
        procs[1].stop()
        assert cell.health().startswith("real cell: srsenb exited")
        cell._procs = [procs[0], procs[2]]
        cell._link = LteLink("n1", 1, here, "enb", "rx", here, "lo", "10.20.1.2", "10.20.1.1", tmp_path)
        assert cell.health().startswith("real cell: the UE is no longer attached (lo in rx has 127.0.0.1, "
                                        "not 10.20.1.2)")
    finally:
        for p in procs:
            p.stop()
