"""`mplab lte`/`mplab wifi` and the make targets: usage errors exit 2 with a clear message; render works."""
from __future__ import annotations

import subprocess
import sys

from lte_fixtures import GOLDEN, LAB, REPO


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
    from lte_fixtures import lab_data, lab_inventory
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
