"""The inventory: what a testbed consists of.

One schema for both kinds of testbed. An *emulated* inventory adds channel rates,
buffer depths and shared capacities (turned into namespaces and HTB classes by
``harness.testbeds.emulated``) and the power profile of its emulated meters; a *lab*
inventory adds how to reach each machine. Pure data: nothing here touches a host.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PositiveFloat, PositiveInt, field_validator, model_validator

from harness.config.load import Strict, load_yaml_model
from harness.config.metering import (  # noqa: F401 - re-exported: an emulated meter imports only metering
    MAX_MW, MAX_RATE_MBIT, RADIOS, BothPower, LineFormat, PowerProfile, Radio, RadioPower,
)
from harness.config.radio import Lte, Wifi, check_earfcn, srsepc_sgi_subnet
from harness.config.switch import SwitchPorts

SCHEMA_VERSION = 1

#: A serial speed of at most 4 Mbaud (a link rate's and a power's bounds: harness.config.metering).
MAX_BAUD = 4_000_000

#: Inventory kind -> the sections it is checked against: "emulated" (an emulation section, channels,
#: emulated meters) or "lab" (real machines). A testbed kind registered at run time
#: (``harness.testbeds.kinds.register_testbed``) adds its kind here through ``register_inventory_kind``.
INVENTORY_KINDS: dict[str, Literal["emulated", "lab"]] = {"emulated": "emulated", "lab": "lab"}


def register_inventory_kind(kind: str, schema: str) -> None:
    """Accept inventories of ``kind``, checked as ``schema`` ("emulated" or "lab") inventories are."""
    if schema not in ("emulated", "lab"):
        raise ValueError(f"inventory kind {kind!r}: schema must be 'emulated' or 'lab', not {schema!r}")
    INVENTORY_KINDS[kind] = schema  # type: ignore[assignment]


Name = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,14}$")]
# Sender and receiver names have no dashes: on the emulated testbed their namespaces are named
# <prefix><name>, and a dash-free name is how a testbed tells its own namespaces from those of a
# testbed whose prefix extends its own.
NodeName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,14}$")]
#: Lab-only names (infrastructure hosts, groups) never become namespaces, so dashes are fine.
LabName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,30}$")]
IfName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")]
#: Interface names the kernel refuses although the pattern allows them ("." and ".." are path components of
#: /sys/class/net) or that every namespace already has (lo).
RESERVED_IFNAMES = (".", "..", "lo")
#: Most receivers in one inventory: the emulated testbed numbers a receiver's networks 10.10.<i>.0/24 and
#: 10.20.<i>.0/24 (i = 1..254), and the lab's WiFi and LTE subnets hold no more either.
MAX_INVENTORY_RECEIVERS = 254


class Channel(Strict):
    """An emulated downlink channel: the receiver's own rate on this radio, and its buffer."""

    rate_mbit: Annotated[float, Field(gt=0, le=MAX_RATE_MBIT)] = Field(
        description="downlink rate ceiling of this receiver on this radio (Mbit/s; at most 100,000)")
    buffer_ms: Annotated[float, Field(gt=0, le=10_000)] = Field(
        description="bottleneck buffer depth, as queueing delay at rate_mbit (ms; at most 10 s)")
    delay_ms: Annotated[float, Field(ge=0, le=1000)] = Field(
        default=0.0, description="base one-way delay of this receiver's downlink on this radio (ms), added by a "
                                 "user-space delay line (harness/emulation/delayline.py); 0 = none")
    loss_pct: Annotated[float, Field(ge=0, lt=100)] = Field(
        default=0.0, description="random loss of this receiver's downlink packets on this radio (%), e.g. 1 for "
                                 "the related schemes' WLAN setting")

    @property
    def buffer_bytes(self) -> int:
        """Buffer depth in bytes, never below two full-size packets."""
        return max(3000, int(self.rate_mbit * 1e6 / 8 * self.buffer_ms / 1000))


class RealCell(Strict):
    """A real LTE cell for this receiver's LTE path on the emulated testbed (instead of the emulated channel)."""

    kind: Literal["srsran-zmq"] = Field(
        description="srsran-zmq: srsepc + srsenb + srsUE over ZeroMQ (one UE per ZMQ cell); srsUE's tun is lte0")
    n_prb: Literal[6, 15, 25, 50, 75, 100] = Field(default=50, description="cell bandwidth in PRBs (50 = 10 MHz)")


