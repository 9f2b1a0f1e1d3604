"""`mplab lte check-configs --hosts`: each daemon checked on the machine that will run it, over SSH (a real
OpenSSH server in a namespace per host: rigs.sshrig), with the versions installed there."""
from __future__ import annotations

import os

import pytest

from harness.config.inventory import Inventory
from harness.hosts.local import LocalHost
from harness.upkeep.clean import clean_prefix
from lte.deploy import LteHosts
from lte.hostcheck import check_hosts
from lte.realcheck import bin_dirs
from harness.deploy.trial import find_program
from rigs.ltelab import lab_data


@pytest.fixture
def rig(prefix):
    from rigs.sshrig import SshdRig
    root = LocalHost("root")
    r = SshdRig(prefix)
    try:
        for name in ("enb", "epc"):
            root.run(["ip", "netns", "add", f"{prefix}{name}"])
            r.add(name, f"{prefix}{name}")
        yield r
    finally:
        r.close()
        clean_prefix(prefix)


def _stub(path, version):
    """A program that only answers --version (the version reading is what is under test here)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "Version {version}" && exit 0\nexit 3\n')
    path.chmod(0o755)


@pytest.mark.root
def test_version_on_the_enb_host_against_the_pin(rig, prefix, tmp_path):
    _stub(tmp_path / "bin" / "srsenb", "23.4.0")
    d = lab_data()
    d["lte"]["enb"].update(bin_dir=str(tmp_path / "bin"), version="22.10")
    d["lte"]["epc"].update(version="2.7.2")
    inv = Inventory.model_validate(d)
    hosts = LteHosts(enb=rig.ssh_host("enb"), epc=rig.ssh_host("epc"))
    try:
        verdicts = {v.name: v for v in check_hosts(inv, hosts, f"{prefix}chk")}
    finally:
        hosts.enb.close()
        hosts.epc.close()
    v = verdicts["srsenb version @enb"]
    assert v.ok is False and "srsRAN 4G 22.10 is pinned but host enb runs 23.04.0 (srsenb --version)" in v.detail
    # the EPC host has no Open5GS: said so for that host, not taken from this machine
    epc = [x for n, x in verdicts.items() if n.endswith("@epc")]
    assert epc and all(x.ok is False for x in epc) and "epc" in epc[0].detail


@pytest.mark.root
@pytest.mark.real_lte
def test_real_srsenb_checked_on_its_host_over_ssh(rig, prefix, tmp_path):
    prog = find_program("srsenb", bin_dirs())
    if prog is None:
        pytest.skip("srsenb not installed (not on PATH or under $MPLAB_LTE_BIN)")
    d = lab_data()
    d["lte"]["enb"].update(bin_dir=os.path.dirname(prog), version="23.04")
    d["lte"]["epc"].update(version="2.7.2")
    inv = Inventory.model_validate(d)
    hosts = LteHosts(enb=rig.ssh_host("enb"), epc=rig.ssh_host("epc"))
    try:
        verdicts = {v.name: v for v in check_hosts(inv, hosts, f"{prefix}chk")}
    finally:
        hosts.enb.close()
        hosts.epc.close()
    assert verdicts["srsenb version @enb"].ok and "runs srsRAN 4G 23.04" in verdicts["srsenb version @enb"].detail
    assert verdicts["srsenb @enb"].ok, verdicts["srsenb @enb"].detail


@pytest.mark.root
def test_preflight_version_lines_from_the_hosts(prefix, tmp_path):
    from rigs.sshrig import SshdRig
    from lte.hostcheck import version_checks
    _stub(tmp_path / "bin" / "srsenb", "23.4.0")
    mmed = tmp_path / "o5" / "open5gs-mmed"
    mmed.parent.mkdir()
    mmed.write_text("#!/bin/sh\necho 'Open5GS daemon v2.7.2'\n")
    mmed.chmod(0o755)
    d = lab_data()
    d["lte"]["enb"].update(bin_dir=str(tmp_path / "bin"), version="23.04")
    d["lte"]["epc"].update(version="2.6")
    inv = Inventory.model_validate(d)
    root = LocalHost("root")
    rig = SshdRig(prefix)
    try:
        for name in ("enb", "epc"):
            root.run(["ip", "netns", "add", f"{prefix}{name}"])
        rig.add("enb", f"{prefix}enb")
        # the EPC host's PATH has that open5gs-mmed
        rig.add("epc", f"{prefix}epc", env={"PATH": f"{mmed.parent}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"})
        hosts = LteHosts(enb=rig.ssh_host("enb"), epc=rig.ssh_host("epc"))
        try:
            checks = {c.name: c for c in version_checks(inv, hosts)}
        finally:
            hosts.enb.close()
            hosts.epc.close()
    finally:
        rig.close()
        clean_prefix(prefix)
    assert checks["LTE: srsRAN 4G version"].ok and checks["LTE: srsRAN 4G version"].detail == "23.04.0"
    o5 = checks["LTE: Open5GS version"]
    assert not o5.ok and "Open5GS 2.6 is pinned but host epc (open5gs-mmed -v) has 2.7.2" in o5.detail
