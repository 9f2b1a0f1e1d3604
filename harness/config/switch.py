"""The lab switch: an OpenFlow 1.3 switch (Open vSwitch) between the sender and the access networks.

What a controller needs to drive it, as data: where the switch listens for its controller
(``listen``, host:port: ``ovs-vsctl set-controller BR ptcp:PORT``), and for each access network the
OpenFlow port towards the sender (``up``) and the one towards the AP or eNB (``down``), and the
network's nominal capacity (``capacity_mbit``: MP-SDN's congestion signal on a lab). Optionally
the bridge's name and the ``lab.infra`` machine (role ``switch``) it runs on, for preflight over
SSH. One schema for both readers: an inventory's ``lab.switch`` section (a lab campaign with
``steering: openflow``) and the ``mplab controller serve`` spec, which adds the receivers
(``controller.steering.openflow.SwitchSpec``). Pure data: checking the switch speaks OpenFlow 1.3
is ``harness.upkeep.ofprobe``.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, model_validator

from harness.config.load import Strict

#: An OVS bridge name (a Linux interface name on the switch).
BridgeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")]
#: Where a switch listens for its controller.
ListenAddress = Annotated[str, Field(pattern=r"^[^:\s]+:\d{1,5}$",
                                     description="host:port where the switch listens for its controller "
                                                 "(ovs-vsctl set-controller BR ptcp:PORT)")]


class NetworkPorts(Strict):
    """One access network's two switch ports."""

    up: int = Field(ge=1, le=0xFFFFFF00, description="OpenFlow port towards the sender")
    down: int = Field(ge=1, le=0xFFFFFF00, description="OpenFlow port towards the receivers (the AP or eNB side)")
    capacity_mbit: PositiveFloat | None = Field(
        default=None, description="the access network's nominal downlink capacity (Mbit/s): what it carries when "
                                  "saturated (a calibrated saturating transfer through it, not the PHY rate). "
                                  "MP-SDN's congestion signal on a lab is the down port's transmit rate against it")


class SwitchPorts(Strict):
    """An OpenFlow switch and the ports of each access network on it."""

    listen: ListenAddress
    networks: dict[Literal["wifi", "lte"], NetworkPorts] = Field(
        description="each access network's ports: {wifi: {up, down}, lte: {up, down}}")
    bridge: BridgeName | None = Field(default=None, description="the OVS bridge (preflight reads its settings "
                                                                "over SSH when 'host' is set)")
    host: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,30}$")] | None = Field(
        default=None, description="the lab.infra machine (role switch) running OVS, for preflight over SSH")
    answer_timeout_s: float = Field(
        default=15.0, ge=0.5, le=300, allow_inf_nan=False,
        description="how long the OpenFlow probe (preflight, `controller serve`) waits for the switch's answers: "
                    "a userspace-datapath OVS on a loaded host took over 5 s")

    @model_validator(mode="after")
    def _ports(self) -> SwitchPorts:
        missing = [r for r in ("wifi", "lte") if r not in self.networks]
        if missing:
            raise ValueError(f"networks: missing {missing}: steering needs both access networks' ports")
        seen: dict[int, str] = {}
        for net, p in self.networks.items():
            for side, port in (("up", p.up), ("down", p.down)):
                if port in seen:
                    raise ValueError(f"networks.{net}.{side}: port {port} is also {seen[port]}; each side of "
                                     "each network needs its own port")
                seen[port] = f"networks.{net}.{side}"
        port = int(self.listen.rsplit(":", 1)[1])
        if not 1 <= port <= 65535:
            raise ValueError(f"listen: port {port} is not a TCP port (1..65535)")
        return self

    @property
    def listen_host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def listen_port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    def ports(self) -> dict[str, dict[str, int]]:
        """Network -> {"up": port, "down": port}, as the steering takes it."""
        return {net: {"up": p.up, "down": p.down} for net, p in self.networks.items()}

    def capacity_mbit(self) -> dict[str, float] | None:
        """Network -> nominal capacity (Mbit/s), or None unless every network gives one."""
        caps = {net: p.capacity_mbit for net, p in self.networks.items()}
        return None if None in caps.values() else caps  # type: ignore[return-value]
