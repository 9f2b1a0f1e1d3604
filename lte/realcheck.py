"""The real srsRAN 4G and Open5GS programs read the files ``lte.render`` writes.

``check_configs`` renders the cell with every path redirected into a scratch directory
(configs, logs; Open5GS's freeDiameter files are the installed ones), then starts each
installed daemon on its file in a scratch network namespace whose loopback carries the
inventory's S1 addresses (``harness.deploy.trial``). A daemon passes when it gets past
configuration parsing:

- srsenb and srsue: they go on to open their radio ("Opening 1 channels in RF device=...");
  rr.conf, sib.conf and rb.conf are parsed before that.
- Open5GS daemons: "initialize...done"; the MME also passes when it stops at the S1AP
  socket on a kernel without SCTP, since it parses its YAML before it opens sockets.
- srsepc: its HSS has read user_db.csv and its MME stops at the SCTP socket here
  (without SCTP) or gets to "SP-GW Initialized".

Programs come from ``MPLAB_LTE_BIN`` (a colon-separated list of directories) and then
PATH. Absent programs are reported as such; nothing is installed or built here.
"""
from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.deploy.trial import Trial, Verdict, find_program, run_trial, scratch_netns
from harness.errors import MplabError
from harness.hosts.local import LocalHost
from harness.config.inventory import Inventory
from harness.deploy.secrets import Secrets
from harness.deploy.files import ConfigFile
from lte.render import EPC_DAEMONS, render_open5gs, render_srsenb
from lte.version import Open5gsVersion, decide_open5gs, parse_version

#: Environment variable naming extra directories with the LTE programs (before PATH).
BIN_ENV = "MPLAB_LTE_BIN"

#: srsenb/srsue: radio initialisation starts only after every configuration file was parsed
#: (srsenb/src/enb.cc: parse_cfg_files, then the radio; srsue/src/ue.cc likewise).
SRS_PASSED = (r"^Opening \d+ channels in RF device", r"Supported RF device list", r"^==== eNodeB started ===",
              r"^Attaching UE")
#: srsenb/src/enb_cfg_parser.cc and main.cc error lines; boost::program_options' "unrecognised option".
SRS_FAILED = (r"^Error ", r"^Error:", r"[Ee]rror parsing", r"not supported yet",
              r"unrecognised option", r"unrecognized option", r"^Failed to read", r"^Invalid ", r"Failed to parse",
              r"the argument \(.*\) for option .* is invalid", r"Couldn't open ")
#: Complaints srsenb survives but a lab should see (enb_cfg_parser.cc: the inactivity timer below t310+t311+n310+50).
SRS_WARNED = (r"is too low", r"Inactivity timeout is smaller")
#: Open5GS: the daemon's own "initialize...done".
O5GS_PASSED = (r"initialize\.\.\.done",)
O5GS_FAILED = (r"\] (ERROR|FATAL): ", r"CRITICAL", r"ERROR: ", r"FATAL: ")
#: Each daemon parses its YAML (``*_context_parse_config``) before it opens the database (HSS, PCRF) and
#: starts freeDiameter or S1AP servers (SCTP): these lines come after parsing (src/*/init.c).
O5GS_BLOCKED = (r"Protocol not supported", r"Failed to connect to server")
#: srsepc (srsepc/src/main.cc: HSS, then MME, then SP-GW): "HSS Initialized." comes once user_db.csv was
#: read; on a kernel without SCTP the MME then stops at "Could not create SCTP socket", past all parsing.
SRSEPC_PASSED = (r"SP-GW Initialized", r"SPGW Initialized")
SRSEPC_BLOCKED = (r"Could not create SCTP socket",)
SRSEPC_FAILED = (r"^Error ", r"[Ee]rror parsing", r"unrecognised option", r"unrecognized option",
                 r"Error initializing HSS", r"Error reading user database", r"Error opening",
                 r"Wrong number of columns", r"the argument \(.*\) for option .* is invalid")


def bin_dirs() -> list[str]:
    """Directories named by ``MPLAB_LTE_BIN`` (searched before PATH)."""
    return [d for d in os.environ.get(BIN_ENV, "").split(os.pathsep) if d]


