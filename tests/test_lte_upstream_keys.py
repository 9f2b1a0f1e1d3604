"""Every key mplab writes is one the upstream programs read, for each supported release.

``tests/data/upstream_config_keys.json`` holds, per srsRAN 4G tag, the option names of srsenb/srsue/srsepc
``src/main.cc`` (boost::program_options refuses any other key in an INI file) and, per Open5GS tag, the key
paths of ``configs/open5gs/*.yaml.in`` and the YAML keys its parsers compare against. The real programs
check the same files in ``test_lte_realcheck.py`` where they are installed; this runs everywhere.
"""
from __future__ import annotations

import configparser
import json
from pathlib import Path

import pytest
import yaml

from harness.config.inventory import Inventory
from harness.deploy.secrets import load_secrets
from lte.render import render_open5gs, render_srsenb
from lte.srsepc import render_epc_conf
from lte.version import parse_version
from lte.zmq import render_zmq
from rigs.ltelab import lab_data, lab_inventory, write_secrets

UPSTREAM = json.loads((Path(__file__).parent / "data" / "upstream_config_keys.json").read_text())

#: Top-level sections of Open5GS's sample files that mplab leaves out, and why (any other omission fails).
OPTIONAL_SECTIONS = {
    "max": "2.6: the pools default to 1024 UEs without it",
    "parameter": "defaults are what an EPC needs",
    "time": "timer defaults",
    "usrsctp": "only for builds on usrsctp",
    "sgwc": "2.6 sgwu.yaml: the SGW-C's own section, unused by the SGW-U",
    "smf": "2.6 upf.yaml: the SMF's own section, unused by the UPF",
    "sbi": "2.6 smf.yaml: 5G core interfaces; mplab writes an EPC only",
    "scp": "2.6 smf.yaml: 5G core interfaces; mplab writes an EPC only",
    "sgsn": "2.6 mme.yaml: a 2G/3G SGSN peer (Gn); the lab has none",
}


def _ini_keys(text: str) -> list[str]:
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    cp.read_string(text)
    return [f"{s}.{k}" for s in cp.sections() for k in cp[s]]


def _paths(doc, pre=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{pre}.{k}" if pre else str(k)
            yield p, str(k)
            yield from _paths(v, p)
    elif isinstance(doc, list):
        for v in doc:
            yield from _paths(v, pre + "[]")


@pytest.mark.parametrize("release", sorted(UPSTREAM["srsran"]))
def test_srsran_ini_keys_are_options_of_that_release(release, tmp_path):
    opts = UPSTREAM["srsran"][release]
    d = lab_data()
    d["lte"]["enb"]["version"] = release
    inv = Inventory.model_validate(d)
    zmq = {f.path.rsplit("/", 1)[1]: f.text for f in render_zmq(
        inv, "n1", load_secrets(write_secrets(tmp_path / "s.yaml")), str(tmp_path), "ns")}
    d["lte"]["epc"]["kind"] = "srsepc"
    files = {"srsenb": [next(f.text for f in render_srsenb(inv) if f.path.endswith("enb.conf")), zmq["enb.conf"]],
             "srsue": [zmq["ue.conf"]], "srsepc": [render_epc_conf(Inventory.model_validate(d)).text]}
    for prog, texts in files.items():
        for text in texts:
            unknown = [k for k in _ini_keys(text) if k not in opts[prog]]
            assert not unknown, f"{prog} {release} does not know {unknown}"


@pytest.mark.parametrize("version", sorted(UPSTREAM["open5gs"]))
def test_open5gs_keys_are_read_by_that_version(version):
    up = UPSTREAM["open5gs"][version]
    known = set(up["parser_keys"])
    for f in render_open5gs(lab_inventory(), parse_version(version)):
        daemon = f.path.rsplit("/", 1)[1].removesuffix(".yaml")
        ours = list(_paths(yaml.safe_load(f.text)))
        sample = set(up["samples"][daemon])
        for path, key in ours:
            assert path in sample or key in known, f"{version} {daemon}.yaml: {path} is read by no parser"
        mine = {p for p, _ in ours}
        for top in (p for p in sample if "." not in p and "[" not in p):
            assert top in mine or top in OPTIONAL_SECTIONS, f"{version} {daemon}.yaml lacks the sample's {top}:"
