"""hostapd.conf for each AP and wpa_supplicant-<if>.conf for each receiver, from the inventory.

Both files carry the WPA2 passphrase, so both are written mode 0600.
"""
from __future__ import annotations

import re

import jinja2

from harness.config.inventory import Inventory
from harness.config.radio import AccessPoint
from harness.deploy.files import ConfigFile
from harness.deploy.secrets import Secrets
from harness.errors import ConfigError

BANNER = "Written by mplab from the inventory; edits are overwritten by `mplab wifi up` (a backup is kept)."


#: WPA2 passphrases: 8..63 printable ASCII characters, no double quote (it would end the quoted value).
_PSK = re.compile(r'^[ !#-~]{8,63}$')
def channel_freq_mhz(band: str, channel: int) -> int:
    """Centre frequency of a 20 MHz WiFi channel (IEEE 802.11 channel numbering)."""
    if band == "2.4":
        return 2484 if channel == 14 else 2407 + 5 * channel
    return 5000 + 5 * channel


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("wifi", "templates"), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, autoescape=False)


def passphrases(inv: Inventory, secrets: Secrets, source: str = "secrets",
                aps: list[AccessPoint] | None = None) -> dict[str, str]:
    """The passphrase of each AP's SSID (default: every AP); one ``ConfigError`` naming every missing or
    malformed one, so that a secrets file is fixed in one go."""
    assert inv.wifi is not None, "inventory has no wifi section"
    found, problems = {}, []
    for ap in inv.wifi.aps if aps is None else aps:
        try:
            found[ap.ssid] = wifi_passphrase(secrets, ap.ssid, source)
        except ConfigError as exc:
            problems.append((ap.ssid, exc))
    if len(problems) == 1:
        raise problems[0][1]
    if problems:
        missing = [s for s, e in problems if e.field == "wifi_psk"]
        bad = [s for s, e in problems if e.field != "wifi_psk"]
        parts = []
        if missing:
            parts.append(f"no passphrase for SSIDs {', '.join(map(repr, missing))} (add wifi_psk.<ssid> for each)")
        if bad:
            parts.append(f"passphrases of SSIDs {', '.join(map(repr, bad))} must be 8..63 printable ASCII "
                         "characters without '\"'")
        raise ConfigError("; ".join(parts), source=source, field="wifi_psk")
    return found


def render_hostapd(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[ConfigFile[str]]:
    """One hostapd.conf per AP."""
    assert inv.wifi is not None, "inventory has no wifi section"
    psk = passphrases(inv, secrets, source)
    env = _env()
    out = []
    for ap in inv.wifi.aps:
        text = env.get_template("hostapd.conf.j2").render(
            banner=BANNER, inventory_name=inv.name, ap=ap, hw_mode="g" if ap.band == "2.4" else "a",
            freq_mhz=channel_freq_mhz(ap.band, ap.channel), passphrase=psk[ap.ssid])
        out.append(ConfigFile(ap.host, ap.config_path, text, mode=0o600, unit=ap.unit))
    return out


def supplicant_unit(ifname: str) -> str:
    """Debian's per-interface unit (reads /etc/wpa_supplicant/wpa_supplicant-<if>.conf)."""
    return f"wpa_supplicant@{ifname}"


def render_supplicants(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[ConfigFile[str]]:
    """One wpa_supplicant config per receiver, for the receivers' AP."""
    assert inv.wifi is not None, "inventory has no wifi section"
    ap: AccessPoint | None = inv.wifi.ap("receivers")
    if ap is None:
        return []
    env = _env()
    passphrase = passphrases(inv, secrets, source, [ap])[ap.ssid]
    out = []
    for r in inv.receivers:
        ifname = r.interfaces["wifi"].name
        text = env.get_template("wpa_supplicant.conf.j2").render(
            banner=BANNER, receiver=r.name, ifname=ifname, ap=ap, passphrase=passphrase,
            freq_mhz=channel_freq_mhz(ap.band, ap.channel))
        out.append(ConfigFile(r.name, f"{inv.wifi.supplicant_dir}/wpa_supplicant-{ifname}.conf", text,
                              mode=0o600, unit=supplicant_unit(ifname)))
    return out


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
