"""`mplab init DIR --emulated | --lab`: a workspace with inventories, scenarios and what to do next.

A workspace is the folder mplab runs in: ``inventory/`` (what exists), ``scenarios/`` (what to run;
each names its inventory as ``../inventory/<file>``), and what the commands write beside them
(``runs/``, ``datasets/``, ``models/``, ``reports/``, ``mlflow.db``). The examples come from the
installed package (``mplab/workspace``), never from a checkout. Mounted on the app by ``mplab.cli``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from harness.errors import ConfigError
from harness.files import atomic_write
from harness.resources import package_path

#: The example workspace inside the installed package.
EXAMPLES = package_path("mplab", "workspace")
#: The reference lab's inventory and the secrets file format that goes with it.
LAB_INVENTORY = "lab.yaml"
LAB_SECRETS = "lab-secrets.example.yaml"
#: The emulated inventories: the physics power profile, the calibrated lab, the related schemes' links.
EMULATED_INVENTORIES = ("emulated.yaml", "paper-lab.yaml", "schemes-paper-links.yaml")
#: Scenarios a lab workspace gets, pointed at the lab's inventory.
LAB_SCENARIOS = ("paper-setup1.yaml", "paper-setup2.yaml")
SECRETS = "secrets.yaml"
NEXT_STEPS = "NEXT-STEPS.md"
_INVENTORY_LINE = re.compile(r"^inventory: .*$", re.MULTILINE)
_SECRETS_LINE = re.compile(r"^(\s*secrets_file:).*$", re.MULTILINE)

EMULATED_STEPS = """\
# Next steps: an emulated testbed

This workspace runs the emulated testbed: network namespaces on this machine, the kernel's MPTCP,
real iperf3, emulated USB meters. Everything it records is labelled emulated.

1. Check the machine (as root: the namespace features are tried for real):

       sudo mplab doctor

2. Run the quick sweep (a few minutes; 3 receivers, every congestion control and interface mode):

       sudo mplab run scenarios/quick.yaml

   The campaign goes to `runs/quick-<time>/`; `mplab status runs/quick-<time>` shows it, and
   `mplab run --resume runs/quick-<time>` carries on after an interruption.

3. Build its dataset and its report:

       mplab dataset build runs/quick-<time> -o datasets/quick
       mplab report runs/quick-<time> datasets/quick -o reports/quick

   `reports/quick/index.html` is one self-contained page.

The reference sweep is `scenarios/paper-setup1.yaml` (`mplab run scenarios/paper-setup1.yaml --dry-run
--speedup auto --testbeds 2` prints its plan and how long it takes). `inventory/emulated.yaml` draws power
from published radio coefficients; `inventory/paper-lab.yaml` is calibrated to the reference paper.
"""

LAB_STEPS = """\
# Next steps: a lab

This workspace drives a real lab over SSH: one sender, receivers with WiFi and an LTE modem, a USB
meter on each receiver, the WiFi access points and the LTE cell.

1. Describe the lab in `inventory/lab.yaml`: every host's address, each receiver's interfaces and
   meter, the access points and the LTE cell. Its comments say what each field is.
2. Fill in `secrets.yaml` (SIM keys, WiFi passphrases). It is readable by you alone (mode 0600) and
   mplab refuses it otherwise; nothing in it is ever written to a log or a record.
3. Reach and prepare the boards, then check the machine and the lab:

       mplab lab keys inventory/lab.yaml              # mplab's SSH key on every machine, host keys pinned
       mplab lab prepare inventory/lab.yaml --dry-run # what it would change on each board
       mplab lab prepare inventory/lab.yaml
       mplab doctor
       mplab preflight --inventory inventory/lab.yaml --scenario scenarios/paper-setup1.yaml

   Every row that is not `ok` says what is wrong and how to fix it.
4. Bring up the radios: `mplab wifi up inventory/lab.yaml` and `mplab lte up inventory/lab.yaml`
   (`mplab lte check inventory/lab.yaml` checks the cell end to end).
5. Run the reference sweep:

       mplab run scenarios/paper-setup1.yaml

   `mplab run --resume runs/<campaign>` carries on after an interruption; `mplab watch runs/<campaign>`
   serves a live page.
"""


def _write(dst: Path, text: str, mode: int = 0o644) -> Path:
    atomic_write(dst, text.encode(), mode=mode)  # the secrets file is 0600 from its first byte
    return dst


def _example(*parts: str) -> str:
    return EXAMPLES.joinpath(*parts).read_text()


def _target(directory: Path, force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise ConfigError("exists and is not a directory", source=str(directory))
    if directory.is_dir() and any(directory.iterdir()) and not force:
        raise ConfigError("exists and is not empty: choose a new directory (or --force to write the examples into it; "
                          "a secrets file there is kept)", source=str(directory))


def init(
    directory: Annotated[Path, typer.Argument(help="the workspace to create (a new or empty directory)")],
    lab: Annotated[bool, typer.Option("--lab", help="a real lab over SSH: a lab inventory and a secrets file")] = False,
    emulated: Annotated[bool, typer.Option("--emulated", help="the emulated testbed on this machine")] = False,
    force: Annotated[bool, typer.Option(help="write into a directory that is not empty")] = False,
) -> None:
    """Create a workspace: inventories, scenarios and NEXT-STEPS.md; run mplab inside it."""
    if lab == emulated:
        raise ConfigError("choose one kind of workspace: --emulated (this machine) or --lab (a real lab over SSH)")
    _target(directory, force)
    inv_dir, sc_dir = directory / "inventory", directory / "scenarios"
    inv_dir.mkdir(parents=True, exist_ok=True)
    sc_dir.mkdir(exist_ok=True)
    written: list[Path] = []
    if emulated:
        for name in EMULATED_INVENTORIES:
            written.append(_write(inv_dir / name, _example("inventory", name)))
        for src in sorted((EXAMPLES / "scenarios").glob("*.yaml")):
            written.append(_write(sc_dir / src.name, src.read_text()))
        written.append(_write(directory / NEXT_STEPS, EMULATED_STEPS))
    else:
        inv = _SECRETS_LINE.sub(rf"\1 {SECRETS}   # mode 0600, in the workspace (mplab init wrote it): fill it in",
                                _example("inventory", LAB_INVENTORY), count=1)
        written.append(_write(inv_dir / "lab.yaml", inv))
        secrets = directory / SECRETS
        if not secrets.exists():  # filled-in secrets are never overwritten, not even with --force
            _write(secrets, _example("inventory", LAB_SECRETS), mode=0o600)
        written.append(secrets)
        for name in LAB_SCENARIOS:
            text = _INVENTORY_LINE.sub("inventory: ../inventory/lab.yaml", _example("scenarios", name), count=1)
            written.append(_write(sc_dir / name, text))
        written.append(_write(directory / NEXT_STEPS, LAB_STEPS))
    for path in written:
        print(path)
    print(f"workspace ready: cd {directory} and follow {NEXT_STEPS}")


def register(app: typer.Typer) -> None:
    """Mount `mplab init` on the top-level app."""
    app.command()(init)