def freediameter_dir(program: str) -> str:
    """The installed freeDiameter configuration next to ``program`` (<prefix>/etc/freeDiameter), else /etc's."""
    prefix = Path(program).resolve().parent.parent
    for d in (prefix / "etc" / "freeDiameter", Path("/etc/freeDiameter")):
        if d.is_dir():
            return str(d)
    return "/etc/freeDiameter"


def redirected(inv: Inventory, where: Path, fd_dir: str | None = None) -> Inventory:
    """``inv`` with every file the cell writes (configs, logs) under ``where``."""
    assert inv.lte is not None
    enb = inv.lte.enb.model_copy(update={"config_dir": str(where / "enb"), "log_path": str(where / "enb" / "enb.log")})
    upd = {"config_dir": str(where / "epc"), "log_dir": str(where / "epc" / "log")}
    if fd_dir:
        upd["freediameter_dir"] = fd_dir
    epc = inv.lte.epc.model_copy(update=upd)
    return inv.model_copy(update={"lte": inv.lte.model_copy(update={"enb": enb, "epc": epc})})


def write(files: Sequence[ConfigFile]) -> None:
    """Write rendered files where they say (the scratch directory, after ``redirected``)."""
    for f in files:
        p = Path(f.path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.text)
        p.chmod(f.mode)


def installed_open5gs_version(mmed: str) -> Open5gsVersion | None:
    """``open5gs-mmed -v`` of the program found (None when it does not say)."""
    try:
        res = LocalHost("here").run([mmed, "-v"], check=False, timeout=10)
    except MplabError:
        return None
    m = re.search(r"\d+\.\d+\.\d+", res.stdout + res.stderr)
    return parse_version(m.group(0)) if m else None


def ue_conf(inv: Inventory, where: Path, netns: str) -> ConfigFile | None:
    """srsUE's ue.conf of the ZMQ cell for the first receiver with a SIM (placeholder keys: only parsing
    is checked), or None when no receiver has one."""
    from lte.zmq import render_zmq
    r = next((r for r in inv.receivers if r.sim is not None), None)
    if r is None:
        return None
    dummy = Secrets.model_validate({"sim": {r.sim.imsi: {"k": "0" * 32, "opc": "0" * 32}}})
    files = render_zmq(inv, r.name, dummy, str(where / "ue"), netns)
    return next(f for f in files if f.path.endswith("/ue.conf"))


@dataclass(frozen=True)
class Plan:
    """What a check will start, and what it cannot (absent programs)."""

    trials: tuple[Trial, ...]
    absent: tuple[Verdict, ...]
    open5gs_version: str | None


def plan(inv: Inventory, where: Path, dirs: Sequence[str] = (), netns: str = "mplab-lte-check") -> Plan:
    """Render the cell under ``where`` and build one trial per installed daemon."""
    assert inv.lte is not None
    trials: list[Trial] = []
    absent: list[Verdict] = []
    srsenb = find_program("srsenb", dirs)
    inv_r = redirected(inv, where)
    if srsenb is None:
        absent.append(Verdict("srsenb", None, f"srsenb is not installed (not on PATH or under ${BIN_ENV})"))
    else:
        files = render_srsenb(inv_r)
        write(files)
        trials.append(Trial("srsenb", (srsenb, f"{inv_r.lte.enb.config_dir}/enb.conf"), SRS_PASSED, SRS_FAILED,
                            warned=SRS_WARNED))
    srsue = find_program("srsue", dirs)
    ue = ue_conf(inv, where, netns)
    if srsue is None:
        absent.append(Verdict("srsue", None, f"srsue is not installed (not on PATH or under ${BIN_ENV})"))
    elif ue is not None:
        write([ue])
        trials.append(Trial("srsue", (srsue, ue.path), SRS_PASSED, SRS_FAILED))
    daemons = {d: find_program(f"open5gs-{d}d", dirs) for d in EPC_DAEMONS}
    version = None
    if not any(daemons.values()):
        if inv.lte.epc.kind == "open5gs":
                absent.append(Verdict("open5gs", None, f"no Open5GS daemon is installed (open5gs-*d, not on PATH or "
                                                   f"under ${BIN_ENV})"))
    else:
        first = next(p for p in daemons.values() if p)
        prog = daemons["mme"] or first
        installed = installed_open5gs_version(prog)
        # the decision `lte up` and `lte render` make: a pin that disagrees with the program is refused
        version = decide_open5gs(inv.lte.epc.version, installed, f"{prog} -v") if (
            installed or inv.lte.epc.version) else parse_version("2.7.2")
        inv_e = redirected(inv, where, freediameter_dir(first))
        files = render_open5gs(inv_e, version)
        write(files)
        Path(inv_e.lte.epc.log_dir).mkdir(parents=True, exist_ok=True)
        for d, prog in daemons.items():
            if prog is None:
                absent.append(Verdict(f"open5gs-{d}d", None, f"open5gs-{d}d is not installed"))
                continue
            trials.append(Trial(f"open5gs-{d}d", (prog, "-c", f"{inv_e.lte.epc.config_dir}/{d}.yaml"),
                                O5GS_PASSED, O5GS_FAILED, blocked=O5GS_BLOCKED))
    srsepc_trial(inv, where, dirs, trials, absent)
    return Plan(tuple(trials), tuple(absent), None if version is None else str(version))


