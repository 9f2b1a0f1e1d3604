"""srsEPC as the core (epc.kind: srsepc): epc.conf and user_db.csv from the subscriber inputs Open5GS gets,
SQNs carried over from the file srsepc wrote back, and what the inventory refuses for it."""
from __future__ import annotations

import configparser

import pytest
from pydantic import ValidationError

from harness.errors import ConfigError
from harness.config.inventory import Inventory
from lte.checks import srsepc_s1_seen
from harness.deploy.secrets import load_secrets
from lte.srsepc import SQN_ZERO, inventory_rows, merge_sqn, parse_user_db, render_srsepc
from lte.subscribers import inventory_documents
from rigs.ltelab import KEYS, lab_data, write_secrets

#: Every option of srsepc/src/main.cc at release_22_04 (the smallest set of 22.04 / 23.04 / 23.11; 23.04 adds
#: mme.lac, which mplab does not write): boost::program_options refuses any other key in epc.conf.
SRSEPC_OPTIONS = {
    "mme": {"mme_code", "name", "mme_group", "tac", "mcc", "mnc", "mme_bind_addr", "dns_addr", "full_net_name",
            "short_net_name", "apn", "encryption_algo", "integrity_algo", "paging_timer", "request_imeisv"},
    "hss": {"db_file"},
    "spgw": {"gtpu_bind_addr", "sgi_if_addr", "sgi_if_name", "max_paging_queue"},
    "pcap": {"enable", "filename"},
    "log": {"all_level", "all_hex_limit", "filename", "nas_level", "s1ap_level", "mme_gtpc_level",
            "spgw_gtpc_level", "gtpu_level", "spgw_level", "hss_level"},
}


def _inv(**epc):
    d = lab_data()
    d["lte"]["epc"].update(kind="srsepc", **epc)
    return Inventory.model_validate(d)


@pytest.fixture
def secrets(tmp_path):
    return load_secrets(write_secrets(tmp_path / "s.yaml"))


def test_epc_conf_keys_and_values(secrets):
    inv = _inv()
    files, _ = render_srsepc(inv, secrets)
    conf, db = files
    assert (conf.path, db.path, db.mode) == ("/etc/srsran/epc.conf", "/etc/srsran/user_db.csv", 0o600)
    cp = configparser.ConfigParser()
    cp.read_string(conf.text)
    for section in cp.sections():
        unknown = set(cp[section]) - SRSEPC_OPTIONS[section]
        assert not unknown, f"[{section}] {unknown}: srsepc would refuse them"
    mme = cp["mme"]
    assert (mme["mcc"], mme["mnc"], int(mme["tac"], 16)) == ("001", "01", inv.lte.enb.tac)
    assert mme["mme_bind_addr"] == cp["spgw"]["gtpu_bind_addr"] == "192.168.30.1"
    assert int(mme["mme_group"], 16) == 2 and int(mme["mme_code"], 16) == 1 and mme["apn"] == "internet"
    assert cp["spgw"]["sgi_if_addr"] == "10.45.0.1" and cp["hss"]["db_file"] == db.path
    assert cp["log"]["filename"] == "/tmp/epc.log"


def test_user_db_from_the_same_inputs_as_open5gs(secrets):
    inv = _inv()
    rows = parse_user_db(render_srsepc(inv, secrets)[0][1].text)
    docs = {d["imsi"]: d for d in inventory_documents(inv, secrets)}
    assert set(rows) == set(docs) == set(KEYS)
    for imsi, cols in rows.items():
        sec = docs[imsi]["security"]
        assert len(cols) == 10 and cols[1] == "mil" and cols[4] == "opc"
        assert (cols[3].upper(), cols[5].upper(), cols[6]) == (sec["k"], sec["opc"], sec["amf"])
        assert cols[9] == docs[imsi]["slice"][0]["session"][0]["ue"]["ipv4"]       # static address per IMSI
        assert cols[7] == SQN_ZERO
    assert rows["001010000000001"][0] == "n1" and rows["001010000000001"][9] == "10.45.0.11"


