"""The optional all-software LTE cell: srsenb over ZeroMQ with one srsUE in a namespace.

srsRAN 4G's ZMQ radio is a REQ/REP socket pair, so it carries exactly one eNodeB and one
UE (srsRAN 4G ZeroMQ app note: "only one eNB and one UE are supported"); it serves one
receiver. srsUE runs in the receiver's network namespace (``[gw] netns``) so that its
traffic really crosses the TUN interface instead of short-cutting through the host.
Start order: EPC, eNodeB, UE; stop: UE first, then the eNodeB (which must be restarted
before it can serve a UE again).

When srsenb/srsue are not installed, ``check`` says so and nothing starts; the
configuration files can still be rendered and checked.
"""
from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.deploy.files import ConfigFile
from harness.errors import PreflightError
from harness.hosts.local import BackgroundProcess, Host
from harness.hosts.ready import wait_until
from harness.config.inventory import Inventory
from harness.config.radio import RfDevice
from lte.render import BANNER, Role, render_srsenb, srsran_templates, template_env
from lte.secrets import Secrets, sim_keys

#: Device arguments from srsRAN 4G's ZeroMQ app note (rf_zmq_imp.c argument names).
ENB_ZMQ_ARGS = "fail_on_disconnect=true,tx_port=tcp://*:2000,rx_port=tcp://localhost:2001,id=enb,base_srate=23.04e6"
UE_ZMQ_ARGS = "tx_port=tcp://*:2001,rx_port=tcp://localhost:2000,id=ue,base_srate=23.04e6"
UE_TUN = "tun_srsue"
#: 23.04 MHz base rate fits up to 100 PRB; the app note's examples use 50.
ZMQ_N_PRB = 50
#: srsUE does not answer paging once RRC-idle, so downlink traffic after an idle spell longer than the
#: timer fails ("T3413 expired -- Could not page the ue"); the ZMQ cell keeps the UE connected for an hour.
ZMQ_RRC_INACTIVITY_MS = 3_600_000


def zmq_inventory(inv: Inventory, config_dir: str, rrc_inactivity_timer_ms: int = ZMQ_RRC_INACTIVITY_MS,
                  n_prb: int = ZMQ_N_PRB) -> Inventory:
    """``inv`` with the eNodeB's radio replaced by ZMQ, and its files under ``config_dir``."""
    assert inv.lte is not None
    enb = inv.lte.enb.model_copy(update={
        "rf": RfDevice(device_name="zmq", device_args=ENB_ZMQ_ARGS, tx_gain_db=80, rx_gain_db=40),
        "n_prb": n_prb, "config_dir": config_dir, "log_path": f"{config_dir}/enb.log",
        "rrc_inactivity_timer_ms": rrc_inactivity_timer_ms})
    return inv.model_copy(update={"lte": inv.lte.model_copy(update={"enb": enb})})


def render_zmq(inv: Inventory, receiver: str, secrets: Secrets, config_dir: str, netns: str,
               rrc_inactivity_timer_ms: int = ZMQ_RRC_INACTIVITY_MS, n_prb: int = ZMQ_N_PRB,
               ifname: str = UE_TUN) -> list[ConfigFile[Role]]:
    """srsenb's four files with a ZMQ radio, plus ``ue.conf`` for ``receiver``'s SIM.

    ``rrc_inactivity_timer_ms``: an hour by default (srsUE does not answer paging); a bench that
    wants to see the RRC release after idle sets srsenb's minimum instead. ``ifname``: srsUE's tun
    device (the emulated testbed's real cell names it after the receiver's LTE interface).
    """
    zinv = zmq_inventory(inv, config_dir, rrc_inactivity_timer_ms, n_prb)
    r = inv.receiver(receiver)
    if r.sim is None:
        raise PreflightError(f"receiver {receiver} has no SIM (sim.imsi) for srsUE")
    keys = sim_keys(secrets, r.sim.imsi)
    env = template_env()
    # IMEI: any 15 digits; derived from the IMSI so that each receiver's UE is recognisable in the MME log.
    imei = "35" + r.sim.imsi[-13:]
    ue = env.get_template(f"{srsran_templates(inv)}/ue.conf.j2").render(
        banner=BANNER, inventory_name=inv.name, receiver=receiver, device_args=UE_ZMQ_ARGS, enb=zinv.lte.enb,
        epc=zinv.lte.epc, keys=keys, imsi=r.sim.imsi, imei=imei, netns=netns, ifname=ifname,
        log_path=f"{config_dir}/ue.log", metrics_csv_path=f"{config_dir}/ue_metrics.csv")
    return render_srsenb(zinv) + [ConfigFile("ue", f"{config_dir}/ue.conf", ue)]


def find_on(host: Host, program: str, dirs: Sequence[str] = ()) -> str | None:
    """``program`` from the first of ``dirs`` (``$MPLAB_LTE_BIN``'s, as ``lte.realcheck.bin_dirs`` gives them) on
    ``host`` that has it executable, else from ``host``'s PATH, else None."""
    for d in dirs:
        path = f"{d.rstrip('/')}/{program}"
        if host.run(["test", "-f", path, "-a", "-x", path], check=False).returncode == 0:
            return path
    return host.which(program)


