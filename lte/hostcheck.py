"""``mplab lte check-configs --hosts``: each daemon checked on the machine that will run it, over SSH.

The local check (``lte.realcheck``) runs whatever srsRAN/Open5GS this machine has; the eNB and EPC hosts
may run other builds. Here, on each host of the cell (``lte.enb.host``, ``lte.epc.host``):

1. the installed versions are read there (``srsenb --version``, ``open5gs-mmed -v``) and held against
   the inventory's pins: the same decision ``lte up`` makes (``lte.version.decide_*``);
2. the cell is rendered for those versions into a scratch directory on the host;
3. each daemon the host will run starts on its file inside a scratch network namespace on the host
   (so that a running cell's sockets and radio are not touched: the eNodeB's radio is the ZeroMQ
   device there, which needs no hardware), and passes when it gets past parsing (the verdict lines of
   ``lte.realcheck``). The namespace and the directory are removed afterwards.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from harness.deploy.trial import Trial, Verdict, decide, last_words
from harness.upkeep.preflight import Check
from harness.errors import ConfigError, MplabError
from harness.hosts.local import BackgroundProcess, CommandResult, Host
from harness.config.inventory import Inventory
from lte.deploy import LteHosts
from lte.realcheck import (O5GS_BLOCKED, O5GS_FAILED, O5GS_PASSED, SRS_FAILED, SRS_PASSED, SRS_WARNED,
                           SRSEPC_BLOCKED, SRSEPC_FAILED, SRSEPC_PASSED, redirected)
from harness.deploy.secrets import Secrets
from lte.render import EPC_DAEMONS, render_open5gs, render_srsenb
from lte.srsepc import render_srsepc
from lte.version import decide_open5gs, decide_srsran, detect_srsran, detect_version


class InNetns(Host):
    """Commands of ``host`` run inside its network namespace ``netns`` (files are the host's)."""

    kind = "netns"

    def __init__(self, host: Host, netns: str) -> None:
        super().__init__(f"{host.name}:{netns}")
        self.host = host
        self.netns = netns

    def _wrap(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
            input: str | None = None) -> CommandResult:
        return self.host.run(self._wrap(argv), timeout=timeout, check=check, input=input)

    def start(self, argv: Sequence[str], *, gated: bool = False, label: str | None = None) -> BackgroundProcess:
        return self.host.start(self._wrap(argv), gated=gated, label=label)

    def read_file(self, path: str) -> bytes:
        return self.host.read_file(path)

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        self.host.write_file(path, data, mode)


def program(host: Host, name: str, bin_dir: str | None) -> str | None:
    """``name`` on ``host``: in ``bin_dir`` when given (a source build), else on its PATH."""
    if bin_dir:
        return f"{bin_dir}/{name}" if host.exists(f"{bin_dir}/{name}") else None
    return host.which(name)


def _zmq_radio(inv: Inventory) -> Inventory:
    """``inv`` whose eNodeB radio is the ZeroMQ device: a trial must not open the lab's SDR."""
    rf = inv.lte.enb.rf.model_copy(update={"device_name": "zmq", "device_args":
                                           "tx_port=tcp://*:2000,rx_port=tcp://localhost:2001,base_srate=23.04e6"})
    enb = inv.lte.enb.model_copy(update={"rf": rf})
    return inv.model_copy(update={"lte": inv.lte.model_copy(update={"enb": enb})})


def _write(host: Host, files) -> None:
    dirs = sorted({str(Path(f.path).parent) for f in files})
    host.run(["mkdir", "-p", *dirs])
    for f in files:
        host.write_file(f.path, f.text.encode(), f.mode)


def enb_trials(inv: Inventory, host: Host, where: str) -> tuple[list[Trial], list[Verdict]]:
    """srsenb's version against the pin, and its trial on the rendered files under ``where``."""
    enb = inv.lte.enb
    prog = program(host, "srsenb", enb.bin_dir)
    if prog is None:
        return [], [Verdict("srsenb", False, f"srsenb is not installed on {host.name} "
                                             f"({'in ' + enb.bin_dir if enb.bin_dir else 'not on its PATH'})")]
    try:
        v = decide_srsran(enb.version, detect_srsran(host, prog), f"host {host.name}")
    except ConfigError as exc:
        return [], [Verdict("srsenb version", False, str(exc))]
    found = [Verdict("srsenb version", True, f"{host.name} runs srsRAN 4G {v}" if v else
                     f"{host.name}: srsenb --version did not answer (release not verified)")]
    files = render_srsenb(redirected(_zmq_radio(inv), Path(where)))
    _write(host, files)
    conf = next(f.path for f in files if f.path.endswith("/enb.conf"))
    return [Trial("srsenb", (prog, conf), SRS_PASSED, SRS_FAILED, warned=SRS_WARNED)], found


def epc_trials(inv: Inventory, host: Host, where: str) -> tuple[list[Trial], list[Verdict]]:
    """The EPC's versions against the pin, and one trial per daemon on the rendered files under ``where``."""
    epc = inv.lte.epc
    if epc.kind == "srsepc":
        prog = program(host, "srsepc", epc.bin_dir)
        if prog is None:
            return [], [Verdict("srsepc", False, f"srsepc is not installed on {host.name}")]
        r = redirected(inv, Path(where))
        r = r.model_copy(update={"lte": r.lte.model_copy(update={"epc": r.lte.epc.model_copy(
            update={"user_db": f"{where}/epc/user_db.csv"})})})
        # placeholder keys: only parsing is checked, the lab's SIM keys never leave its secrets file
        dummy = Secrets.model_validate({"sim": {x.sim.imsi: {"k": "0" * 32, "opc": "0" * 32}
                                                for x in inv.receivers if x.sim is not None}})
        files, _ = render_srsepc(r, dummy)
        _write(host, files)
        conf = next(f.path for f in files if f.path.endswith("/epc.conf"))
        return [Trial("srsepc", (prog, conf), SRSEPC_PASSED, SRSEPC_FAILED, blocked=SRSEPC_BLOCKED)], []
    try:
        version = decide_open5gs(epc.version, detect_version(host), f"host {host.name} (open5gs-mmed -v)")
    except ConfigError as exc:
        return [], [Verdict("open5gs version", False, str(exc))]
    except MplabError as exc:
        return [], [Verdict("open5gs", False, f"{host.name}: {exc}")]
    found = [Verdict("open5gs version", True, f"{host.name} runs Open5GS {version}")]
    r = redirected(inv, Path(where))
    files = render_open5gs(r, version)
    _write(host, files)
    host.run(["mkdir", "-p", r.lte.epc.log_dir])
    trials = []
    for d in EPC_DAEMONS:
        prog = program(host, f"open5gs-{d}d", None)
        if prog is None:
            found.append(Verdict(f"open5gs-{d}d", False, f"open5gs-{d}d is not installed on {host.name}"))
            continue
        trials.append(Trial(f"open5gs-{d}d", (prog, "-c", f"{r.lte.epc.config_dir}/{d}.yaml"),
                            O5GS_PASSED, O5GS_FAILED, blocked=O5GS_BLOCKED))
    return trials, found


def run_bounded(host: Host, trial: Trial, seconds: int = 15) -> Verdict:
    """``trial`` on ``host`` for at most ``seconds`` (then SIGINT, as srsRAN and Open5GS stop cleanly on it),
    judged on its whole output: an SSH host shows a process's output only once it has exited."""
    res = host.run(["timeout", "-s", "INT", "-k", "5", str(seconds), *trial.argv], check=False,
                   timeout=seconds + 20)
    both = res.stdout + "\n" + res.stderr
    got = decide(res.stdout, res.stderr, trial)
    if got is None:
        return Verdict(trial.name, False, f"no verdict within {seconds} s (exit {res.returncode}): "
                                          f"{last_words(both, 2)}", trial.argv, both)
    return Verdict(trial.name, got[0], got[1], trial.argv, both)


def check_on_host(host: Host, role: str, inv: Inventory, netns: str, addresses: list[str]) -> list[Verdict]:
    """Versions and trials of the daemons ``role`` ("enb" or "epc") runs, on ``host``; scratch removed after."""
    where = host.run(["mktemp", "-d", "/tmp/mplab-ltecheck-XXXXXX"]).stdout.strip()
    made = False
    try:
        trials, verdicts = (enb_trials if role == "enb" else epc_trials)(inv, host, where)
        if trials:
            host.run(["ip", "netns", "add", netns])
            made = True
            ns = InNetns(host, netns)
            ns.run(["ip", "link", "set", "lo", "up"])
            for a in dict.fromkeys(addresses):
                if not a.startswith("127."):
                    ns.run(["ip", "addr", "add", f"{a}/32", "dev", "lo"])
            verdicts += [run_bounded(ns, t) for t in trials]
        return [Verdict(f"{v.name} @{host.name}", v.ok, v.detail, v.argv, v.output) for v in verdicts]
    finally:
        if made:
            host.run(["ip", "netns", "del", netns], check=False)
        host.run(["rm", "-rf", "--one-file-system", where], check=False)


def check_hosts(inv: Inventory, hosts: LteHosts, netns: str) -> list[Verdict]:
    """Every daemon of the cell on the host that will run it: the eNB's srsenb, the EPC's core."""
    addrs = [str(inv.lte.enb.address), str(inv.lte.epc.address)]
    out: list[Verdict] = []
    for role, host in (("enb", hosts.enb), ("epc", hosts.epc)):
        try:
            out += check_on_host(host, role, inv, netns, addrs)
        except MplabError as exc:
            out.append(Verdict(f"{role} @{host.name}", False, f"cannot check on {host.name}: {exc}"))
    return out



def version_checks(inv: Inventory, hosts: LteHosts | None = None) -> list[Check]:
    """Preflight's LTE lines: the srsRAN and Open5GS versions on the hosts against the pins (`lte up`'s rule).

    ``hosts``: the cell's hosts (default: from the inventory, closed afterwards).
    """
    from harness.deploy.machines import host_for
    own = hosts is None
    hosts = hosts or LteHosts(enb=host_for(inv, inv.lte.enb.host), epc=host_for(inv, inv.lte.epc.host))
    out: list[Check] = []
    try:
        enb, epc = hosts.enb, hosts.epc
        try:
            prog = program(enb, "srsenb", inv.lte.enb.bin_dir) or "srsenb"
            v = decide_srsran(inv.lte.enb.version, detect_srsran(enb, prog), f"host {enb.name}")
            out.append(Check(enb.name, "LTE: srsRAN 4G version", True, f"{v or 'not reported by srsenb --version'}"))
        except (ConfigError, MplabError) as exc:
            out.append(Check(enb.name, "LTE: srsRAN 4G version", False, str(exc), "pin what the host runs"))
        if inv.lte.epc.kind == "open5gs":
            try:
                v5 = decide_open5gs(inv.lte.epc.version, detect_version(epc), f"host {epc.name} (open5gs-mmed -v)")
                out.append(Check(epc.name, "LTE: Open5GS version", True, str(v5)))
            except (ConfigError, MplabError) as exc:
                out.append(Check(epc.name, "LTE: Open5GS version", False, str(exc), "pin what the host runs"))
    finally:
        if own:
            hosts.enb.close()
            hosts.epc.close()
    return out
