"""Rendered srsenb and Open5GS configs: they parse, carry the inventory's values, match golden files,
and the 2.6 and 2.7 schemas differ where Open5GS's did."""
from __future__ import annotations

import configparser
import io
import os

import libconf
import pytest
import yaml

from harness.errors import ConfigError
from lte.render import EPC_DAEMONS, SRSENB_FILES, render_open5gs, render_srsenb
from lte.version import parse_version
from rigs.ltelab import GOLDEN, lab_inventory

UPDATE = os.environ.get("MPLAB_UPDATE_GOLDEN") == "1"
VERSIONS = {"open5gs-2.6": "2.6.6", "open5gs-2.7.0": "2.7.0", "open5gs-2.7": "2.7.2"}


def _by_name(files):
    return {f.path.rsplit("/", 1)[1]: f for f in files}


def _ini(text):
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    cp.read_string(text)
    return cp


def _libconf(text):
    return libconf.load(io.StringIO(text))


@pytest.fixture(scope="module")
def inv():
    return lab_inventory()


@pytest.fixture(scope="module")
def srs(inv):
    return _by_name(render_srsenb(inv))


@pytest.fixture(scope="module")
def epc(inv):
    return {gen: {n: yaml.safe_load(f.text) for n, f in _by_name(render_open5gs(inv, parse_version(v))).items()}
            for gen, v in VERSIONS.items()}


def test_golden_files(inv):
    rendered = {"srsenb": render_srsenb(inv)}
    rendered |= {gen: render_open5gs(inv, parse_version(v)) for gen, v in VERSIONS.items()}
    for gen, files in rendered.items():
        for f in files:
            p = GOLDEN / gen / f.path.rsplit("/", 1)[1]
            if UPDATE:
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(f.text)
            assert p.exists(), f"missing golden file {p} (MPLAB_UPDATE_GOLDEN=1 writes them)"
            assert f.text == p.read_text(), f"{gen}/{p.name} differs from its golden file"


def test_enb_conf_parses_with_every_key(inv, srs):
    assert set(srs) == set(SRSENB_FILES)
    cp = _ini(srs["enb.conf"].text)
    enb, lte = inv.lte.enb, inv.lte
    assert cp["enb"]["mcc"] == "001" and cp["enb"]["mnc"] == "01"
    assert int(cp["enb"]["enb_id"], 16) == enb.enb_id
    assert cp["enb"]["mme_addr"] == str(lte.epc.address)
    assert cp["enb"]["gtp_bind_addr"] == cp["enb"]["s1c_bind_addr"] == str(enb.address)
    assert int(cp["enb"]["n_prb"]) == 50
    assert cp["enb_files"]["rr_config"] == "/etc/srsran/rr.conf"
    assert cp["enb_files"]["sib_config"] == "/etc/srsran/sib.conf"
    assert cp["enb_files"]["rb_config"] == "/etc/srsran/rb.conf"
    assert int(cp["rf"]["dl_earfcn"]) == 3100
    assert cp["rf"]["device_name"] == "UHD"
    assert cp["rf"]["device_args"] == "recv_frame_size=9232,send_frame_size=9232"
    assert float(cp["rf"]["tx_gain"]) == 80 and float(cp["rf"]["rx_gain"]) == 40
    assert int(cp["rf"]["time_adv_nsamples"]) == 100
    assert int(cp["expert"]["rrc_inactivity_timer"]) == 11576
    # srsenb opens its metrics CSV even when disabled: in the cell's directory, never a shared /tmp file.
    assert cp["expert"]["metrics_csv_filename"] == f"{enb.config_dir}/enb_metrics.csv"
    assert cp["log"]["filename"] == "/tmp/enb.log"


def test_rr_sib_rb_parse_as_libconfig(srs):
    rr = _libconf(srs["rr.conf"].text)
    cell = rr["cell_list"][0]
    assert (cell["cell_id"], cell["tac"], cell["pci"]) == (1, 7, 1)
    assert cell["dl_earfcn"] == 3100 and cell["ul_earfcn"] == 21100
    assert rr["mac_cnfg"]["ulsch_cnfg"]["max_harq_tx"] == 4
    assert "0x0007" in srs["rr.conf"].text          # hex, as srsRAN's example writes it
    sib = _libconf(srs["sib.conf"].text)
    assert sib["sib1"]["sched_info"][0]["si_mapping_info"] == [3]
    assert sib["sib2"]["rr_config_common_sib"]["prach_cnfg"]["prach_cnfg_info"]["prach_freq_offset"] == 2
    rb = _libconf(srs["rb.conf"].text)
    assert [q["qci"] for q in rb["qci_config"]] == [7, 9]


