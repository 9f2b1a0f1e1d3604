"""A sample's energy does not depend on what ran before it: radio tails are accounted to their own sample
and never reach the next one. On the emulated testbed the tail is fast-forwarded in the power model (its
energy accounted from the model) rather than waited out. Root-only: a real emulated testbed, one receiver."""
from __future__ import annotations

import pytest

from harness.campaign.campaign import start_campaign
from harness.config.load import parse_model
from harness.upkeep.clean import clean_prefix
from harness.config.scenario import Scenario
from tests.conftest import small_inventory

pytestmark = pytest.mark.root


def test_wifi_after_lte_reads_what_wifi_after_wifi_reads(tmp_path, prefix):
    # WiFi slow enough for a 5 s window (the emulated meter's 100 ms counter sampling blurs window edges by
    # up to 0.1 s of dynamic power: < 1% here), LTE fast so that its samples are quick; its tail is the same.
    # An LTE tail (6 s) longer than the 5 s WiFi sample it could leak into: unwaited, it would cover the
    # whole WiFi window (+1.06 W on ~3.5 W). The shipped 11.6 s tail shows the same and costs 17 s more.
    inv = small_inventory(prefix, [(10, 30)], lte_tail_s=6.0)
    # Seed 8 runs wifi s003, wifi s002 (after a WiFi sample), lte s001, wifi s001 (after an LTE sample),
    # lte s003, lte s002: the WiFi-after-WiFi reference runs before any LTE tail could touch it.
    sc = parse_model(Scenario, {"name": "order", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["lte", "wifi"], "samples_per_case": 3, "file_size": "6M",
                                "settle_s": 0, "seed": 8}, "test")
    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="order")
    finally:
        clean_prefix(prefix, nested=False)
    recs = {r["sample_id"]: r for r in c.records()}
    order = [r["sample_id"] for r in c.records()]
    assert order == ["cubic-n1-wifi-s003", "cubic-n1-wifi-s002", "cubic-n1-lte-s001", "cubic-n1-wifi-s001",
                     "cubic-n1-lte-s003", "cubic-n1-lte-s002"]
    assert [r["status"] for r in recs.values()] == ["ok"] * 6, [r["error"] for r in recs.values()]
    after_lte, after_wifi = recs["cubic-n1-wifi-s001"], recs["cubic-n1-wifi-s002"]
    assert not after_lte["flags"] and not after_wifi["flags"], (after_lte["flags"], after_wifi["flags"])
    # Power, not energy: energy also follows the transfer's duration, which a busy machine stretches.
    ratio = after_lte["mean_power_w"] / after_wifi["mean_power_w"]
    assert abs(ratio - 1) < 0.02, ratio
    profile = inv.emulation.power_profile
    for sid in ("cubic-n1-lte-s001", "cubic-n1-lte-s002", "cubic-n1-lte-s003"):
        r = recs[sid]
        # The LTE tail was charged to its own sample: most of it fast-forwarded in the model, the rest metered.
        assert r["idle_wait_s"] >= profile.lte.tail_s - 0.15
        assert r["tail_skipped_s"] > 0.5 * profile.lte.tail_s
        full_j = (profile.base_w + profile.lte.tail_mw / 1000) * profile.lte.tail_s
        assert r["tail_energy_j"] == pytest.approx(full_j, rel=0.05)
    for r in (after_lte, after_wifi):
        assert r["idle_wait_s"] < 2 and r["tail_energy_j"] is not None
