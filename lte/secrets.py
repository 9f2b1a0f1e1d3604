"""The secrets file: SIM keys (K, OPc) per IMSI and WiFi passphrases per AP.

Kept apart from the inventory so that inventories can be shared and committed. The
file must be readable by its owner only (mode 0600): a group- or world-readable file is
refused, because these keys authenticate real SIM cards.

Format (YAML)::

    subscribers:
      "001010000000001": {k: 465B5CE8B199B49FAA5F0A2EE238A6BC, opc: E8ED289DEBA952E4283B54E88E6183CA}
    wifi:
      rx-ap: {passphrase: "correct horse battery staple"}
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import Field

from harness.config import Strict, parse_model
from harness.errors import ConfigError

Hex128 = Annotated[str, Field(pattern=r"^[0-9A-Fa-f]{32}$", description="128-bit key as 32 hex digits")]


class SimKeys(Strict):
    """Milenage keys of one SIM."""

    k: Hex128
    opc: Hex128
    amf: Annotated[str, Field(pattern=r"^[0-9A-Fa-f]{4}$")] = "8000"


class WifiSecret(Strict):
    """The WPA2-PSK passphrase of one AP."""

    passphrase: Annotated[str, Field(min_length=8, max_length=63, pattern=r"^[ !#-~]*$",
                                  description="8..63 printable ASCII characters, no double quote")]


class Secrets(Strict):
    """Everything secret the lab needs."""

    subscribers: dict[Annotated[str, Field(pattern=r"^[0-9]{15}$")], SimKeys] = Field(default_factory=dict)
    wifi: dict[str, WifiSecret] = Field(default_factory=dict)

    def sim(self, imsi: str, source: str = "secrets") -> SimKeys:
        """Keys for ``imsi``; ``ConfigError`` naming the IMSI when they are missing."""
        try:
            return self.subscribers[imsi]
        except KeyError:
            raise ConfigError(f"no keys for IMSI {imsi} (add subscribers.\"{imsi}\": {{k: ..., opc: ...}})",
                              source=source, field="subscribers") from None

    def wifi_passphrase(self, ap: str, source: str = "secrets") -> str:
        """Passphrase of AP ``ap``; ``ConfigError`` when missing."""
        try:
            return self.wifi[ap].passphrase
        except KeyError:
            raise ConfigError(f"no passphrase for AP {ap!r} (add wifi.{ap}.passphrase)", source=source,
                              field="wifi") from None


def load_secrets(path: str | Path) -> Secrets:
    """Read the secrets file; refuse it unless only its owner can read it."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError("secrets file not found", source=str(p)) from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"mode {stat.S_IMODE(st.st_mode):04o} lets others read the SIM keys; "
                          f"run `chmod 600 {p}`", source=str(p))
    if st.st_uid != os.geteuid():
        raise ConfigError(f"owned by uid {st.st_uid}, not by the user running mplab ({os.geteuid()})", source=str(p))
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML ({exc})", source=str(p)) from None
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(p))
    return parse_model(Secrets, data, str(p))
