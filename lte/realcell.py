"""A real srsRAN cell for one receiver of the emulated testbed (``interfaces.lte.real_cell``).

srsepc, srsenb and srsUE run in the testbed's eNB namespace, the eNodeB and the UE joined by
ZeroMQ (one UE per ZMQ cell: srsRAN 4G ZeroMQ app note). srsUE puts its tun device into the
receiver's namespace under the receiver's LTE interface name (``lte0``), and srsEPC gives it the
address the emulated channel would have had (10.20.<i>.2: the UE pool is the receiver's LTE /24,
srsepc's SGi tun takes the gateway 10.20.<i>.1 in the eNB namespace). So the testbed's routes,
rules and MPTCP endpoint are the same as with the emulated channel; its HTB, radio loop, delay
line and loss do not act on this path (``shaped = False``): the cell's own scheduler and queues do.

S1 is SCTP. A lab kernel has it; this machine's kernel has not, so a test rig sets
``MPLAB_SCTP_SHIM`` to the SCTP-over-UDP preload library of the test rigs
(``rigs/sctp_over_udp.c``, built by ``rigs.sctpshim``); it is used only when
the kernel has no SCTP, and ``describe`` records which. The programs come from ``$MPLAB_LTE_BIN``
(searched first) or PATH. Every process is ours by pid (its own session), stopped UE first.

The SIM is a software SIM: its K/OPc are drawn per run and written only into the run's files.
"""
from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import secrets as pysecrets
import socket
import time
from pathlib import Path

from harness.config.inventory import Inventory, RealCell
from harness.deploy.secrets import Secrets
from harness.deploy.trial import find_program
from harness.errors import PreflightError
from harness.hosts.ready import wait_until
from harness.hosts.local import BackgroundProcess, Host
from harness.emulation.access import AccessKinds, LteLink
from harness.upkeep.preflight import Check
from lte.realcheck import BIN_ENV, bin_dirs
from lte.srsepc import render_srsepc
from lte.zmq import FFTW_HOME, output_tail, render_zmq

log = logging.getLogger("mplab.lte.realcell")

KIND = "srsran-zmq"
PROGRAMS = ("srsepc", "srsenb", "srsue")
SHIM_ENV = "MPLAB_SCTP_SHIM"
#: S1 addresses on the eNB namespace's loopback (S1 never leaves the namespace).
ENB_S1, EPC_S1 = "127.0.1.1", "127.0.1.100"
#: coreutils' stdbuf preload: line-buffered stdout, so that readiness lines arrive as printed.
STDBUF = "/usr/libexec/coreutils/libstdbuf.so"
#: srsenb's console when its MAC refuses the cell's PUCCH/PRACH layout (srsenb/src/stack/mac/sched_helpers.cc).
CELL_REFUSED_RE = re.compile(r"Invalid (?:PUCCH|PRACH) configuration[^\n]*")
#: Test PLMN 001/01, band 7 (the lab reference inventory's cell).
MCC, MNC, TAC, DL_EARFCN = "001", "01", 7, 3100


def kernel_has_sctp() -> bool:
    """True when this kernel can open an SCTP socket (then S1 needs no shim)."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_SEQPACKET, 132).close()
        return True
    except OSError:
        return False


def sctp_situation(env: dict[str, str] | None = None) -> tuple[bool, str, str | None]:
    """(usable, what it is, shim path or None): kernel SCTP, else the test rigs' shim from ``MPLAB_SCTP_SHIM``."""
    env = os.environ if env is None else env
    if kernel_has_sctp():
        return True, "kernel SCTP", None
    shim = env.get(SHIM_ENV, "")
    if shim and Path(shim).is_file():
        return True, f"no kernel SCTP: SCTP-over-UDP shim of the test rigs ({shim})", shim
    what = f"{SHIM_ENV}={shim} is not a file" if shim else f"{SHIM_ENV} unset"
    return False, f"this kernel has no SCTP (S1 needs it) and {what}", None


def realcell_checks(host_name: str, env: dict[str, str] | None = None) -> list[Check]:
    """One check per program (srsepc, srsenb, srsue), and one for S1's SCTP."""
    dirs = bin_dirs()
    out = []
    for prog in PROGRAMS:
        path = find_program(prog, dirs)
        out.append(Check(host_name, f"real cell: program {prog}", path is not None, path or "not found",
                         f"build srsRAN 4G (23.04) with ZeroMQ (libzmq3-dev) and put its bin directory in "
                         f"${BIN_ENV} or PATH"))
    ok, what, _ = sctp_situation(env)
    out.append(Check(host_name, "real cell: S1 SCTP", ok, what,
                     f"modprobe sctp (a lab kernel has it), or on a test rig set {SHIM_ENV} to the shim built by "
                     "rigs.sctpshim.build_shim"))
    return out


