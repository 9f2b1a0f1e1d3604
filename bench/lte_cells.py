"""Every bandwidth x a few bands: what mplab says, what the real srsenb says, and ZMQ attach times.

Part 1 (srsenb alone): for each band and PRB count, mplab renders the lab cell (tests/data/lab-lte.yaml,
DL EARFCN in the middle of the band's valid range, ZeroMQ radio) or refuses it with its line; srsenb then
runs on the files in a scratch namespace until it has opened its radio and started ("==== eNodeB
started"), plus a few seconds for its MAC's cell checks, and every complaint it printed is collected.
The pre-fix sib.conf (``n_rb_cqi = 2`` at 6 PRB) is run too, to show srsenb's own reaction to it.

Part 2 (attach): srsepc + srsenb + srsUE over ZeroMQ (S1 over the test rigs' SCTP-over-UDP shim when the
kernel has no SCTP) at the given PRB counts; attach time from srsUE's "Attaching UE" (after its PHY
start-up, reported apart) to its TUN address.

Needs root and the programs ($MPLAB_LTE_BIN or PATH); run it alone (srsUE over ZMQ wants ~1.5 cores).

    MPLAB_LTE_BIN=/path/to/srsran/bin uv run python bench/lte_cells.py [--bands 3,7,20] [--attach 6,25,100]
"""
from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path


from harness.config.bands import earfcn_range
from harness.config.inventory import Inventory
from harness.deploy.secrets import load_secrets
from harness.deploy.trial import find_program
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import link_up_argv, netns_add_argv, netns_del_argv
from rigs.sctpshim import build_shim, kernel_has_sctp
from lte.realcheck import bin_dirs
from lte.render import render_srsenb
from lte.srsepc import render_srsepc
from lte.zmq import FFTW_HOME, UE_TUN, render_zmq
from rigs.ltelab import lab_data, write_secrets

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-cells-"
PRBS = (6, 15, 25, 50, 75, 100)
RX = "n2"
#: srsenb lines worth reporting (its own words; sched_helpers.cc, enb_cfg_parser.cc, rf, main.cc).
SRSENB_SAYS = re.compile(r"Invalid PUCCH[^\n]*|Invalid PRACH[^\n]*|ERROR[^\n]*|Error[^\n]*|Opening \d+ channels in RF "
                         r"device[^\n]*|==== eNodeB started ===|Setting frequency[^\n]*")


def inventory(tmp: Path, band: int, prb: int, earfcn: int | None = None) -> Inventory:
    """The lab cell on the ZMQ radio, srsEPC core on the namespace's loopback."""
    d = lab_data()
    lo, hi = earfcn_range(band, prb) or (0, 0)
    d["lte"]["enb"].update(address="127.0.1.1", n_prb=prb, band=band, dl_earfcn=earfcn or (lo + hi) // 2,
                           config_dir=str(tmp / "enb"), log_path=str(tmp / "enb" / "enb.log"),
                           rf={"device_name": "zmq", "device_args": "tx_port=tcp://*:2000,rx_port=tcp://localhost:"
                                                                    "2001,id=enb,base_srate=23.04e6"})
    d["lte"]["epc"].update(kind="srsepc", address="127.0.1.100", config_dir=str(tmp / "epc"), log_dir=str(tmp),
                           user_db=str(tmp / "epc" / "user_db.csv"))
    d["lte"]["lab_subnets"] = []
    return Inventory.model_validate(d)


def wait_for(proc, pattern: str, deadline_s: float) -> float | None:
    """Seconds until ``proc`` printed ``pattern`` (None at the deadline or when it exits)."""
    t0, rx = time.monotonic(), re.compile(pattern)
    while time.monotonic() - t0 < deadline_s:
        if rx.search("".join(proc.output_so_far())):
            return time.monotonic() - t0
        if proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def srsenb_alone(srsenb: str, band: int, prb: int, tmp: Path, plant_cqi: int | None = None) -> dict:
    """mplab's verdict and srsenb's words for one cell."""
    try:
        inv = inventory(tmp, band, prb)
        files = render_srsenb(inv)
    except Exception as exc:  # noqa: BLE001 - a refusal is a result here (its line goes in the table)
        return {"mplab": f"refused: {str(exc).splitlines()[0][:150]}", "srsenb": "-"}
    for f in files:
        text = f.text if not (plant_cqi and f.path.endswith("sib.conf")) else \
            re.sub(r"n_rb_cqi = \d+;", f"n_rb_cqi = {plant_cqi};", f.text)
        Path(f.path).parent.mkdir(parents=True, exist_ok=True)
        Path(f.path).write_text(text)
    root, ns = LocalHost("root"), f"{PREFIX}enb"
    root.run(netns_add_argv(ns))
    try:
        h = NamespaceHost("cell", ns)
        h.run(link_up_argv("lo"))
        h.run(["ip", "addr", "add", "127.0.1.1/8", "dev", "lo"], check=False)
        env = ["env", "-C", str(tmp), f"HOME={FFTW_HOME}", "LD_PRELOAD=/usr/libexec/coreutils/libstdbuf.so",
               "_STDBUF_O=L"]
        p = h.start(env + [srsenb, str(tmp / "enb" / "enb.conf")], label="srsenb")
        t = wait_for(p, r"==== eNodeB started ===", 120)
        time.sleep(3)                                     # the MAC's cell checks come with the stack's start
        out = "".join(p.output_so_far())
        p.stop(grace_s=3.0)
    finally:
        root.run(netns_del_argv(ns), check=False)
    says = list(dict.fromkeys(m.group(0).strip() for m in SRSENB_SAYS.finditer(out)))
    return {"mplab": "rendered, cell rules ok", "started_s": t, "srsenb": " / ".join(says)[:400]}


