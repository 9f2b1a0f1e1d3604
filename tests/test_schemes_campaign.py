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

from controller import schemes
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
    # eemptcp: the split of the pure rule on the recorded probes is what ran, as caps (both paths
    # feasible only from x_L >= 15.2 Mbit/s, so here one path at its probe rate).
    for rx in ("n1", "n2"):
        ee = recs[("eemptcp", rx)]
        want = schemes.eemptcp(ee["probe_mbit"], schemes.PAPER_POWER)
        assert ee["caps_mbit"] == pytest.approx(dict(want.caps_mbit))
        assert ee["caps_by"] == "htb", "nftables steering: the caps are HTB on the gateways' ports"
        assert ee["assignment"] == ("both" if len(want.paths) == 2 else next(iter(want.paths)))
    # mp-sdn: both paths, the secondary capped, and one entry per EI with occupancy and limits.
    for rx in ("n1", "n2"):
        r = recs[("mp-sdn", rx)]
        secondary = min(r["probe_mbit"], key=r["probe_mbit"].get)
        assert r["assignment"] == "both" and set(r["caps_mbit"]) == {secondary}
        assert r["policy_trace"]["primary"] == max(r["probe_mbit"], key=r["probe_mbit"].get)
        epochs = r["control_epochs"]
        assert epochs and all("error" not in e for e in epochs), epochs
        assert all(set(e["occupancy"]) <= {"wifi", "lte"} for e in epochs)
        assert [e["epoch"] for e in epochs] == list(range(1, len(epochs) + 1))
        # The loop starts at the release, after the probes' tails were waited out: its epochs cover
        # the transfer, not the idle wait before it (probe_idle_wait_s, about the LTE tail).
        assert r["probe_idle_wait_s"] > 5.0
        assert len(epochs) <= r["duration_s"] / 1.0 + 2, (len(epochs), r["duration_s"])
        for prev, e in zip([None, *epochs], epochs):
            # Algorithm 2 as recorded: congested -> halved (floored), otherwise not lower.
            if prev is not None and e["occupancy"].get(secondary, 0) >= 0.85:
                assert e["tier2_mbit"][secondary] == pytest.approx(max(0.1, prev["tier2_mbit"][secondary] / 2))
