"""Where the lab's LTE cell runs: the inventory's lte section, the eNodeB's and the EPC's hosts, and how
mplab reaches the EPC's subscriber database (directly, or through an SSH tunnel to the EPC).

Used by every `mplab lte` command; opening hosts is here, what to do on them is ``deploy``,
``checks`` and ``subscribers``.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from harness.config.inventory import Inventory, load_inventory
from harness.deploy.machines import host_for
from harness.errors import ConfigError
from harness.hosts.local import Host
from lte.deploy import LteHosts
from lte.tunnel import LocalForward


def lte_inventory(path: Path) -> Inventory:
    """Load ``path`` and insist on an lte section."""
    inv = load_inventory(path)
    if inv.lte is None:
        raise ConfigError("this inventory has no 'lte' section: the LTE commands need a lab inventory that "
                          "describes the eNodeB and the EPC (see inventory/lab.yaml and docs/lte.md)",
                          source=str(path))
    return inv


def lte_hosts(inv: Inventory) -> LteHosts:
    """Hosts of the eNodeB and the EPC."""
    assert inv.lte is not None
    return LteHosts(enb=host_for(inv, inv.lte.enb.host),
                    epc=host_for(inv, inv.lte.epc.host))


@contextmanager
def cell_hosts(inv: Inventory) -> Iterator[LteHosts]:
    """``lte_hosts``, closed (eNodeB first) when the block ends, also on an error."""
    hosts = lte_hosts(inv)
    try:
        yield hosts
    finally:
        hosts.enb.close()
        hosts.epc.close()


def provision_uri(inv: Inventory, epc: Host, stack: ExitStack) -> str:
    """Where mplab writes subscribers: ``lte.epc.provision_uri``, else the daemons' ``db_uri`` through an SSH
    tunnel to the EPC when it is an SSH host (MongoDB listens on the EPC's loopback by default)."""
    epc_cfg = inv.lte.epc
    if epc_cfg.provision_uri:
        return epc_cfg.provision_uri
    if not hasattr(epc, "connect"):                  # this machine or a namespace: the URI works as is
        return epc_cfg.db_uri
    host, port, db = parse_mongo_uri(epc_cfg.db_uri)
    fwd = stack.enter_context(LocalForward(epc, (host, port)))
    return f"mongodb://127.0.0.1:{fwd.port}/{db}?directConnection=true"


def parse_mongo_uri(uri: str) -> tuple[str, int, str]:
    """(host, port, database) of a single-host ``mongodb://host[:port]/db`` URI."""
    m = re.match(r"^mongodb://(?:[^@/]*@)?([^:/,?]+)(?::(\d+))?/([^?]*)", uri)
    if not m:
        raise ConfigError(f"lte.epc.db_uri {uri!r}: expected mongodb://host[:port]/database; set "
                          "lte.epc.provision_uri to reach it directly")
    host = "127.0.0.1" if m.group(1) == "localhost" else m.group(1)
    return host, int(m.group(2) or 27017), m.group(3) or "open5gs"
