"""Is the cell that ``lte up`` just started really serving? Judged from this start's output only.

A daemon being "active" says little: srsenb with a failed S1 retries every 10 s forever, srsenb with a
PUCCH region that leaves no room for Msg3 keeps running, and open5gs-hssd without its database exits 0
and loops under ``Restart=always``. So after starting the units, ``lte up``:

- waits (with a deadline) for srsenb's own "S1Setup procedure completed successfully" and for the MME's
  side of it in the log written since the start (``lte.startlog`` marks); an S1 Setup Failure, a failed
  S1 connection or a cell-config complaint from srsenb fails at once, naming the likely side;
- fails when any EPC daemon started more than once since the mark (it restarted, or loops);
- verifies the subscriber store (MongoDB) before anything is pushed.
"""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass

from harness.deploy.services import StepError
from harness.errors import MplabError
from harness.hosts.local import Host
from harness.config.inventory import Inventory
from lte.checks import s1_setup_seen, srsenb_s1_verdict, srsepc_s1_seen
from lte.render import EPC_DAEMONS
from lte.startlog import LogMark, mark, since, starts

log = logging.getLogger("mplab.lte")

#: srsenb's console banner at each start (srsenb/src/main.cc): its journal is cut there.
SRSENB_BANNER_RE = re.compile(r"Software Radio Systems LTE eNodeB")
SRSEPC_BANNER_RE = re.compile(r"Software Radio Systems EPC")


class LteStepError(StepError):
    """A named step of bringing the cell up or down failed on a named host."""

    what = "LTE"


@dataclass(frozen=True)
class StartMarks:
    """Where each EPC log stood before this start (daemon -> mark)."""

    epc: dict[str, LogMark]


def take_marks(inv: Inventory, epc: Host) -> StartMarks:
    """Marks on the MME's log (srsepc) or every Open5GS daemon's log."""
    lte = inv.lte
    names = ("epc",) if lte.epc.kind == "srsepc" else tuple(EPC_DAEMONS)
    return StartMarks({n: mark(epc, f"{lte.epc.log_dir}/{n}.log") for n in names})


def enb_output(inv: Inventory, enb: Host, console: str) -> str:
    """srsenb's log file (it truncates it at start) and its console of this start (``console``: its journal
    or console file, cut at the last start banner)."""
    try:
        text = enb.read_file(inv.lte.enb.log_path).decode(errors="replace")
    except (OSError, MplabError):
        text = ""
    hits = list(SRSENB_BANNER_RE.finditer(console))
    return text + "\n" + (console[hits[-1].start():] if hits else console)


def s1_state(inv: Inventory, epc: Host, marks: StartMarks, enb_text: str,
             epc_console: str = "") -> tuple[bool | None, str, str]:
    """(ok, detail, side) of S1 from both ends; ok None while undecided. ``epc_console``: srsepc's console of
    this start (its log file is stdio-buffered like srsenb's; the console is not)."""
    enb_ok, enb_detail, enb_side = srsenb_s1_verdict(enb_text)
    if enb_ok is False:
        return False, enb_detail, enb_side
    name = "epc" if inv.lte.epc.kind == "srsepc" else "mme"
    mme_text = since(epc, marks.epc[name])
    if inv.lte.epc.kind == "srsepc":
        hits = list(SRSEPC_BANNER_RE.finditer(epc_console))
        mme_ok, mme_detail = srsepc_s1_seen(mme_text + "\n" + (epc_console[hits[-1].start():] if hits else ""))
    else:
        mme_ok, mme_detail = s1_setup_seen(mme_text, str(inv.lte.enb.address))
    if any(w in mme_detail for w in ("refused", "removed", "left")):
        return False, mme_detail, "EPC (PLMN/TAC)" if "refused" in mme_detail else "eNB (it left)"
    if enb_ok and mme_ok:
        return True, f"{enb_detail}; MME: {mme_detail}", ""
    if enb_ok is None and mme_ok:
        # srsenb's log file is stdio-buffered (srslog flushes it on exit or its "flush" console command), so
        # its success line can lag for minutes; its console (line-buffered) would have shown any S1 failure.
        return True, f"MME: {mme_detail}; srsenb: no S1 failure on its console (its log file is buffered)", ""
    return None, enb_detail if not enb_ok else f"MME: {mme_detail}", enb_side or "EPC"


def await_s1(inv: Inventory, enb: Host, epc: Host, marks: StartMarks, console, deadline_s: float,
             poll_s: float = 0.5, epc_console=lambda: "") -> str:
    """Wait until both ends report S1 Setup; ``LteStepError`` naming the side on failure or at the deadline.

    Args:
        console: returns srsenb's console (journal) text, read at each poll.
    """
    end = time.monotonic() + deadline_s
    while True:
        ok, detail, side = s1_state(inv, epc, marks, enb_output(inv, enb, console()), epc_console())
        if ok:
            return detail
        if ok is False or time.monotonic() >= end:
            why = detail if ok is False else f"not within {deadline_s:.0f} s: {detail}"
            raise LteStepError("S1 Setup between eNB and MME", enb.name if side.startswith("eNB") else epc.name,
                               f"{why} (likely side: {side})")
        time.sleep(poll_s)


def check_restarts(epc: Host, marks: StartMarks) -> None:
    """``LteStepError`` when an EPC daemon started more than once since the marks (it restarted or loops)."""
    for name, m in marks.epc.items():
        n = starts(since(epc, m))
        if n > 1:
            hint = (" (the HSS exits when it cannot reach MongoDB and systemd restarts it)" if name == "hss" else "")
            raise LteStepError(f"keep {name} running", epc.name,
                               f"{m.path} shows {n} starts since `lte up` began: the daemon restarted {n - 1} "
                               f"time(s){hint}")


def mongo_ping_argvs(uri: str) -> list[list[str]]:
    """Ways to ping MongoDB from the EPC host (mongosh, then the legacy mongo shell)."""
    return [["mongosh", "--quiet", uri, "--eval", "db.runCommand({ping: 1}).ok"],
            ["mongo", "--quiet", uri, "--eval", "db.runCommand({ping: 1}).ok"]]


def verify_mongo_on_host(epc: Host, uri: str) -> bool:
    """Ping the subscriber store from the EPC; ``LteStepError`` when a shell answers that it is down,
    False when no shell is installed (nothing was verified)."""
    for argv in mongo_ping_argvs(uri):
        try:
            res = epc.run(argv, check=False, timeout=20)
        except (OSError, MplabError):
            continue
        if res.returncode in (126, 127) or "No such file or directory" in res.stderr:
            continue                                 # that shell is not installed (ip netns exec says 255)
        if res.returncode != 0 or res.stdout.strip().splitlines()[-1:] != ["1"]:
            out = (res.stdout + res.stderr).strip().splitlines()
            raise LteStepError("reach MongoDB (the subscriber store) before pushing anything", epc.name,
                               f"{argv[0]} {uri}: {out[-1] if out else f'exit {res.returncode}'}; start mongod "
                               "(the HSS and PCRF exit without it)")
        return True
    return False