# Key paths each daemon needs for this topology, per schema generation. "[]" = first list item.
NEEDS = {
    "2.6": {
        "mme": ["logger.file", "mme.freeDiameter", "mme.s1ap[].addr", "mme.gtpc[].addr", "mme.gummei.plmn_id.mcc",
                "mme.gummei.mme_gid", "mme.gummei.mme_code", "mme.tai.plmn_id.mnc", "mme.tai.tac",
                "sgwc.gtpc[].addr", "smf.gtpc[].addr", "mme.network_name.full"],
        "sgwc": ["sgwc.gtpc[].addr", "sgwc.pfcp[].addr", "sgwu.pfcp[].addr"],
        "sgwu": ["sgwu.pfcp[].addr", "sgwu.gtpu[].addr"],
        "smf": ["smf.pfcp[].addr", "smf.gtpc[].addr", "smf.gtpu[].addr", "smf.subnet[].addr", "smf.subnet[].dnn",
                "smf.mtu", "smf.freeDiameter", "upf.pfcp[].addr", "smf.dns"],
        "upf": ["upf.pfcp[].addr", "upf.gtpu[].addr", "upf.subnet[].addr"],
        "hss": ["db_uri", "hss.freeDiameter", "logger.file"],
        "pcrf": ["db_uri", "pcrf.freeDiameter", "logger.file"],
    },
    "2.7": {
        "mme": ["logger.file.path", "global.max.ue", "mme.freeDiameter", "mme.s1ap.server[].address",
                "mme.gtpc.server[].address", "mme.gtpc.client.sgwc[].address", "mme.gtpc.client.smf[].address",
                "mme.gummei[].plmn_id.mcc", "mme.gummei[].mme_gid", "mme.tai[].plmn_id.mnc", "mme.tai[].tac"],
        "sgwc": ["sgwc.gtpc.server[].address", "sgwc.pfcp.server[].address", "sgwc.pfcp.client.sgwu[].address"],
        "sgwu": ["sgwu.pfcp.server[].address", "sgwu.gtpu.server[].address"],
        "smf": ["smf.pfcp.server[].address", "smf.pfcp.client.upf[].address", "smf.gtpc.server[].address",
                "smf.gtpu.server[].address", "smf.session[].subnet", "smf.session[].gateway", "smf.session[].dnn",
                "smf.mtu", "smf.freeDiameter"],
        "upf": ["upf.pfcp.server[].address", "upf.gtpu.server[].address", "upf.session[].subnet",
                "upf.session[].gateway"],
        "hss": ["db_uri", "hss.freeDiameter", "logger.file.path"],
        "pcrf": ["db_uri", "pcrf.freeDiameter", "logger.file.path"],
    },
}


def _get(doc, path):
    for part in path.split("."):
        lst = part.endswith("[]")
        key = part[:-2] if lst else part
        assert isinstance(doc, dict) and key in doc, f"missing {path} (at {key})"
        doc = doc[key]
        if lst:
            assert isinstance(doc, list) and doc, f"{path}: {key} is not a non-empty list"
            doc = doc[0]
    return doc


@pytest.mark.parametrize("gen, schema", [("open5gs-2.6", "2.6"), ("open5gs-2.7", "2.7")])
def test_every_needed_key_present(epc, gen, schema):
    docs = epc[gen]
    assert set(docs) == {f"{d}.yaml" for d in EPC_DAEMONS}
    for daemon, paths in NEEDS[schema].items():
        for path in paths:
            assert _get(docs[f"{daemon}.yaml"], path) is not None, f"{gen}/{daemon}.yaml: {path} is empty"


def test_values_from_inventory_and_consistent_with_enb(inv, srs, epc):
    enb_ini = _ini(srs["enb.conf"].text)["enb"]
    rr_tac = _libconf(srs["rr.conf"].text)["cell_list"][0]["tac"]
    for gen in ("open5gs-2.6", "open5gs-2.7"):
        mme = epc[gen]["mme.yaml"]["mme"]
        new = gen == "open5gs-2.7"
        tai = mme["tai"][0] if new else mme["tai"]
        gummei = mme["gummei"][0] if new else mme["gummei"]
        for plmn in (tai["plmn_id"], gummei["plmn_id"]):
            assert (plmn["mcc"], plmn["mnc"]) == (enb_ini["mcc"], enb_ini["mnc"])  # strings: "001" stays "001"
        assert tai["tac"] == rr_tac == inv.lte.enb.tac
        s1ap = mme["s1ap"]["server"][0]["address"] if new else mme["s1ap"][0]["addr"]
        assert s1ap == enb_ini["mme_addr"]
        sgwu = epc[gen]["sgwu.yaml"]["sgwu"]["gtpu"]
        assert (sgwu["server"][0]["address"] if new else sgwu[0]["addr"]) == str(inv.lte.epc.address)
        for d in ("hss.yaml", "pcrf.yaml"):
            assert epc[gen][d]["db_uri"] == "mongodb://localhost/open5gs"


