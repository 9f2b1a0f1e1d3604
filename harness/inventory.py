"""The inventory: what a testbed consists of.

One schema for both kinds of testbed. An *emulated* inventory adds channel rates,
buffer depths and shared capacities (turned into namespaces and HTB classes by
``harness.emulation``) and the power profile of its emulated meters; a *lab*
inventory adds how to reach each machine. Pure data: nothing here touches a host.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, field_validator, model_validator

from harness.config import Strict, load_yaml_model
from harness.radio import Lte, Wifi, check_lte, check_wifi

SCHEMA_VERSION = 1

#: The two radios of a receiver. Interface modes are built from these.
Radio = Literal["wifi", "lte"]
RADIOS: tuple[Radio, ...] = ("wifi", "lte")

Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,14}$")]
IfName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")]


class Channel(Strict):
    """An emulated downlink channel: the receiver's own rate on this radio, and its buffer."""

    rate_mbit: PositiveFloat = Field(description="downlink rate ceiling of this receiver on this radio (Mbit/s)")
    buffer_ms: PositiveFloat = Field(description="bottleneck buffer depth, as queueing delay at rate_mbit (ms)")

    @property
    def buffer_bytes(self) -> int:
        """Buffer depth in bytes, never below two full-size packets."""
        return max(3000, int(self.rate_mbit * 1e6 / 8 * self.buffer_ms / 1000))


class Interface(Strict):
    """One radio of a receiver."""

    name: IfName = Field(description="interface name on the receiver (wlan0, wwan0, ...)")
    address: ipaddress.IPv4Address | None = Field(
        default=None, description="the interface's address (lab); assigned by mplab on the emulated testbed")
    channel: Channel | None = Field(default=None, description="emulated channel (emulated testbed only)")


class Meter(Strict):
    """The energy meter in a receiver's supply."""

    kind: Literal["emulated-um25c", "um24c", "um25c", "um34c", "ina-line"]
    port: str | None = Field(default=None, description="serial device or pyserial URL (lab meters)")


class Sim(Strict):
    """The programmable SIM in a receiver's LTE modem (its keys live in the secrets file, never here)."""

    imsi: Annotated[str, Field(pattern=r"^[0-9]{15}$", description="15-digit IMSI; starts with the cell's MCC+MNC")]


class Receiver(Strict):
    """A dual-homed receiver."""

    name: Name
    interfaces: dict[Radio, Interface]
    meter: Meter
    sim: Sim | None = Field(default=None, description="the LTE modem's SIM (needed when the inventory has 'lte')")

    @field_validator("interfaces")
    @classmethod
    def _both_radios(cls, v: dict[str, Interface]) -> dict[str, Interface]:
        missing = [r for r in RADIOS if r not in v]
        if missing:
            raise ValueError(f"missing interface(s) {missing}: every receiver needs wifi and lte")
        return v


class Sender(Strict):
    """The machine that pushes the file."""

    name: Name = "snd"
    address: ipaddress.IPv4Address = Field(description="address receivers connect to")


class RadioPower(Strict):
    """Power drawn by one radio (linear model P = theta + b * x while active, plus tails)."""

    active_mw: float = Field(ge=0, description="theta: extra power while the radio carries traffic (mW)")
    mw_per_mbit: float = Field(ge=0, description="b: power per Mbit/s of downlink throughput (mW per Mbit/s)")
    promotion_s: float = Field(default=0.0, ge=0, description="idle-to-active promotion delay (s)")
    promotion_mw: float = Field(default=0.0, ge=0, description="power during promotion (mW)")
    tail_s: float = Field(default=0.0, ge=0, description="time the radio stays in a high-power state after traffic (s)")
    tail_mw: float = Field(default=0.0, ge=0, description="power during the tail (mW)")


class PowerProfile(Strict):
    """How an emulated receiver's power follows its traffic."""

    name: str
    source: str = Field(description="where the constants come from (recorded with every emulated record)")
    base_w: PositiveFloat = Field(description="board plus idle dongles (W)")
    volts: PositiveFloat = Field(default=5.1, description="supply voltage the emulated meter reports (V)")
    active_threshold_mbit: float = Field(default=0.05, ge=0,
                                         description="throughput above which a radio counts as active (Mbit/s)")
    wifi: RadioPower
    lte: RadioPower


class SharedCapacity(Strict):
    """Capacity shared by every receiver on one access network."""

    capacity_mbit: PositiveFloat


class Emulation(Strict):
    """Settings of the emulated testbed."""

    namespace_prefix: Annotated[str, Field(pattern=r"^mplab-[a-z0-9-]{0,20}$")] = "mplab-"
    wifi_ap: SharedCapacity
    lte_cell: SharedCapacity
    power_profile: PowerProfile


class Inventory(Strict):
    """Everything a testbed consists of."""

    schema_version: Literal[1] = 1
    kind: Literal["emulated", "lab"]
    name: str
    sender: Sender
    receivers: list[Receiver] = Field(min_length=1)
    emulation: Emulation | None = None
    lte: Lte | None = Field(default=None, description="the lab's LTE cell: srsRAN eNodeB and Open5GS EPC")
    wifi: Wifi | None = Field(default=None, description="the lab's WiFi access points")

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        names = [r.name for r in self.receivers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"receiver names must be unique, repeated: {dup}")
        if self.sender.name in names:
            raise ValueError(f"sender name {self.sender.name!r} is also a receiver name")
        if self.kind == "emulated":
            if self.emulation is None:
                raise ValueError("an emulated inventory needs an 'emulation' section")
            for r in self.receivers:
                for radio, intf in r.interfaces.items():
                    if intf.channel is None:
                        raise ValueError(f"receiver {r.name}: interface {radio} needs a 'channel' on the emulated testbed")
                if r.meter.kind != "emulated-um25c":
                    raise ValueError(f"receiver {r.name}: meter kind {r.meter.kind!r} on the emulated testbed "
                                     "(use emulated-um25c)")
        if self.lte is not None:
            check_lte(self)
        if self.wifi is not None:
            check_wifi(self)
        return self

    def receiver(self, name: str) -> Receiver:
        """The receiver called ``name``."""
        for r in self.receivers:
            if r.name == name:
                return r
        raise KeyError(name)


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file (``ConfigError`` naming file, field and reason)."""
    return load_yaml_model(Inventory, path)
