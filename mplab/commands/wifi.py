"""`mplab wifi ...`: render, up and check of the lab's access points and receivers' supplicants."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harness.errors import ConfigError, MplabError

if TYPE_CHECKING:
    from harness.config.inventory import Inventory

# wifi's modules (templates, SSH) are imported by each command: `mplab --help` needs none.
console = Console()
app = typer.Typer(name="wifi", no_args_is_help=True, help="The lab's WiFi: hostapd on the APs, wpa_supplicant on receivers.")

InventoryArg = Annotated[Path, typer.Argument(help="lab inventory with a wifi section")]
SecretsOpt = Annotated[Path | None, typer.Option("--secrets", help="secrets file with the WiFi passphrases (0600)")]


def wifi_inventory(path: Path) -> Inventory:
    from harness.config.inventory import load_inventory

    inv = load_inventory(path)
    if inv.wifi is None:
        raise ConfigError("this inventory has no 'wifi' section: the WiFi commands need a lab inventory that "
                          "describes the access points (see inventory/lab.yaml and docs/lte.md)", source=str(path))
    return inv


@app.command()
def render(inventory: InventoryArg, secrets: SecretsOpt = None,
           out: Annotated[Path, typer.Option(help="directory to write into")] = Path("wifi-rendered")) -> None:
    """Write hostapd and wpa_supplicant configs locally (mode 0600: they hold the passphrase)."""
    from harness.deploy.secrets import secrets_for
    from wifi.render import render_hostapd, render_supplicants

    inv = wifi_inventory(inventory)
    sec = secrets_for(inv, inventory, secrets)
    for f in render_hostapd(inv, sec) + render_supplicants(inv, sec):
        p = out / f.machine / f.path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f.text)
        p.chmod(f.mode)
        console.print(f"{f.machine:8} {f.path} -> {p}")


@app.command()
def up(inventory: InventoryArg, secrets: SecretsOpt = None) -> None:
    """Configure and restart hostapd on each AP, then wpa_supplicant on each receiver; check association."""
    from harness.deploy.machines import host_for, receiver_hosts
    from harness.deploy.secrets import secrets_for
    from wifi.checks import check_association
    from wifi.deploy import wifi_up

    inv = wifi_inventory(inventory)
    sec = secrets_for(inv, inventory, secrets)
    hosts = {ap.host: host_for(inv, ap.host) for ap in inv.wifi.aps}
    hosts |= receiver_hosts(inv)
    try:
        rep = wifi_up(inv, hosts, sec)
        console.print(f"started: {', '.join(rep.started)}")
        checks = [check_association(inv, r.name, hosts[r.name]) for r in inv.receivers]
    finally:
        for h in hosts.values():
            h.close()
    for c in checks:
        console.print(f"{'[green]ok  [/]' if c.ok else '[red]FAIL[/]'} {c.host:8} {c.detail}")
    bad = [c for c in checks if not c.ok]
    if bad:
        raise MplabError(f"WiFi check '{bad[0].name}' failed on host '{bad[0].host}': {bad[0].detail} ({bad[0].fix})")


@app.command("check-configs")
def check_configs(inventory: InventoryArg, secrets: SecretsOpt = None,
                  keep: Annotated[Path | None, typer.Option(
                      help="render into this directory and keep it (default: a temporary one)")] = None) -> None:
    """Start the installed hostapd and wpa_supplicant on every rendered file in a scratch namespace; a daemon
    passes when it gets past parsing to its radio driver. Exit 1 if one refuses its file, or none is installed."""
    import os
    import tempfile

    from harness.deploy.secrets import secrets_for
    from mplab.commands.verdicts import checked_something, print_verdicts
    from wifi.realcheck import check_files
    from wifi.render import render_hostapd, render_supplicants

    inv = wifi_inventory(inventory)
    sec = secrets_for(inv, inventory, secrets)
    files = render_hostapd(inv, sec) + render_supplicants(inv, sec)
    with tempfile.TemporaryDirectory(prefix="mplab-wificheck-") as tmp:
        where = keep.resolve() if keep else Path(tmp)
        verdicts = check_files(files, where, f"mplab-wificheck-{os.getpid()}")
    print_verdicts(verdicts)
    checked_something(verdicts, "hostapd or wpa_supplicant", "here (apt-get install hostapd wpasupplicant)")


def register(root: typer.Typer) -> None:
    """Mount `mplab wifi ...` on the root app."""
    root.add_typer(app, name="wifi")
