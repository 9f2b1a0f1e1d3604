"""Steering on the receivers themselves, for labs without SDN: MPTCP endpoint flags.

The receiver's in-kernel path manager only opens subflows from endpoints flagged ``subflow``;
mplab's receivers start every connection on a path their assignment allows (WiFi, or LTE for
an LTE-only receiver) and add the LTE endpoint only when both are allowed. So ``{wifi}`` and
``{lte}`` = no extra endpoint, ``{wifi, lte}`` = the LTE endpoint with ``subflow``. This
steers connections that start after ``apply``; it cannot move a running one off a path (use a
network-side backend for that). Counters are the receiver's own interface byte counters
(received), the nearest a host-side scheme gets to "as the controller sees it".
"""
from __future__ import annotations

import json
import logging

from harness.errors import CommandError, MplabError
from harness.hosts.netcmd import mptcp_endpoint_argv, mptcp_flush_argv

from controller.policy import Assignment
from controller.steering.base import SteeredReceiver

log = logging.getLogger("mplab.controller.host")


class HostSteering:
    """``ip mptcp endpoint`` on each receiver."""

    name = "host"

    def __init__(self, receivers: list[SteeredReceiver]) -> None:
        bad = [r.name for r in receivers if r.host is None or set(r.ifnames) != {"wifi", "lte"}]
        if bad:
            raise MplabError(f"host steering needs each receiver's host and interface names (missing for {bad})")
        self.receivers = list(receivers)
        self._base: dict[str, dict[str, int]] = {}

    def _endpoints(self, r: SteeredReceiver, lte_subflow: bool) -> None:
        r.host.run(mptcp_flush_argv())
        if lte_subflow:
            r.host.run(mptcp_endpoint_argv(r.addresses["lte"], r.ifnames["lte"], ("subflow",)))

    def setup(self) -> None:
        for r in self.receivers:
            self._endpoints(r, True)
        self._base = self._raw()

    def apply(self, assignment: Assignment) -> None:
        for r in self.receivers:
            d = assignment.get(r.name)
            if d is not None:
                self._endpoints(r, len(d.ifaces) == 2)

    def _raw(self) -> dict[str, dict[str, int]]:
        out = {}
        for r in self.receivers:
            links = json.loads(r.host.run(["ip", "-j", "-s", "link", "show"]).stdout)
            by_name = {ln["ifname"]: int(ln["stats64"]["rx"]["bytes"]) for ln in links}
            out[r.name] = {radio: by_name.get(ifname, 0) for radio, ifname in r.ifnames.items()}
        return out

    def counters(self) -> dict[str, dict[str, int]]:
        now = self._raw()
        return {rx: {radio: now[rx][radio] - self._base.get(rx, {}).get(radio, 0) for radio in now[rx]}
                for rx in now}

    def teardown(self) -> None:
        # Back to the testbed's own configuration: the LTE endpoint joins every connection.
        for r in self.receivers:
            try:
                self._endpoints(r, True)
            except CommandError as exc:  # best effort: the namespace may be gone already
                log.warning("restoring endpoints of %s: %s", r.name, exc)
