"""`mplab lte`/`mplab wifi` and the make targets: usage errors exit 2 with a clear message; render works."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from rigs.ltelab import GOLDEN, LAB, REPO


def _mplab(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_inventory_without_lte_is_a_usage_error():
    for cmd in (["lte", "up"], ["lte", "status"], ["wifi", "up"]):
        res = _mplab(*cmd, "inventory/emulated.yaml")
        assert res.returncode == 2, res.stderr
        section = cmd[0]
        assert f"inventory/emulated.yaml: this inventory has no '{section}' section" in res.stderr


def test_lte_up_without_secrets_is_a_usage_error(tmp_path):
    res = _mplab("lte", "up", str(LAB), "--secrets", str(tmp_path / "none.yaml"))
    assert res.returncode == 2 and "none.yaml: secrets file not found" in res.stderr
    (tmp_path / "open.yaml").write_text("sim: {}\n")
    (tmp_path / "open.yaml").chmod(0o644)
    res = _mplab("lte", "up", str(LAB), "--secrets", str(tmp_path / "open.yaml"))
    assert res.returncode == 2 and "chmod 600" in res.stderr


def test_make_targets_need_an_inventory():
    for target in ("lte-up", "lte-down", "wifi-up"):
        res = subprocess.run(["make", "-s", target], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert res.returncode == 2
        assert f"make {target} needs a lab inventory" in res.stderr


def test_render_writes_the_golden_files(tmp_path):
    res = _mplab("lte", "render", str(LAB), "--version", "2.7.2", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "epc/etc/open5gs/mme.yaml").read_text() == (GOLDEN / "open5gs-2.7" / "mme.yaml").read_text()
    assert (tmp_path / "enb/etc/srsran/rr.conf").read_text() == (GOLDEN / "srsenb" / "rr.conf").read_text()
    bad = _mplab("lte", "render", str(LAB), "--version", "3.1.0", "--out", str(tmp_path))
    assert bad.returncode == 2 and "not a version mplab knows" in bad.stderr


def test_hosts_come_from_lab_infra_and_receivers_ssh():
    from harness.hosts.local import LocalHost
    from harness.config.inventory import Inventory
    from harness.hosts.ssh import SSHHost
    from harness.deploy.machines import host_for, receiver_hosts
    from rigs.ltelab import lab_data, lab_inventory
    inv = lab_inventory()
    h = host_for(inv, "epc")                                  # built, not connected
    assert isinstance(h, SSHHost) and (h.user, h.address, h.port) == ("root", "192.168.1.21", 22)
    assert receiver_hosts(inv)["n2"].address == "192.168.1.12"
    d = lab_data()
    d["lab"]["infra"][0].pop("ssh")                           # an eNB box without SSH: this machine
    assert isinstance(host_for(Inventory.model_validate(d), "enb"), LocalHost)


def test_zmq_command_without_srsran_says_why():
    import shutil
    if shutil.which("srsenb") and shutil.which("srsue"):
        import pytest
        pytest.skip("srsRAN is installed here")
    res = _mplab("lte", "zmq", str(LAB), "--receiver", "n1")
    assert res.returncode == 1
    assert "needs srsRAN 4G, but srsenb, srsue is not installed" in res.stderr


def test_render_and_up_share_one_version_decision(tmp_path):
    import yaml
    from rigs.ltelab import lab_data
    d = lab_data()
    d["lte"]["epc"]["version"] = "2.6"                       # the newest 2.6.x template set
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(d))
    ok = _mplab("lte", "render", str(inv), "--out", str(tmp_path / "a"))
    assert ok.returncode == 0, ok.stderr
    assert "Open5GS 2.6.6 (lte.epc.version)" in ok.stdout
    assert (tmp_path / "a/epc/etc/open5gs/mme.yaml").read_text() == (GOLDEN / "open5gs-2.6" / "mme.yaml").read_text()
    d["lte"]["epc"]["version"] = "2.6.6"
    inv.write_text(yaml.safe_dump(d))
    bad = _mplab("lte", "render", str(inv), "--version", "2.7.2", "--out", str(tmp_path / "b"))
    assert bad.returncode == 2
    assert "lte.epc.version: Open5GS 2.6.6 is pinned but --version has 2.7.2" in bad.stderr
    assert "Traceback" not in bad.stderr and not (tmp_path / "b").exists()


def test_version_decision_rules():
    import pytest
    from harness.errors import ConfigError
    from lte.version import decide_open5gs, decide_srsran, parse_srsran_version, parse_version
    assert str(decide_open5gs("2.6", parse_version("2.6.4"))) == "2.6.4"       # the series matches: the host's
    assert str(decide_open5gs("2.7", None)) == "2.7.2"
    assert str(decide_open5gs(None, parse_version("2.7.1"))) == "2.7.1"
    with pytest.raises(ConfigError, match=r"Open5GS 2.6 is pinned but the EPC host \(open5gs-mmed -v\) has 2.7.2"):
        decide_open5gs("2.6", parse_version("2.7.2"))
    with pytest.raises(ConfigError, match="Open5GS 2.5 is not a series mplab has templates for"):
        decide_open5gs("2.5", None)
    with pytest.raises(ConfigError, match=r"srsRAN 4G 22.10 is pinned but the eNB host runs 23.04.0"):
        decide_srsran("22.10", parse_srsran_version("Version 23.4.0"))
    assert str(decide_srsran("23.04", parse_srsran_version("Version 23.4.1"))) == "23.04.1"


@pytest.mark.parametrize("epc_kind", ["open5gs", "srsepc"])
def test_lte_check_prints_every_check_and_fails_on_a_failed_one(epc_kind, monkeypatch, capsys, tmp_path):
    """`mplab lte check` end to end inside mplab: the inventory is the shipped lab one; the cell's hosts and the
    checks' results are stand-ins (no eNodeB or EPC here), so what is tested is that every check is printed and a
    failed one ends in its diagnosis and exit 1. (The EPC's log once shadowed the console: AttributeError.)"""
    import harness.deploy.machines as machines
    import lte.checks as checks
    import lte.hosts as lte_hosts
    from harness.upkeep.preflight import Check
    from mplab.cli import run as mplab_cli   # (not `run`: tests/test_tools.py reads run([...]) as a program call)

    class Host:
        closed = 0

        def close(self):
            Host.closed += 1

    class Service:
        def logs(self, unit, lines):
            return "srsepc: S1 Setup Response sent\n"

    seen: dict = {}

    def fake_run_checks(inv, epc, rx, enb=None, epc_console=""):
        seen["epc_console"] = epc_console
        return [Check("epc", "s1", True, "eNB connected"), Check("rx1", "attach", False, "no UE-pool address")]

    monkeypatch.setattr(lte_hosts, "lte_hosts",
                        lambda inv: SimpleNamespace(enb=Host(), epc=Host(), services={"epc": Service()}))
    monkeypatch.setattr(machines, "receiver_hosts", lambda inv: {"rx1": Host()})
    monkeypatch.setattr(checks, "run_checks", fake_run_checks)
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(LAB.read_text().replace("  epc:\n    host: epc\n", f"  epc:\n    kind: {epc_kind}\n    host: epc\n"))
    rc = mplab_cli(["lte", "check", str(inventory)])
    out, err = capsys.readouterr()
    assert rc == 1, err
    assert "s1" in out and "eNB connected" in out and "attach" in out and "no UE-pool address" in out
    assert err.startswith("error: ") and "Traceback" not in err
    assert Host.closed == 3
    # srsepc logs to its console: the S1 check reads it from the unit's journal.
    assert seen["epc_console"] == ("srsepc: S1 Setup Response sent\n" if epc_kind == "srsepc" else "")
