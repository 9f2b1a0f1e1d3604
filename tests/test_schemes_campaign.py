"""The related schemes through the campaign runner on the emulated testbed (root).

Two receivers: n1 better on WiFi (20 vs 5 Mbit/s), n2 better on LTE (6 vs 12). es-mptcp reads RTT
and loss from the sender's subflows while probing; eemptcp's split is enforced as HTB caps at the
AP / eNB; mp-sdn regulates its Tier-2 caps every EI during the transfer and records each epoch.
"""
from __future__ import annotations

import pytest

from harness.campaign.campaign import start_campaign
from harness.config.scenario import Scenario
from harness.hosts.local import LocalHost
from harness.testbeds.clean import list_namespaces

from controller.setup2 import control_factory

from tests.conftest import small_inventory

FILE = 8 * 2**20


@pytest.mark.root
def test_related_schemes_measure_cap_and_regulate(tmp_path, prefix):
    sc = Scenario.model_validate({
        "name": "schemes-test", "congestion_controls": ["cubic"], "receiver_counts": [2], "modes": [],
        "policies": ["es-mptcp", "eemptcp", {"name": "mp-sdn", "params": {"ei_s": 1.0}}],
        "samples_per_case": 1, "file_size": "8M", "transfer_timeout_s": 90, "retries": 1, "settle_s": 0.1,
        "control": {"probe_s": 1.0, "warm_s": 0.3}})
    inv = small_inventory(prefix, [(20, 5), (6, 12)])
    camp = start_campaign(sc, inv, tmp_path / "runs", control_factory=control_factory)
    assert list_namespaces(LocalHost(), prefix) == []
    recs = {(r["policy"], r["receiver"]): r for r in camp.records()}
    assert len(recs) == 6
    for r in recs.values():
        assert r["status"] == "ok", r["error"]
        assert r["bytes"] == FILE
    # es-mptcp: RTT and loss per path from the sender's subflows, and its ranking in the record.
    es = recs[("es-mptcp", "n1")]
    assert set(es["path_stats"]) == {"wifi", "lte"}, es["path_stats"]
    assert all(0 < st["rtt_s"] < 1 and "ss -tin" in st["source"] for st in es["path_stats"].values())
    assert es["policy_trace"]["ranking"] and es["policy_trace"]["candidates"]
    # eemptcp: n1's split is WiFi alone at its probe rate (LTE at 5 cannot reach R = 20 with "both"
    # feasible only from x_L >= 15.2); the cap in force is the split.
    ee = recs[("eemptcp", "n1")]
    assert ee["assignment"] == "wifi" and set(ee["caps_mbit"]) == {"wifi"}
    assert ee["caps_mbit"]["wifi"] == pytest.approx(ee["probe_mbit"]["wifi"], rel=1e-6)
    # mp-sdn: both paths, the secondary capped, and one entry per EI with occupancy and limits.
    for rx, secondary in (("n1", "lte"), ("n2", "wifi")):
        r = recs[("mp-sdn", rx)]
        assert r["assignment"] == "both" and set(r["caps_mbit"]) == {secondary}
        assert r["policy_trace"]["primary"] == ("wifi" if rx == "n1" else "lte")
        epochs = r["control_epochs"]
        assert epochs and all("error" not in e for e in epochs), epochs
        assert all(set(e["occupancy"]) <= {"wifi", "lte"} for e in epochs)
        assert [e["epoch"] for e in epochs] == list(range(1, len(epochs) + 1))
        for prev, e in zip([None, *epochs], epochs):
            # Algorithm 2 as recorded: congested -> halved (floored), otherwise not lower.
            if prev is not None and e["occupancy"].get(secondary, 0) >= 0.85:
                assert e["tier2_mbit"][secondary] == pytest.approx(max(0.1, prev["tier2_mbit"][secondary] / 2))
