"""The lab's radio access networks as inventory data: the LTE cell and the WiFi access points.

Pure data (pydantic), part of the inventory schema: ``Inventory.lte`` and
``Inventory.wifi``. Nothing here touches a host. ``lte/`` and ``wifi/`` turn these into
configuration files and running daemons. The cross-checks that need the whole
inventory (PLMN/TAC agreement, EARFCN in band, UE pool vs lab subnets, every receiver
has an IMSI) are ``harness.config.inventory.check_lte``/``check_wifi``, run by
``Inventory``'s validator, so a bad inventory is refused before anything is rendered or
deployed; they live there because they read the receivers and the lab too (this module
knows only its own sections, so the schema has no import cycle).

Secrets (SIM keys K/OPc, WiFi passphrases) are *not* here: they live in a separate
secrets file (see ``harness.deploy.secrets``).
"""
from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, model_validator

# The band table and EARFCN arithmetic live in ``harness.config.bands``; re-exported for the renderers.
from harness.config.bands import (BANDS, PRB_BANDWIDTH_MHZ, check_earfcn, dl_freq_mhz, earfcn_range,  # noqa: F401 - re-exported for the renderers
                                  fdd_band, ul_earfcn, ul_freq_mhz)
from harness.config.load import Strict

HostName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")]
IfName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,15}$")]
Path_ = Annotated[str, Field(pattern=r"^/[^\x00]*$", description="absolute path on that host")]

#: SIB2 ``ue_timers_and_constants`` mplab writes into sib.conf (t3xx in ms, n3xx counts; srsenb's example values).
SIB2_UE_TIMERS: dict[str, int] = {"t300": 2000, "t301": 100, "t310": 200, "n310": 1, "t311": 10000, "n311": 1}


def min_rrc_inactivity_timer_ms(timers: dict[str, int] = SIB2_UE_TIMERS) -> int:
    """srsenb's lower bound on ``rrc_inactivity_timer``: t310 + t311 + n310 + 50 ms
    (srsenb/src/enb_cfg_parser.cc, 22.04 to 23.11: below it srsenb logs "rrc_inactivity_timer=... is too
    low" and releases a UE before it could have declared radio-link failure)."""
    return timers["t310"] + timers["t311"] + timers["n310"] + 50


class Plmn(Strict):
    """A public land mobile network id. Strings, because leading zeros matter (001 != 1)."""

    mcc: Annotated[str, Field(pattern=r"^[0-9]{3}$")]
    mnc: Annotated[str, Field(pattern=r"^[0-9]{2,3}$")]

    def __str__(self) -> str:
        return f"{self.mcc}/{self.mnc}"


class Reach(Strict):
    """Which machine runs it: on a lab, a name from ``lab.infra`` (whose ``ssh`` says how to reach it)."""

    host: HostName = Field(description="name of the machine (a lab.infra entry on a lab; used in messages)")


class RfDevice(Strict):
    """The eNodeB's radio front end ([rf] in enb.conf)."""

    device_name: Literal["auto", "UHD", "bladeRF", "soapy", "zmq"] = "UHD"
    device_args: str = Field(default="recv_frame_size=9232,send_frame_size=9232",
                             description="driver arguments, passed verbatim")
    tx_gain_db: float = Field(default=80, ge=0, le=100)
    rx_gain_db: float = Field(default=40, ge=0, le=100)
    time_adv_nsamples: int | None = Field(default=None, description="B210: 100; None = srsenb's default")


def own_unit_for_source_builds(data: object, unit: str) -> object:
    """A source build (``bin_dir``) without a ``unit`` runs mplab's own systemd unit ``unit``."""
    if isinstance(data, dict) and data.get("bin_dir") and "unit" not in data:
        data = {**data, "unit": unit}
    return data


