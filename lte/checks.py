"""Is the LTE cell working? S1 setup in the MME log, each receiver attached (LTE
interface up with an address from the UE pool), and a ping through the LTE path.

Each check is a ``harness.upkeep.preflight.Check`` (host, name, ok, detail, fix). ``diagnose``
turns a list of them into one message naming the first failed step and its host, and
what to look at next.
"""
from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping

from harness.errors import MplabError
from harness.hosts.local import Host
from harness.config.inventory import Inventory, Receiver
from harness.upkeep.preflight import Check
from lte.startlog import last_start

#: Open5GS MME log line when an eNodeB's SCTP association is accepted, e.g.
#: ``[mme] INFO: eNB-S1 accepted[192.168.30.2]:36412 in s1_path module``
#: (https://github.com/open5gs/open5gs/issues/902 and /1003).
#: It comes before S1 Setup: the MME then either answers (nothing logged at INFO) or logs
#: ``S1-Setup failure:`` and the reason on the next line (src/mme/s1ap-handler.c).
S1_ACCEPTED_RE = re.compile(r"eNB-S1 accepted\[(?P<addr>[0-9.]+)\]")
ENB_COUNT_RE = re.compile(r"Number of eNBs is now (?P<n>\d+)")
S1_FAILURE_RE = re.compile(r"S1-Setup failure:[^\n]*\n[^\n]*?(?:WARNING|ERROR|INFO): +(?P<why>[^\n]*?)"
                           r"\s*(?:\(\.\./[^\n]*)?$", re.MULTILINE)


def s1_setup_seen(mme_log: str, enb_address: str) -> tuple[bool, str]:
    """Whether this start's MME log shows the eNodeB at ``enb_address`` set up and still there.

    ``mme_log`` must hold only this start's lines (``lte.startlog``): Open5GS appends across starts.
    Fails on no association from the eNB, an ``S1-Setup failure`` after it, or an eNB count that fell
    to 0 after it (the eNB left: "eNBs now 0").
    """
    hits = [m for m in S1_ACCEPTED_RE.finditer(mme_log) if m.group("addr") == enb_address]
    if not hits:
        others = sorted({m.group("addr") for m in S1_ACCEPTED_RE.finditer(mme_log)})
        return False, ("no 'eNB-S1 accepted' from " + enb_address +
                       (f" (accepted only from {', '.join(others)})" if others else ""))
    after = mme_log[hits[-1].end():]
    failure = S1_FAILURE_RE.search(after)
    if failure:
        return False, f"the MME refused S1 Setup from eNB {enb_address}: {failure.group('why').strip()}"
    counts = ENB_COUNT_RE.findall(after)
    if counts and int(counts[-1]) == 0:
        return False, f"eNB {enb_address} was accepted and later removed (eNBs now 0)"
    return True, f"eNB {enb_address} accepted, no S1-Setup failure" + (f"; eNBs now {counts[-1]}" if counts else "")


#: srsenb's own S1 lines (srsenb/src/stack/s1ap/s1ap.cc, 22.04-23.11): success at INFO in its log file
#: (enb.conf sets ``s1ap_level = info``), failures on its console and at ERROR; and the cell-config
#: complaints its MAC prints and survives (srsenb/src/stack/mac/sched_helpers.cc).
SRSENB_S1_RE = re.compile(r"(?P<ok>S1Setup procedure completed successfully)|"
                          r"S1 Setup Failure\. Cause: (?P<cause>[^\n]*)|"
                          r"(?P<noconn>Failed to initiate S1 connection)|"
                          r"(?P<gone>SCTP Association Shutdown|SCTP peer address unreachable)|"
                          r"(?P<cell>Invalid (?:PUCCH|PRACH) configuration[^\n]*)")


