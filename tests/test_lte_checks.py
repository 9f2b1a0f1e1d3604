"""LTE checks: S1 setup from the MME log, attach (interface up, address from the UE pool), ping
through the LTE path, and a diagnosis naming the failed step and host.

The namespace test gives each receiver an ``lte0`` veth to an "EPC" namespace that holds
the UE pool's gateway, so attach and ping are checked against what the kernel reports.
"""
from __future__ import annotations

import ipaddress
import json

import pytest

from harness.upkeep.clean import clean_prefix
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import veth_argv
from harness.upkeep.preflight import Check
from lte.checks import (attach_hint, attach_state, diagnose, ping_argv, run_checks, s1_setup_seen,
                        srsenb_s1_verdict)
from lte.startlog import last_start, starts
from rigs.ltelab import lab_inventory

# Captured from https://github.com/open5gs/open5gs/issues/902 (v2.2.x MME log), addresses as logged there.
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


# Open5GS 2.7 lines for the same events (src/mme/mme-sm.c, mme-context.c, s1ap-handler.c, lib/app/ogs-init.c).
BANNER = "11/26 03:00:00.000: [app] INFO: Configuration: '/etc/open5gs/mme.yaml' (../lib/app/ogs-init.c:133)\n"
ACCEPTED = ("11/26 03:00:02.329: [mme] INFO: eNB-S1 accepted[192.168.30.2]:36412 in s1_path module "
            "(../src/mme/mme-sm.c:108)\n"
            "11/26 03:00:02.329: [mme] INFO: [Added] Number of eNBs is now 1 (../src/mme/mme-context.c:2842)\n")
REMOVED = ("11/26 03:05:00.000: [mme] INFO: eNB-S1[192.168.30.2] connection refused!!! (../src/mme/mme-sm.c:173)\n"
           "11/26 03:05:00.000: [mme] INFO: [Removed] Number of eNBs is now 0 (../src/mme/mme-context.c:2876)\n")
REFUSED = ("11/26 03:00:02.330: [mme] WARNING: S1-Setup failure: (../src/mme/s1ap-handler.c:245)\n"
           "11/26 03:00:02.330: [mme] WARNING:     Cannot find Served TAI. Check 'mme.tai' configuration "
           "(../src/mme/s1ap-handler.c:246)\n")


@pytest.mark.parametrize("log, ok, detail", [
    (BANNER + ACCEPTED, True, "eNB 192.168.30.2 accepted, no S1-Setup failure; eNBs now 1"),
    (BANNER + ACCEPTED + REMOVED, False, "eNB 192.168.30.2 was accepted and later removed (eNBs now 0)"),
    (BANNER + ACCEPTED + REFUSED, False, "the MME refused S1 Setup from eNB 192.168.30.2: Cannot find Served TAI. "
                                         "Check 'mme.tai' configuration"),
    (BANNER + ACCEPTED + REMOVED + ACCEPTED, True, "eNB 192.168.30.2 accepted, no S1-Setup failure; eNBs now 1"),
])
def test_s1_verdict_on_this_starts_mme_log(log, ok, detail):
    assert s1_setup_seen(log, "192.168.30.2") == (ok, detail)


def test_an_earlier_starts_accept_does_not_pass_todays_check():
    # mme.log appended across starts: yesterday the eNB was accepted; today's start has no eNB at all.
    log = BANNER + ACCEPTED + BANNER.replace("03:00:00", "09:00:00")
    assert s1_setup_seen(log, "192.168.30.2")[0] is True            # the whole file would pass ...
    assert s1_setup_seen(last_start(log), "192.168.30.2") == (False, "no 'eNB-S1 accepted' from 192.168.30.2")
    assert starts(log) == 2 and starts(last_start(log)) == 1


# srsenb 23.04's lines (srsenb/src/stack/s1ap/s1ap.cc, srsenb/src/stack/mac/sched_helpers.cc).
S1_OK = '2026-11-26T03:00:02.331 [S1AP   ] [I] Proc "S1Setup" - S1Setup procedure completed successfully\n'


@pytest.mark.parametrize("text, ok, words", [
    ("", None, "has not logged S1 Setup yet"),
    (S1_OK, True, "S1Setup procedure completed successfully"),
    ("S1 Setup Failure. Cause: unknown-PLMN\n", False, "S1 Setup Failure, cause unknown-PLMN"),
    ("Failed to initiate S1 connection. Attempting reconnection in 10 seconds\n", False, "retrying every 10 s"),
    (S1_OK + "SCTP Association Shutdown. Association: 5\n", False, "S1 lost after setup"),
    ("Invalid PUCCH configuration: nrb_pucch=2 does not allow space for Msg3 transmission..\n" + S1_OK, False,
     "srsenb: Invalid PUCCH configuration: nrb_pucch=2 does not allow space for Msg3"),
])
def test_srsenb_s1_verdict(text, ok, words):
    got, detail, side = srsenb_s1_verdict(text)
    assert got is ok and words in detail
    if ok is False and "PUCCH" in text:
        assert side.startswith("eNB")


def test_attach_hint_names_the_likely_side():
    imsi = "001010000000001"
    assert attach_hint(imsi, BANNER + ACCEPTED).startswith("radio side: IMSI 001010000000001 never reached the MME")
    rej = BANNER + ACCEPTED + f"11/26 03:00:05.000: [emm] INFO: [{imsi}] Attach reject [OGS_NAS_EMM_CAUSE:8]\n"
    assert attach_hint(imsi, rej).startswith("EPC side: the MME rejected IMSI")
    done = BANNER + ACCEPTED + f"11/26 03:00:05.000: [emm] INFO: [{imsi}] Attach complete (../src/mme/emm-sm.c:1407)\n"
    assert attach_hint(imsi, done).startswith("UE side")


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
    from rigs.ltelab import lab_data
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


def test_enb_s1_check_reads_srsenbs_own_log(tmp_path):
    from harness.hosts.local import LocalHost
    from lte.checks import check_enb_s1
    inv = lab_inventory()
    inv = inv.model_copy(update={"lte": inv.lte.model_copy(update={"enb": inv.lte.enb.model_copy(
        update={"log_path": str(tmp_path / "enb.log")})})})
    (tmp_path / "enb.log").write_text(S1_OK)
    assert check_enb_s1(inv, LocalHost("enb")).ok
    (tmp_path / "enb.log").write_text("S1 Setup Failure. Cause: unknown-PLMN\n")
    c = check_enb_s1(inv, LocalHost("enb"))
    assert not c.ok and c.detail == "srsenb: S1 Setup Failure, cause unknown-PLMN" and "EPC" in c.fix