def cell_inventory(inv: Inventory, link: LteLink, n_prb: int, imsi: str, config_dir: Path) -> Inventory:
    """A one-receiver, one-cell inventory (srsepc, ZMQ eNodeB) whose UE gets ``link.address``."""
    data = inv.model_dump(mode="json")
    rx = next(r for r in data["receivers"] if r["name"] == link.receiver)
    rx["interfaces"]["lte"].update(address=link.address, real_cell=None)
    rx["sim"] = {"imsi": imsi}
    data["receivers"] = [rx]
    plmn = {"mcc": MCC, "mnc": MNC}
    data["lte"] = {
        "lab_subnets": [],
        "enb": {"host": "enb", "address": ENB_S1, "plmn": plmn, "tac": TAC, "dl_earfcn": DL_EARFCN,
                "n_prb": n_prb, "config_dir": str(config_dir / "enb"), "log_path": str(config_dir / "enb.log")},
        "epc": {"kind": "srsepc", "host": "epc", "address": EPC_S1, "plmn": plmn, "tacs": [TAC],
                "ue_pool": str(ipaddress.IPv4Network(f"{link.gateway}/24", strict=False)), "config_dir": str(config_dir / "epc"),
                "log_dir": str(config_dir), "user_db": str(config_dir / "epc" / "user_db.csv")},
    }
    # The UE pool's first host is srsepc's SGi address: it must be the link's gateway.
    cell = Inventory.model_validate(data)
    assert cell.lte is not None and str(cell.lte.epc.ue_gateway) == link.gateway, (cell.lte.epc.ue_gateway, link)
    return cell


def wait_line(proc: BackgroundProcess, pattern: str, deadline_s: float) -> float:
    """Seconds until ``proc`` prints a line matching ``pattern``.

    Raises:
        NotReady: naming the process and the line, at the deadline or as soon as ``proc`` exits, with the
            end of its output.
    """
    t0 = time.monotonic()
    rx = re.compile(pattern)
    wait_until(lambda: rx.search("".join(proc.output_so_far())), deadline_s,
               f"real cell: {proc.label} printing /{pattern}/", proc=proc, poll_s=0.1,
               detail=lambda: f"its output ends:\n{output_tail(proc, 1200)}")
    return time.monotonic() - t0