def srsenb_s1_verdict(enb_output: str) -> tuple[bool | None, str, str]:
    """srsenb's own view of S1 from its log and console of this start: (ok, detail, likely side).

    ``ok`` is None while nothing decisive was printed yet. A broken cell configuration fails even when
    S1 succeeded: srsenb keeps running and UEs never attach.
    """
    events = list(SRSENB_S1_RE.finditer(enb_output))
    cell = next((e for e in events if e.group("cell")), None)
    if cell:
        return False, f"srsenb: {cell.group('cell').strip()}", "eNB (sib.conf/rr.conf)"
    if not events:
        return None, "srsenb has not logged S1 Setup yet (no 'S1Setup procedure completed successfully')", "eNB"
    last = events[-1]
    if last.group("ok"):
        return True, "srsenb: S1Setup procedure completed successfully", ""
    if last.group("cause") is not None:
        return False, f"srsenb: S1 Setup Failure, cause {last.group('cause').strip()}", \
            "EPC (the MME refused the eNB: PLMN/TAC of mme.yaml vs enb.conf/rr.conf)"
    if last.group("noconn"):
        return False, "srsenb: Failed to initiate S1 connection (retrying every 10 s)", \
            "network/EPC (the MME is not reachable at mme_addr on SCTP 36412, or not running)"
    return False, f"srsenb: S1 lost after setup ({last.group('gone')})", "EPC (the MME went away) or network"


#: Open5GS MME per-UE outcome lines (src/mme/emm-sm.c, mme-sm.c).
ATTACH_RE = re.compile(r"\[(?P<imsi>\d{6,15})\] (?P<what>Attach complete|Attach reject \[OGS_NAS_EMM_CAUSE:\d+\])")


def mme_attach(mme_log: str, imsi: str) -> str | None:
    """The last attach outcome of ``imsi`` in this start's MME log ("Attach complete", "Attach reject [...]")."""
    hits = [m.group("what") for m in ATTACH_RE.finditer(mme_log) if m.group("imsi") == imsi]
    return hits[-1] if hits else None


#: srsEPC's MME (srsepc/src/mme/s1ap_mngmt_proc.cc): the request, then a response or a failure with its cause.
SRSEPC_S1_RE = re.compile(r"(Received S1 Setup Request|Sending S1 Setup Response|"
                          r"Sending S1 Setup Failure - (?P<cause>[^\n]*)|"
                          r"Deleting eNB context\. eNB Id: (?P<gone>0x[0-9a-fA-F]+))")


def srsepc_s1_seen(epc_log: str) -> tuple[bool, str]:
    """Whether srsEPC's log shows an S1 Setup Request answered with a Response (the last exchange counts)."""
    events = list(SRSEPC_S1_RE.finditer(epc_log))
    if not events:
        return False, "no 'Received S1 Setup Request' in srsepc's log"
    last = events[-1]
    if last.group("gone"):
        return False, f"srsepc deleted eNB {last.group('gone')}'s context after S1 Setup (the eNB left)"
    if last.group("cause"):
        return False, f"srsepc refused the eNB's S1 Setup: {last.group('cause').strip()}"
    if last.group(1) == "Sending S1 Setup Response":
        return True, "S1 Setup Request answered with S1 Setup Response"
    return False, "S1 Setup Request received but no S1 Setup Response sent"


def epc_log_path(inv: Inventory) -> str:
    """The MME's log file: Open5GS's mme.log, or srsepc's own log."""
    epc_cfg = inv.lte.epc
    return f"{epc_cfg.log_dir}/{'epc' if epc_cfg.kind == 'srsepc' else 'mme'}.log"


def this_start(inv: Inventory, epc: Host, mme_log: str | None = None) -> str:
    """This start's MME log: ``mme_log`` when given (read from a mark), else cut at the last start banner
    (srsepc truncates its log at start; Open5GS appends)."""
    if mme_log is not None:
        return mme_log
    text = epc.read_file(epc_log_path(inv)).decode(errors="replace")
    return text if inv.lte.epc.kind == "srsepc" else last_start(text)


