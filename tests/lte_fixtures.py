"""Shared helpers of the LTE/WiFi tests: the reference lab inventory and variants of it."""
from __future__ import annotations

import copy
from pathlib import Path

import yaml

from harness.config.inventory import Inventory

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "inventory" / "lab-lte.yaml"
GOLDEN = Path(__file__).resolve().parent / "golden"

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
