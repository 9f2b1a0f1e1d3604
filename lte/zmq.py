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
import time
from dataclasses import dataclass

import jinja2

from harness.deploy.files import ConfigFile
from harness.errors import PreflightError
from harness.hosts.local import BackgroundProcess, Host
from harness.config.inventory import Inventory
from harness.config.radio import RfDevice
from lte.render import BANNER, Role, render_srsenb, srsran_templates
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
    env = jinja2.Environment(loader=jinja2.PackageLoader("lte", "templates"), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, autoescape=False)
    # IMEI: any 15 digits; derived from the IMSI so that each receiver's UE is recognisable in the MME log.
    imei = "35" + r.sim.imsi[-13:]
    ue = env.get_template(f"{srsran_templates(inv)}/ue.conf.j2").render(
        banner=BANNER, inventory_name=inv.name, receiver=receiver, device_args=UE_ZMQ_ARGS, enb=zinv.lte.enb,
        epc=zinv.lte.epc, keys=keys, imsi=r.sim.imsi, imei=imei, netns=netns, ifname=ifname,
        log_path=f"{config_dir}/ue.log")
    return render_srsenb(zinv) + [ConfigFile("ue", f"{config_dir}/ue.conf", ue)]


def check(host: Host) -> list[str]:
    """Paths of srsenb and srsue on ``host``; ``PreflightError`` naming what is missing."""
    found = {p: host.which(p) for p in ("srsenb", "srsue")}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        raise PreflightError(f"[{host.name}] the all-software LTE cell needs srsRAN 4G, but {', '.join(missing)} "
                             "is not installed (build srsRAN_4G with libzmq3-dev, or use the lab's SDR cell); "
                             "skipping it")
    return [found["srsenb"], found["srsue"]]


@dataclass
class ZmqCell:
    """A running single-UE cell: srsenb on ``host``, srsue in ``ue_netns`` (both started by us)."""

    host: Host
    ue_netns: str
    enb: BackgroundProcess | None = None
    ue: BackgroundProcess | None = None

    def start(self, files: list[ConfigFile[Role]], pool: ipaddress.IPv4Network, deadline_s: float = 60.0) -> str:
        """Write the files, start eNodeB then UE; return the UE's address once it is in ``pool``."""
        srsenb, srsue = check(self.host)
        for f in files:
            self.host.write_file(f.path, f.text.encode(), f.mode)
        by_name = {f.path.rsplit("/", 1)[1]: f.path for f in files}
        self.enb = self.host.start([srsenb, by_name["enb.conf"]], label="srsenb-zmq")
        self.ue = self.host.start([srsue, by_name["ue.conf"]], label="srsue-zmq")
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            for p, name in ((self.enb, "srsenb"), (self.ue, "srsue")):
                if p.poll() is not None:
                    res = p.stop()
                    raise PreflightError(f"[{self.host.name}] {name} exited {res.returncode}: "
                                         f"{(res.stdout + res.stderr).strip()[-400:]}")
            res = self.host.run(["ip", "netns", "exec", self.ue_netns, "ip", "-j", "-4", "addr", "show", "dev",
                                 UE_TUN], check=False)
            if res.returncode == 0:
                for link in json.loads(res.stdout or "[]"):
                    for a in link.get("addr_info", []):
                        if ipaddress.IPv4Address(a["local"]) in pool:
                            return a["local"]
            time.sleep(0.5)
        raise PreflightError(f"[{self.host.name}] srsUE got no address from {pool} on {UE_TUN} within "
                             f"{deadline_s:.0f} s (see the srsenb/srsue logs)")

    def stop(self) -> None:
        """UE first, then the eNodeB (srsRAN's rule for a clean ZMQ shutdown); idempotent."""
        for p in (self.ue, self.enb):
            if p is not None:
                p.stop(grace_s=3.0)
        self.ue = self.enb = None
