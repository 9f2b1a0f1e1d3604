"""The all-software single-UE cell (srsenb + srsUE over ZeroMQ): configs always; a run only with srsRAN."""
from __future__ import annotations

import configparser

import pytest

from harness.errors import PreflightError
from harness.hosts.local import LocalHost
from harness.deploy.secrets import load_secrets
from lte.zmq import ENB_ZMQ_ARGS, UE_TUN, UE_ZMQ_ARGS, check, render_zmq
from lte_fixtures import KEYS, lab_inventory, write_secrets


def _ini(text):
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"))
    cp.read_string(text)
    return cp


def test_zmq_configs(tmp_path):
    files = {f.path.rsplit("/", 1)[1]: f for f in render_zmq(
        lab_inventory(), "n2", load_secrets(write_secrets(tmp_path / "s.yaml")), str(tmp_path), "mplab-ue")}
    assert set(files) == {"enb.conf", "rr.conf", "sib.conf", "rb.conf", "ue.conf"}
    enb = _ini(files["enb.conf"].text)
    assert enb["rf"]["device_name"] == "zmq" and enb["rf"]["device_args"] == ENB_ZMQ_ARGS
    assert enb["enb_files"]["rr_config"] == f"{tmp_path}/rr.conf"
    ue = _ini(files["ue.conf"].text)
    assert ue["rf"]["device_name"] == "zmq" and ue["rf"]["device_args"] == UE_ZMQ_ARGS
    # The two sides' ports cross: the eNB's tx is the UE's rx and vice versa.
    assert "tx_port=tcp://*:2000" in ENB_ZMQ_ARGS and "rx_port=tcp://localhost:2000" in UE_ZMQ_ARGS
    assert int(ue["rat.eutra"]["dl_earfcn"]) == int(enb["rf"]["dl_earfcn"]) == 3100
    assert ue["usim"]["imsi"] == "001010000000002"
    assert (ue["usim"]["k"], ue["usim"]["opc"]) == KEYS["001010000000002"]
    assert ue["usim"]["algo"] == "milenage" and len(ue["usim"]["imei"]) == 15
    assert ue["nas"]["apn"] == "internet"
    assert ue["gw"]["netns"] == "mplab-ue" and ue["gw"]["ip_devname"] == UE_TUN


def test_missing_srsran_is_reported_clearly():
    host = LocalHost("here")
    if host.which("srsenb") and host.which("srsue"):
        pytest.skip("srsRAN is installed here; the missing-binary message cannot be shown")
    with pytest.raises(PreflightError, match="needs srsRAN 4G, but .*not installed.*skipping it"):
        check(host)


@pytest.mark.root
def test_zmq_cell_runs_when_srsran_is_installed():
    host = LocalHost("here")
    try:
        check(host)
    except PreflightError as exc:
        pytest.skip(str(exc))
    pytest.skip("srsRAN is installed but an Open5GS EPC is needed too; run `mplab lte zmq` by hand")