class Enb(Reach):
    """The srsRAN 4G eNodeB."""

    address: ipaddress.IPv4Address = Field(description="S1-C and GTP-U bind address, reachable from the EPC")
    enb_id: int = Field(default=0x19B, ge=0, lt=1 << 20, description="20-bit eNB id")
    plmn: Plmn
    tac: int = Field(ge=0, le=0xFFFF, description="tracking area code (decimal; rr.conf gets it in hex)")
    cell_id: int = Field(default=1, ge=0, le=0xFF)
    pci: int = Field(default=1, ge=0, le=503)
    band: int = Field(default=7, description="E-UTRA FDD band (harness.config.bands: srsRAN 4G's bands)")
    dl_earfcn: int
    n_prb: Literal[6, 15, 25, 50, 75, 100] = 50
    rf: RfDevice = RfDevice()
    rrc_inactivity_timer_ms: int | None = Field(
        default=None, gt=0, lt=1 << 32, description="[expert] rrc_inactivity_timer; sets the LTE tail (record it!); "
        "at least t310 + t311 + n310 + 50 ms of sib.conf (10251 ms); None = srsenb's default (30000 ms)")
    version: Annotated[str, Field(pattern=r"^[0-9]{2}\.[0-9]{1,2}(\.[0-9]+)?$")] | None = Field(
        default=None, description="srsRAN 4G release the eNodeB runs (e.g. 23.04); chooses the templates; "
                                  "unknown releases are refused before anything is pushed")
    config_dir: Path_ = "/etc/srsran"
    log_path: Path_ = "/tmp/enb.log"
    unit: str = Field(default="srsenb", description="systemd unit running srsenb (mplab-srsenb with bin_dir)")
    bin_dir: Path_ | None = Field(
        default=None, description="srsRAN built from source: the directory holding srsenb; mplab then writes and "
                                  "runs its own unit (mplab-srsenb) instead of assuming a package's")

    @model_validator(mode="before")
    @classmethod
    def _own_unit_for_source_builds(cls, data: object) -> object:
        return own_unit_for_source_builds(data, "mplab-srsenb")

    @model_validator(mode="after")
    def _band_known(self) -> Enb:
        try:
            fdd_band(self.band)
        except ValueError as exc:
            raise ValueError(f"lte.enb.band: {exc}") from None
        return self

    @model_validator(mode="after")
    def _inactivity_timer_above_srsenb_minimum(self) -> Enb:
        low = min_rrc_inactivity_timer_ms()
        if self.rrc_inactivity_timer_ms is not None and self.rrc_inactivity_timer_ms < low:
            raise ValueError(f"rrc_inactivity_timer_ms {self.rrc_inactivity_timer_ms} is below srsenb's minimum "
                             f"{low} ms (t310 + t311 + n310 + 50 of sib.conf); use at least {low}, or leave it "
                             "out for srsenb's default 30000")
        return self


class Epc(Reach):
    """The EPC on one machine: Open5GS (MME, SGW-C, SGW-U, SMF as PGW-C, UPF as PGW-U, HSS, PCRF; subscribers
    in MongoDB) or srsEPC (one ``srsepc`` process; subscribers in a CSV file, no database)."""

    kind: Literal["open5gs", "srsepc"] = Field(
        default="open5gs", description="open5gs, or srsepc (srsRAN 4G's EPC: epc.conf + user_db.csv, no MongoDB)")

    address: ipaddress.IPv4Address = Field(description="MME S1AP and SGW-U GTP-U address, reachable from the eNB")
    plmn: Plmn
    tacs: list[Annotated[int, Field(ge=0, le=0xFFFF)]] = Field(min_length=1, description="TACs the MME serves")
    mme_gid: int = Field(default=2, ge=0, le=0xFFFF)
    mme_code: int = Field(default=1, ge=0, le=0xFF)
    ue_pool: ipaddress.IPv4Network = Field(default=ipaddress.IPv4Network("10.45.0.0/16"),
                                           description="UE address pool (the UPF's ogstun subnet)")
    apn: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")] = "internet"
    dns: list[ipaddress.IPv4Address] = Field(default_factory=list)
    mtu: int = Field(default=1400, ge=576, le=9000)
    version: Annotated[str, Field(pattern=r"^v?[0-9]+\.[0-9]+(\.[0-9]+)?$")] | None = Field(
        default=None, description="the Open5GS version the EPC runs: 2.7.2, or 2.6 for the newest 2.6.x mplab "
                                  "knows; checked against `open5gs-mmed -v` on the EPC host (a mismatch is refused)")
    db_uri: str = Field(default="mongodb://localhost/open5gs", description="MongoDB URI the daemons use")
    provision_uri: str | None = Field(
        default=None, description="MongoDB URI mplab provisions subscribers through (default: db_uri, "
                                  "through an SSH tunnel to the EPC)")
    network_name: str = "mplab"
    config_dir: Path_ = "/etc/open5gs"
    log_dir: Path_ = "/var/log/open5gs"
    freediameter_dir: Path_ = "/etc/freeDiameter"
    @model_validator(mode="before")
    @classmethod
    def _srsepc_paths(cls, data: object) -> object:
        # srsepc's files live where srsRAN's packages put them, not in Open5GS's directories.
        if isinstance(data, dict) and data.get("kind") == "srsepc":
            data = {"config_dir": "/etc/srsran", "log_dir": "/tmp", **data}
        return data

    user_db: Path_ = Field(default="/etc/srsran/user_db.csv",
                           description="srsepc: its subscriber CSV (srsepc writes SQNs back into it on exit)")
    unit: str = Field(default="srsepc", description="srsepc: systemd unit running srsepc (mplab-srsepc with bin_dir)")
    bin_dir: Path_ | None = Field(
        default=None, description="srsepc built from source: the directory holding srsepc; mplab then writes and "
                                  "runs its own unit (mplab-srsepc)")

    @model_validator(mode="before")
    @classmethod
    def _own_unit_for_source_builds(cls, data: object) -> object:
        return own_unit_for_source_builds(data, "mplab-srsepc")

    @property
    def ue_gateway(self) -> ipaddress.IPv4Address:
        """The UPF's address on ogstun: the first host of the pool."""
        return next(self.ue_pool.hosts())