def check_s1(inv: Inventory, epc: Host, mme_log: str | None = None, epc_console: str = "") -> Check:
    """S1 setup of the inventory's eNodeB in this start's MME log (srsepc's own log for srsEPC, with its console
    ``epc_console``: srsepc's log file is stdio-buffered, its console is not)."""
    assert inv.lte is not None
    epc_cfg = inv.lte.epc
    srsepc = epc_cfg.kind == "srsepc"
    path = epc_log_path(inv)
    try:
        text = this_start(inv, epc, mme_log)
    except (OSError, MplabError) as exc:
        return Check(epc.name, "s1-setup", False, f"cannot read {path}: {exc}",
                     "EPC side: is srsepc running and logging there ([log] filename)?" if srsepc else
                     "EPC side: is open5gs-mmed running and logging there?")
    if srsepc:
        cut = epc_console.rfind("Software Radio Systems EPC")
        text += "\n" + (epc_console[cut:] if cut >= 0 else epc_console)
    ok, detail = srsepc_s1_seen(text) if srsepc else s1_setup_seen(text, str(inv.lte.enb.address))
    if ok:
        return Check(epc.name, "s1-setup", True, detail, "")
    if "refused" in detail:
        fix = "EPC side: the MME's PLMN/TAC (mme.yaml tai/gummei, epc.conf) must match the eNB's enb.conf/rr.conf"
    elif "removed" in detail or "left" in detail:
        fix = "eNB side: srsenb left after S1 Setup; is it still running? see its log and journal"
    else:
        fix = (f"eNB side: is srsenb running with mme_addr = {epc_cfg.address}, and S1 (SCTP 36412) reachable "
               "from the eNB?")
    return Check(epc.name, "s1-setup", False, detail, fix)


def parse_ip_addr(text: str) -> list[dict]:
    """``ip -j addr show`` output as a list of links."""
    return json.loads(text or "[]")


def attach_state(links: list[dict], ifname: str, pool: ipaddress.IPv4Network,
                 expected: ipaddress.IPv4Address | None) -> tuple[bool, str]:
    """Whether ``ifname`` is up with an IPv4 address from ``pool`` (and the static one, if expected)."""
    link = next((ln for ln in links if ln.get("ifname") == ifname), None)
    if link is None:
        return False, f"no interface {ifname}"
    flags = link.get("flags", [])
    if "UP" not in flags or link.get("operstate") not in ("UP", "UNKNOWN"):
        return False, f"{ifname} is down (state {link.get('operstate')}, flags {','.join(flags)})"
    addrs = [a for a in link.get("addr_info", []) if a.get("family") == "inet"]
    in_pool = [a["local"] for a in addrs if ipaddress.IPv4Address(a["local"]) in pool]
    if not in_pool:
        have = ", ".join(f"{a['local']}/{a['prefixlen']}" for a in addrs) or "none"
        return False, f"{ifname} has no address in the UE pool {pool} (has {have})"
    if expected is not None and str(expected) not in in_pool:
        return False, f"{ifname} has {', '.join(in_pool)}, not its static address {expected}"
    return True, f"{ifname} up with {', '.join(in_pool)}"


def check_attach(inv: Inventory, receiver: Receiver, host: Host, mme_log: str | None = None) -> Check:
    """The receiver's modem is attached: its LTE interface is up with a UE-pool address."""
    assert inv.lte is not None
    intf = receiver.interfaces["lte"]
    res = host.run(["ip", "-j", "-4", "addr", "show", "dev", intf.name], check=False, timeout=10)
    if res.returncode != 0:
        ok, detail = False, f"no interface {intf.name} ({res.stderr.strip()})"
    else:
        ok, detail = attach_state(parse_ip_addr(res.stdout), intf.name, inv.lte.epc.ue_pool, intf.address)
    imsi = receiver.sim.imsi if receiver.sim else "?"
    return Check(host.name, "attach", ok, detail, "" if ok else attach_hint(imsi, mme_log))


