"""Shared helpers of the LTE/WiFi tests and benches: the reference lab inventory and variants of it.

Not installed with mplab (``rigs/`` is not in the wheel).
"""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from harness.config.inventory import Inventory

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "tests" / "data" / "lab-lte.yaml"  # three receivers: the golden files are rendered from it
GOLDEN = REPO / "tests" / "golden"

KEYS = {"001010000000001": ("465B5CE8B199B49FAA5F0A2EE238A6BC", "E8ED289DEBA952E4283B54E88E6183CA"),
        "001010000000002": ("00112233445566778899AABBCCDDEEFF", "63BFA50EE6523365FF14C1F45F88737D"),
        "001010000000003": ("0123456789ABCDEF0123456789ABCDEF", "FEDCBA9876543210FEDCBA9876543210")}


def lab_data() -> dict:
    """The reference lab inventory as plain data (a fresh copy to modify)."""
    return copy.deepcopy(yaml.safe_load(LAB.read_text()))


def lab_inventory(**edits) -> Inventory:
    """The reference lab inventory, validated."""
    return Inventory.model_validate(lab_data())


def write_secrets(path: Path, mode: int = 0o600) -> Path:
    """A secrets file with keys for the lab's three SIMs and passphrases for both APs."""
    data = {"sim": {imsi: {"k": k, "opc": opc} for imsi, (k, opc) in KEYS.items()},
            "wifi_psk": {"mplab-rx": "mplab receivers 1", "mplab-snd": "mplab sender 22"}}
    path.write_text(yaml.safe_dump(data))
    path.chmod(mode)
    return path


#: The Open5GS daemons the stand-ins play, by their short kind.
DAEMON_KIND = {"open5gs-hssd": "hss", "open5gs-pcrfd": "pcrf", "open5gs-sgwud": "sgwu", "open5gs-upfd": "upf",
               "open5gs-sgwcd": "sgwc", "open5gs-smfd": "smf", "open5gs-mmed": "mme"}


def deploy_inventory(tmp_path, version="2.7.2", epc_address="192.168.30.1") -> Inventory:
    """The reference lab inventory with its eNB and EPC files under ``tmp_path`` (made)."""
    d = lab_data()
    e, c = d["lte"]["enb"], d["lte"]["epc"]
    e.update(config_dir=str(tmp_path / "enb" / "etc"), log_path=str(tmp_path / "enb" / "enb.log"))
    c.update(config_dir=str(tmp_path / "epc" / "etc"), log_dir=str(tmp_path / "epc" / "log"), version=version,
             address=epc_address)
    for p in ("enb/etc", "epc/etc", "epc/log"):
        (tmp_path / p).mkdir(parents=True, exist_ok=True)
    return Inventory.model_validate(d)
