"""SIM keys from the lab's secrets file (``harness.deploy.secrets``).

The file (mode 0600, named by ``lab.secrets_file`` or ``--secrets``) is loaded by
``harness.deploy.secrets.load_secrets``; this module only picks out and checks what the LTE
cell needs: K and OPc per IMSI (``sim``). Values stay ``SecretStr`` until they are written
into a config file or the subscriber database. (WiFi passphrases: ``wifi.render``.)
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import ConfigError
from harness.deploy.secrets import Secrets

_HEX128 = re.compile(r"^[0-9A-Fa-f]{32}$")


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

