"""Bring the WiFi up: hostapd on the APs first, then wpa_supplicant on every receiver.

Files are pushed with the same backup rule as the LTE configs (``harness.deploy.files``:
what a push replaces is kept next to it, stamped); each daemon is restarted and must
become active before the next step (``harness.deploy.services.restart_and_wait``). A
failure names the step and the host.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.config.inventory import Inventory
from harness.deploy.files import Pushed, push_files
from harness.deploy.secrets import Secrets
from harness.deploy.services import ServiceManager, StepError, Systemd, restart_and_wait
from harness.errors import MplabError
from harness.hosts.local import Host
from wifi.render import render_hostapd, render_supplicants


class WifiStepError(StepError):
    """A named step of bringing the WiFi up failed on a named host."""

    what = "WiFi"


@dataclass(frozen=True)
class WifiUpReport:
    pushed: tuple[Pushed, ...]
    started: tuple[str, ...]


def wifi_up(inv: Inventory, hosts: Mapping[str, Host], secrets: Secrets, *,
            services: Callable[[Host], ServiceManager] = Systemd, start_deadline_s: float = 20.0,
            settle_s: float = 0.5, stamp: str | None = None) -> WifiUpReport:
    """Configure and (re)start hostapd on each AP, then wpa_supplicant on each receiver.

    Args:
        hosts: machine name -> Host, for every AP's ``host`` and every receiver's name.
        services: builds the service manager of a host (systemd by default).
    """
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S")
    pushed: list[Pushed] = []
    started: list[str] = []
    for stage in (render_hostapd(inv, secrets), render_supplicants(inv, secrets)):
        for wf in stage:
            assert wf.unit is not None, "every WiFi file names the daemon that reads it"
            host = _host(hosts, wf.machine)
            try:
                pushed += push_files(host, [wf], stamp)
            except (MplabError, OSError) as exc:
                raise WifiStepError(f"push {wf.path}", host.name, str(exc)) from exc
            restart_and_wait(services(host), wf.unit, step=f"start {wf.unit}", host=host.name, error=WifiStepError,
                             deadline_s=start_deadline_s, settle_s=settle_s)
            started.append(f"{host.name}:{wf.unit}")
    return WifiUpReport(tuple(pushed), tuple(started))


def _host(hosts: Mapping[str, Host], name: str) -> Host:
    try:
        return hosts[name]
    except KeyError:
        raise WifiStepError("connect", name, f"no host called {name!r} (known: {sorted(hosts)})") from None