class SrsranZmqCell:
    """srsepc + srsenb + srsUE over ZMQ for one receiver; srsUE's tun is the receiver's LTE interface."""

    kind = KIND
    shaped = False

    def __init__(self, spec: RealCell, inventory: Inventory, phy_deadline_s: float = 240.0,
                 attach_deadline_s: float = 90.0) -> None:
        self.spec = spec
        self.inventory = inventory
        self.phy_deadline_s = phy_deadline_s
        self.attach_deadline_s = attach_deadline_s
        self._procs: list[BackgroundProcess] = []
        self._link: LteLink | None = None
        self.attach_s: float | None = None

    def check(self, root: Host) -> list[Check]:
        return realcell_checks(root.name)

    def up(self, link: LteLink) -> None:
        progs = {p: find_program(p, bin_dirs()) for p in PROGRAMS}
        missing = [p for p, path in progs.items() if path is None]
        ok, sctp, shim = sctp_situation()
        if missing or not ok:
            raise PreflightError(f"real cell for {link.receiver}: missing {', '.join(missing) or 'nothing'}; "
                                 f"S1: {sctp}")
        where = link.state_dir / f"realcell-{link.receiver}"
        imsi = MCC + MNC + f"{link.index:010d}"
        cell = cell_inventory(self.inventory, link, self.spec.n_prb, imsi, where)
        sec = Secrets.model_validate({"sim": {imsi: {"k": pysecrets.token_hex(16), "opc": pysecrets.token_hex(16)}}})
        files = render_zmq(cell, link.receiver, sec, str(where / "enb"), link.receiver_netns,
                           n_prb=self.spec.n_prb, ifname=link.ifname)
        files += render_srsepc(cell, sec)[0]
        for f in files:
            p = Path(f.path)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(f.text)
            p.chmod(f.mode)
        for a in (ENB_S1, EPC_S1):
            link.enb.run(["ip", "addr", "add", f"{a}/8", "dev", "lo"], check=False)
        FFTW_HOME.mkdir(parents=True, exist_ok=True)
        preload = " ".join(p for p in (shim, STDBUF if Path(STDBUF).exists() else None) if p)
        # In the run's directory: srsUE keeps its NAS security context in ./.ctxt and reads it back at its next
        # start (srsue/src/stack/upper/nas.cc), which must be neither the caller's directory nor another run's.
        env = ["env", "-C", str(where), f"HOME={FFTW_HOME}", "_STDBUF_O=L"] + (
            [f"LD_PRELOAD={preload}"] if preload else [])
        t0 = time.monotonic()
        try:
            epc = self._start(link.enb, env + [progs["srsepc"], str(where / "epc" / "epc.conf")], "srsepc")
            wait_line(epc, r"SP-GW Initialized|SPGW Initialized", 30)
            enb = self._start(link.enb, env + [progs["srsenb"], str(where / "enb" / "enb.conf")], "srsenb")
            wait_line(enb, r"==== eNodeB started ===", 60)
            wait_line(epc, r"S1 Setup Response", 20)
            # srsenb survives a cell its MAC refused (and S1 succeeds): say so now, not after the attach deadline
            refused = CELL_REFUSED_RE.search("".join(enb.output_so_far()))
            if refused:
                raise PreflightError(f"real cell for {link.receiver}: srsenb refused the cell: {refused.group(0)}")
            ue = self._start(link.enb, env + [progs["srsue"], str(where / "enb" / "ue.conf")], "srsue")
            wait_line(ue, r"Waiting PHY to initialize \.\.\. done", self.phy_deadline_s)
            wait_line(ue, r"Network attach successful", self.attach_deadline_s)
            self._wait_address(link, ue)
        except BaseException:
            self.down()
            raise
        self.attach_s = time.monotonic() - t0
        self._link = link
        log.info("real cell up for %s in %.1f s (%s)", link.receiver, self.attach_s, sctp)

    def _start(self, host: Host, argv: list[str], label: str) -> BackgroundProcess:
        proc = host.start(argv, label=label)
        self._procs.append(proc)
        return proc

    def _wait_address(self, link: LteLink, ue: BackgroundProcess, deadline_s: float = 30.0) -> None:
        """Until srsUE's tun in the receiver namespace carries the receiver's address (``NotReady`` if not;
        ``PreflightError`` at once when it carries another one)."""
        def addressed() -> bool:
            res = link.receiver_host.run(["ip", "-j", "-4", "addr", "show", "dev", link.ifname], check=False)
            if res.returncode != 0:
                return False
            addrs = [a["local"] for ln in json.loads(res.stdout or "[]") for a in ln.get("addr_info", [])]
            if addrs and link.address not in addrs:
                raise PreflightError(f"real cell: {link.ifname} got {addrs}, not {link.address}")
            return link.address in addrs
        wait_until(addressed, deadline_s, f"real cell: {link.address} on {link.ifname} in {link.receiver_netns}",
                   proc=ue, poll_s=0.1, detail=lambda: f"srsue's output ends:\n{output_tail(ue, 800)}")

    def down(self) -> None:
        """UE, then eNodeB, then EPC (srsRAN's order for a clean ZMQ shutdown); idempotent."""
        for p in reversed(self._procs):
            try:
                p.stop(grace_s=3.0)
            except Exception as exc:  # noqa: BLE001 - teardown goes on to the next process
                log.warning("real cell: stopping %s: %s", p.label, exc)
        self._procs.clear()
        self._link = None

    def describe(self) -> dict:
        return {"kind": self.kind, "n_prb": self.spec.n_prb, "radio": "srsRAN 4G over ZeroMQ (not emulated radio)",
                "s1_sctp": sctp_situation()[1],
                "attach_s": None if self.attach_s is None else round(self.attach_s, 3)}

    def health(self) -> str | None:
        """srsepc, srsenb and srsUE still running, and the UE still holding its address."""
        if self._link is None:
            return "real cell: not up"
        for p in self._procs:
            code = p.poll()
            if code is not None:
                return f"real cell: {p.label} exited (code {code}); its output ends: {output_tail(p, 300)}"
        link = self._link
        res = link.receiver_host.run(["ip", "-j", "-4", "addr", "show", "dev", link.ifname], check=False)
        addrs = [a["local"] for ln in json.loads(res.stdout or "[]") for a in ln.get("addr_info", [])] \
            if res.returncode == 0 else []
        if link.address not in addrs:
            return (f"real cell: the UE is no longer attached ({link.ifname} in {link.receiver_netns} has "
                    f"{', '.join(addrs) or 'no address'}, not {link.address})")
        return None


#: The access kinds ``lte`` provides; the CLI passes this into the emulated testbed.
ACCESS_KINDS: AccessKinds = {KIND: SrsranZmqCell}
