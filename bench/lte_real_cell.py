"""The real LTE cell for one receiver (srsepc + srsenb + srsUE over ZMQ) beside the emulated LTE channel.

Real cell: srsepc, srsenb and srsUE on mplab's rendered files (tests/data/lab-lte.yaml with
``epc.kind: srsepc``, receiver n2's SIM, 50 PRB ZMQ radio) in one scratch namespace; srsUE's TUN
device in a second namespace (the receiver). S1 runs over the SCTP-over-UDP shim of the test rigs
(this kernel has no SCTP). Measured: attach time (srsUE start to its TUN address), ping RTT idle and
during a 20 s iperf3 downlink, the downlink rate, and the RRC release after srsenb's inactivity
timer (set to its minimum here so that the tail is seen).

Emulated: a one-receiver emulated testbed whose LTE channel has the rate the real cell achieved,
the real cell's idle RTT as base delay (the delay line; --no-emu-delay: none) and the inventory's
default LTE buffer (60 ms); the same ping/iperf3 measurements.

Prints one table; numbers are from this run. Needs root, the programs ($MPLAB_LTE_BIN or PATH),
clang (for the shim) and ~1.5 of 2 cores while the cell is up: run it alone.

    MPLAB_LTE_BIN=/path/to/srsran/bin uv run python bench/lte_real_cell.py [--seconds 20] [--prb 50]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path


from harness.deploy.trial import find_program
from harness.hosts.local import LocalHost, NamespaceHost
from harness.config.inventory import Inventory
from harness.hosts.netcmd import link_up_argv, netns_add_argv, netns_del_argv, route_add_argv
from rigs.sctpshim import build_shim, kernel_has_sctp
from lte.realcheck import bin_dirs
from harness.deploy.secrets import load_secrets
from lte.srsepc import render_srsepc
from lte.zmq import FFTW_HOME, UE_TUN, render_zmq
from rigs.ltelab import lab_data, write_secrets

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-bench-cell-"
RX = "n2"


def wait_line(proc, pattern: str, deadline_s: float) -> tuple[float, str]:
    """Seconds until a line of ``proc``'s output matches ``pattern`` (RuntimeError with the tail if not)."""
    t0 = time.monotonic()
    rx = re.compile(pattern)
    while time.monotonic() - t0 < deadline_s:
        out, err = proc.output_so_far()
        for line in (out + err).splitlines():
            if rx.search(line):
                return time.monotonic() - t0, line
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    out, err = proc.output_so_far()
    raise RuntimeError(f"{proc.label}: no /{pattern}/ within {deadline_s:.0f} s:\n{(out + err)[-1500:]}")


def ping_rtts(text: str) -> list[float]:
    return [float(m) for m in re.findall(r"time=([0-9.]+) ms", text)]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def cell_inventory(tmp: Path, prb: int) -> Inventory:
    d = lab_data()
    d["lte"]["enb"].update(address="127.0.1.1", n_prb=prb)
    d["lte"]["epc"].update(kind="srsepc", address="127.0.1.100", config_dir=str(tmp / "epc"), log_dir=str(tmp),
                           user_db=str(tmp / "epc" / "user_db.csv"))
    d["lte"]["lab_subnets"] = []
    return Inventory.model_validate(d)


