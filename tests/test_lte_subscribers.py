"""Subscriber documents and idempotent provisioning; the secrets file.

No MongoDB server is used: Debian 12 ships none, the PyPI/npm packages that provide
mongod (pymongo-inmemory, mongodb-memory-server, mongodb-prebuilt) download it at run
time from fastdl.mongodb.org, which this machine cannot reach, and FerretDB (a
wire-compatible server) is not served by the Go module proxy here (403). So the
document is checked field by field against the structure ``open5gs-dbctl add`` writes,
and the upsert logic runs against mongomock (an in-memory stand-in for pymongo's
Collection) — a mock only because no real server can run here.
"""
from __future__ import annotations

import mongomock
import pytest

from harness.errors import ConfigError
from harness.deploy.secrets import load_secrets
from lte.subscribers import inventory_documents, provision, subscriber_document
from rigs.ltelab import KEYS, lab_inventory, write_secrets

K, OPC = "465b5ce8b199b49faa5f0a2ee238a6bc", "e8ed289deba952e4283b54e88e6183ca"


def test_document_matches_open5gs_dbctl_field_by_field():
    doc = subscriber_document("001010000000001", K, OPC, "internet")
    # Top level, as open5gs/open5gs misc/db/open5gs-dbctl `add imsi key opc` writes it (minus the _ids mongo adds).
    assert list(doc) == ["schema_version", "imsi", "msisdn", "imeisv", "mme_host", "mm_realm", "purge_flag", "slice",
                         "security", "ambr", "access_restriction_data", "network_access_mode",
                         "subscribed_rau_tau_timer", "__v"]
    assert doc["schema_version"] == 1 and doc["imsi"] == "001010000000001"
    for empty in ("msisdn", "imeisv", "mme_host", "mm_realm", "purge_flag"):
        assert doc[empty] == []
    assert doc["security"] == {"k": K.upper(), "op": None, "opc": OPC.upper(), "amf": "8000"}
    gbit = {"value": 1_000_000_000, "unit": 0}
    assert doc["ambr"] == {"downlink": gbit, "uplink": gbit}
    assert (doc["access_restriction_data"], doc["network_access_mode"], doc["subscribed_rau_tau_timer"],
            doc["__v"]) == (32, 0, 12, 0)
    [sl] = doc["slice"]
    assert sl["sst"] == 1 and sl["default_indicator"] is True
    [s] = sl["session"]
    assert s == {"name": "internet", "type": 3,
                 "qos": {"index": 9, "arp": {"priority_level": 8, "pre_emption_capability": 1,
                                             "pre_emption_vulnerability": 2}},
                 "ambr": {"downlink": gbit, "uplink": gbit}, "pcc_rule": []}
    # Every number is an int (dbctl writes NumberInt); a float would be stored as a BSON double.
    def walk(x):
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        else:
            assert not isinstance(x, float)
    walk(doc)


def test_static_address_is_written_where_the_core_reads_it():
    doc = subscriber_document("001010000000001", K, OPC, "internet", ipv4="10.45.0.11")
    assert doc["slice"][0]["session"][0]["ue"] == {"ipv4": "10.45.0.11"}


def test_inventory_documents_take_keys_from_secrets(tmp_path):
    inv = lab_inventory()
    secrets = load_secrets(write_secrets(tmp_path / "secrets.yaml"))
    docs = inventory_documents(inv, secrets)
    assert [d["imsi"] for d in docs] == list(KEYS)
    assert docs[1]["security"]["k"] == KEYS["001010000000002"][0]
    assert docs[0]["slice"][0]["session"][0]["ue"] == {"ipv4": "10.45.0.11"}
    assert docs[2]["slice"][0]["session"][0]["ue"] == {"ipv4": "10.45.0.13"}
    assert {d["slice"][0]["session"][0]["name"] for d in docs} == {"internet"}


def test_missing_keys_name_the_imsi(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("sim: {}\n")
    p.chmod(0o600)
    with pytest.raises(ConfigError, match="no keys for IMSI 001010000000001"):
        inventory_documents(lab_inventory(), load_secrets(p), str(p))


def test_provisioning_is_idempotent(tmp_path):
    coll = mongomock.MongoClient().open5gs.subscribers
    inv = lab_inventory()
    docs = inventory_documents(inv, load_secrets(write_secrets(tmp_path / "s.yaml")))
    first = provision(coll, docs)
    assert first.inserted == tuple(KEYS) and not first.updated
    second = provision(coll, docs)
    assert second.unchanged == tuple(KEYS) and not second.inserted and not second.updated
    assert coll.count_documents({}) == 3
    changed = [dict(d) for d in docs]
    changed[0] = subscriber_document(docs[0]["imsi"], "F" * 32, "E" * 32, "internet", ipv4="10.45.0.11")
    third = provision(coll, changed)
    assert third.updated == ("001010000000001",) and coll.count_documents({}) == 3
    assert coll.find_one({"imsi": "001010000000001"})["security"]["k"] == "F" * 32


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_secrets_file_must_be_private(tmp_path, mode):
    p = write_secrets(tmp_path / "s.yaml", mode)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_secrets(p)


def test_bad_key_is_refused_without_showing_it(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text('sim: {"001010000000001": {k: "12ab", opc: "' + "0" * 32 + '"}}\n')
    p.chmod(0o600)
    with pytest.raises(ConfigError, match=r"sim\.001010000000001\.k: k of IMSI 001010000000001 is not 32 hex") as ei:
        inventory_documents(lab_inventory(), load_secrets(p))
    assert "12ab" not in str(ei.value)