def check(host: Host, dirs: Sequence[str] = ()) -> list[str]:
    """Paths of srsenb and srsue on ``host`` (``dirs`` first, then PATH); ``PreflightError`` naming what is
    missing."""
    found = {p: find_on(host, p, dirs) for p in ("srsenb", "srsue")}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        raise PreflightError(f"[{host.name}] the all-software LTE cell needs srsRAN 4G, but {', '.join(missing)} "
                             "is not installed (build srsRAN_4G with libzmq3-dev, or use the lab's SDR cell; "
                             "$MPLAB_LTE_BIN names extra directories); skipping it")
    return [found["srsenb"], found["srsue"]]


def output_tail(proc: BackgroundProcess, n_chars: int = 400) -> str:
    """The end of what ``proc`` printed (srsRAN prints its console to stdout), or why it cannot be shown."""
    try:
        out, err = proc.output_so_far()
    except NotImplementedError:
        return "(output not available before it exits)"
    return (out + err).strip()[-n_chars:]


class _FirstExit:
    """The eNodeB and the UE as one ``Polled``: the wait for the UE's address ends when either has exited."""

    def __init__(self, *procs: BackgroundProcess) -> None:
        self.procs = procs

    def poll(self) -> int | None:
        return next((rc for p in self.procs if (rc := p.poll()) is not None), None)

    def states(self) -> str:
        """Each process's state and the end of its output."""
        return "; ".join(f"{p.label} {'running' if p.poll() is None else f'exited {p.poll()}'}, output ends: "
                         f"{output_tail(p)}" for p in self.procs)


#: srsRAN keeps measured FFT plans in $HOME/.srsran_fftwisdom; without them srsUE's PHY start took
#: 50-90 s on this machine (bench/lte_real_cell.py). Shared by every cell mplab starts and that bench.
FFTW_HOME = Path("/var/tmp/mplab-srsran-home")
#: How long `mplab lte zmq` waits for the UE's address: a first start, with no FFT plans saved yet, took up to 90 s.
START_DEADLINE_S = 150.0


@dataclass
class ZmqCell:
    """A running single-UE cell: srsenb on ``host``, srsue in ``ue_netns`` (both started by us).

    ``dirs``: directories searched for srsenb/srsue before PATH (``$MPLAB_LTE_BIN``). ``launcher``: an argv
    prefix for both programs (a test rig's ``env LD_PRELOAD=<SCTP shim>``; empty in a lab). Both run in the
    directory of ``ue.conf``: srsUE keeps its NAS security context in ``./.ctxt`` (srsue/src/stack/upper/nas.cc)
    and reads it back at its next start.
    """

    host: Host
    ue_netns: str
    enb: BackgroundProcess | None = None
    ue: BackgroundProcess | None = None
    dirs: tuple[str, ...] = ()
    launcher: tuple[str, ...] = ()

    def start(self, files: list[ConfigFile[Role]], pool: ipaddress.IPv4Network,
              deadline_s: float = START_DEADLINE_S) -> str:
        """Write the files, start eNodeB then UE; return the UE's address once it is in ``pool``.

        Raises:
            NotReady: no address from ``pool`` on srsUE's tun within ``deadline_s``, or at once when srsenb or
                srsue exits; both are stopped then.
        """
        srsenb, srsue = check(self.host, self.dirs)
        for f in files:
            self.host.write_file(f.path, f.text.encode(), f.mode)
        by_name = {f.path.rsplit("/", 1)[1]: f.path for f in files}
        workdir = by_name["ue.conf"].rsplit("/", 1)[0] or "/"
        FFTW_HOME.mkdir(parents=True, exist_ok=True)
        run_in = [*self.launcher, "env", "-C", workdir, f"HOME={FFTW_HOME}"]
        try:
            self.enb = self.host.start([*run_in, srsenb, by_name["enb.conf"]], label="srsenb-zmq")
            self.ue = self.host.start([*run_in, srsue, by_name["ue.conf"]], label="srsue-zmq")
            got: list[str] = []

            def addressed() -> bool:
                res = self.host.run(["ip", "netns", "exec", self.ue_netns, "ip", "-j", "-4", "addr", "show", "dev",
                                     UE_TUN], check=False)
                if res.returncode == 0:
                    got[:] = [a["local"] for ln in json.loads(res.stdout or "[]") for a in ln.get("addr_info", [])
                              if ipaddress.IPv4Address(a["local"]) in pool]
                return bool(got)
            both = _FirstExit(self.enb, self.ue)
            wait_until(addressed, deadline_s, f"[{self.host.name}] srsUE's address from {pool} on {UE_TUN} in "
                       f"{self.ue_netns}", proc=both, poll_s=0.2, detail=both.states)
        except BaseException:
            self.stop()
            raise
        return got[0]

    def stop(self) -> None:
        """UE first, then the eNodeB (srsRAN's rule for a clean ZMQ shutdown); idempotent."""
        for p in (self.ue, self.enb):
            if p is not None:
                p.stop(grace_s=3.0)
        self.ue = self.enb = None
