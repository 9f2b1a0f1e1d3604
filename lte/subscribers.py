"""Subscribers in Open5GS's MongoDB: one document per SIM, as ``open5gs-dbctl add`` writes it.

Provisioning is an idempotent upsert keyed on ``imsi``: running it twice leaves one
document per IMSI with the same content, and a receiver whose keys changed in the
secrets file gets them replaced. Documents inserted directly register without a daemon
restart (Open5GS quickstart, "Register Subscriber Information").

One deliberate deviation from ``open5gs-dbctl add imsi ip key opc``: that script writes
a static UE address as ``"ue": {"addr": ...}``, but the core reads ``ue.ipv4`` /
``ue.ipv6`` (``OGS_UE_STRING``/``OGS_IPV4_STRING`` in lib/dbi/subscription.c, and what
the WebUI and dbctl's ``static_ip`` write), so mplab writes ``ue.ipv4``.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Protocol

from harness.errors import MplabError
from harness.config.inventory import Inventory
from lte.secrets import Secrets, sim_keys

log = logging.getLogger("mplab.lte")

#: open5gs-dbctl's defaults: 1 Gbps AMBR (unit 0 = bps), QCI 9, ARP 8, PDN type 3 (IPv4v6).
AMBR_BPS = 1_000_000_000
DATABASE = "open5gs"
COLLECTION = "subscribers"


class SubscriberError(MplabError):
    """The subscriber database could not be reached or refused a write."""


def subscriber_document(imsi: str, k: str, opc: str, apn: str, *, amf: str = "8000",
                        ipv4: str | None = None) -> dict[str, Any]:
    """The subscriber document for one SIM (without ``_id``s, which MongoDB adds).

    Args:
        imsi: 15-digit IMSI.
        k, opc: Milenage keys, 32 hex digits each (stored upper-case, as the WebUI does).
        apn: the session's APN/DNN (the SMF/UPF ``dnn``).
        amf: authentication management field.
        ipv4: static UE address, or None for an address from the pool.
    """
    ambr = {"downlink": {"value": AMBR_BPS, "unit": 0}, "uplink": {"value": AMBR_BPS, "unit": 0}}
    session: dict[str, Any] = {
        "name": apn,
        "type": 3,
        "qos": {"index": 9, "arp": {"priority_level": 8, "pre_emption_capability": 1,
                                   "pre_emption_vulnerability": 2}},
        "ambr": {"downlink": dict(ambr["downlink"]), "uplink": dict(ambr["uplink"])},
        "pcc_rule": [],
    }
    if ipv4 is not None:
        session["ue"] = {"ipv4": ipv4}
    return {
        "schema_version": 1,
        "imsi": imsi,
        "msisdn": [], "imeisv": [], "mme_host": [], "mm_realm": [], "purge_flag": [],
        "slice": [{"sst": 1, "default_indicator": True, "session": [session]}],
        "security": {"k": k.upper(), "op": None, "opc": opc.upper(), "amf": amf},
        "ambr": ambr,
        "access_restriction_data": 32,
        "network_access_mode": 0,
        "subscribed_rau_tau_timer": 12,
        "__v": 0,
    }


def inventory_documents(inv: Inventory, secrets: Secrets, source: str = "secrets") -> list[dict[str, Any]]:
    """One document per receiver, keys from ``secrets`` (``ConfigError`` naming a missing IMSI)."""
    assert inv.lte is not None
    docs = []
    for r in inv.receivers:
        assert r.sim is not None  # the inventory refuses an lte section with a SIM-less receiver
        keys = sim_keys(secrets, r.sim.imsi, source)
        static = r.interfaces["lte"].address
        docs.append(subscriber_document(r.sim.imsi, keys.k, keys.opc, inv.lte.epc.apn, amf=keys.amf,
                                        ipv4=str(static) if static is not None else None))
    return docs


class Collection(Protocol):
    """The two pymongo ``Collection`` methods provisioning uses."""

    def replace_one(self, filter: dict, replacement: dict, upsert: bool = ...) -> Any: ...

    def find_one(self, filter: dict) -> Any: ...


@dataclass(frozen=True)
class ProvisionResult:
    """What one provisioning pass did."""

    inserted: tuple[str, ...]
    updated: tuple[str, ...]
    unchanged: tuple[str, ...]


def _strip_ids(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _strip_ids(v) for k, v in doc.items() if k != "_id"}
    if isinstance(doc, list):
        return [_strip_ids(v) for v in doc]
    return doc


def provision(collection: Collection, documents: list[dict[str, Any]]) -> ProvisionResult:
    """Upsert ``documents`` keyed on ``imsi``; documents already identical are left alone."""
    inserted, updated, unchanged = [], [], []
    for doc in documents:
        imsi = doc["imsi"]
        current = collection.find_one({"imsi": imsi})
        if current is not None and _strip_ids(current) == doc:
            unchanged.append(imsi)
            continue
        collection.replace_one({"imsi": imsi}, doc, upsert=True)
        (updated if current is not None else inserted).append(imsi)
        log.info("subscriber %s %s", imsi, "updated" if current is not None else "inserted")
    return ProvisionResult(tuple(inserted), tuple(updated), tuple(unchanged))


def open_collection(uri: str, timeout_s: float = 5.0):  # pragma: no cover - needs a MongoDB server
    """The ``open5gs.subscribers`` collection at ``uri`` (``SubscriberError`` when unreachable)."""
    import pymongo
    from pymongo.errors import PyMongoError

    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=int(timeout_s * 1000))
    try:
        client.admin.command("ping")
    except PyMongoError as exc:
        client.close()
        raise SubscriberError(f"cannot reach MongoDB at {uri}: {exc}; is mongod running on the EPC and "
                              "listening where lte.epc.provision_uri points?") from exc
    db = client.get_default_database(default=DATABASE)
    return db[COLLECTION]
