"""Run metadata, captured by default.

Each provider adds one section (as MLflow's RunContextProviders add tags). A provider
that fails writes ``null`` and a warning: metadata never aborts a run.
"""
from __future__ import annotations

import logging
import platform
import sys
from collections.abc import Callable
from importlib import metadata as importlib_metadata

from harness.build import build_info
from harness.cc import kernel_flavour
from harness.hosts.local import Host

log = logging.getLogger("mplab.metadata")

#: Sysctls that change how MPTCP and TCP behave (recorded per host, as Flent's INTERESTING_SYSCTLS).
INTERESTING_SYSCTLS = (
    "net.mptcp.enabled", "net.mptcp.scheduler", "net.mptcp.path_manager", "net.mptcp.pm_type",
    "net.mptcp.checksum_enabled", "net.mptcp.allow_join_initial_addr_port",
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_ecn", "net.ipv4.tcp_no_metrics_save", "net.core.default_qdisc",
)
PACKAGES = ("mplab", "pydantic", "pyserial", "typer", "rich", "pyyaml")


def safely(name: str, fn: Callable[[], object]) -> object:
    """Run a provider; on failure log a warning and return None."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a failed probe must never abort a run
        log.warning("metadata %s: %s", name, exc)
        return None


def git_info() -> dict | None:
    """Commit mplab was built from (a wheel) or runs from (a checkout), and whether it had uncommitted changes."""
    return build_info()


def host_info(host: Host) -> dict:
    """Kernel release and flavour, and the interesting sysctls of one host."""
    uname = host.run(["uname", "-r"]).stdout.strip()
    sysctls = {}
    res = host.run(["sysctl", "-e", *INTERESTING_SYSCTLS], check=False)
    for line in res.stdout.splitlines():
        k, sep, v = line.partition(" = ")
        if sep:
            sysctls[k.strip()] = v.strip()
    return {"kernel": uname, "kernel_flavour": kernel_flavour(host), "sysctls": sysctls}


def software() -> dict:
    """Versions of Python and of mplab's own dependencies on the orchestrator."""
    pkgs = {}
    for p in PACKAGES:
        try:
            pkgs[p] = importlib_metadata.version(p)
        except importlib_metadata.PackageNotFoundError:
            pkgs[p] = None
    return {"python": sys.version.split()[0], "platform": platform.platform(), "packages": pkgs}


def tool_versions(host: Host) -> dict:
    """Versions of the external programs mplab drives on ``host``."""
    out = {}
    for name, argv in {"iproute2": ["ip", "-V"], "iperf3": ["iperf3", "--version"],
                       "tc": ["tc", "-V"], "mptcpize": ["mptcpize", "--version"]}.items():
        out[name] = safely(name, lambda a=argv: (host.run(a, check=False).stdout or "").splitlines()[0].strip())
    return out


def collect(providers: dict[str, Callable[[], object]]) -> dict:
    """Run every provider through ``safely``."""
    return {name: safely(name, fn) for name, fn in providers.items()}
