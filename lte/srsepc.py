"""srsEPC as the cell's core (``lte.epc.kind: srsepc``): ``epc.conf`` and ``user_db.csv``.

srsEPC (srsRAN 4G's MME + HSS + S/P-GW in one process) needs no database: its HSS reads
the subscribers from a CSV, one line per SIM (``name,auth,imsi,key,op_type,op/opc,amf,
sqn,qci,ip_alloc``; srsepc/user_db.csv.example). The rows come from the same inputs as
Open5GS's subscriber documents (``lte.subscribers.inventory_documents``: IMSI from the
inventory, K/OPc from the secrets file, the receiver's LTE address as its static IP).

srsepc writes the CSV back on exit with each SIM's advanced SQN. Resetting it would make
the next attach fail until the UE resynchronises, so ``merge_sqn`` carries the SQN over
from the file on the EPC host (when the SIM's keys are unchanged) and says which SQNs it
kept and which it could not keep.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from harness.errors import ConfigError
from harness.config.inventory import Inventory
from harness.deploy.files import ConfigFile
from lte.render import BANNER, Role, template_env
from lte.secrets import Secrets
from lte.subscribers import inventory_documents

#: A fresh SIM's SQN (12 hex digits, 48 bits).
SQN_ZERO = "000000000000"
#: QCI of the default bearer (best effort, as Open5GS's subscriber documents).
DEFAULT_QCI = 9
HEADER = ("# {banner}\n"
          "# srsEPC subscribers of {name}: name,auth,imsi,key,op_type,op/opc,amf,sqn,qci,ip_alloc\n"
          "# (srsepc/user_db.csv.example). srsepc rewrites this file with advanced SQNs when it exits;\n"
          "# mplab keeps those SQNs when it pushes the file again.\n")


@dataclass(frozen=True)
class UserDbRow:
    """One subscriber line of user_db.csv."""

    name: str
    imsi: str
    k: str
    opc: str
    amf: str
    sqn: str = SQN_ZERO
    qci: int = DEFAULT_QCI
    ip_alloc: str = "dynamic"

    def line(self) -> str:
        return ",".join([self.name, "mil", self.imsi, self.k.lower(), "opc", self.opc.lower(), self.amf,
                         self.sqn, str(self.qci), self.ip_alloc])

    def __repr__(self) -> str:  # never print keys
        return f"UserDbRow({self.name}, {self.imsi}, sqn={self.sqn}, ip={self.ip_alloc})"


def inventory_rows(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[UserDbRow]:
    """One row per receiver, from the documents Open5GS would get (same keys, same static address)."""
    names = {r.sim.imsi: r.name for r in inv.receivers if r.sim is not None}
    rows = []
    for doc in inventory_documents(inv, secrets, source):
        sec = doc["security"]
        ue = doc["slice"][0]["session"][0].get("ue", {})
        rows.append(UserDbRow(names[doc["imsi"]], doc["imsi"], sec["k"], sec["opc"], sec["amf"],
                              ip_alloc=ue.get("ipv4", "dynamic")))
    return rows


_ROW = re.compile(r"^[^,#]*,(xor|mil),\d{6,15},[0-9A-Fa-f]{32},(op|opc),[0-9A-Fa-f]{32},[0-9A-Fa-f]{4},"
                  r"[0-9A-Fa-f]{12},\d+,[^,]+$")


def parse_user_db(text: str, source: str = "user_db.csv") -> dict[str, list[str]]:
    """IMSI -> the ten columns, for every subscriber line (``ConfigError`` naming a malformed line)."""
    out = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not _ROW.match(line):
            raise ConfigError(f"line {n} is not a srsepc subscriber line (name,auth,imsi,key,op_type,op/opc,amf,"
                              "sqn,qci,ip_alloc); fix or remove it before mplab rewrites the file", source=source)
        cols = line.split(",")
        out[cols[2]] = cols
    return out


@dataclass(frozen=True)
class SqnMerge:
    """What carrying SQNs over did, per IMSI."""

    kept: tuple[str, ...]          # "IMSI sqn" whose SQN came from the file on the host
    reset: tuple[str, ...]         # IMSIs whose keys changed: their SQN starts again at 0 (said, not silent)
    dropped: tuple[str, ...]       # IMSIs in the host's file that the inventory no longer has
    new: tuple[str, ...]           # IMSIs not in the host's file


def merge_sqn(rows: list[UserDbRow], existing: str | None, source: str = "user_db.csv") -> tuple[list[UserDbRow],
                                                                                                    SqnMerge]:
    """``rows`` with each SIM's SQN taken from ``existing`` (the file srsepc last wrote) when its keys match."""
    old = parse_user_db(existing, source) if existing else {}
    out, kept, reset, new = [], [], [], []
    for r in rows:
        cols = old.get(r.imsi)
        if cols is None:
            new.append(r.imsi)
            out.append(r)
        elif cols[3].lower() == r.k.lower() and cols[5].lower() == r.opc.lower() and cols[4] == "opc":
            kept.append(f"{r.imsi} {cols[7].lower()}")
            out.append(replace(r, sqn=cols[7].lower()))
        else:
            reset.append(r.imsi)
            out.append(r)
    dropped = tuple(i for i in old if i not in {r.imsi for r in rows})
    return out, SqnMerge(tuple(kept), tuple(reset), dropped, tuple(new))


def user_db_text(inv: Inventory, rows: list[UserDbRow]) -> str:
    """The CSV srsepc reads."""
    return HEADER.format(banner=BANNER, name=inv.name) + "".join(r.line() + "\n" for r in rows)


def render_epc_conf(inv: Inventory) -> ConfigFile[Role]:
    """srsepc's epc.conf (``lte.epc.config_dir``/epc.conf)."""
    assert inv.lte is not None
    epc = inv.lte.epc
    env = template_env()
    text = env.get_template("srsepc/epc.conf.j2").render(
        banner=BANNER, inventory_name=inv.name, epc=epc, gateway=str(epc.ue_gateway),
        dns=str(epc.dns[0]) if epc.dns else "8.8.8.8")
    return ConfigFile("epc", f"{epc.config_dir}/epc.conf", text)


def render_srsepc(inv: Inventory, secrets: Secrets, existing_user_db: str | None = None,
                  source: str = "secrets") -> tuple[list[ConfigFile[Role]], SqnMerge]:
    """epc.conf and user_db.csv (mode 0600: it holds the keys), SQNs carried over from ``existing_user_db``."""
    assert inv.lte is not None
    rows, merge = merge_sqn(inventory_rows(inv, secrets, source), existing_user_db,
                            source=f"{inv.lte.epc.host}:{inv.lte.epc.user_db}")
    db = ConfigFile("epc", inv.lte.epc.user_db, user_db_text(inv, rows), mode=0o600)
    return [render_epc_conf(inv), db], merge