def attach_hint(imsi: str, mme_log: str | None) -> str:
    """Which side to look at when a UE is not attached, from what this start's MME log says of its IMSI."""
    outcome = None if mme_log is None else mme_attach(mme_log, imsi)
    if outcome is None and mme_log is not None:
        return (f"radio side: IMSI {imsi} never reached the MME; is the cell up (srsenb's own log: PUCCH/PRACH "
                "errors), is the modem in LTE mode on this band/EARFCN?")
    if outcome and outcome.startswith("Attach reject"):
        return f"EPC side: the MME rejected IMSI {imsi} ({outcome}): is it provisioned with the right K/OPc and APN?"
    if outcome == "Attach complete":
        return f"UE side: the MME completed IMSI {imsi}'s attach; the modem has not brought its interface up"
    return f"is the modem in LTE mode and IMSI {imsi} provisioned? look for it in the MME log"


def ping_argv(ifname: str, target: str, count: int = 3, wait_s: int = 2) -> list[str]:
    """Ping ``target`` out of ``ifname`` only."""
    return ["ping", "-n", "-q", "-c", str(count), "-W", str(wait_s), "-I", ifname, target]


def check_ping(inv: Inventory, receiver: Receiver, host: Host) -> Check:
    """A ping through the LTE path (to ``lte.ping_target`` or the UE pool gateway)."""
    assert inv.lte is not None
    target = str(inv.lte.ping_target or inv.lte.epc.ue_gateway)
    ifname = receiver.interfaces["lte"].name
    res = host.run(ping_argv(ifname, target), check=False, timeout=20)
    m = re.search(r"(\d+) packets transmitted, (\d+) (?:packets )?received", res.stdout)
    received = int(m.group(2)) if m else 0
    ok = res.returncode == 0 and received > 0
    detail = (f"{received} replies from {target} via {ifname}" if ok else
              f"no reply from {target} via {ifname} ({(res.stdout + res.stderr).strip().splitlines()[-1:]})")
    return Check(host.name, "ping", ok, detail, "" if ok else "check the UPF's ogstun, ip_forward and routes back "
                                                            "to the UE pool")


def check_enb_s1(inv: Inventory, enb: Host) -> Check:
    """srsenb's own S1 outcome and cell complaints, from its log file (srsenb truncates it at each start)."""
    path = inv.lte.enb.log_path
    try:
        text = enb.read_file(path).decode(errors="replace")
    except (OSError, MplabError) as exc:
        return Check(enb.name, "enb-s1", False, f"cannot read {path}: {exc}", "eNB side: is srsenb running?")
    ok, detail, side = srsenb_s1_verdict(text)
    if ok is None:      # srslog buffers the file: no line yet is not a failure (the MME's side decides then)
        return Check(enb.name, "enb-s1", True, "no S1 outcome in srsenb's log yet (the file is buffered)", "")
    return Check(enb.name, "enb-s1", ok, detail, "" if ok else f"likely side: {side}")


def run_checks(inv: Inventory, epc: Host, receivers: Mapping[str, Host], mme_log: str | None = None,
               enb: Host | None = None, epc_console: str = "") -> list[Check]:
    """S1 setup (the MME's side, and srsenb's own when ``enb`` is given), then per receiver attach and (if
    attached) ping, all against this start's logs."""
    try:
        mme_log = this_start(inv, epc, mme_log)
    except (OSError, MplabError):
        mme_log = None
    checks = [check_s1(inv, epc, mme_log, epc_console)] + ([check_enb_s1(inv, enb)] if enb is not None else [])
    for r in inv.receivers:
        host = receivers[r.name]
        att = check_attach(inv, r, host, mme_log if inv.lte.epc.kind == "open5gs" else None)
        checks.append(att)
        if att.ok:
            checks.append(check_ping(inv, r, host))
    return checks


def diagnose(checks: list[Check]) -> str | None:
    """None when everything passed; else which step failed on which host, and what to try."""
    failed = [c for c in checks if not c.ok]
    if not failed:
        return None
    first = failed[0]
    msg = f"LTE check '{first.name}' failed on host '{first.host}': {first.detail}"
    if first.fix:
        msg += f" ({first.fix})"
    if len(failed) > 1:
        msg += "; also failed: " + ", ".join(f"{c.name}@{c.host}" for c in failed[1:])
    return msg