def test_2_6_and_2_7_differ_where_the_schemas_do(epc):
    old, new, v270 = epc["open5gs-2.6"], epc["open5gs-2.7"], epc["open5gs-2.7.0"]
    assert isinstance(old["mme.yaml"]["mme"]["s1ap"], list) and "server" in new["mme.yaml"]["mme"]["s1ap"]
    assert isinstance(old["mme.yaml"]["mme"]["tai"], dict) and isinstance(new["mme.yaml"]["mme"]["tai"], list)
    assert isinstance(old["mme.yaml"]["mme"]["gummei"], dict) and isinstance(new["mme.yaml"]["mme"]["gummei"], list)
    assert "sgwc" in old["mme.yaml"] and "sgwc" not in new["mme.yaml"]           # peers moved under mme.gtpc.client
    assert "sgwu" in old["sgwc.yaml"] and "client" in new["sgwc.yaml"]["sgwc"]["pfcp"]
    assert "upf" in old["smf.yaml"] and "upf" not in new["smf.yaml"]
    assert old["smf.yaml"]["smf"]["subnet"][0]["addr"] == "10.45.0.1/16"
    assert new["smf.yaml"]["smf"]["session"][0] == {"subnet": "10.45.0.0/16", "gateway": "10.45.0.1", "dnn": "internet"}
    assert v270["smf.yaml"]["smf"]["session"][0] == {"subnet": "10.45.0.1/16", "dnn": "internet"}   # v2.7.0 form
    assert "global" in new["mme.yaml"] and "global" not in old["mme.yaml"]
    assert old["mme.yaml"]["logger"]["file"] == "/var/log/open5gs/mme.log"
    assert v270["mme.yaml"]["logger"]["file"] == "/var/log/open5gs/mme.log"
    assert new["mme.yaml"]["logger"]["file"] == {"path": "/var/log/open5gs/mme.log"}


def test_several_tacs_render_as_a_list(tmp_path):
    from harness.config.inventory import Inventory
    from rigs.ltelab import lab_data
    d = lab_data()
    d["lte"]["epc"]["tacs"] = [7, 9]
    inv = Inventory.model_validate(d)
    for v in ("2.6.6", "2.7.2"):
        mme = yaml.safe_load(_by_name(render_open5gs(inv, parse_version(v)))["mme.yaml"].text)["mme"]
        tai = mme["tai"] if v.startswith("2.6") else mme["tai"][0]
        assert tai["tac"] == [7, 9]


@pytest.mark.parametrize("text, version, schema", [
    ("Open5GS daemon v2.7.2\n", "2.7.2", "2.7"),
    ("2.6.6~jammy", "2.6.6", "2.6"),
    ("open5gs daemon v2.8.0", "2.8.0", "2.7"),
])
def test_version_parsing(text, version, schema):
    v = parse_version(text)
    assert (str(v), v.schema) == (version, schema)


@pytest.mark.parametrize("text", ["v2.5.6", "3.0.0", "1.3.0"])
def test_unknown_versions_are_refused(text):
    with pytest.raises(ConfigError, match="not a version mplab knows"):
        parse_version(text).schema  # noqa: B018 - read for its effect: the property raises


def test_no_version_in_text():
    with pytest.raises(ConfigError, match="no Open5GS version"):
        parse_version("command not found")


# --- what the real srsenb, srsUE and Open5GS daemons refused in mplab's earlier configs, per supported release ------------

#: Sections srsenb's parse_rb() cannot do without, by release (srsenb/src/enb_cfg_parser.cc at each tag):
#: five_qi_config is a mandatory section since 22.04; srb1/srb2_5g_config since 22.04.1 ("Optional 5G SRB
#: configuration is not supported yet"). qci_config was always mandatory.
RB_REQUIRED = {"22.04": ["qci_config", "five_qi_config"],
               "23.04": ["qci_config", "srb1_5g_config", "srb2_5g_config", "five_qi_config"],
               "23.11": ["qci_config", "srb1_5g_config", "srb2_5g_config", "five_qi_config"]}
SRSRAN_VERSIONS = sorted(RB_REQUIRED)
OPEN5GS_27 = ["2.7.0", "2.7.2", "2.8.0"]