def srsepc_variant(inv: Inventory) -> Inventory | None:
    """``inv`` with srsEPC as its core (None when the inventory cannot have one, e.g. several TACs)."""
    if inv.lte.epc.kind == "srsepc":
        return inv
    data = inv.model_dump(mode="json", exclude_none=True)
    data["lte"]["epc"].update(kind="srsepc", config_dir="/etc/srsran", log_dir="/tmp")
    try:
        return Inventory.model_validate(data)
    except ValueError:
        return None


def srsepc_trial(inv: Inventory, where: Path, dirs: Sequence[str], trials: list[Trial],
                 absent: list[Verdict]) -> None:
    """srsepc on its epc.conf and user_db.csv (placeholder keys), when installed; the inventory's own core or,
    for an Open5GS inventory, the srsepc variant of it (so that a lab can see both cores' verdicts)."""
    from lte.srsepc import render_srsepc
    own = inv.lte.epc.kind == "srsepc"
    prog = find_program("srsepc", dirs)
    if prog is None:
        if own:
            absent.append(Verdict("srsepc", None, f"srsepc is not installed (not on PATH or under ${BIN_ENV})"))
        return
    variant = srsepc_variant(inv)
    if variant is None:
        # a verdict all the same: the lab should see why its cell cannot move to srsEPC
        absent.append(Verdict("srsepc (other core)", None, f"not tried: srsepc's MME serves one TAC and this "
                                                          f"cell's MME serves {inv.lte.epc.tacs}"))
        return
    epc = variant.lte.epc.model_copy(update={"config_dir": str(where / "srsepc"), "log_dir": str(where / "srsepc"),
                                             "user_db": str(where / "srsepc" / "user_db.csv")})
    variant = variant.model_copy(update={"lte": variant.lte.model_copy(update={"epc": epc})})
    dummy = Secrets.model_validate({"sim": {r.sim.imsi: {"k": "0" * 32, "opc": "0" * 32}
                                            for r in inv.receivers if r.sim is not None}})
    files, _ = render_srsepc(variant, dummy)
    write(files)
    trials.append(Trial("srsepc" if own else "srsepc (other core)", (prog, f"{epc.config_dir}/epc.conf"),
                        SRSEPC_PASSED, SRSEPC_FAILED, blocked=SRSEPC_BLOCKED))


def scratch_addresses(inv: Inventory) -> list[str]:
    """Addresses the rendered configs bind to (S1 on both sides)."""
    assert inv.lte is not None
    return [str(inv.lte.enb.address), str(inv.lte.epc.address)]


def check_configs(inv: Inventory, netns: str, where: Path | None = None,
                  dirs: Sequence[str] | None = None) -> tuple[Plan, list[Verdict]]:
    """Every installed daemon of the cell on its rendered file; one verdict per daemon (absent ones too)."""
    dirs = bin_dirs() if dirs is None else dirs
    with tempfile.TemporaryDirectory(prefix="mplab-lte-check-") as tmp:
        base = where or Path(tmp)
        p = plan(inv, base, dirs, netns)
        verdicts: list[Verdict] = []
        if p.trials:
            with scratch_netns(netns, scratch_addresses(inv)) as ns:
                verdicts = [run_trial(ns, t) for t in p.trials]
        return p, verdicts + list(p.absent)
