"""WiFi: hostapd and wpa_supplicant configs from the inventory, association parsing, and
``wifi_up`` through namespace Hosts (stand-in systemctl and daemons: no radios, no systemd here)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import standins
from harness.upkeep.clean import clean_prefix
from harness.errors import ConfigError
from harness.hosts.local import LocalHost, NamespaceHost
from harness.config.inventory import Inventory
from harness.deploy.services import Systemd
from harness.deploy.secrets import load_secrets
from rigs.ltelab import LAB, lab_data, lab_inventory, write_secrets
from wifi.checks import association_state, parse_wpa_status
from wifi.deploy import wifi_up
from wifi.realcheck import check_files, trials
from wifi.render import channel_freq_mhz, render_hostapd, render_supplicants


def _kv(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


@pytest.fixture
def secrets(tmp_path):
    return load_secrets(write_secrets(tmp_path / "s.yaml"))


def test_channel_frequencies():
    assert channel_freq_mhz("2.4", 1) == 2412 and channel_freq_mhz("2.4", 13) == 2472
    assert channel_freq_mhz("5", 36) == 5180 and channel_freq_mhz("5", 149) == 5745


def test_hostapd_configs(secrets):
    files = render_hostapd(lab_inventory(), secrets)
    assert [f.machine for f in files] == ["ap-rx", "ap-snd"]
    rx, snd = (_kv(f.text) for f in files)
    assert rx == {**rx, "interface": "wlan0", "bridge": "br-lan", "driver": "nl80211", "ssid": "mplab-rx",
                  "country_code": "DE", "hw_mode": "a", "channel": "36", "wpa": "2", "wpa_key_mgmt": "WPA-PSK",
                  "rsn_pairwise": "CCMP", "wpa_passphrase": "mplab receivers 1", "ieee80211ac": "1"}
    assert snd["channel"] == "149" and snd["ssid"] == "mplab-snd" and snd["wpa_passphrase"] == "mplab sender 22"
    assert rx["channel"] != snd["channel"]
    assert all(f.mode == 0o600 for f in files)                   # they carry the passphrase


def test_2_4_ghz_ap(secrets):
    d = lab_data()
    d["wifi"]["aps"][1].update(band="2.4", channel=6)
    files = render_hostapd(Inventory.model_validate(d), secrets)
    kv = _kv(files[1].text)
    assert kv["hw_mode"] == "g" and kv["channel"] == "6" and "ieee80211ac" not in kv


def test_supplicant_configs(secrets):
    files = render_supplicants(lab_inventory(), secrets)
    assert [(f.machine, f.path, f.unit) for f in files] == [
        (n, "/etc/wpa_supplicant/wpa_supplicant-wlan0.conf", "wpa_supplicant@wlan0") for n in ("n1", "n2", "n3")]
    net = files[0].text.split("network={", 1)[1].split("}", 1)[0]
    kv = {k.strip(): v for k, v in _kv(net).items()}
    assert kv == {"ssid": '"mplab-rx"', "psk": '"mplab receivers 1"', "key_mgmt": "WPA-PSK", "proto": "RSN",
                  "pairwise": "CCMP", "scan_freq": "5180", "freq_list": "5180"}
    assert "country=DE" in files[0].text


def test_missing_passphrase_is_a_config_error(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("wifi_psk: {mplab-snd: mplab sender 22}\n")
    p.chmod(0o600)
    with pytest.raises(ConfigError, match="no passphrase for SSID .mplab-rx."):
        render_hostapd(lab_inventory(), load_secrets(p))


def test_every_missing_passphrase_named_at_once(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("wifi_psk: {}\n")
    p.chmod(0o600)
    with pytest.raises(ConfigError) as err:
        render_hostapd(lab_inventory(), load_secrets(p))
    assert "'mplab-rx'" in str(err.value) and "'mplab-snd'" in str(err.value)
    p.write_text("wifi_psk: {mplab-snd: short}\n")
    with pytest.raises(ConfigError) as err:
        render_hostapd(lab_inventory(), load_secrets(p))
    assert "no passphrase for SSIDs 'mplab-rx'" in str(err.value) and "'mplab-snd' must be 8..63" in str(err.value)
    # the receivers' supplicants need only their own AP's passphrase
    p.write_text("wifi_psk: {mplab-rx: mplab receivers 1}\n")
    assert len(render_supplicants(lab_inventory(), load_secrets(p))) == 3


def test_cli_render_names_every_missing_passphrase(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("wifi_psk: {}\n")
    p.chmod(0o600)
    res = subprocess.run([sys.executable, "-m", "mplab", "wifi", "render", str(LAB), "--secrets", str(p),
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    assert "'mplab-rx'" in res.stderr and "'mplab-snd'" in res.stderr


# The real hostapd and wpa_supplicant (Debian packages, installed by `make setup`) parse every file
# `mplab wifi render` writes: a template change they reject fails here. Not skipped when they are missing.
@pytest.mark.root
def test_real_daemons_accept_every_rendered_file(prefix, tmp_path, secrets):
    d = lab_data()
    d["wifi"]["aps"][1].update(band="2.4", channel=6)        # both bands' template branches
    inv = Inventory.model_validate(d)
    files = render_hostapd(inv, secrets) + render_supplicants(inv, secrets)
    verdicts = check_files(files, tmp_path / "files", f"{prefix}wifi")
    assert [v.name for v in verdicts] == ["hostapd ap-rx", "hostapd ap-snd", "wpa_supplicant n1",
                                          "wpa_supplicant n2", "wpa_supplicant n3"]
    bad = [f"{v.name}: {v.word}: {v.detail}" for v in verdicts if not v.ok]
    assert not bad, bad
    for v in verdicts:       # they stopped at the missing radio, after parsing
        assert "nl80211" in v.detail or "interface" in v.detail, v


@pytest.mark.root
def test_real_daemons_reject_a_broken_file(prefix, tmp_path, secrets):
    """The check can fail: an unknown key and a short passphrase are each named by line."""
    inv = lab_inventory()
    ap, rx = render_hostapd(inv, secrets)[0], render_supplicants(inv, secrets)[0]
    broken = [dataclasses.replace(ap, text=ap.text.replace("wmm_enabled=1", "wmm_enabld=1")),
              dataclasses.replace(rx, text=rx.text.replace("proto=RSN", "proto=RSNX"))]
    verdicts = check_files(broken, tmp_path / "files", f"{prefix}wifi")
    assert [v.ok for v in verdicts] == [False, False]
    assert "wmm_enabld" in verdicts[0].detail and verdicts[0].detail.startswith("Line ")
    assert "RSNX" in verdicts[1].detail or "proto" in verdicts[1].detail


@pytest.mark.root
def test_cli_check_configs_passes_rendered_files_and_refuses_to_check_nothing(tmp_path):
    s = write_secrets(tmp_path / "s.yaml")
    argv = [sys.executable, "-m", "mplab", "wifi", "check-configs", str(LAB), "--secrets", str(s)]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("ok ") == 5 and "hostapd ap-rx" in res.stdout and "wpa_supplicant n3" in res.stdout
    # neither daemon installed: it checked nothing, which is no pass
    bare = {"PATH": str(tmp_path)}
    code = ("import harness.deploy.trial as t; t.SYSTEM_SBIN = (); import sys; from mplab.cli import run; "
            f"sys.exit(run({argv[3:]!r}))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=bare)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "nothing checked: no hostapd or wpa_supplicant program found" in res.stderr


def test_real_daemon_absent_is_reported(tmp_path, secrets, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("harness.deploy.trial.SYSTEM_SBIN", ())
    todo, absent = trials(render_hostapd(lab_inventory(), secrets), tmp_path / "f")
    assert todo == [] and [v.word for v in absent] == ["absent", "absent"]
    assert "apt-get install hostapd" in absent[0].detail


# `wpa_cli -i wlan0 status` on an associated Debian 12 client (format: hostap wpa_cli.c, wpa_supplicant
# ctrl_iface "STATUS"); values made up.
WPA_STATUS = """\
bssid=a0:b1:c2:d3:e4:f5
freq=5180
ssid=mplab-rx
id=0
mode=station
wifi_generation=5
pairwise_cipher=CCMP
group_cipher=CCMP
key_mgmt=WPA2-PSK
wpa_state=COMPLETED
ip_address=192.168.10.11
address=00:11:22:33:44:55
"""


def test_association_parsing():
    st = parse_wpa_status(WPA_STATUS)
    ok, detail = association_state(st, "mplab-rx", 5180)
    assert ok and "a0:b1:c2:d3:e4:f5" in detail and "192.168.10.11" in detail
    assert association_state(st, "mplab-snd", 5745) == (False, "associated with 'mplab-rx', not 'mplab-snd'")
    assert association_state(st, "mplab-rx", 5200)[1] == "on 5180 MHz, expected 5200 MHz"
    scanning = parse_wpa_status("wpa_state=SCANNING\naddress=00:11:22:33:44:55\n")
    assert association_state(scanning, "mplab-rx", 5180) == (False, "not associated (wpa_state=SCANNING)")


@pytest.mark.root
def test_wifi_up_through_namespace_hosts(prefix, tmp_path, secrets):
    d = lab_data()
    d["receivers"] = d["receivers"][:2]
    for ap in d["wifi"]["aps"]:
        ap["config_path"] = str(tmp_path / ap["host"] / "hostapd.conf")
    d["wifi"]["supplicant_dir"] = str(tmp_path / "rx")
    inv = Inventory.model_validate(d)
    (tmp_path / "ap-rx").mkdir()
    (tmp_path / "ap-snd").mkdir()
    (tmp_path / "rx").mkdir()
    sdir = tmp_path / "standins"
    units = {"hostapd": standins.daemon_argv("hostapd", str(tmp_path / "ap-rx" / "hostapd.conf")),
             "wpa_supplicant@wlan0": standins.daemon_argv("wpa_supplicant",
                                                          str(tmp_path / "rx" / "wpa_supplicant-wlan0.conf"))}
    tools = standins.install(sdir, units)
    root = LocalHost("root")
    hosts = {}
    try:
        for name in ("ap-rx", "n1", "n2"):
            root.run(["ip", "netns", "add", f"{prefix}{name}"])
            hosts[name] = NamespaceHost(name, f"{prefix}{name}")
        hosts["ap-snd"] = hosts["ap-rx"]        # one stand-in hostapd unit serves both APs here
        rep = wifi_up(inv, hosts, secrets, settle_s=0.2,
                      services=lambda h: Systemd(h, str(tools["systemctl"]), str(tools["journalctl"])))
        calls = [c for c in standins.calls(sdir) if not c.startswith("is-active")]
        assert calls[0] == "restart hostapd" and calls[-1] == "restart wpa_supplicant@wlan0"
        assert calls.index("restart wpa_supplicant@wlan0") > calls.index("restart hostapd")   # APs first
        assert rep.started[:2] == ("ap-rx:hostapd", "ap-rx:hostapd")
        conf = tmp_path / "ap-rx" / "hostapd.conf"
        assert conf.stat().st_mode & 0o777 == 0o600 and "ssid=mplab-rx" in conf.read_text()
        assert (tmp_path / "rx" / "wpa_supplicant-wlan0.conf").stat().st_mode & 0o777 == 0o600
    finally:
        standins.stop_all(sdir)
        clean_prefix(prefix)
