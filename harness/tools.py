"""The external programs mplab calls, and the Debian package that provides each: one table.

``TOOLS`` is the only place that says which package a program comes from. The Makefile's
``APT_PACKAGES`` must cover every ``local`` tool that is not part of a minimal Debian
(``tests/test_tools.py`` checks it, reads every argv the code builds for program names the
table lacks, and cross-checks the table with ``dpkg -S``); ``mplab doctor`` probes them.

Where a tool runs:

- ``local``: on the machine that runs mplab (the emulated testbed, the test rigs, the build);
  ``make setup`` installs these.
- ``lab``: only on a physical lab's machines (eNodeB, EPC, APs, receivers), installed by the
  lab's own set-up (docs/lab.md, docs/lte.md); mplab's lab preflight checks them there.

This module is a leaf: it knows programs and packages, not how to run them on a host.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal

Where = Literal["local", "lab"]


@dataclass(frozen=True)
class Tool:
    """One external program: the package that provides it and why mplab needs it."""

    program: str
    package: str
    where: Where
    purpose: str
    #: Part of every Debian system (priority required/Essential): never needs installing.
    essential: bool = False
    #: mplab cannot do its main job without it (``mplab doctor`` fails when it is missing).
    required: bool = True


def _t(program: str, package: str, purpose: str, *, where: Where = "local", essential: bool = False,
       required: bool = True) -> Tool:
    return Tool(program, package, where, purpose, essential, required)


TOOLS: dict[str, Tool] = {t.program: t for t in (
    # the emulated testbed and every sample
    _t("iperf3", "iperf3", "the transfers (reverse mode, a fixed byte count)"),
    _t("mptcpize", "mptcpize", "MPTCP sockets for iperf3 < 3.19 (Debian 12 ships 3.12)"),
    _t("ip", "iproute2", "namespaces, veth links, addresses, routes, MPTCP endpoints"),
    _t("tc", "iproute2", "HTB/bfifo channel emulation, qdisc statistics"),
    _t("ss", "iproute2", "per-subflow congestion control and TCP state"),
    _t("nstat", "iproute2", "the sender's MPTCP/TCP counters around a transfer (bench/mpsdn_wifi.py)"),
    _t("nft", "nftables", "network-side counters and steering in the emulated AP and eNB"),
    _t("ethtool", "ethtool", "offloads off on shaped links (GSO bursts overflow shallow FIFOs)"),
    _t("sysctl", "procps", "MPTCP and congestion-control sysctls"),
    _t("kill", "procps", "stopping process groups on SSH hosts"),
    _t("modprobe", "kmod", "loading kernel congestion-control modules"),
    _t("modinfo", "kmod", "finding kernel congestion-control modules"),
    _t("bpftool", "bpftool", "vmlinux.h, registering/unregistering BPF struct_ops congestion controls"),
    _t("clang", "clang", "compiling the BPF congestion controls (make bpf) and their host copy for the replay tests; "
                         "the real-LTE rig's SCTP shim"),
    _t("git", "git", "the commit and dirty flag recorded in every manifest"),
    _t("ping", "iputils-ping", "reachability checks through the LTE tunnel"),
    # OpenFlow steering (controller/steering/openflow.py): a real Open vSwitch run by hand
    _t("ovsdb-tool", "openvswitch-common", "creating the switch's own OVSDB database", required=False),
    _t("ovsdb-server", "openvswitch-common", "the switch's database server (own run/db/log dirs)",
       required=False),
    _t("ovs-vswitchd", "openvswitch-switch", "the switch (userspace datapath, datapath_type=netdev)",
       required=False),
    _t("ovs-vsctl", "openvswitch-switch", "bridge, ports and controller of the switch", required=False),
    _t("ovs-ofctl", "openvswitch-common", "flow dumps when checking steering by hand", required=False),
    # test and bench rigs, remote meters
    _t("sshd", "openssh-server", "the SSH test rig (a real OpenSSH server in a namespace)"),
    _t("ssh-keygen", "openssh-client", "keys of the SSH test rig; mplab lab keys' key pair"),
    _t("ssh-copy-id", "openssh-client", "mplab lab keys --copy: mplab's key onto a board (its password asked once)",
       required=False),
    _t("tcpdump", "tcpdump", "packets on both sides of the shared-bottleneck FIFO: where drops fall "
                             "(bench/cc_bursts.py)", required=False),
    _t("ser2net", "ser2net", "meters shared over the network (rfc2217/raw TCP)", required=False),
    _t("hostapd", "hostapd", "the lab APs; here: parses every rendered hostapd.conf (wifi.realcheck)"),
    _t("wpa_supplicant", "wpasupplicant", "lab receivers' WiFi; here: parses every rendered supplicant config"),
    _t("chromium", "chromium", "a real headless browser: reports opened by tests (Playwright), MLflow UI screenshots",
       required=False),
    # part of every Debian system
    _t("sh", "dash", "gated starts and small host commands", essential=True),
    _t("bash", "bash", "gated starts with EPOCHREALTIME", essential=True),
    _t("setsid", "util-linux", "process groups on SSH hosts", essential=True),
    _t("uname", "coreutils", "kernel release", essential=True),
    _t("cat", "coreutils", "reading files on hosts", essential=True),
    _t("date", "coreutils", "clock offsets of SSH hosts", essential=True),
    _t("env", "coreutils", "the OVS daemons' own run/db/log directories (OVS_RUNDIR etc.)", essential=True),
    _t("sha256sum", "coreutils", "checksums of deployed files", essential=True),
    _t("true", "coreutils", "reachability", essential=True),
    _t("mkdir", "coreutils", "scratch directories for checking LTE configs on their hosts", essential=True),
    _t("mktemp", "coreutils", "a scratch directory on an LTE host (check-configs --hosts)", essential=True),
    _t("rm", "coreutils", "removing that scratch directory", essential=True),
    _t("timeout", "coreutils", "bounding a daemon's trial start on its host (check-configs --hosts)",
       essential=True),
    _t("stat", "coreutils", "an EPC log's size before `lte up` (this start's output only)", essential=True),
    _t("mount", "mount", "a small tmpfs for the full-disk tests (tests/faults/test_disk_full.py)", essential=True,
       required=False),
    _t("umount", "mount", "unmounting that tmpfs", essential=True, required=False),
    _t("test", "coreutils", "file tests on hosts", essential=True),
    _t("sleep", "coreutils", "test processes", essential=True),
    _t("echo", "coreutils", "test processes", essential=True),
    _t("printf", "coreutils", "test processes", essential=True),
    _t("dpkg-query", "dpkg", "package versions (doctor, LTE version detection)", essential=True),
    _t("dpkg", "dpkg", "which package owns a program (the fresh-machine guard test)", essential=True),
    _t("chattr", "e2fsprogs", "the fault suite: a file even root cannot write (chattr +i)", essential=True,
       required=False),
    # physical lab machines only (installed by the lab's own set-up)
    _t("systemctl", "systemd", "starting the lab's LTE/WiFi daemons", where="lab"),
    _t("journalctl", "systemd", "daemon logs in lab checks", where="lab"),
    _t("wpa_cli", "wpasupplicant", "WiFi association checks on lab receivers", where="lab"),
    _t("apt-get", "apt", "mplab lab prepare: installing the packages a board lacks (Debian-family boards)", where="lab"),
    _t("srsenb", "srsran", "the eNodeB (srsRAN 4G; labs usually build it from source)", where="lab"),
    _t("srsue", "srsran", "a software UE over ZMQ (srsRAN 4G)", where="lab", required=False),
    _t("srsepc", "srsran", "the EPC when lte.epc.kind is srsepc (srsRAN 4G)", where="lab", required=False),
    _t("open5gs-mmed", "open5gs", "the EPC's MME (Open5GS; from its own repository)", where="lab"),
)}

#: Python-side programs ``make setup`` brings with the environment (not apt packages).
PYTHON_TOOLS = ("uv",)


def local_packages() -> set[str]:
    """Debian packages that ``make setup`` must install for the local tools."""
    return {t.package for t in TOOLS.values() if t.where == "local" and not t.essential}


def missing_from(apt_packages: set[str]) -> list[Tool]:
    """Local, non-essential tools whose package is not in ``apt_packages``."""
    return [t for t in TOOLS.values() if t.where == "local" and not t.essential and t.package not in apt_packages]


@dataclass(frozen=True)
class ToolStatus:
    """What a probe found for one tool on this machine."""

    tool: Tool
    path: str | None
    version: str | None


_DPKG_VERSION = re.compile(r"^[\w.+:~-]+$")


def package_version(package: str, timeout_s: float = 5.0) -> str | None:
    """The installed Debian package's version, or None (not installed, or not a Debian system)."""
    if shutil.which("dpkg-query") is None:
        return None
    try:
        cp = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], check=False, capture_output=True, text=True,
                            timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = cp.stdout.strip()
    return out if cp.returncode == 0 and out and _DPKG_VERSION.match(out) else None


def probe(tool: Tool) -> ToolStatus:
    """Find ``tool`` on PATH (and in sbin, where daemons live) and its package's version."""
    path = shutil.which(tool.program) or shutil.which(tool.program, path="/usr/sbin:/sbin")
    return ToolStatus(tool, path, package_version(tool.package) if path else None)
