"""Render the LTE cell's configuration files from the inventory (Jinja2 templates).

srsenb: ``enb.conf`` (INI), ``rr.conf``, ``sib.conf``, ``rb.conf`` (libconfig). Open5GS:
one YAML per EPC daemon, in the layout of the installed version (``lte.version``). Every
value that must agree between the two sides (PLMN, TAC, MME and SGW-U addresses) is
taken from the inventory, which refuses disagreement before we get here.

Each file comes back as a ``harness.deploy.files.ConfigFile`` whose machine is a ``Role``
(which machine, which path, what text), so deployment needs no knowledge of what the files mean.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from harness.config.inventory import Inventory
from harness.config.radio import SIB2_UE_TIMERS, dl_freq_mhz, ul_earfcn, ul_freq_mhz
from harness.deploy.files import ConfigFile
from harness.errors import ConfigError
from lte import cell
from lte.version import Open5gsVersion, SrsranVersion, parse_srsran_version

if TYPE_CHECKING:
    import jinja2

#: Which machine of the cell a file is for.
Role = Literal["enb", "epc", "ue"]

#: Loopback addresses the EPC daemons use among themselves (Open5GS's defaults, which its
#: freeDiameter configuration files also assume); only the MME's S1AP and SGW-U's GTP-U
#: face the eNodeB.
INTERNAL_IP = {"mme": "127.0.0.2", "sgwc": "127.0.0.3", "smf": "127.0.0.4", "sgwu": "127.0.0.6",
               "upf": "127.0.0.7", "hss": "127.0.0.8", "pcrf": "127.0.0.9"}

#: EPC daemons mplab configures: name -> systemd unit.
EPC_DAEMONS = {"hss": "open5gs-hssd", "pcrf": "open5gs-pcrfd", "sgwu": "open5gs-sgwud", "upf": "open5gs-upfd",
               "sgwc": "open5gs-sgwcd", "smf": "open5gs-smfd", "mme": "open5gs-mmed"}

SRSENB_FILES = ("enb.conf", "rr.conf", "sib.conf", "rb.conf")

BANNER = "Written by mplab from the inventory; edits are overwritten by `mplab lte up` (a backup is kept)."


def template_env() -> jinja2.Environment:
    """The Jinja2 environment of every template under lte/templates (strict: an undefined name is an error)."""
    import jinja2  # (a twentieth of a second) only to render: `mplab run` imports lte's drivers, which import this

    env = jinja2.Environment(loader=jinja2.PackageLoader("lte", "templates"), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=False, autoescape=False)
    env.filters["num"] = lambda x: int(x) if float(x).is_integer() else x
    return env


def _common(inv: Inventory) -> dict:
    assert inv.lte is not None, "inventory has no lte section"
    return {"inventory_name": inv.name, "banner": BANNER, "enb": inv.lte.enb, "epc": inv.lte.epc,
            "ip": INTERNAL_IP}


def srsran_version(inv: Inventory) -> SrsranVersion | None:
    """The declared ``lte.enb.version`` (None: not declared; the templates fit every supported release)."""
    assert inv.lte is not None
    v = inv.lte.enb.version
    return None if v is None else parse_srsran_version(v, source="lte.enb.version")


def srsran_templates(inv: Inventory) -> str:
    """Template directory for the inventory's srsRAN release (``ConfigError`` for an unknown release)."""
    v = srsran_version(inv)
    try:
        return "srsran" if v is None else v.templates
    except ConfigError as exc:
        raise ConfigError(str(exc), source="lte.enb.version") from None


def render_srsenb(inv: Inventory) -> list[ConfigFile[Role]]:
    """enb.conf, rr.conf, sib.conf and rb.conf for the inventory's eNodeB."""
    ctx = _common(inv)
    enb = inv.lte.enb
    tdir = srsran_templates(inv)
    ctx.update(dl_mhz=dl_freq_mhz(enb.band, enb.dl_earfcn),
               ul_mhz=ul_freq_mhz(enb.band, enb.dl_earfcn),
               ul_earfcn=ul_earfcn(enb.band, enb.dl_earfcn),
               cell=cell.derive(enb.n_prb), ue_timers=SIB2_UE_TIMERS)
    env = template_env()
    files = [ConfigFile("enb", f"{enb.config_dir}/{name}", env.get_template(f"{tdir}/{name}.j2").render(ctx))
             for name in SRSENB_FILES]
    check_cell_files(enb.n_prb, files)
    return files


def check_cell_files(n_prb: int, files: list[ConfigFile[Role]]) -> None:
    """``ConfigError`` when the sib.conf/rr.conf among ``files`` break srsRAN's PUCCH/PRACH/SI rules."""
    text = {f.path.rsplit("/", 1)[-1]: f.text for f in files}
    try:
        bad = cell.violations(cell.read_back(n_prb, text["sib.conf"], text["rr.conf"]))
    except ValueError as exc:
        raise ConfigError(str(exc), source="sib.conf") from None
    if bad:
        raise ConfigError("srsenb would not serve this cell: " + "; ".join(bad), source="sib.conf")


def render_open5gs(inv: Inventory, version: Open5gsVersion) -> list[ConfigFile[Role]]:
    """One YAML per EPC daemon, in the schema of ``version``."""
    ctx = _common(inv)
    epc = inv.lte.epc
    tacs = epc.tacs
    ctx.update(version=str(version), gateway=str(epc.ue_gateway),
               tac_yaml=str(tacs[0]) if len(tacs) == 1 else "[" + ", ".join(map(str, tacs)) + "]",
               pool_gateway_split=version.session_gateway_split, new_logger=version.logger_file_path)
    env = template_env()
    out = []
    for daemon in EPC_DAEMONS:
        text = env.get_template(f"open5gs-{version.schema}/{daemon}.yaml.j2").render(ctx, daemon=daemon)
        out.append(ConfigFile("epc", f"{epc.config_dir}/{daemon}.yaml", text))
    return out


def render_all(inv: Inventory, version: Open5gsVersion) -> list[ConfigFile[Role]]:
    """Every file of the cell: srsenb's four, then the EPC's seven."""
    return render_srsenb(inv) + render_open5gs(inv, version)
