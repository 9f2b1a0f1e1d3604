"""mplab's own systemd units for srsRAN built from source (``lte.enb.bin_dir``, ``lte.epc.bin_dir``).

A lab that builds srsRAN 4G by hand has no ``srsenb.service``/``srsepc.service``: no distribution unit
may be assumed. With ``bin_dir`` set, ``lte up`` pushes ``mplab-srsenb.service`` (and for srsEPC
``mplab-srsepc.service``) next to the configs, reloads systemd and drives them like any other unit.
They stop with SIGINT, which both programs handle (srsepc writes its SQNs back to user_db.csv on the
way out), and they do not restart on failure: a cell that fails must stay visibly failed for
``lte up``'s checks and the campaign's health check, not loop.
"""
from __future__ import annotations

from harness.config.inventory import Inventory
from harness.deploy.files import ConfigFile

#: Where mplab writes its units on the cell's hosts (the administrator's unit directory).
UNIT_DIR = "/etc/systemd/system"

_TEMPLATE = """\
# Written by mplab from the inventory ({inventory}); `mplab lte up` rewrites it.
[Unit]
Description={what} (srsRAN 4G built from source in {bin_dir}), run by mplab
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart={bin_dir}/{program} {config}
KillSignal=SIGINT
TimeoutStopSec=15
Restart=no

[Install]
WantedBy=multi-user.target
"""


def unit_text(inv: Inventory, what: str, bin_dir: str, program: str, config: str) -> str:
    """One unit file's text."""
    return _TEMPLATE.format(inventory=inv.name, what=what, bin_dir=bin_dir, program=program, config=config)


def render_units(inv: Inventory, unit_dir: str = UNIT_DIR) -> list[ConfigFile]:
    """The units the inventory needs mplab to provide (none when both sides come from packages)."""
    lte = inv.lte
    out: list[ConfigFile] = []
    if lte.enb.bin_dir:
        out.append(ConfigFile("enb", f"{unit_dir}/{lte.enb.unit}.service",
                              unit_text(inv, "srsRAN 4G eNodeB", lte.enb.bin_dir, "srsenb",
                                        f"{lte.enb.config_dir}/enb.conf")))
    if lte.epc.kind == "srsepc" and lte.epc.bin_dir:
        out.append(ConfigFile("epc", f"{unit_dir}/{lte.epc.unit}.service",
                              unit_text(inv, "srsEPC", lte.epc.bin_dir, "srsepc", f"{lte.epc.config_dir}/epc.conf")))
    return out