def _with_enb(**enb):
    from harness.config.inventory import Inventory
    from rigs.ltelab import lab_data
    d = lab_data()
    d["lte"]["enb"].update(enb)
    return Inventory.model_validate(d)


def _zmq_files(inv, tmp_path):
    from harness.deploy.secrets import load_secrets
    from lte.zmq import render_zmq
    from rigs.ltelab import write_secrets
    return _by_name(render_zmq(inv, "n1", load_secrets(write_secrets(tmp_path / "s.yaml")), str(tmp_path), "ns"))


@pytest.mark.parametrize("release", SRSRAN_VERSIONS)
def test_rb_conf_has_the_sections_srsenb_requires(release):
    rb = _libconf(_by_name(render_srsenb(_with_enb(version=release)))["rb.conf"].text)
    for section in RB_REQUIRED[release]:
        assert section in rb, f"srsenb {release} refuses rb.conf without {section}"
    assert [q["five_qi"] for q in rb["five_qi_config"]] == [7, 9]
    for srb in ("srb1_5g_config", "srb2_5g_config"):
        am = rb[srb]["rlc_config"]
        assert set(am) == {"ul_am", "dl_am"} and am["ul_am"]["sn_field_len"] == 12
    # each 5QI's RLC mode is one parse_rb knows (am or um_bi_dir), with its PDCP DRB block
    for q in rb["five_qi_config"]:
        assert {"am", "um_bi_dir"} & set(q["rlc_config"]) and "drb" in q["pdcp_nr_config"]


@pytest.mark.parametrize("release", SRSRAN_VERSIONS)
def test_ue_conf_release_and_sample_rate(release, tmp_path):
    ue = _ini(_zmq_files(_with_enb(version=release), tmp_path)["ue.conf"].text)
    # release 15 made srsUE fail "Error packing EUTRA capabilities"; 8 is its default
    assert int(ue["rrc"]["release"]) == 8
    # a fixed srate (23.04e6) broke attach on the 50-PRB ZMQ cell; srsUE must follow the cell
    assert "srate" not in ue["rf"]


@pytest.mark.parametrize("release", SRSRAN_VERSIONS)
def test_rrc_inactivity_timer_not_below_srsenb_minimum(release, tmp_path):
    for files in (_by_name(render_srsenb(_with_enb(version=release))), _zmq_files(_with_enb(version=release),
                                                                                   tmp_path)):
        timers = _libconf(files["sib.conf"].text)["sib2"]["ue_timers_and_constants"]
        low = timers["t310"] + timers["t311"] + timers["n310"] + 50       # srsenb's own bound
        timer = _ini(files["enb.conf"].text)["expert"].get("rrc_inactivity_timer")
        assert timer is None or int(timer) >= low, f"rrc_inactivity_timer {timer} < srsenb's minimum {low}"
    # the ZMQ cell keeps its UE connected: srsUE does not answer paging once idle
    assert int(_ini(_zmq_files(_with_enb(version=release), tmp_path)["enb.conf"].text)["expert"][
        "rrc_inactivity_timer"]) >= 3_600_000


def test_inventory_refuses_a_timer_below_srsenb_minimum():
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="below srsenb's minimum 10251 ms"):
        _with_enb(rrc_inactivity_timer_ms=10000)
    assert _with_enb(rrc_inactivity_timer_ms=10251).lte.enb.rrc_inactivity_timer_ms == 10251


def test_2_6_smf_turns_sbi_tls_off(epc):
    # Without it Open5GS 2.6.x's smfd refuses to start, SBI or not: "[sbi] ERROR: TLS enabled but no server key"
    # (lib/sbi/context.c; seen with 2.6.6 built from its tag, tests/test_lte_realcheck.py).
    assert epc["open5gs-2.6"]["smf.yaml"]["sbi"] == {"server": {"no_tls": True}, "client": {"no_tls": True}}
    assert "sbi" not in epc["open5gs-2.7"]["smf.yaml"]


@pytest.mark.parametrize("version", OPEN5GS_27)
def test_every_2_7_daemon_has_a_global_section(inv, version):
    # Without it v2.7's pools are sized for 0 UEs: epoll_create() failed (22:Invalid argument).
    for name, f in _by_name(render_open5gs(inv, parse_version(version))).items():
        assert yaml.safe_load(f.text)["global"]["max"]["ue"] > 0, f"{version} {name}"


@pytest.mark.parametrize("release", ["21.10", "24.04", "22.07"])
def test_unknown_srsran_releases_are_refused(release):
    with pytest.raises(ConfigError, match=f"lte.enb.version: srsRAN 4G {release}.0 is not a release mplab knows"):
        render_srsenb(_with_enb(version=release))
