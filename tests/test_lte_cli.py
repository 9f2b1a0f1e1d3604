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


def test_lte_up_without_secrets_is_a_usage_error():
    res = _mplab("lte", "up", str(LAB))
    assert res.returncode == 2 and "no secrets file: pass --secrets FILE" in res.stderr


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


def test_ssh_destinations():
    import pytest

    from harness.errors import ConfigError
    from harness.hosts import LocalHost
    from harness.ssh import SSHHost
    from lte.hosts import host_for, parse_destination
    from lte_fixtures import lab_inventory
    assert parse_destination("root@192.168.1.20") == ("root", "192.168.1.20", 22)
    assert parse_destination("epc.lab:2222") == ("root", "epc.lab", 2222)
    assert parse_destination("mplab@10.0.0.1:22") == ("mplab", "10.0.0.1", 22)
    with pytest.raises(ConfigError, match="not \\[user@\\]address\\[:port\\]"):
        parse_destination("a b")
    inv = lab_inventory()
    h = host_for(inv, "epc", inv.lte.epc.ssh)               # built, not connected
    assert isinstance(h, SSHHost) and (h.user, h.address, h.port) == ("root", "192.168.1.21", 22)
    assert isinstance(host_for(inv, "enb", None), LocalHost)
