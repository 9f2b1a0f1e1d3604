"""Steering with OpenFlow: the os-ken app (``controller.steering.ofapp``) driving an Open vSwitch.

The app runs as its own process next to the switch (``host``, e.g. the switch's namespace), reached
over a unix socket; this class is the synchronous face the controller uses. ``apply`` returns once
the switch confirmed the flow changes with a barrier reply; ``counters`` are the downlink entries'
flow statistics (bytes forwarded towards each receiver on each network), carried across deletes.
The process is stopped by its pid (SIGTERM; it exits at once). Rate caps on the same switch are
OpenFlow meters the app installs (``controller.steering.caps.MeterCaps`` asks it through ``request``).
"""
from __future__ import annotations

import json
import logging
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from typing import Literal

from pydantic import Field, IPvAnyAddress, model_validator

from harness.config.switch import SwitchPorts
from harness.errors import MplabError, PreflightError
from harness.hosts.local import BackgroundProcess, Host, LocalHost

from controller.policy import Assignment
from controller.steering.base import SteeredReceiver

log = logging.getLogger("mplab.controller.openflow")

READY_S = 20.0


class SwitchSpec(SwitchPorts):
    """A lab switch for `mplab controller serve`: the inventory's ``lab.switch`` fields (where OVS listens,
    each network's ports) plus the receivers to steer (YAML). ``switch:`` is read as ``listen:`` (its
    name before the inventory section existed)."""

    receivers: dict[str, dict[Literal["wifi", "lte"], IPvAnyAddress]] = Field(
        min_length=1, description="receiver -> network -> its address there")

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, data):
        if isinstance(data, dict) and "switch" in data and "listen" not in data:
            data = {("listen" if k == "switch" else k): v for k, v in data.items()}
        return data

    def steered(self) -> list[SteeredReceiver]:
        return [SteeredReceiver(n, {net: str(a) for net, a in addrs.items()}) for n, addrs in self.receivers.items()]


class OpenFlowError(MplabError):
    """The OpenFlow app or the switch did not do what was asked."""


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the app's own, unused, listener)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_argv(spec_path: str) -> list[str]:
    return [sys.executable, "-m", "controller.steering.ofapp", spec_path]


class OpenFlowSteering:
    """Per-receiver forwarding entries on an OVS bridge, via the os-ken app.

    Args:
        host: where the app process runs (it must reach ``switch``, host:port where OVS listens).
        networks: network -> {"up": port towards the sender, "down": port towards the receivers}.
        receivers: who is steered.
        state_dir: where the spec and the control socket live.
    """

    name = "openflow"

    def __init__(self, host: Host, switch: str, networks: Mapping[str, Mapping[str, int]],
                 receivers: list[SteeredReceiver], state_dir: Path) -> None:
        self.host = host
        self.switch = switch
        self.networks = {k: dict(v) for k, v in networks.items()}
        self.receivers = list(receivers)
        self.state_dir = Path(state_dir)
        self.sock = self.state_dir / "ofapp.sock"
        self._proc: BackgroundProcess | None = None
        self.last_apply_s: float | None = None

    @classmethod
    def for_switch(cls, rig, receivers: list[SteeredReceiver]) -> OpenFlowSteering:
        """From a switch description with ``host``, ``listen_port``, ``ports`` {net: (up, down)}, ``state_dir``."""
        return cls(rig.switch.host, f"127.0.0.1:{rig.listen_port}",
                   {net: {"up": up, "down": down} for net, (up, down) in rig.ports.items()},
                   receivers, rig.switch.state_dir)

    @classmethod
    def for_lab(cls, switch: SwitchPorts, receivers: list[SteeredReceiver], state_dir: Path) -> OpenFlowSteering:
        """The app on this machine (where mplab runs), driving the lab switch an inventory or spec describes."""
        return cls(LocalHost("controller"), switch.listen, switch.ports(), receivers, state_dir)

    def spec(self) -> dict:
        return {"switch": self.switch, "control_socket": str(self.sock), "networks": self.networks,
                "receivers": {r.name: dict(r.addresses) for r in self.receivers},
                # os-ken also listens for switches itself; on a shared machine a fixed port would
                # collide with another app's (its bind fails), so it gets a free one.
                "listen_port": free_tcp_port()}

    def setup(self) -> None:
        try:
            import os_ken  # noqa: F401 - only whether os-ken imports at all
        except ImportError:
            raise PreflightError("os-ken is not installed in this environment (uv sync)") from None
        self.state_dir.mkdir(parents=True, exist_ok=True)
        spec_path = self.state_dir / "ofapp.json"
        spec_path.write_text(json.dumps(self.spec(), indent=1))
        self._proc = self.host.start(app_argv(str(spec_path)), label="os-ken steering app")
        deadline = time.monotonic() + READY_S
        while True:
            if self._proc.poll() is not None:
                res = self._proc.stop()
                self._proc = None
                raise OpenFlowError(f"the OpenFlow app exited ({res.returncode}): {res.stderr.strip()[-600:]}")
            if self.sock.exists():
                try:
                    if self._call({"op": "ready", "timeout": 1.0})["ok"]:
                        return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.teardown()
                raise OpenFlowError(f"switch {self.switch} did not connect to the OpenFlow app within {READY_S:.0f} s")
            time.sleep(0.05)

    def _call(self, req: dict, timeout: float = 15.0) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(self.sock))
            with s.makefile("rw") as f:
                f.write(json.dumps(req) + "\n")
                f.flush()
                line = f.readline()
        if not line:
            raise OpenFlowError(f"the OpenFlow app closed the connection on {req.get('op')}")
        return json.loads(line)

    def request(self, req: dict) -> dict:
        """One control request to the app (its reply; ``OpenFlowError`` when it refused)."""
        rep = self._call(req)
        if not rep.get("ok"):
            raise OpenFlowError(f"OpenFlow app refused {req.get('op')}: {rep.get('error')}")
        return rep

    def apply(self, assignment: Assignment) -> None:
        allowed = {r.name: {net: net in assignment[r.name].ifaces for net in self.networks}
                   for r in self.receivers if r.name in assignment}
        self.last_apply_s = self.request({"op": "apply", "allowed": allowed})["apply_s"]

    def counters(self) -> dict[str, dict[str, int]]:
        got = self.request({"op": "counters"})["bytes"]
        return {rx: {net: int(b) for net, b in nets.items()} for rx, nets in got.items()}

    def teardown(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stop(grace_s=2.0)
            finally:
                self._proc = None
        self.sock.unlink(missing_ok=True)
