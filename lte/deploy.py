"""Bring the LTE cell up and down through Hosts: push configs (keeping backups), set up
the UE pool's TUN device, provision subscribers, restart daemons in dependency order,
and collect their logs.

Every step is named, and a failure raises ``LteStepError`` naming the step and the
host, with the end of the failing daemon's log, so ``mplab lte up`` tells a technician
where to look instead of "something failed".
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.deploy.files import Pushed, push_files
from harness.deploy.services import ServiceManager, Systemd, restart_and_wait
from harness.errors import CommandError, MplabError, PreflightError
from harness.hosts.local import Host
from harness.config.inventory import Inventory
from lte.render import render_all, render_srsenb
from lte.secrets import Secrets
from lte.services import Unit, cell_units
from lte.srsepc import SqnMerge, render_srsepc
from lte.subscribers import Collection, ProvisionResult, inventory_documents, provision
from lte.version import (Open5gsVersion, SrsranVersion, decide_open5gs, decide_srsran, detect_srsran,
                         detect_version)
from lte.units import UNIT_DIR, render_units
from lte.verify import (LteStepError, StartMarks, await_s1, check_restarts, take_marks,
                         verify_mongo_on_host)

log = logging.getLogger("mplab.lte")

OGSTUN = "ogstun"


@dataclass
class LteHosts:
    """The two machines of the cell, and how their daemons are controlled."""

    enb: Host
    epc: Host
    services: Mapping[str, ServiceManager] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.services = {"enb": self.services.get("enb") or Systemd(self.enb),
                         "epc": self.services.get("epc") or Systemd(self.epc)}

    def host(self, role: str) -> Host:
        return self.enb if role == "enb" else self.epc


def ogstun_argvs(gateway: str, prefixlen: int) -> list[list[str]]:
    """Create (if missing) and address the UPF's TUN device for the UE pool."""
    return [["ip", "link", "set", OGSTUN, "up"],
            ["ip", "addr", "replace", f"{gateway}/{prefixlen}", "dev", OGSTUN],
            ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"]]


def ensure_ogstun(host: Host, gateway: str, prefixlen: int) -> None:
    """The UE pool's gateway on ``ogstun`` (the Debian package normally creates it via systemd-networkd)."""
    if host.run(["ip", "link", "show", "dev", OGSTUN], check=False).returncode != 0:
        host.run(["ip", "tuntap", "add", "name", OGSTUN, "mode", "tun"])
    for argv in ogstun_argvs(gateway, prefixlen):
        host.run(argv)


def resolve_version(inv: Inventory, epc: Host) -> Open5gsVersion:
    """What the EPC host runs (``open5gs-mmed -v``), checked against the pin ``lte.epc.version``: the one
    decision ``lte render`` and ``check-configs`` make too (``lte.version.decide_open5gs``)."""
    assert inv.lte is not None
    try:
        installed = detect_version(epc)
    except (PreflightError, CommandError) as exc:
        if not inv.lte.epc.version:
            raise
        installed = None
        log.warning("%s; writing the pinned lte.epc.version %s unverified", exc, inv.lte.epc.version)
    return decide_open5gs(inv.lte.epc.version, installed, f"host {epc.name} (open5gs-mmed -v)")


def enb_program(inv: Inventory) -> str:
    """srsenb as the eNB host runs it: from ``lte.enb.bin_dir`` (a source build), else PATH."""
    bin_dir = inv.lte.enb.bin_dir
    return f"{bin_dir}/srsenb" if bin_dir else "srsenb"


def check_srsran_version(inv: Inventory, enb: Host) -> SrsranVersion | None:
    """``srsenb --version`` on the eNB host against the pin ``lte.enb.version`` (a mismatch is refused)."""
    installed = detect_srsran(enb, enb_program(inv))
    if installed is None:
        log.warning("[%s] srsenb --version did not answer; srsRAN release not verified", enb.name)
    return decide_srsran(inv.lte.enb.version, installed, f"host {enb.name}")  # ConfigError: exit 2, names both


@dataclass(frozen=True)
class UpReport:
    """What ``lte_up`` did."""

    version: str
    pushed: tuple[Pushed, ...]
    subscribers: ProvisionResult | None
    started: tuple[str, ...]
    duration_s: float
    sqn: SqnMerge | None = None
    s1: str = ""
    marks: StartMarks | None = None


def lte_up(inv: Inventory, hosts: LteHosts, secrets: Secrets | None,
           collection: Callable[[], Collection] | None, *, start_deadline_s: float = 30.0,
           settle_s: float = 0.5, stamp: str | None = None, s1_deadline_s: float = 30.0,
           unit_dir: str = UNIT_DIR) -> UpReport:
    """Configure and start the cell: push, ogstun, subscribers, restart in dependency order.

    Args:
        secrets: SIM keys; with ``collection`` None, provisioning is skipped (and said so in the log).
        collection: opens the subscribers collection (``lte.subscribers.open_collection``).
        start_deadline_s: how long each daemon may take to become active.
        settle_s: how long a daemon must stay active to count as started (catches instant crashes).
        s1_deadline_s: how long srsenb and the MME may take to report S1 Setup (``lte.verify``).
        unit_dir: where mplab's own units for source-built srsRAN go (``lte.units``).
    """
    assert inv.lte is not None, "inventory has no lte section"
    t0 = time.monotonic()
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S")
    lte = inv.lte
    if lte.epc.kind == "srsepc":
        return _srsepc_up(inv, hosts, secrets, start_deadline_s, settle_s, stamp, t0, s1_deadline_s, unit_dir)
    check_srsran_version(inv, hosts.enb)
    try:
        version = resolve_version(inv, hosts.epc)     # a pin that disagrees with the host: ConfigError, exit 2
    except (PreflightError, CommandError) as exc:
        raise LteStepError("detect Open5GS version", hosts.epc.name, str(exc)) from exc
    units = render_units(inv, unit_dir)
    files = render_all(inv, version) + units
    coll = _subscriber_store(inv, hosts, collection)       # verified before anything is pushed
    pushed: list[Pushed] = []
    for role in ("enb", "epc"):
        host = hosts.host(role)
        mine = [f for f in files if f.machine == role]
        try:
            pushed += push_files(host, mine, stamp)
        except (MplabError, OSError) as exc:
            raise LteStepError(f"push {len(mine)} config file(s) to {role}", host.name, str(exc)) from exc
    _reload_units(hosts, units, pushed)
    try:
        ensure_ogstun(hosts.epc, str(lte.epc.ue_gateway), lte.epc.ue_pool.prefixlen)
    except CommandError as exc:
        raise LteStepError("set up ogstun (UE pool gateway)", hosts.epc.name, str(exc)) from exc
    result = None
    if coll is not None and secrets is not None:
        try:
            result = provision(coll, inventory_documents(inv, secrets))
        except MplabError as exc:
            raise LteStepError("provision subscribers", hosts.epc.name, str(exc)) from exc
    else:
        log.warning("subscriber provisioning skipped (no secrets file or no database)")
    marks = take_marks(inv, hosts.epc)
    started = _start_all(inv, hosts, start_deadline_s, settle_s)
    s1 = _verify_started(inv, hosts, marks, s1_deadline_s)
    return UpReport(str(version), tuple(pushed), result, tuple(started), time.monotonic() - t0, s1=s1, marks=marks)


def _subscriber_store(inv: Inventory, hosts: LteHosts, collection: Callable[[], Collection] | None):
    """The opened (pinged) subscribers collection, or None; ``LteStepError`` when MongoDB is down."""
    if collection is not None:
        try:
            return collection()
        except MplabError as exc:
            raise LteStepError("reach MongoDB (the subscriber store) before pushing anything", hosts.epc.name,
                               str(exc)) from exc
    if not verify_mongo_on_host(hosts.epc, inv.lte.epc.db_uri):
        log.warning("[%s] MongoDB not verified: neither mongosh nor mongo is installed there", hosts.epc.name)
    return None


def _reload_units(hosts: LteHosts, units: list, pushed: list[Pushed]) -> None:
    """``systemctl daemon-reload`` on each host whose mplab-written unit file changed."""
    role_of = {u.path: u.machine for u in units}
    for role in sorted({role_of[p.path] for p in pushed if p.changed and p.path in role_of}):
        try:
            hosts.services[role].reload()
        except MplabError as exc:
            raise LteStepError("reload systemd (mplab's srsRAN units)", hosts.host(role).name, str(exc)) from exc


def _start_all(inv: Inventory, hosts: LteHosts, deadline_s: float, settle_s: float) -> list[str]:
    started = []
    for unit in cell_units(inv):
        _start(hosts, unit, deadline_s, settle_s)
        started.append(unit.name)
    return started


def _verify_started(inv: Inventory, hosts: LteHosts, marks: StartMarks, s1_deadline_s: float) -> str:
    """S1 Setup seen from both ends in this start's output, and no EPC daemon restarted meanwhile."""
    enb_unit = inv.lte.enb.unit
    epc_console = (lambda: hosts.services["epc"].logs(inv.lte.epc.unit, 300)) if inv.lte.epc.kind == "srsepc" \
        else (lambda: "")
    detail = await_s1(inv, hosts.enb, hosts.epc, marks, lambda: hosts.services["enb"].logs(enb_unit, 300),
                      s1_deadline_s, epc_console=epc_console)
    check_restarts(hosts.epc, marks)
    log.info("S1: %s", detail)
    return detail


def _srsepc_up(inv: Inventory, hosts: LteHosts, secrets: Secrets | None, start_deadline_s: float, settle_s: float,
               stamp: str, t0: float, s1_deadline_s: float, unit_dir: str) -> UpReport:
    """srsEPC: stop it (it writes the SQNs back on exit), carry the SQNs over, push, start srsepc then srsenb."""
    lte = inv.lte
    check_srsran_version(inv, hosts.enb)
    units = render_units(inv, unit_dir)
    enb_files = render_srsenb(inv) + [u for u in units if u.machine == "enb"]
    if secrets is None:
        raise LteStepError("render user_db.csv", hosts.epc.name, "srsepc keeps the SIM keys in user_db.csv: "
                                                                "pass --secrets (or set lab.secrets_file)")
    epc_unit = cell_units(inv)[0]
    try:
        # Only a running srsepc has SQNs to write back; a unit that does not exist (yet) has nothing to stop.
        if hosts.services["epc"].is_active(epc_unit.name):
            hosts.services["epc"].stop(epc_unit.name)
    except MplabError as exc:
        raise LteStepError(f"stop srsEPC ({epc_unit.name}) so that it writes its SQNs back", hosts.epc.name,
                           str(exc)) from exc
    try:
        existing = hosts.epc.read_file(lte.epc.user_db).decode() if hosts.epc.exists(lte.epc.user_db) else None
        epc_files, merge = render_srsepc(inv, secrets, existing)
        epc_files = epc_files + [u for u in units if u.machine == "epc"]
    except MplabError as exc:
        raise LteStepError("read user_db.csv (SQNs)", hosts.epc.name, str(exc)) from exc
    if merge.reset:
        log.warning("user_db.csv: the keys of %s changed; their SQN starts again at 0", ", ".join(merge.reset))
    pushed: list[Pushed] = []
    for host, files, role in ((hosts.enb, enb_files, "enb"), (hosts.epc, epc_files, "epc")):
        try:
            pushed += push_files(host, files, stamp)
        except (MplabError, OSError) as exc:
            raise LteStepError(f"push {len(files)} config file(s) to {role}", host.name, str(exc)) from exc
    _reload_units(hosts, units, pushed)
    marks = take_marks(inv, hosts.epc)
    started = _start_all(inv, hosts, start_deadline_s, settle_s)
    s1 = _verify_started(inv, hosts, marks, s1_deadline_s)
    return UpReport("srsepc", tuple(pushed), None, tuple(started), time.monotonic() - t0, merge, s1=s1, marks=marks)


def _start(hosts: LteHosts, unit: Unit, deadline_s: float, settle_s: float) -> None:
    svc = hosts.services[unit.role]
    host = hosts.host(unit.role)
    restart_and_wait(svc, unit.name, step=f"start {unit.what} ({unit.name})", host=host.name, error=LteStepError,
                     deadline_s=deadline_s, settle_s=settle_s)
    log.info("[%s] %s active", host.name, unit.name)


def lte_down(inv: Inventory, hosts: LteHosts) -> list[str]:
    """Stop every daemon in reverse dependency order; keep going past failures, then report them."""
    assert inv.lte is not None
    stopped, failures = [], []
    for unit in reversed(cell_units(inv)):
        try:
            hosts.services[unit.role].stop(unit.name)
            stopped.append(unit.name)
        except MplabError as exc:
            failures.append(LteStepError(f"stop {unit.what} ({unit.name})", hosts.host(unit.role).name, str(exc)))
    if failures:
        raise failures[0]
    return stopped


@dataclass(frozen=True)
class UnitStatus:
    """Whether one daemon is running."""

    unit: str
    what: str
    host: str
    active: bool


def lte_status(inv: Inventory, hosts: LteHosts) -> list[UnitStatus]:
    """Each daemon's state, in start order."""
    assert inv.lte is not None
    return [UnitStatus(u.name, u.what, hosts.host(u.role).name, hosts.services[u.role].is_active(u.name))
            for u in cell_units(inv)]


def collect_logs(inv: Inventory, hosts: LteHosts, dest: Path, lines: int = 500) -> list[Path]:
    """Copy each daemon's journal and log file into ``dest/<host>/`` (best effort: missing logs are noted)."""
    assert inv.lte is not None
    lte = inv.lte
    written = []
    for unit in cell_units(inv):
        host = hosts.host(unit.role)
        d = dest / host.name
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{unit.name}.journal"
        p.write_text(hosts.services[unit.role].logs(unit.name, lines))
        written.append(p)
    names = ("epc",) if lte.epc.kind == "srsepc" else ("mme", "sgwc", "sgwu", "smf", "upf", "hss", "pcrf")
    files = [(hosts.epc, f"{lte.epc.log_dir}/{n}.log") for n in names]
    files.append((hosts.enb, lte.enb.log_path))
    for host, path in files:
        p = dest / host.name / Path(path).name
        try:
            p.write_bytes(host.read_file(path))
        except (MplabError, OSError) as exc:
            p.with_suffix(p.suffix + ".missing").write_text(f"{path}: {exc}\n")
            continue
        written.append(p)
    return written
