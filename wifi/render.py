"""hostapd.conf for each AP and wpa_supplicant-<if>.conf for each receiver, from the inventory.

Both files carry the WPA2 passphrase, so both are written mode 0600.
"""
from __future__ import annotations

from dataclasses import dataclass

import jinja2

from harness.errors import ConfigError
from harness.inventory import Inventory
from harness.radio import AccessPoint
from lte.secrets import Secrets, wifi_passphrase

BANNER = "Written by mplab from the inventory; edits are overwritten by `mplab wifi up` (a backup is kept)."


@dataclass(frozen=True)
class WifiFile:
    """One configuration file for one machine (an AP or a receiver)."""

    host: str
    path: str
    text: str
    unit: str
    mode: int = 0o600


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


def render_hostapd(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[WifiFile]:
    """One hostapd.conf per AP."""
    assert inv.wifi is not None, "inventory has no wifi section"
    psk = passphrases(inv, secrets, source)
    env = _env()
    out = []
    for ap in inv.wifi.aps:
        text = env.get_template("hostapd.conf.j2").render(
            banner=BANNER, inventory_name=inv.name, ap=ap, hw_mode="g" if ap.band == "2.4" else "a",
            freq_mhz=channel_freq_mhz(ap.band, ap.channel), passphrase=psk[ap.ssid])
        out.append(WifiFile(ap.host, ap.config_path, text, ap.unit))
    return out


def supplicant_unit(ifname: str) -> str:
    """Debian's per-interface unit (reads /etc/wpa_supplicant/wpa_supplicant-<if>.conf)."""
    return f"wpa_supplicant@{ifname}"


def render_supplicants(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[WifiFile]:
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
        out.append(WifiFile(r.name, f"{inv.wifi.supplicant_dir}/wpa_supplicant-{ifname}.conf", text,
                            supplicant_unit(ifname)))
    return out