def real_cell(seconds: int, prb: int, tmp: Path) -> dict:
    dirs = bin_dirs()
    progs = {p: find_program(p, dirs) for p in ("srsepc", "srsenb", "srsue", "iperf3", "ping")}
    missing = [p for p, path in progs.items() if path is None]
    if missing:
        raise SystemExit(f"needs {', '.join(missing)} (PATH or $MPLAB_LTE_BIN)")
    shim = None if kernel_has_sctp() else build_shim(tmp / "shim")
    inv = cell_inventory(tmp, prb)
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
        # the minimum inactivity timer, so that the RRC release (the tail) is seen within the run
        files = render_zmq(inv, RX, secrets, str(tmp / "enb"), ns_ue, rrc_inactivity_timer_ms=10251, n_prb=prb)
        epc_files, _ = render_srsepc(inv, secrets)
        for f in files + epc_files:
            p = Path(f.path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f.text)
        # line-buffered stdout (coreutils' stdbuf library) so that console lines arrive as they are printed
        stdbuf = "/usr/libexec/coreutils/libstdbuf.so"
        # srsRAN plans its FFTs with FFTW_MEASURE and keeps the plans in $HOME/.srsran_fftwisdom: without it
        # srsUE's "Waiting PHY to initialize" took 50-90 s here; the bench keeps its own wisdom in FFTW_HOME.
        FFTW_HOME.mkdir(parents=True, exist_ok=True)
        # in the scratch directory: srsUE writes its NAS context to ./.ctxt (one from this bench was committed once)
        env = ["env", "-C", str(tmp), f"HOME={FFTW_HOME}",
               f"LD_PRELOAD={shim} {stdbuf}" if shim else f"LD_PRELOAD={stdbuf}", "_STDBUF_O=L"]
        epc = cell.start(env + [progs["srsepc"], f"{inv.lte.epc.config_dir}/epc.conf"], label="srsepc")
        procs.append(epc)
        wait_line(epc, r"SP-GW Initialized|SPGW Initialized", 30)
        enb = cell.start(env + [progs["srsenb"], str(tmp / "enb" / "enb.conf")], label="srsenb")
        procs.append(enb)
        wait_line(enb, r"==== eNodeB started ===", 60)
        wait_line(epc, r"Sending S1 Setup Response", 20)
        ue = cell.start(env + [progs["srsue"], str(tmp / "enb" / "ue.conf")], label="srsue")
        procs.append(ue)
        # srsUE's PHY start-up (FFT plans, worker buffers) took 40-90 s on this shared machine, before any
        # radio exchange: it is reported apart, and attach is timed from "Attaching UE..." as a modem's would be.
        stages = {"phy_init": wait_line(ue, r"Waiting PHY to initialize \.\.\. done", 240)[0]}
        t0 = time.monotonic()
        for stage, pattern in (("cell_found", r"Found Cell"), ("rrc_connected", r"RRC Connected"),
                               ("attached", r"Network attach successful")):
            wait_line(ue, pattern, 60)
            stages[stage] = time.monotonic() - t0
        addr = None
        while time.monotonic() - t0 < 90 and addr is None:
            res = ue_ns.run(["ip", "-j", "-4", "addr", "show", "dev", UE_TUN], check=False)
            for link in json.loads(res.stdout or "[]") if res.returncode == 0 else []:
                for a in link.get("addr_info", []):
                    addr = a["local"]
            if ue.poll() is not None:
                raise RuntimeError(f"srsue exited: {''.join(ue.output_so_far())[-1500:]}")
            time.sleep(0.05)
        if addr is None:
            raise RuntimeError(f"srsue: no address on {UE_TUN} within 60 s: {''.join(ue.output_so_far())[-1500:]}")
        attach_s = time.monotonic() - t0
        if "--verbose" in sys.argv:
            print("--- srsue ---\n" + "".join(ue.output_so_far())[-3000:])
            print("--- srsenb ---\n" + "".join(enb.output_so_far())[-2000:])
            print("--- srsepc ---\n" + "".join(epc.output_so_far())[-2000:])
        ue_ns.run(route_add_argv("default", dev=UE_TUN))
        gw = str(inv.lte.epc.ue_gateway)
        idle = ping_rtts(ue_ns.run([progs["ping"], "-n", "-c", "20", "-i", "0.2", gw], timeout=30).stdout)
        srv = cell.start([progs["iperf3"], "-s", "-1", "-B", gw, "-p", "5999"], label="iperf3-s")
        procs.append(srv)
        time.sleep(0.3)
        load = ue_ns.start([progs["ping"], "-n", "-i", "0.2", "-w", str(seconds + 2), gw], label="ping-loaded")
        procs.append(load)
        res = ue_ns.run([progs["iperf3"], "-c", gw, "-p", "5999", "-R", "-t", str(seconds), "-J"],
                        timeout=seconds + 30)
        doc = json.loads(res.stdout)
        rate = doc["end"]["sum_received"]["bits_per_second"] / 1e6
        loaded = ping_rtts(load.wait(seconds + 10).stdout)
        # The tail: srsenb releases the idle UE after rrc_inactivity_timer (RRC idle), as a modem would.
        t_idle = time.monotonic()
        release_s, line = wait_line(enb, r"[Dd]isconnecting rnti|RRC.*[Rr]elease|Release.*rnti", 30)
        return {"attach_s": attach_s, "stages": stages, "ue_addr": addr, "rate_mbit": rate, "idle": idle, "loaded": loaded,
                "release_after_idle_s": time.monotonic() - t_idle, "release_line": line.strip()[:120],
                "retransmits": doc["end"].get("sum_sent", {}).get("retransmits")}
    finally:
        for p in reversed(procs):
            p.stop(grace_s=3.0)
        for ns in (ns_ue, ns_cell):
            root.run(netns_del_argv(ns), check=False)


