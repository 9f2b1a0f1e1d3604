"""Lab secrets: SIM keys, Wi-Fi passphrases, passwords. Kept out of the inventory.

The inventory names only the *path* of the secrets file (``lab.secrets_file``). The
file must be a regular file readable by its owner only (mode 0600 or stricter);
anything else is refused before it is read. Values are pydantic ``SecretStr``s, so
they print as ``**********`` in reprs, errors and model dumps; ``redact`` and
``RedactingFilter`` scrub them from any text that could still reach a log.

File format (YAML)::

    sim:                       # by IMSI: what the EPC's subscriber database needs
      "001010000000001": {k: 00112233445566778899aabbccddeeff, opc: 000102030405060708090a0b0c0d0e0f}
    wifi_psk:                  # by SSID
      mplab-ap1: a-long-passphrase
    passwords:                 # anything else, by a name the consumer documents
      enb-admin: hunter2
"""
from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import yaml
from pydantic import Field, SecretStr

from harness.config.inventory import Inventory
from harness.config.load import Strict, parse_model, read_config_text
from harness.errors import ConfigError


class SimKey(Strict):
    """Authentication material of one SIM (Milenage)."""

    k: SecretStr
    opc: SecretStr


class Secrets(Strict):
    """Everything secret a lab needs."""

    sim: dict[str, SimKey] = Field(default_factory=dict)
    wifi_psk: dict[str, SecretStr] = Field(default_factory=dict)
    passwords: dict[str, SecretStr] = Field(default_factory=dict)
    ssh_key_passphrase: SecretStr | None = None

    def values(self) -> list[str]:
        """Every secret value (for redaction)."""
        out = [v.get_secret_value() for v in (*self.wifi_psk.values(), *self.passwords.values())]
        for s in self.sim.values():
            out += [s.k.get_secret_value(), s.opc.get_secret_value()]
        if self.ssh_key_passphrase is not None:
            out.append(self.ssh_key_passphrase.get_secret_value())
        return [v for v in out if v]


def load_secrets(path: str | Path) -> Secrets:
    """Read a secrets file after checking it is private; ``ConfigError`` otherwise (exit code 2)."""
    p = Path(path).expanduser()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError("secrets file not found (create it with mode 0600; see docs/lab.md)", source=str(p)) from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("secrets file is not a regular file", source=str(p))
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise ConfigError(f"secrets file has mode {mode:04o}: group or others may read it; refusing to use it "
                          f"(fix: chmod 600 {p})", source=str(p))
    if st.st_uid != os.geteuid():
        raise ConfigError(f"secrets file belongs to uid {st.st_uid}, not to the user running mplab "
                          f"({os.geteuid()}); fix: chown it", source=str(p))
    text = read_config_text(p)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        # Never echo the parser's context: it would quote the secret text.
        raise ConfigError("secrets file is not valid YAML", source=str(p)) from None
    except RecursionError:
        raise ConfigError("secrets file is nested too deeply", source=str(p)) from None
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(p))
    # A number where text is expected (an unquoted all-digit password or SIM key) is refused without
    # echoing it; quoting is the fix, and coercing would drop a key's leading zeros.
    secrets = parse_model(Secrets, data, str(p), echo_input=False)
    install_redaction(secrets)
    return secrets


def redact(text: str, secrets: Secrets) -> str:
    """``text`` with every secret value replaced by ``[secret]``."""
    for v in sorted(secrets.values(), key=len, reverse=True):
        text = text.replace(v, "[secret]")
    return text


class RedactingFilter(logging.Filter):
    """Scrubs secret values from log records before any handler formats them."""

    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact(msg, self.secrets)
        if clean != msg:
            record.msg, record.args = clean, None
        # An exception's text (log.exception) is formatted by the handler from exc_info, after every
        # filter: format it here, scrubbed, and drop exc_info so no handler renders the raw one.
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), self.secrets)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact(record.stack_info, self.secrets)
        return True


def install_redaction(secrets: Secrets) -> None:
    """Add a ``RedactingFilter`` to the root logger's handlers (idempotent per secrets object)."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) and f.secrets is secrets for f in handler.filters):
            handler.addFilter(RedactingFilter(secrets))


def secrets_for(inv: Inventory, inventory_path: Path, option: Path | None, required: bool = True) -> Secrets | None:
    """The secrets file from ``--secrets``, else the inventory's ``lab.secrets_file`` (as LabTestbed reads it)."""
    path = option
    if path is None and inv.lab is not None and inv.lab.secrets_file:
        path = Path(inv.lab.secrets_file)
    if path is None:
        if required:
            raise ConfigError("no secrets file: pass --secrets FILE (YAML with SIM keys and WiFi passphrases, "
                              "mode 0600)", source=str(inventory_path))
        return None
    return load_secrets(path)