def test_sqn_kept_reset_dropped_and_new(secrets):
    inv = _inv()
    rows = inventory_rows(inv, secrets)
    k1, opc1 = KEYS["001010000000001"]
    existing = ("# srsepc wrote this\n"
                f"n1,mil,001010000000001,{k1.lower()},opc,{opc1.lower()},8000,0000000012A0,9,10.45.0.11\n"
                f"n2,mil,001010000000002,{'F' * 32},opc,{'E' * 32},8000,000000000777,9,10.45.0.12\n"
                f"old,mil,001010000000009,{'1' * 32},opc,{'2' * 32},8000,000000000100,9,dynamic\n")
    merged, what = merge_sqn(rows, existing)
    assert what.kept == ("001010000000001 0000000012a0",)
    assert what.reset == ("001010000000002",)          # keys changed: said, not silent
    assert what.dropped == ("001010000000009",) and what.new == ("001010000000003",)
    assert [r.sqn for r in merged] == ["0000000012a0", SQN_ZERO, SQN_ZERO]
    assert "0000000012a0" in render_srsepc(inv, secrets, existing)[0][1].text


def test_malformed_user_db_is_refused_not_overwritten(secrets):
    with pytest.raises(ConfigError, match="line 2 is not a srsepc subscriber line"):
        render_srsepc(_inv(), secrets, "# ok\nn1,mil,001010000000001,short\n")


def test_inventory_refusals():
    with pytest.raises(ValidationError, match="srsepc's MME serves one TAC"):
        _inv(tacs=[7, 9])
    d = lab_data()
    d["lte"]["epc"]["kind"] = "srsepc"
    d["receivers"][0]["interfaces"]["lte"]["address"] = "10.45.1.11"
    with pytest.raises(ValidationError, match=r"outside srsepc's SGi subnet 10.45.0.0/24"):
        Inventory.model_validate(d)
    assert _inv().lte.epc.config_dir == "/etc/srsran"
    assert _inv(config_dir="/opt/epc").lte.epc.config_dir == "/opt/epc"


# srsepc's console/log lines (srsepc/src/mme/s1ap_mngmt_proc.cc)
def test_srsepc_s1_log_lines():
    ok = "2023-06-01T10:00:00 [MME ] [I] Received S1 Setup Request.\n[MME ] [I] Sending S1 Setup Response\n"
    assert srsepc_s1_seen(ok) == (True, "S1 Setup Request answered with S1 Setup Response")
    bad = ok + "[MME ] [I] Received S1 Setup Request.\n[MME ] [W] Sending S1 Setup Failure - No matching TAC\n"
    assert srsepc_s1_seen(bad) == (False, "srsepc refused the eNB's S1 Setup: No matching TAC")
    assert srsepc_s1_seen("HSS Initialized.\n")[0] is False
    left = ok + "2026-11-26T03:05:00.000 [S1AP   ] [I] Deleting eNB context. eNB Id: 0x19b\n"
    assert srsepc_s1_seen(left) == (False, "srsepc deleted eNB 0x19b's context after S1 Setup (the eNB left)")


def test_two_tac_cell_gets_a_srsepc_verdict(tmp_path):
    """check-configs tries srsepc as the other core; a cell whose MME serves two TACs cannot have it, and says so."""
    from lte.realcheck import plan
    from rigs.ltelab import lab_data
    from harness.config.inventory import Inventory
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srsepc").write_text("#!/bin/sh\nexit 0\n")
    (bindir / "srsepc").chmod(0o755)
    d = lab_data()
    d["lte"]["epc"]["tacs"] = [7, 8]
    p = plan(Inventory.model_validate(d), tmp_path / "scratch", [str(bindir)])
    v = next(v for v in p.absent if v.name == "srsepc (other core)")
    assert v.ok is None and v.detail == "not tried: srsepc's MME serves one TAC and this cell's MME serves [7, 8]"
