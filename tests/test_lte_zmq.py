"""The all-software single-UE cell (srsenb + srsUE over ZeroMQ): configs always; a run only with srsRAN."""
from __future__ import annotations

import configparser
import ipaddress

import pytest

from harness.config.inventory import Inventory
from harness.errors import NotReady, PreflightError
from harness.hosts.local import LocalHost
from harness.deploy.secrets import load_secrets
from lte.zmq import ENB_ZMQ_ARGS, UE_TUN, UE_ZMQ_ARGS, ZmqCell, check, render_zmq
from rigs.ltelab import KEYS, lab_data, lab_inventory, write_secrets


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
    # Both programs open their metrics CSV even when it is disabled: in the cell's directory, not /tmp.
    assert enb["expert"]["metrics_csv_filename"] == f"{tmp_path}/enb_metrics.csv"
    assert ue["general"]["metrics_csv_filename"] == f"{tmp_path}/ue_metrics.csv"


def test_missing_srsran_is_reported_clearly(tmp_path):
    host = LocalHost("here")
    if host.which("srsue"):
        pytest.skip("srsRAN is installed here; the missing-binary message cannot be shown")
    with pytest.raises(PreflightError, match="needs srsRAN 4G, but .*not installed.*skipping it"):
        check(host)
    # a program in one of the given directories ($MPLAB_LTE_BIN's) is found there, like everywhere else
    _fake(tmp_path, "srsenb", "exit 0")
    with pytest.raises(PreflightError, match="but srsue is not installed"):
        check(host, [str(tmp_path / "missing"), str(tmp_path)])


def _fake(d, name: str, body: str):
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(f"#!/bin/sh\n{body}\n")
    (d / name).chmod(0o755)


def _zmq_files(tmp_path, netns: str, inv=None):
    return render_zmq(inv or lab_inventory(), "n2", load_secrets(write_secrets(tmp_path / "s.yaml")),
                      str(tmp_path / "cell"), netns)


def test_zmq_cell_wait_ends_when_the_enodeb_exits_and_runs_in_the_cell_directory(tmp_path, monkeypatch):
    """Stand-ins for srsenb/srsue: srsenb refuses its file at once. The wait for the UE's address (60 s) ends
    then, naming srsenb and its error, and both programs ran in the cell's directory (srsUE's ./.ctxt)."""
    bin_dir = tmp_path / "bin"
    _fake(bin_dir, "srsenb", 'touch .ctxt; echo "Error parsing rr.conf"; exit 3')
    _fake(bin_dir, "srsue", "exec sleep 60")
    monkeypatch.chdir(tmp_path)
    cell = ZmqCell(LocalHost("here"), "mplab-tzmq-nosuchns", dirs=(str(bin_dir),))
    with pytest.raises(NotReady, match=r"(?s)srsUE's address .*exited \(3\).*srsenb-zmq exited 3.*Error parsing rr.conf"):
        cell.start(_zmq_files(tmp_path, "mplab-tzmq-nosuchns"), ipaddress.IPv4Network("10.45.0.0/16"), deadline_s=60)
    assert cell.ue is None and cell.enb is None                      # both stopped
    assert (tmp_path / "cell" / ".ctxt").exists() and not (tmp_path / ".ctxt").exists()


@pytest.mark.root
@pytest.mark.real_lte
def test_zmq_cell_attaches_through_srsepc(prefix, tmp_path):
    """srsenb + srsUE started by ``ZmqCell`` (as ``mplab lte zmq`` does) attach through srsepc, and srsUE keeps
    its NAS context in the cell's directory."""
    from harness.deploy.trial import find_program, scratch_netns
    from rigs.sctpshim import build_shim, kernel_has_sctp
    from lte.realcell import STDBUF, wait_line
    from lte.realcheck import bin_dirs, write
    from lte.srsepc import render_srsepc

    missing = [p for p in ("srsepc", "srsenb", "srsue") if find_program(p, bin_dirs()) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (not on PATH or under $MPLAB_LTE_BIN)")
    shim = None if kernel_has_sctp() else str(build_shim(tmp_path / "shim"))
    # (ZmqCell runs srsRAN with HOME at the FFT plans every mplab cell shares: see lte.zmq.FFTW_HOME)
    launcher = (("env", f"LD_PRELOAD={shim}") if shim else ())
    preload = " ".join(p for p in (shim, STDBUF) if p)                  # srsepc: line-buffered, for wait_line
    d = lab_data()
    d["lte"]["lab_subnets"] = []
    d["lte"]["enb"]["address"] = "127.0.1.1"
    d["lte"]["epc"].update(kind="srsepc", address="127.0.1.100", config_dir=str(tmp_path / "epc"),
                           log_dir=str(tmp_path), user_db=str(tmp_path / "epc" / "user_db.csv"))
    inv = Inventory.model_validate(d)
    sec = load_secrets(write_secrets(tmp_path / "s.yaml"))
    with scratch_netns(f"{prefix}cell", ["127.0.1.1", "127.0.1.100"]) as cell_ns, \
            scratch_netns(f"{prefix}ue") as ue_ns:
        write(render_srsepc(inv, sec)[0])
        epc = cell_ns.start(["env", "-C", str(tmp_path), "_STDBUF_O=L", f"LD_PRELOAD={preload}",
                             find_program("srsepc", bin_dirs()), str(tmp_path / "epc" / "epc.conf")], label="srsepc")
        cell = ZmqCell(cell_ns, ue_ns.netns, dirs=tuple(bin_dirs()), launcher=launcher)
        try:
            wait_line(epc, r"SP-GW Initialized|SPGW Initialized", 30)
            addr = cell.start(_zmq_files(tmp_path, ue_ns.netns, inv), inv.lte.epc.ue_pool, deadline_s=240)
        finally:
            cell.stop()
            epc.stop(grace_s=3.0)
    assert addr == "10.45.0.12"                                          # n2's static address, from srsepc
    assert (tmp_path / "cell" / ".ctxt").exists()                        # srsUE writes it as it stops (nas::stop)