class Lte(Strict):
    """The lab's LTE cell."""

    enb: Enb
    epc: Epc
    lab_subnets: list[ipaddress.IPv4Network] = Field(
        default_factory=list, description="other subnets in use in the lab (management, S1); the UE pool must "
                                          "not overlap them")
    ping_target: ipaddress.IPv4Address | None = Field(
        default=None, description="what the LTE ping check pings (default: the UE pool gateway on the UPF)")


class AccessPoint(Reach):
    """One WiFi router running hostapd."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,14}$")]
    role: Literal["receivers", "sender"] = Field(description="whose AP this is")
    interface: IfName = "wlan0"
    bridge: IfName | None = None
    ssid: Annotated[str, Field(min_length=1, max_length=32, pattern=r"^[^\n\r\x00\"]*$")]
    band: Literal["2.4", "5"]
    channel: int
    country: Annotated[str, Field(pattern=r"^[A-Z]{2}$")]
    subnet: ipaddress.IPv4Network = Field(description="the AP's client subnet")
    config_path: Path_ = "/etc/hostapd/hostapd.conf"
    unit: str = "hostapd"

    @model_validator(mode="after")
    def _channel_in_band(self) -> AccessPoint:
        ok = (1 <= self.channel <= 13) if self.band == "2.4" else self.channel in WIFI_5GHZ_CHANNELS
        if not ok:
            raise ValueError(f"AP {self.name}: channel {self.channel} is not a {self.band} GHz channel")
        return self


#: 20 MHz channels in the 5 GHz band (UNII-1..3); which are allowed depends on the country (hostapd checks).
WIFI_5GHZ_CHANNELS = frozenset([36, 40, 44, 48, 52, 56, 60, 64, 100, 104, 108, 112, 116, 120, 124, 128, 132,
                                136, 140, 144, 149, 153, 157, 161, 165])


class Wifi(Strict):
    """The lab's WiFi: the receivers' AP and the sender's, on different channels."""

    aps: list[AccessPoint] = Field(min_length=1, max_length=2)
    supplicant_dir: Path_ = Field(default="/etc/wpa_supplicant", description="where receivers keep their config")

    @model_validator(mode="after")
    def _distinct(self) -> Wifi:
        names = [a.name for a in self.aps]
        if len(set(names)) != len(names):
            raise ValueError(f"AP names must be unique: {names}")
        roles = [a.role for a in self.aps]
        if len(set(roles)) != len(roles):
            raise ValueError(f"one AP per role: {roles}")
        if len(self.aps) == 2 and self.aps[0].band == self.aps[1].band and self.aps[0].channel == self.aps[1].channel:
            raise ValueError(f"the two APs share channel {self.aps[0].channel}: put them on different channels")
        return self

    def ap(self, role: str) -> AccessPoint | None:
        """The AP serving ``role`` ("receivers" or "sender"), if any."""
        return next((a for a in self.aps if a.role == role), None)


def srsepc_sgi_subnet(gateway: ipaddress.IPv4Address) -> ipaddress.IPv4Network:
    """The subnet srsepc routes to its UEs: the SGi TUN address with a fixed /24 (srsepc/src/spgw/gtpu.cc)."""
    return ipaddress.IPv4Network(f"{gateway}/24", strict=False)
