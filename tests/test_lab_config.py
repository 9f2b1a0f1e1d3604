"""Lab configuration without a lab: the example inventory, secrets files, ser2net commands, the preflight table."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.config.inventory import Inventory, Ser2Net, load_inventory
from harness.testbeds.lab import LabTestbed
from mplab.commands.testbed import checks_table
from harness.deploy.secrets import RedactingFilter, load_secrets, redact
from harness.meters.ser2net import ser2net_argv
from harness.hosts.ssh import SSHHost
from harness.upkeep.preflight import Check

REPO = Path(__file__).resolve().parent.parent


def test_example_lab_inventory_is_valid_and_complete():
    inv = load_inventory(REPO / "inventory" / "lab.yaml")
    assert inv.kind == "lab" and len(inv.receivers) == 9
    assert {h.role for h in inv.lab.infra} == {"enb", "epc", "wifi-ap", "switch"}
    assert inv.meter_port(inv.receiver("rx1")) == "rfc2217://192.168.100.21:7001?ign_set_control"
    assert inv.meter_port(inv.receiver("rx9")) == "/dev/rfcomm8"
    tb = LabTestbed(inv)  # builds hosts only: nothing is contacted
    assert isinstance(tb.sender, SSHHost) and tb.sender.address == "192.168.100.10"
    rx1 = tb.nodes["rx1"].host
    assert rx1.host_key_policy == "strict" and rx1.user == "root" and rx1.key_file.name == "mplab_lab"
    assert tb.nodes["rx3"].port == 5203
    assert set(tb.infra) == {"enb", "epc", "ap-rx", "ap-snd", "sw1"}
    # One inventory for the whole reference lab: its radio sections, pinned versions, a SIM in every receiver.
    assert inv.lte is not None and inv.wifi is not None and inv.lab.switch is not None
    assert (inv.lte.enb.version, inv.lte.epc.version) == ("23.04", "2.7.2")
    assert all(r.sim is not None for r in inv.receivers)


def test_reference_lab_renders_with_its_secrets_example(tmp_path):
    """The technician's first commands on the shipped inventory and its secrets example (filled in as copied):
    `lte render` (the pinned Open5GS) and `wifi render` (every SSID has its passphrase) both write their files."""
    import subprocess
    import sys

    import yaml

    inv = REPO / "inventory" / "lab.yaml"
    example = REPO / "inventory" / "lab-secrets.example.yaml"
    doc = yaml.safe_load(example.read_text())
    lab = load_inventory(inv)
    assert set(doc["sim"]) == {r.sim.imsi for r in lab.receivers}
    assert set(doc["wifi_psk"]) == {ap.ssid for ap in lab.wifi.aps}
    secrets = tmp_path / "secrets.yaml"
    secrets.write_text(example.read_text())
    secrets.chmod(0o600)
    for radio in ("lte", "wifi"):
        res = subprocess.run([sys.executable, "-m", "mplab", radio, "render", str(inv), "--secrets", str(secrets),
                              "--out", str(tmp_path / radio)], capture_output=True, text=True, cwd=REPO, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "Traceback" not in res.stderr
    assert "Open5GS 2.7.2 (lte.epc.version)" in res.stdout or (tmp_path / "lte" / "epc").is_dir()
    assert (tmp_path / "lte" / "epc" / "etc" / "open5gs" / "mme.yaml").exists()
    assert (tmp_path / "wifi" / "ap-rx" / "etc" / "hostapd" / "hostapd.conf").exists()
    assert len(list((tmp_path / "wifi").glob("rx*/etc/wpa_supplicant/*.conf"))) == 9


def test_unknown_group_member_is_a_config_error(tmp_path):
    text = (REPO / "inventory" / "lab.yaml").read_text().replace("core: [snd, enb, epc]",
                                                                        "core: [snd, enb, epc, nope]")
    p = tmp_path / "lab.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=r"lab.groups.core: unknown host\(s\) \['nope'\]") as exc:
        load_inventory(p)
    assert exc.value.exit_code == 2 and str(p) in str(exc.value)


SECRET = "0123456789abcdef0123456789abcdef"


def _secrets(tmp_path: Path, mode: int) -> Path:
    p = tmp_path / "secrets.yaml"
    p.write_text(f'sim:\n  "001010000000021": {{k: "{SECRET}", opc: "{SECRET[::-1]}"}}\nwifi_psk: {{ap1: hunter22}}\n')
    p.chmod(mode)
    return p


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_readable_secrets_file_is_refused(tmp_path, mode):
    p = _secrets(tmp_path, mode)
    with pytest.raises(ConfigError, match="chmod 600") as exc:
        load_secrets(p)
    assert exc.value.exit_code == 2 and SECRET not in str(exc.value)


def test_private_secrets_file_loads_and_stays_hidden(tmp_path, caplog):
    s = load_secrets(_secrets(tmp_path, 0o600))
    assert s.sim["001010000000021"].k.get_secret_value() == SECRET
    assert SECRET not in repr(s) and SECRET not in s.model_dump_json() and "hunter22" not in str(s)
    assert redact(f"key={SECRET} psk=hunter22", s) == "key=[secret] psk=[secret]"
    logger = logging.getLogger("mplab.test-secrets")
    handler = logging.Handler()
    seen = []
    handler.emit = lambda record: seen.append(record.getMessage())
    handler.addFilter(RedactingFilter(s))
    logger.addHandler(handler)
    try:
        logger.warning("provisioning %s with %s", "001010000000021", SECRET)
    finally:
        logger.removeHandler(handler)
    assert seen == ["provisioning 001010000000021 with [secret]"]


def test_bad_secrets_yaml_does_not_echo_its_content(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(f"sim: [{SECRET}\n")
    p.chmod(0o600)
    with pytest.raises(ConfigError) as exc:
        load_secrets(p)
    assert SECRET not in str(exc.value)


def test_ser2net_argv_serves_the_device_with_rfc2217():
    argv = ser2net_argv(Ser2Net(device="/dev/rfcomm0", tcp_port=7001), "rx1")
    assert argv[:2] == ["ser2net", "-n"]
    joined = "\n".join(argv)
    assert "accepter: telnet(rfc2217),tcp,7001" in joined
    assert "connector: serialdev,/dev/rfcomm0,9600n81,local" in joined


def test_checks_table_shows_fix_only_for_failures():
    t = checks_table([Check("rx1", "iperf3", True, "3.12", "apt install iperf3"),
                      Check("rx2", "interface lte (wwan0)", False, "DOWN", "ip link set wwan0 up"),
                      Check("rx2", "clock offset", False, "+80 ms", "run chrony", essential=False)], "t")
    fixes = list(t.columns[4].cells)
    results = list(t.columns[2].cells)
    assert fixes == ["", "ip link set wwan0 up", "run chrony"]
    assert "PASS" in results[0] and "FAIL" in results[1] and "WARN" in results[2]


def test_lab_inventory_rejects_emulated_fields():
    data = load_inventory(REPO / "inventory" / "lab.yaml").model_dump(mode="json")
    data["receivers"][0]["interfaces"]["wifi"]["channel"] = {"rate_mbit": 10, "buffer_ms": 10}
    with pytest.raises(Exception, match="channels are emulated only"):
        Inventory.model_validate(data)


def _mplab(*args: str):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=REPO,
                          env={"COLUMNS": "200", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=120)


@pytest.mark.root
def test_preflight_command_on_the_emulated_testbed():
    res = _mplab("preflight", "--inventory", "inventory/emulated.yaml", "--cc", "cubic")
    assert res.returncode == 0, res.stderr
    assert "kernel MPTCP" in res.stdout and "MPTCP enabled" in res.stdout and "PASS" in res.stdout


def test_preflight_command_fails_with_fixes_on_an_unreachable_lab(tmp_path):
    key = tmp_path / "k"
    key.write_text("not a key")
    (tmp_path / "kh").write_text("")
    text = (REPO / "inventory" / "lab.yaml").read_text()
    # Every machine on a port of this host where nothing listens: refused at once, nothing else is contacted.
    import re
    text = re.sub(r"address: 192\.168\.100\.\d+", "address: 127.0.0.1", text)
    text = text.replace("~/.ssh/mplab_lab", str(key)).replace("inventory/lab.known_hosts", str(tmp_path / "kh"))
    text = text.replace("port: 22\n", "port: 1\n").replace("secrets_file: ~/.config/mplab/lab-secrets.yaml",
                                                           f"secrets_file: {tmp_path / 'nope.yaml'}")
    inv = tmp_path / "lab.yaml"
    inv.write_text(text)
    res = _mplab("preflight", "--inventory", str(inv), "--group", "bench2")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "essential check(s) failed" in res.stderr
    for rx in ("rx6", "rx7", "rx8", "rx9"):
        assert rx in res.stdout
    assert "rx1 " not in res.stdout  # not in the group
    assert "FAIL" in res.stdout and "cannot connect" in res.stdout and "check that the machine is up" in res.stdout
    assert "secrets file not found" in res.stdout
    res = _mplab("preflight", "--inventory", str(inv), "--group", "nope")
    assert res.returncode == 2 and "no group 'nope'" in res.stderr