def emulated(seconds: int, rate_mbit: float, delay_ms: float) -> dict:
    from _common import inventory as emu_inventory

    from harness.upkeep.clean import clean_prefix
    from harness.testbeds.emulated import EmulatedTestbed
    prefix = "mplab-bench-emucell-"
    inv = emu_inventory(prefix)
    data = inv.model_dump(mode="json")
    rx = data["receivers"][1]
    rx["interfaces"]["lte"]["channel"]["rate_mbit"] = round(rate_mbit, 1)
    rx["interfaces"]["lte"]["channel"]["delay_ms"] = round(delay_ms, 1)
    data["receivers"] = [rx]
    data["emulation"]["lte_cell"]["capacity_mbit"] = max(round(rate_mbit, 1), 1.0)
    inv = Inventory.model_validate(data)
    tb = EmulatedTestbed(inv)
    try:
        tb.setup([])
        hosts = {n: node.host for n, node in tb.nodes.items()}
        node = tb.nodes[rx["name"]]
        lte = node.interfaces["lte"]
        srv_addr = str(tb.server_address)
        h = hosts[rx["name"]]
        idle = ping_rtts(h.run(["ping", "-n", "-c", "20", "-i", "0.2", "-I", str(lte.address), srv_addr],
                               timeout=30).stdout)
        srv = tb.sender.start(["iperf3", "-s", "-1", "-B", srv_addr, "-p", "5999"], label="iperf3-s")
        time.sleep(0.3)
        load = h.start(["ping", "-n", "-i", "0.2", "-w", str(seconds + 2), "-I", str(lte.address), srv_addr],
                       label="ping-loaded")
        res = h.run(["iperf3", "-c", srv_addr, "-p", "5999", "-R", "-t", str(seconds), "-J", "-B", str(lte.address)],
                    timeout=seconds + 30)
        doc = json.loads(res.stdout)
        loaded = ping_rtts(load.wait(seconds + 10).stdout)
        srv.stop()
        return {"rate_mbit": doc["end"]["sum_received"]["bits_per_second"] / 1e6, "idle": idle, "loaded": loaded,
                "configured_mbit": round(rate_mbit, 1), "buffer_ms": rx["interfaces"]["lte"]["channel"]["buffer_ms"],
                "delay_ms": round(delay_ms, 1)}
    finally:
        tb.teardown()
        clean_prefix(prefix)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--prb", type=int, default=50, choices=[25, 50])
    ap.add_argument("--verbose", action="store_true", help="print the daemons' output at attach")
    ap.add_argument("--no-emu-delay", dest="emu_delay", action="store_false",
                    help="emulated channel without the real cell's idle RTT as base delay")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mplab-bench-cell-") as tmp:
        real = real_cell(a.seconds, a.prb, Path(tmp))
    # The emulated channel gets the real cell's rate and, through its delay line (downlink only), the real
    # cell's idle RTT as base delay: what remains to compare is the queueing under load and the tail.
    emu = emulated(a.seconds, real["rate_mbit"], statistics.median(real["idle"]) if a.emu_delay else 0.0)
    st = real["stages"]
    print(f"real cell ({a.prb} PRB, ZMQ, srsepc): attach {real['attach_s']:.2f} s from 'Attaching UE' to the TUN "
          f"address, UE {real['ue_addr']} (cell found {st['cell_found']:.2f} s, RRC connected {st['rrc_connected']:.2f} s, "
          f"NAS attach {st['attached']:.2f} s; srsUE PHY start-up before that {st['phy_init']:.0f} s)")
    print(f"{'':24}{'real cell':>14}{'emulated':>14}")
    print(f"{'downlink Mbit/s':24}{real['rate_mbit']:14.1f}{emu['rate_mbit']:14.1f}   (emulated configured "
          f"{emu['configured_mbit']} Mbit/s, buffer {emu['buffer_ms']} ms, delay line {emu['delay_ms']} ms)")
    for name, key in (("RTT idle ms (median)", "idle"), ("RTT loaded ms (median)", "loaded")):
        print(f"{name:24}{statistics.median(real[key]):14.2f}{statistics.median(emu[key]):14.2f}")
    print(f"{'RTT loaded ms (p95)':24}{pct(real['loaded'], 0.95):14.1f}{pct(emu['loaded'], 0.95):14.1f}")
    print(f"loaded/idle RTT: real {statistics.median(real['loaded']) / statistics.median(real['idle']):.2f}x, "
          f"emulated {statistics.median(emu['loaded']) / max(statistics.median(emu['idle']), 1e-3):.2f}x")
    print(f"tail: real RRC release {real['release_after_idle_s']:.1f} s after the download "
          f"(rrc_inactivity_timer 10251 ms): {real['release_line']!r}; emulated: no RRC state (power profile "
          "tail only)")


if __name__ == "__main__":
    main()
