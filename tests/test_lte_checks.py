"""LTE checks: S1 setup from the MME log, attach (interface up, address from the UE pool), ping
through the LTE path, and a diagnosis naming the failed step and host.

The namespace test gives each receiver an ``lte0`` veth to an "EPC" namespace that holds
the UE pool's gateway, so attach and ping are checked against what the kernel reports.
"""
from __future__ import annotations

import ipaddress
import json

import pytest

from harness.testbeds.clean import clean_prefix
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import veth_argv
from harness.testbeds.base import Check
from lte.checks import attach_state, diagnose, ping_argv, run_checks, s1_setup_seen
from lte_fixtures import lab_inventory

# Captured from open5gs/open5gs issue #902 (v2.2.x MME log), addresses as logged there.
MME_LOG = """\
04/05 23:07:59.887: [mme] INFO: s1ap_server() [192.168.88.15]:36412 (../src/mme/s1ap-sctp.c:54)
04/05 23:08:02.329: [mme] INFO: eNB-S1 accepted[192.168.88.21]:36412 in s1_path module (../src/mme/s1ap-sctp.c:106)
04/05 23:08:02.329: [mme] INFO: eNB-S1 accepted[192.168.88.21] in master_sm module (../src/mme/mme-sm.c:173)
04/05 23:08:02.329: [mme] INFO: [ENB] max_num_of_ostreams : 30 (../src/mme/mme-context.c:1782)
04/05 23:08:02.329: [mme] INFO: [Added] Number of eNBs is now 1 (../src/mme/mme-context.c:1798)
"""

POOL = ipaddress.IPv4Network("10.45.0.0/16")


def test_s1_setup_from_a_real_mme_log():
    ok, detail = s1_setup_seen(MME_LOG, "192.168.88.21")
    assert ok and "eNBs now 1" in detail
    ok, detail = s1_setup_seen(MME_LOG, "192.168.88.99")
    assert not ok and "accepted only from 192.168.88.21" in detail
    assert s1_setup_seen("", "10.0.0.1") == (False, "no 'eNB-S1 accepted' from 10.0.0.1")


def _link(state="UP", flags=("BROADCAST", "UP", "LOWER_UP"), addrs=(("10.45.0.11", 16),)):
    return [{"ifname": "wwan0", "operstate": state, "flags": list(flags),
             "addr_info": [{"family": "inet", "local": a, "prefixlen": p} for a, p in addrs]}]


@pytest.mark.parametrize("links, expected, ok, words", [
    (_link(), None, True, "wwan0 up with 10.45.0.11"),
    (_link(state="UNKNOWN", flags=("POINTOPOINT", "UP", "LOWER_UP")), None, True, "up"),   # qmi/wwan, tun
    (_link(state="DOWN", flags=("BROADCAST",)), None, False, "wwan0 is down"),
    (_link(addrs=(("192.168.8.100", 24),)), None, False, "no address in the UE pool 10.45.0.0/16 (has 192.168.8.100/24)"),
    (_link(addrs=()), None, False, "(has none)"),
    (_link(), ipaddress.IPv4Address("10.45.0.12"), False, "not its static address 10.45.0.12"),
    ([], None, False, "no interface wwan0"),
])
def test_attach_state(links, expected, ok, words):
    got_ok, detail = attach_state(json.loads(json.dumps(links)), "wwan0", POOL, expected)
    assert got_ok is ok and words in detail


def test_ping_argv_pins_the_interface():
    assert ping_argv("wwan0", "10.45.0.1") == ["ping", "-n", "-q", "-c", "3", "-W", "2", "-I", "wwan0", "10.45.0.1"]


def test_diagnosis_names_first_failed_step_and_host():
    checks = [Check("epc", "s1-setup", True, "ok"), Check("n1", "attach", True, "ok"),
              Check("n2", "attach", False, "wwan0 is down", "is the modem in LTE mode?"),
              Check("n3", "ping", False, "no reply")]
    msg = diagnose(checks)
    assert msg.startswith("LTE check 'attach' failed on host 'n2': wwan0 is down (is the modem in LTE mode?)")
    assert "also failed: ping@n3" in msg
    assert diagnose(checks[:2]) is None


@pytest.mark.root
def test_checks_against_the_kernel(prefix, tmp_path):
    """n1 attached (pool address, ping answered), n2 has a non-pool address, n3 has its interface down."""
    from harness.config.inventory import Inventory
    from lte_fixtures import lab_data
    d = lab_data()
    for r in d["receivers"]:
        r["interfaces"]["lte"]["name"] = "lte0"
    d["lte"]["epc"]["log_dir"] = str(tmp_path)
    (tmp_path / "mme.log").write_text(MME_LOG.replace("192.168.88.21", "192.168.30.2"))
    inv = Inventory.model_validate(d)
    root = LocalHost("root")
    epc_ns = f"{prefix}epc"
    hosts = {}
    try:
        root.run(["ip", "netns", "add", epc_ns])
        epc = NamespaceHost("epc", epc_ns)
        epc.run(["ip", "link", "add", "pool", "type", "bridge"])
        epc.run(["ip", "addr", "add", "10.45.0.1/16", "dev", "pool"])
        epc.run(["ip", "link", "set", "pool", "up"])
        setup = {"n1": ("10.45.0.11/16", True), "n2": ("192.168.8.100/24", True), "n3": ("10.45.0.13/16", False)}
        for i, (name, (addr, up)) in enumerate(setup.items(), start=1):
            ns = f"{prefix}{name}"
            root.run(["ip", "netns", "add", ns])
            root.run(veth_argv("lte0", ns, f"ue{i}", epc_ns))
            epc.run(["ip", "link", "set", f"ue{i}", "master", "pool", "up"])
            h = NamespaceHost(name, ns)
            h.run(["ip", "addr", "add", addr, "dev", "lte0"])
            if up:
                h.run(["ip", "link", "set", "lte0", "up"])
            hosts[name] = h
        checks = run_checks(inv, epc, hosts)
    finally:
        clean_prefix(prefix)
    by = {(c.host, c.name): c for c in checks}
    assert by[("epc", "s1-setup")].ok
    assert by[("n1", "attach")].ok and by[("n1", "ping")].ok, by[("n1", "ping")].detail
    assert "3 replies from 10.45.0.1 via lte0" in by[("n1", "ping")].detail
    assert not by[("n2", "attach")].ok and "192.168.8.100/24" in by[("n2", "attach")].detail
    assert not by[("n3", "attach")].ok and "down" in by[("n3", "attach")].detail
    assert ("n2", "ping") not in by                         # no ping without an attach
    msg = diagnose(checks)
    assert msg.startswith("LTE check 'attach' failed on host 'n2'") and "IMSI 001010000000002" in msg
