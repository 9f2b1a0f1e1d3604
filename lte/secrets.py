"""SIM keys and WiFi passphrases from the lab's secrets file (``harness.deploy.secrets``).

The file (mode 0600, named by ``lab.secrets_file`` or ``--secrets``) is loaded by
``harness.deploy.secrets.load_secrets``; this module only picks out and checks what the LTE
cell and the WiFi need: K and OPc per IMSI (``sim``), a passphrase per SSID
(``wifi_psk``). Values stay ``SecretStr`` until they are written into a config file
or the subscriber database.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.deploy.secrets import Secrets, load_secrets  # noqa: F401 - re-exported for lte/wifi callers

_HEX128 = re.compile(r"^[0-9A-Fa-f]{32}$")
_PSK = re.compile(r'^[ !#-~]{8,63}$')


@dataclass(frozen=True)
class SimKeys:
    """Milenage keys of one SIM, checked (32 hex digits each)."""

    k: str
    opc: str
    amf: str = "8000"

    def __repr__(self) -> str:  # never print keys
        return "SimKeys(k=***, opc=***)"


def sim_keys(secrets: Secrets, imsi: str, source: str = "secrets") -> SimKeys:
    """K and OPc of ``imsi``; ``ConfigError`` naming the IMSI (never the value) when missing or malformed."""
    entry = secrets.sim.get(imsi)
    if entry is None:
        raise ConfigError(f"no keys for IMSI {imsi} (add sim.\"{imsi}\": {{k: ..., opc: ...}})", source=source,
                          field="sim")
    k, opc = entry.k.get_secret_value(), entry.opc.get_secret_value()
    for name, v in (("k", k), ("opc", opc)):
        if not _HEX128.match(v):
            raise ConfigError(f"{name} of IMSI {imsi} is not 32 hex digits", source=source, field=f"sim.{imsi}.{name}")
    return SimKeys(k, opc)


def wifi_passphrase(secrets: Secrets, ssid: str, source: str = "secrets") -> str:
    """WPA2 passphrase of ``ssid`` (8..63 printable ASCII, no double quote)."""
    v = secrets.wifi_psk.get(ssid)
    if v is None:
        raise ConfigError(f"no passphrase for SSID {ssid!r} (add wifi_psk.{ssid})", source=source, field="wifi_psk")
    psk = v.get_secret_value()
    if not _PSK.match(psk):
        raise ConfigError(f"passphrase of SSID {ssid!r} must be 8..63 printable ASCII characters without '\"'",
                          source=source, field=f"wifi_psk.{ssid}")
    return psk