class Interface(Strict):
    """One radio of a receiver."""

    name: IfName = Field(description="interface name on the receiver (wlan0, wwan0, ...)")
    address: ipaddress.IPv4Address | None = Field(
        default=None, description="the interface's address (lab); assigned by mplab on the emulated testbed")
    gateway: ipaddress.IPv4Address | None = Field(
        default=None, description="lab: the next hop through this interface (the AP's router, the EPC's UE gateway), "
                                  "for the policy route `mplab lab prepare` writes; unset: the board's own default "
                                  "route through it, or none for a point-to-point modem (raw IP)")
    channel: Channel | None = Field(default=None, description="emulated channel (emulated testbed only)")
    real_cell: RealCell | None = Field(
        default=None, description="lte only, emulated testbed only: a real srsRAN cell carries this receiver's "
                                  "LTE path (the channel's rate, buffer, delay and loss then do not apply)")


class Ser2Net(Strict):
    """A meter's serial device shared over the network by ser2net running on the receiver (lab)."""

    device: str = Field(description="the meter's serial device on the receiver (/dev/rfcomm0, /dev/ttyUSB0)")
    tcp_port: Annotated[int, Field(ge=1024, le=65535)] = Field(
        description="TCP port ser2net serves the device on, with RFC 2217 (the meter port is rfc2217://<host>:<tcp_port>)")
    baud: Annotated[int, Field(gt=0, le=MAX_BAUD)] = Field(default=9600,
                                                           description="serial speed of the device (UM-series: 9600)")
    bluetooth: Annotated[str, Field(pattern=r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$")] | None = Field(
        default=None, description="the meter's Bluetooth MAC, when ``device`` is an RFCOMM device "
                                  "(/dev/rfcommN): `mplab lab prepare` binds it with `rfcomm bind N <MAC> 1`")


class MeterSpec(Strict):
    """The energy meter in a receiver's supply."""

    kind: Literal["emulated-um25c", "um24c", "um25c", "um34c", "ina-line"]
    port: str | None = Field(default=None, description="serial device or pyserial URL (lab meters): /dev/rfcomm0, "
                                                       "/dev/ttyUSB0, rfc2217://host:port, socket://host:port")
    baudrate: int = Field(default=9600, gt=0, le=MAX_BAUD, description="serial speed (nominal over RFCOMM; INA bridges: "
                                                          "as the sketch sets it)")
    timeout_s: Annotated[float, Field(gt=0, le=600)] = Field(
        default=1.0, description="how long one reading may take before it is a fault")
    rate_hz: Annotated[float, Field(gt=0, le=1000)] | None = Field(
        default=None, description="poll rate (default: the device's limit)")
    line_format: LineFormat | None = Field(default=None, description="ina-line only: how the bridge prints a reading")
    noise_ma: float | None = Field(default=None, ge=0, le=10_000, description="emulated-um25c only: current noise, "
                                                                    "standard deviation (mA)")
    noise_mv: float | None = Field(default=None, ge=0, le=10_000, description="emulated-um25c only: voltage noise, "
                                                                   "standard deviation (mV)")
    ser2net: Ser2Net | None = Field(default=None, description="set up and check ser2net on the receiver for this meter")

    @model_validator(mode="after")
    def _complete(self) -> MeterSpec:
        if self.kind != "emulated-um25c" and not self.port and self.ser2net is None:
            raise ValueError(f"a {self.kind} meter needs a 'port' (e.g. /dev/rfcomm0 or socket://host:port) "
                             "or a 'ser2net' section")
        if self.kind == "ina-line" and self.line_format is None:
            raise ValueError("an ina-line meter needs a 'line_format' (e.g. {fields: [volts_v, amps_a, watts_w]})")
        if self.kind != "ina-line" and self.line_format is not None:
            raise ValueError(f"'line_format' is for ina-line meters, not {self.kind}")
        if self.kind != "emulated-um25c" and (self.noise_ma is not None or self.noise_mv is not None):
            raise ValueError(f"'noise_ma'/'noise_mv' set the emulated device's noise; a {self.kind} has its own")
        return self


class SSHTarget(Strict):
    """How the orchestrator reaches a lab machine over SSH (unset fields come from ``lab.ssh_defaults``)."""

    address: str = Field(description="DNS name or IP address of the machine's management interface")
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(default=None, description="SSH port (default 22)")
    user: str | None = Field(default=None, description="login user (default root)")
    key_file: str | None = Field(default=None, description="private key used to log in (the only auth method)")
    known_hosts: str | None = Field(default=None, description="known_hosts file the host key is verified against")
    host_key_policy: Literal["strict", "accept-new"] | None = Field(
        default=None, description="strict: refuse hosts missing from known_hosts; accept-new: trust and record "
                                  "them on first contact. A changed key is refused either way")
    connect_timeout_s: PositiveFloat | None = Field(default=None, description="deadline for connect and auth (s)")


class Sim(Strict):
    """The programmable SIM in a receiver's LTE modem (its keys live in the secrets file, never here)."""

    imsi: Annotated[str, Field(pattern=r"^[0-9]{15}$", description="15-digit IMSI; starts with the cell's MCC+MNC")]


class Receiver(Strict):
    """A dual-homed receiver."""

    name: NodeName
    interfaces: dict[Radio, Interface]
    meter: MeterSpec
    ssh: SSHTarget | None = Field(default=None, description="how to reach this receiver (lab only)")
    sim: Sim | None = Field(default=None, description="the LTE modem's SIM (needed when the inventory has 'lte')")

    @field_validator("interfaces")
    @classmethod
    def _both_radios(cls, v: dict[str, Interface]) -> dict[str, Interface]:
        missing = [r for r in RADIOS if r not in v]
        if missing:
            raise ValueError(f"missing interface(s) {missing}: every receiver needs wifi and lte")
        for radio, intf in v.items():
            if intf.name in RESERVED_IFNAMES:
                raise ValueError(f"{radio}: interface name {intf.name!r} is one the kernel refuses or the receiver "
                                 "already has (., .., lo)")
        names = [intf.name for intf in v.values()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            # Set-up would fail after the campaign directory exists: one host cannot have two interfaces of a name.
            raise ValueError(f"interface name {dup[0]!r} given to {' and '.join(r for r, i in v.items() if i.name == dup[0])}"
                             ": each radio needs its own interface on the receiver")
        return v


class Sender(Strict):
    """The machine that pushes the file."""

    name: NodeName = "snd"
    address: ipaddress.IPv4Address = Field(description="address receivers connect to")
    ssh: SSHTarget | None = Field(default=None, description="how to reach the sender (lab only)")


class SharedCapacity(Strict):
    """One access network (the AP, the cell): its capacity and how the active receivers share it.

    See ``harness.emulation.sharing`` for the models.
    """

    capacity_mbit: Annotated[float, Field(gt=0, le=MAX_RATE_MBIT)] = Field(
        description="total downlink capacity (Mbit/s; at most 100,000)")
    capacity_by_active: dict[PositiveInt, Annotated[float, Field(gt=0, le=MAX_RATE_MBIT)]] | None = Field(
        default=None, description="capacity with exactly N receivers active (N: Mbit/s), e.g. scheduler overhead; "
                                  "counts outside the table use the nearest entry, capacity_mbit caps all")
    sharing: Literal["dcf", "airtime", "proportional-fair", "equal"] | None = Field(
        default=None, description="WiFi: dcf (default, equal throughput: the performance anomaly) or airtime; "
                                  "LTE: proportional-fair (default) or equal")


class Emulation(Strict):
    """Settings of the emulated testbed."""

    namespace_prefix: Annotated[str, Field(pattern=r"^mplab-[a-z0-9-]{0,20}$")] = "mplab-"
    wifi_ap: SharedCapacity
    lte_cell: SharedCapacity
    power_profile: PowerProfile
    coexistence_factor: Annotated[float, Field(gt=0, le=1)] = Field(
        default=1.0, description="share a receiver keeps on each radio while both carry its data (in-device "
                                 "interference; 1 = none)")
    coexistence_by_active: dict[PositiveInt, Annotated[float, Field(gt=0, le=1)]] | None = Field(
        default=None, description="coexistence factor by the number of receivers active on both radios "
                                  "(nearest entry; overrides coexistence_factor): what the paper-lab fit needs")
    radio_loop_hz: Annotated[float, Field(ge=1, le=100)] = Field(
        default=20.0, description="how often the radio loop re-shares the access networks among active receivers")

    @field_validator("namespace_prefix")
    @classmethod
    def _prefix_ends_in_dash(cls, v: str) -> str:
        # Namespaces are <prefix><node> and node names have no dash: the prefix is everything up to the last
        # dash. Without its own dash, `mplab-flt` would name namespaces mplab-fltsnd, read back as prefix mplab-
        # (`mplab clean --prefix mplab-flt-` would miss them, and the live-claim check would look up mplab-).
        if not v.endswith("-") or "--" in v:
            raise ValueError(f"{v!r} must end in '-' and have no '--' (e.g. {v.rstrip('-') + '-'!r}): namespaces "
                             "are named <prefix><node>, and `mplab clean --prefix` finds them by it")
        return v

    @model_validator(mode="after")
    def _sharing_fits_radio(self) -> Emulation:
        if self.wifi_ap.sharing not in (None, "dcf", "airtime"):
            raise ValueError(f"wifi_ap.sharing {self.wifi_ap.sharing!r}: a WiFi AP shares by 'dcf' or 'airtime'")
        if self.lte_cell.sharing not in (None, "proportional-fair", "equal"):
            raise ValueError(f"lte_cell.sharing {self.lte_cell.sharing!r}: an LTE cell shares by "
                             "'proportional-fair' or 'equal'")
        return self

    @property
    def coexistence(self) -> float | dict[int, float]:
        """The factor, or the table by receivers active on both, as the sharing models take it."""
        return dict(self.coexistence_by_active) if self.coexistence_by_active else self.coexistence_factor

    @property
    def wifi_sharing(self) -> str:
        return self.wifi_ap.sharing or "dcf"

    @property
    def lte_sharing(self) -> str:
        return self.lte_cell.sharing or "proportional-fair"


class SSHDefaults(Strict):
    """SSH settings every lab host inherits unless its own ``ssh`` section says otherwise."""

    port: Annotated[int, Field(ge=1, le=65535)] = 22
    user: str = "root"
    key_file: str = Field(default="~/.ssh/id_ed25519", description="private key used to log in")
    known_hosts: str = Field(default="~/.ssh/known_hosts", description="known_hosts file host keys are verified against")
    host_key_policy: Literal["strict", "accept-new"] = "strict"
    connect_timeout_s: PositiveFloat = 10.0


class InfraHost(Strict):
    """A lab machine that is neither sender nor receiver (eNodeB, EPC, AP, switch): checked by preflight."""

    name: LabName
    role: Literal["enb", "epc", "wifi-ap", "switch", "other"]
    ssh: SSHTarget | None = Field(default=None, description="unset for appliances that have no SSH (a router's web UI)")


class Lab(Strict):
    """Settings of a physical lab."""

    ssh_defaults: SSHDefaults = SSHDefaults()
    secrets_file: str | None = Field(
        default=None, description="YAML with SIM keys and passwords (mode 0600, never in the inventory, never logged)")
    max_clock_offset_s: PositiveFloat = Field(
        default=0.05, description="largest clock offset to the orchestrator preflight accepts (s)")
    command_timeout_s: PositiveFloat = Field(default=30.0, description="deadline for each orchestration command (s)")
    iperf3_base_port: Annotated[int, Field(ge=1024, le=65000)] = Field(
        default=5200, description="receiver i's iperf3 server on the sender listens on base + i")
    infra: list[InfraHost] = Field(default_factory=list, description="eNodeB, EPC, APs, switch")
    groups: dict[LabName, list[LabName]] = Field(
        default_factory=dict, description="Ansible-style named groups of host names (for `mplab preflight --group`)")
    switch: SwitchPorts | None = Field(
        default=None, description="the OpenFlow switch between the sender and the access networks (`steering: "
                                  "openflow` and rate caps as meters): listen host:port, each network's up/down "
                                  "ports, optionally bridge and host (a lab.infra machine with role switch)")

    def ssh_settings(self, target: SSHTarget) -> dict:
        """``target`` completed with the defaults: keyword arguments for ``harness.hosts.ssh.SSHHost``."""
        d = self.ssh_defaults

        def pick(v, default):
            return default if v is None else v

        return {"address": target.address, "port": pick(target.port, d.port), "user": pick(target.user, d.user),
                "key_file": pick(target.key_file, d.key_file), "known_hosts": pick(target.known_hosts, d.known_hosts),
                "host_key_policy": pick(target.host_key_policy, d.host_key_policy),
                "connect_timeout_s": pick(target.connect_timeout_s, d.connect_timeout_s)}


class Inventory(Strict):
    """Everything a testbed consists of."""

    schema_version: Literal[1] = 1
    kind: str = Field(description="the testbed kind: emulated, lab, or a kind a testbed driver registered")
    name: str
    sender: Sender
    receivers: list[Receiver] = Field(min_length=1)
    emulation: Emulation | None = None
    lab: Lab | None = None
    lte: Lte | None = Field(default=None, description="the lab's LTE cell: srsRAN eNodeB and Open5GS EPC")
    wifi: Wifi | None = Field(default=None, description="the lab's WiFi access points")

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in INVENTORY_KINDS:
            raise ValueError(f"unknown testbed kind {kind!r} (known: {', '.join(INVENTORY_KINDS)})")
        return kind

    @property
    def schema_kind(self) -> Literal["emulated", "lab"]:
        """The sections this inventory is checked against (``INVENTORY_KINDS``)."""
        return INVENTORY_KINDS[self.kind]

    @model_validator(mode="after")
    def _consistent(self) -> Inventory:
        if len(self.receivers) > MAX_INVENTORY_RECEIVERS:
            raise ValueError(f"{len(self.receivers)} receivers: at most {MAX_INVENTORY_RECEIVERS} (each gets its own "
                             "10.10.<i>.0/24 and 10.20.<i>.0/24 network); split the testbed")
        names = [r.name for r in self.receivers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"receiver names must be unique, repeated: {dup}")
        if self.sender.name in names:
            raise ValueError(f"sender name {self.sender.name!r} is also a receiver name")
        if self.schema_kind == "emulated":
            if self.emulation is None:
                raise ValueError("an emulated inventory needs an 'emulation' section")
            for r in self.receivers:
                for radio, intf in r.interfaces.items():
                    if intf.channel is None:
                        raise ValueError(f"receiver {r.name}: interface {radio} needs a 'channel' on the emulated testbed")
                _check_real_cell(r)
                if r.meter.kind != "emulated-um25c":
                    raise ValueError(f"receiver {r.name}: meter kind {r.meter.kind!r} on the emulated testbed "
                                     "(use emulated-um25c)")
            if self.lab is not None and self.lab.switch is not None:
                raise ValueError("lab.switch on an emulated inventory: the emulated testbed puts its own OVS "
                                 "between the sender and the AP/eNB (steering: openflow)")
            cells = [r.name for r in self.receivers if r.interfaces["lte"].real_cell is not None]
            if len(cells) > 1:
                raise ValueError(f"receivers {cells} ask for a real_cell: a ZMQ cell carries exactly one UE "
                                 "(srsRAN 4G ZeroMQ app note), so at most one receiver per testbed can have one")
        if self.schema_kind == "lab":
            self._check_lab(names)
        if self.lte is not None:
            check_lte(self)
        if self.wifi is not None:
            check_wifi(self)
        return self

    def _check_lab(self, names: list[str]) -> None:
        # What is wrong on any lab inventory. What a *sweep* needs besides (SSH targets, interface
        # addresses) is checked by ``lab_gaps`` when a LabTestbed is built, so that a partial inventory
        # still serves meters-only commands before the machines are reachable.
        if self.emulation is not None:
            raise ValueError("an 'emulation' section on a lab inventory: emulation settings describe an "
                             "emulated testbed (the lab's radios and meters are real)")
        for r in self.receivers:
            for radio, intf in r.interfaces.items():
                if intf.channel is not None:
                    raise ValueError(f"receiver {r.name}: interface {radio} has a 'channel': channels are emulated "
                                     "only (the lab's radios are real)")
                if intf.real_cell is not None:
                    raise ValueError(f"receiver {r.name}: interface {radio} has a 'real_cell': that is an emulated "
                                     "testbed option (the lab's LTE cell is the inventory's 'lte' section)")
            if r.meter.kind == "emulated-um25c":
                raise ValueError(f"receiver {r.name}: meter kind emulated-um25c on a lab (use um25c, um34c, ...)")
        if self.lab is not None:
            known = set(names) | {self.sender.name} | {h.name for h in self.lab.infra}
            for g, members in self.lab.groups.items():
                unknown = [m for m in members if m not in known]
                if unknown:
                    raise ValueError(f"lab.groups.{g}: unknown host(s) {unknown} (known: {sorted(known)})")
            sw = self.lab.switch
            if sw is not None and sw.host is not None:
                _check_infra(self, sw.host, "switch", "lab.switch.host")

    def lab_gaps(self) -> list[str]:
        """What this lab inventory lacks to drive a sweep (empty when complete)."""
        gaps = []
        if self.sender.ssh is None:
            gaps.append("sender: needs an 'ssh' section (address at least)")
        for r in self.receivers:
            if r.ssh is None:
                gaps.append(f"receivers.{r.name}: needs an 'ssh' section (address at least)")
            for radio, intf in r.interfaces.items():
                if intf.address is None:
                    gaps.append(f"receivers.{r.name}.interfaces.{radio}: needs its 'address'")
        return gaps

    def meter_port(self, rx: Receiver) -> str | None:
        """The port a receiver's meter is read through (a ser2net section implies rfc2217://<receiver>:<port>)."""
        if rx.meter.port is not None:
            return rx.meter.port
        if rx.meter.ser2net is not None and rx.ssh is not None:
            # UM meters use no modem-control lines, and ser2net does not acknowledge SET_CONTROL for
            # devices without them (rfcomm, ptys): pyserial must not wait for that answer.
            return f"rfc2217://{rx.ssh.address}:{rx.meter.ser2net.tcp_port}?ign_set_control"
        return None

    def receiver(self, name: str) -> Receiver:
        """The receiver called ``name``."""
        for r in self.receivers:
            if r.name == name:
                return r
        raise KeyError(name)


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate an inventory file (``ConfigError`` naming file, field and reason)."""
    return load_yaml_model(Inventory, path)


def _check_real_cell(r: Receiver) -> None:
    """``real_cell`` only on the LTE interface (a WiFi real_cell would mean nothing)."""
    if r.interfaces["wifi"].real_cell is not None:
        raise ValueError(f"receiver {r.name}: interface wifi has a 'real_cell': only the lte interface can be "
                         "carried by a real cell")


def check_lte(inv: Inventory) -> None:
    """Cross-checks of the LTE section against itself and the rest of the inventory (raises ValueError)."""
    lte = inv.lte
    assert lte is not None
    enb, epc = lte.enb, lte.epc
    if enb.plmn != epc.plmn:
        raise ValueError(f"lte: PLMN mismatch: eNB broadcasts {enb.plmn} but the MME serves {epc.plmn}; "
                         "set the same mcc/mnc on both sides")
    if enb.tac not in epc.tacs:
        raise ValueError(f"lte: TAC mismatch: eNB tac {enb.tac} is not among the MME's TACs {epc.tacs}")
    check_earfcn(enb.band, enb.n_prb, enb.dl_earfcn)
    pool = epc.ue_pool
    if pool.prefixlen > 30:
        raise ValueError(f"lte.epc.ue_pool: {pool} is too small for a gateway and UEs")
    subnets: list[tuple[str, ipaddress.IPv4Network]] = [(f"lte.lab_subnets[{i}]", n)
                                                         for i, n in enumerate(lte.lab_subnets)]
    if inv.wifi is not None:
        subnets += [(f"wifi AP {a.name} subnet", a.subnet) for a in inv.wifi.aps]
    for what, net in subnets:
        if pool.overlaps(net):
            raise ValueError(f"lte.epc.ue_pool: {pool} overlaps {what} {net}; pick a pool outside the lab's subnets")
    addrs = [("the eNB address", enb.address), ("the EPC address", epc.address),
             ("the sender address", inv.sender.address)]
    for r in inv.receivers:
        wifi = r.interfaces.get("wifi")
        if wifi is not None and wifi.address is not None:
            addrs.append((f"receiver {r.name}'s wifi address", wifi.address))
    # Management (SSH) addresses of every lab machine, when given as IP literals.
    ssh_targets = [(f"sender {inv.sender.name}", inv.sender.ssh)] + [(f"receiver {r.name}", r.ssh)
                                                                      for r in inv.receivers]
    if inv.lab is not None:
        ssh_targets += [(f"lab.infra {ih.name}", ih.ssh) for ih in inv.lab.infra]
    for what, target in ssh_targets:
        if target is None:
            continue
        try:
            addrs.append((f"{what}'s SSH address", ipaddress.IPv4Address(target.address)))
        except ValueError:
            pass  # a DNS name: nothing to compare
    for what, addr in addrs:
        if addr in pool:
            raise ValueError(f"lte.epc.ue_pool: {pool} contains {what} {addr}; pick a pool outside the lab's subnets")
    _check_infra(inv, enb.host, "enb", "lte.enb.host")
    _check_infra(inv, epc.host, "epc", "lte.epc.host")
    prefix = epc.plmn.mcc + epc.plmn.mnc
    seen: dict[str, str] = {}
    for r in inv.receivers:
        if r.sim is None:
            raise ValueError(f"receiver {r.name} has no IMSI: every receiver needs sim.imsi when the inventory "
                             "has an lte section")
        if not r.sim.imsi.startswith(prefix):
            raise ValueError(f"receiver {r.name}: IMSI {r.sim.imsi} does not start with the PLMN {prefix} "
                             f"({epc.plmn})")
        if r.sim.imsi in seen:
            raise ValueError(f"receivers {seen[r.sim.imsi]} and {r.name} share IMSI {r.sim.imsi}")
        seen[r.sim.imsi] = r.name
        static = r.interfaces["lte"].address
        if static is not None and (static not in pool or static == epc.ue_gateway):
            raise ValueError(f"receiver {r.name}: LTE address {static} must be a UE address inside {pool} "
                             f"(not the gateway {epc.ue_gateway})")
        if epc.kind == "srsepc" and static is not None and static not in srsepc_sgi_subnet(epc.ue_gateway):
            raise ValueError(f"receiver {r.name}: LTE address {static} is outside srsepc's SGi subnet "
                             f"{srsepc_sgi_subnet(epc.ue_gateway)} (srsepc gives its SGi interface a /24)")
    if epc.kind == "srsepc" and len(epc.tacs) != 1:
        raise ValueError(f"lte.epc.tacs: srsepc's MME serves one TAC, not {epc.tacs}")


def _check_infra(inv: Inventory, name: str, role: str, field: str) -> None:
    """On a lab, ``name`` must be a ``lab.infra`` machine of ``role`` (that is how mplab reaches it)."""
    if inv.lab is None:
        return
    entry = next((ih for ih in inv.lab.infra if ih.name == name), None)
    if entry is None:
        raise ValueError(f"{field}: {name!r} is not in lab.infra (known: {[ih.name for ih in inv.lab.infra]}); "
                         f"add it with role {role!r} and its ssh address")
    if entry.role != role:
        raise ValueError(f"{field}: lab.infra {name!r} has role {entry.role!r}, expected {role!r}")


def check_wifi(inv: Inventory) -> None:
    """Cross-checks of the WiFi section against the receivers (raises ValueError)."""
    wifi = inv.wifi
    assert wifi is not None
    for i, a in enumerate(wifi.aps):
        _check_infra(inv, a.host, "wifi-ap", f"wifi.aps[{i}].host")
    ap = wifi.ap("receivers")
    if ap is None:
        return
    for r in inv.receivers:
        addr = r.interfaces["wifi"].address
        if addr is not None and addr not in ap.subnet:
            raise ValueError(f"receiver {r.name}: wifi address {addr} is outside AP {ap.name}'s subnet {ap.subnet}")
