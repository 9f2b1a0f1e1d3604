"""Bring the WiFi up: hostapd on the APs first, then wpa_supplicant on every receiver.

Files are pushed with the same backup rule as the LTE configs (what a push replaces is
kept next to it, stamped); each daemon is restarted and must become active before the
next step. A failure names the step and the host.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.errors import CommandError, MplabError
from harness.hosts.local import Host
from harness.config.inventory import Inventory
from harness.deploy.services import ServiceManager, Systemd, wait_active
from lte.deploy import LteStepError, Pushed, push_files
from lte.render import RenderedFile
from lte.secrets import Secrets
from wifi.render import WifiFile, render_hostapd, render_supplicants


class WifiStepError(LteStepError):
    """A named step of bringing the WiFi up failed on a named host."""


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
            host = _host(hosts, wf.host)
            try:
                pushed += push_files(host, [_as_rendered(wf)], stamp)
            except (MplabError, OSError) as exc:
                raise WifiStepError(f"push {wf.path}", host.name, str(exc)) from exc
            svc = services(host)
            step = f"start {wf.unit}"
            try:
                svc.restart(wf.unit)
            except CommandError as exc:
                raise WifiStepError(step, host.name, str(exc), svc.logs(wf.unit)) from exc
            if not wait_active(svc, wf.unit, start_deadline_s, settle_s):
                raise WifiStepError(step, host.name, f"{wf.unit} is not active {start_deadline_s:.0f} s after restart",
                                    svc.logs(wf.unit))
            started.append(f"{host.name}:{wf.unit}")
    return WifiUpReport(tuple(pushed), tuple(started))


def _host(hosts: Mapping[str, Host], name: str) -> Host:
    try:
        return hosts[name]
    except KeyError:
        raise WifiStepError("connect", name, f"no host called {name!r} (known: {sorted(hosts)})") from None


def _as_rendered(wf: WifiFile) -> RenderedFile:
    return RenderedFile("wifi", wf.path, wf.text, wf.mode)  # type: ignore[arg-type]
