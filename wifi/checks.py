"""Is each receiver associated with the receivers' AP? Read from ``wpa_cli status``."""
from __future__ import annotations

from harness.hosts.local import Host
from harness.config.inventory import Inventory
from harness.upkeep.preflight import Check
from wifi.render import channel_freq_mhz


def wpa_cli_status_argv(ifname: str) -> list[str]:
    """``wpa_cli -i <if> status``: key=value lines (wpa_state, ssid, bssid, freq, ip_address, ...)."""
    return ["wpa_cli", "-i", ifname, "status"]


def parse_wpa_status(text: str) -> dict[str, str]:
    """``wpa_cli status`` output as a dict."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def association_state(status: dict[str, str], ssid: str, freq_mhz: int) -> tuple[bool, str]:
    """Whether ``status`` shows a completed association with ``ssid`` on ``freq_mhz``."""
    state = status.get("wpa_state", "?")
    if state != "COMPLETED":
        return False, f"not associated (wpa_state={state})"
    if status.get("ssid") != ssid:
        return False, f"associated with {status.get('ssid')!r}, not {ssid!r}"
    if status.get("freq") and int(status["freq"]) != freq_mhz:
        return False, f"on {status['freq']} MHz, expected {freq_mhz} MHz"
    ip = status.get("ip_address")
    return True, f"associated with {ssid} ({status.get('bssid', '?')}, {freq_mhz} MHz" + (f", {ip})" if ip else ")")


def check_association(inv: Inventory, receiver_name: str, host: Host) -> Check:
    """The receiver's WiFi interface is associated with the receivers' AP."""
    assert inv.wifi is not None
    ap = inv.wifi.ap("receivers")
    assert ap is not None, "no AP with role 'receivers'"
    ifname = inv.receiver(receiver_name).interfaces["wifi"].name
    res = host.run(wpa_cli_status_argv(ifname), check=False, timeout=10)
    if res.returncode != 0:
        return Check(host.name, "wifi-association", False,
                     f"wpa_cli -i {ifname} status exited {res.returncode}: {(res.stderr or res.stdout).strip()[:200]}",
                     f"is wpa_supplicant@{ifname} running?")
    ok, detail = association_state(parse_wpa_status(res.stdout), ap.ssid, channel_freq_mhz(ap.band, ap.channel))
    return Check(host.name, "wifi-association", ok, detail,
                 "" if ok else f"is AP {ap.name} up on channel {ap.channel} and the passphrase right?")
