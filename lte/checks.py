"""Is the LTE cell working? S1 setup in the MME log, each receiver attached (LTE
interface up with an address from the UE pool), and a ping through the LTE path.

Each check is a ``harness.testbeds.base.Check`` (host, name, ok, detail, fix). ``diagnose``
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
from harness.testbeds.base import Check

#: Open5GS MME log line when an eNodeB's S1 association is accepted, e.g.
#: ``[mme] INFO: eNB-S1 accepted[192.168.30.2]:36412 in s1_path module`` (open5gs/open5gs issues #902, #1003).
S1_ACCEPTED_RE = re.compile(r"eNB-S1 accepted\[(?P<addr>[0-9.]+)\]")
ENB_COUNT_RE = re.compile(r"Number of eNBs is now (?P<n>\d+)")


def s1_setup_seen(mme_log: str, enb_address: str) -> tuple[bool, str]:
    """Whether the MME log shows the eNodeB at ``enb_address`` connected (and the eNB count after it)."""
    hits = [m for m in S1_ACCEPTED_RE.finditer(mme_log) if m.group("addr") == enb_address]
    if not hits:
        others = sorted({m.group("addr") for m in S1_ACCEPTED_RE.finditer(mme_log)})
        return False, ("no 'eNB-S1 accepted' from " + enb_address +
                       (f" (accepted only from {', '.join(others)})" if others else ""))
    after = mme_log[hits[-1].end():]
    counts = ENB_COUNT_RE.findall(after)
    return True, f"eNB {enb_address} accepted" + (f"; eNBs now {counts[-1]}" if counts else "")


#: srsEPC's MME (srsepc/src/mme/s1ap_mngmt_proc.cc): the request, then a response or a failure with its cause.
SRSEPC_S1_RE = re.compile(r"(Received S1 Setup Request|Sending S1 Setup Response|"
                          r"Sending S1 Setup Failure - (?P<cause>[^\n]*))")


def srsepc_s1_seen(epc_log: str) -> tuple[bool, str]:
    """Whether srsEPC's log shows an S1 Setup Request answered with a Response (the last exchange counts)."""
    events = list(SRSEPC_S1_RE.finditer(epc_log))
    if not events:
        return False, "no 'Received S1 Setup Request' in srsepc's log"
    last = events[-1]
    if last.group("cause"):
        return False, f"srsepc refused the eNB's S1 Setup: {last.group('cause').strip()}"
    if last.group(1) == "Sending S1 Setup Response":
        return True, "S1 Setup Request answered with S1 Setup Response"
    return False, "S1 Setup Request received but no S1 Setup Response sent"


def check_s1(inv: Inventory, epc: Host) -> Check:
    """S1 setup of the inventory's eNodeB, from the MME log on the EPC host (srsepc's own log for srsEPC)."""
    assert inv.lte is not None
    epc_cfg = inv.lte.epc
    srsepc = epc_cfg.kind == "srsepc"
    path = f"{epc_cfg.log_dir}/{'epc' if srsepc else 'mme'}.log"
    try:
        text = epc.read_file(path).decode(errors="replace")
    except (OSError, MplabError) as exc:
        return Check(epc.name, "s1-setup", False, f"cannot read {path}: {exc}",
                     "is srsepc running and logging there ([log] filename)?" if srsepc else
                     "is open5gs-mmed running and logging there?")
    ok, detail = srsepc_s1_seen(text) if srsepc else s1_setup_seen(text, str(inv.lte.enb.address))
    also = ", the PLMN/TAC of both sides," if srsepc else ""
    return Check(epc.name, "s1-setup", ok, detail,
                 "" if ok else f"check srsenb is running, mme_addr = {epc_cfg.address}{also} and S1 (SCTP 36412) "
                               "is reachable from the eNB")


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


def check_attach(inv: Inventory, receiver: Receiver, host: Host) -> Check:
    """The receiver's modem is attached: its LTE interface is up with a UE-pool address."""
    assert inv.lte is not None
    intf = receiver.interfaces["lte"]
    res = host.run(["ip", "-j", "-4", "addr", "show", "dev", intf.name], check=False, timeout=10)
    if res.returncode != 0:
        ok, detail = False, f"no interface {intf.name} ({res.stderr.strip()})"
    else:
        ok, detail = attach_state(parse_ip_addr(res.stdout), intf.name, inv.lte.epc.ue_pool, intf.address)
    imsi = receiver.sim.imsi if receiver.sim else "?"
    return Check(host.name, "attach", ok, detail,
                 "" if ok else f"is the modem in LTE mode and IMSI {imsi} provisioned? look for it in the MME log")


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


def run_checks(inv: Inventory, epc: Host, receivers: Mapping[str, Host]) -> list[Check]:
    """S1 setup, then per receiver attach and (if attached) ping."""
    checks = [check_s1(inv, epc)]
    for r in inv.receivers:
        host = receivers[r.name]
        att = check_attach(inv, r, host)
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