def attach(progs: dict, prb: int, tmp: Path, band: int = 7) -> dict:
    """srsepc + srsenb + srsUE over ZMQ; seconds from "Attaching UE" to srsUE's address."""
    shim = None if kernel_has_sctp() else build_shim(tmp / "shim")
    inv = inventory(tmp, band, prb)
    secrets = load_secrets(write_secrets(tmp / "secrets.yaml"))
    root = LocalHost("root")
    ns_cell, ns_ue = f"{PREFIX}enb", f"{PREFIX}{RX}"
    procs = []
    for ns in (ns_cell, ns_ue):
        root.run(netns_add_argv(ns))
    try:
        cell, ue_ns = NamespaceHost("cell", ns_cell), NamespaceHost(RX, ns_ue)
        for h in (cell, ue_ns):
            h.run(link_up_argv("lo"))
        for a in ("127.0.1.1/8", "127.0.1.100/8"):
            cell.run(["ip", "addr", "add", a, "dev", "lo"], check=False)
        files = render_zmq(inv, RX, secrets, str(tmp / "enb"), ns_ue, n_prb=prb) + render_srsepc(inv, secrets)[0]
        for f in files:
            Path(f.path).parent.mkdir(parents=True, exist_ok=True)
            Path(f.path).write_text(f.text)
        FFTW_HOME.mkdir(parents=True, exist_ok=True)
        stdbuf = "/usr/libexec/coreutils/libstdbuf.so"
        env = ["env", "-C", str(tmp), f"HOME={FFTW_HOME}",
               f"LD_PRELOAD={shim} {stdbuf}" if shim else f"LD_PRELOAD={stdbuf}", "_STDBUF_O=L"]
        epc = cell.start(env + [progs["srsepc"], f"{inv.lte.epc.config_dir}/epc.conf"], label="srsepc")
        procs.append(epc)
        wait_for(epc, r"SP-GW Initialized|SPGW Initialized", 30)
        enb = cell.start(env + [progs["srsenb"], str(tmp / "enb" / "enb.conf")], label="srsenb")
        procs.append(enb)
        s1 = wait_for(epc, r"Sending S1 Setup Response", 90)
        ue = cell.start(env + [progs["srsue"], str(tmp / "enb" / "ue.conf")], label="srsue")
        procs.append(ue)
        phy = wait_for(ue, r"Waiting PHY to initialize \.\.\. done", 300)
        t0 = time.monotonic()
        ok = wait_for(ue, r"Network attach successful", 90)
        addr = None
        while ok is not None and addr is None and time.monotonic() - t0 < 120:
            res = ue_ns.run(["ip", "-j", "-4", "addr", "show", "dev", UE_TUN], check=False)
            addr = next((a["local"] for ln in json.loads(res.stdout or "[]") for a in ln.get("addr_info", [])), None)
            time.sleep(0.05)
        enb_out = "".join(enb.output_so_far())
        return {"s1_s": s1, "phy_init_s": phy, "attach_s": (time.monotonic() - t0) if addr else None,
                "ue_addr": addr, "srsenb": " / ".join(dict.fromkeys(
                    m.group(0).strip() for m in SRSENB_SAYS.finditer(enb_out)))[:300],
                "ue_tail": "" if addr else "".join(ue.output_so_far())[-600:]}
    finally:
        for p in reversed(procs):
            p.stop(grace_s=3.0)
        for ns in (ns_ue, ns_cell):
            root.run(netns_del_argv(ns), check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bands", default="3,7,20")
    ap.add_argument("--prbs", default=",".join(map(str, PRBS)))
    ap.add_argument("--attach", default="6,25,100", help="PRB counts for the ZMQ attach ('' for none)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    a = ap.parse_args()
    progs = {p: find_program(p, bin_dirs()) for p in ("srsepc", "srsenb", "srsue")}
    if progs["srsenb"] is None:
        raise SystemExit("needs srsenb (PATH or $MPLAB_LTE_BIN)")
    res = {"alone": [], "attach": []}
    for band in map(int, a.bands.split(",")):
        for prb in map(int, a.prbs.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                r = {"band": band, "prb": prb, **srsenb_alone(progs["srsenb"], band, prb, Path(tmp))}
            print(json.dumps(r), flush=True)
            res["alone"].append(r)
    with tempfile.TemporaryDirectory() as tmp:
        r = {"band": 7, "prb": 6, "planted": "n_rb_cqi = 2", **srsenb_alone(progs["srsenb"], 7, 6, Path(tmp), 2)}
    print(json.dumps(r), flush=True)
    res["alone"].append(r)
    for prb in [int(x) for x in a.attach.split(",") if x]:
        with tempfile.TemporaryDirectory() as tmp:
            r = {"band": 7, "prb": prb, **attach(progs, prb, Path(tmp))}
        print(json.dumps(r), flush=True)
        res["attach"].append(r)
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
