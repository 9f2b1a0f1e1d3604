"""A third testbed kind, defined here and registered at run time, runs a policy campaign (root).

The seam's promise: a new kind of testbed is one class and one registry line, with no edit in the
runner, the campaign or the controller. ``RenamedPathsTestbed`` is a variant of the emulated
testbed that names everything the controller touches differently (the gateways' devices towards
the receivers, the sender's devices towards the gateways) and names itself differently from its
namespace prefix. Every name is declared (``Testbed.downlink_device``, ``sender_device``, ``name``),
so code that rebuilt ``rx<i>`` or ``to-ap``, compared kind strings, or probed attributes instead of
asking the testbed fails here: the rate caps of ``eemptcp`` (HTB on the declared devices) could not
be set up, and the records would carry the wrong name or energy source.
"""
from __future__ import annotations

import json
from typing import ClassVar

import pytest
from pydantic import ValidationError

from harness.campaign.campaign import start_campaign
from harness.config import inventory as inventory_module
from harness.config.inventory import Inventory
from harness.config.scenario import Scenario
from harness.hosts.local import LocalHost
from harness.testbeds import kinds
from harness.upkeep.clean import list_namespaces
from harness.testbeds.emulated import EmulatedTestbed

from controller import schemes
from controller.setup2 import control_factory

from tests.conftest import small_inventory

KIND = "netns-renamed"
FILE = 2 * 2**20


class RenamedPathsTestbed(EmulatedTestbed):
    """The emulated topology with other device names and its own name; what it had at teardown is kept."""

    kind = KIND
    #: Every instance built (the campaign builds its own from the inventory).
    built: ClassVar[list[RenamedPathsTestbed]] = []

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        #: Devices of the gateways and the sender just before teardown (what the campaign ran on).
        self.seen_devices: dict[str, set[str]] = {}
        self.built.append(self)

    @property
    def name(self) -> str:
        return f"renamed-{self.prefix.rstrip('-')}"

    def downlink_device(self, receiver: str, radio: str) -> str:
        return f"{radio[0]}dl{self.index[receiver]}"  # wdl1 in the AP, ldl1 in the eNB

    def sender_device(self, radio: str) -> str:
        return f"up-{radio}"

    def teardown(self) -> None:
        if self._up and not self.seen_devices:
            for where, host in (("ap", self.gateway("wifi")), ("enb", self.gateway("lte")), ("snd", self.sender)):
                links = json.loads(host.run(["ip", "-j", "link", "show"], check=False).stdout or "[]")
                self.seen_devices[where] = {ln["ifname"] for ln in links}
        super().teardown()


@pytest.mark.root
def test_a_kind_registered_at_run_time_runs_a_capping_policy_campaign(tmp_path, prefix, monkeypatch):
    # Registrations are process-wide: keep them to this test.
    monkeypatch.setattr(kinds, "TESTBEDS", dict(kinds.TESTBEDS))
    monkeypatch.setattr(inventory_module, "INVENTORY_KINDS", dict(inventory_module.INVENTORY_KINDS))
    doc = small_inventory(prefix, [(20, 5), (6, 12)], lte_tail_s=1.0).model_dump(mode="json")
    doc["kind"] = KIND
    with pytest.raises(ValidationError, match=f"unknown testbed kind '{KIND}'"):
        Inventory.model_validate(doc)

    kinds.register_testbed(KIND, RenamedPathsTestbed)  # the one registry line

    inv = Inventory.model_validate(doc)
    monkeypatch.setattr(RenamedPathsTestbed, "built", [])
    sc = Scenario.model_validate({
        "name": "third-kind", "congestion_controls": ["cubic"], "receiver_counts": [2], "modes": [],
        "policies": ["eemptcp", "all-lte"], "samples_per_case": 1, "file_size": "2M", "transfer_timeout_s": 60,
        "retries": 0, "settle_s": 0.1, "control": {"probe_s": 1.0, "warm_s": 0.3}})
    camp = start_campaign(sc, inv, tmp_path / "runs", control_factory=control_factory)
    assert list_namespaces(LocalHost(), prefix) == []
    [tb] = RenamedPathsTestbed.built
    # It ran on the declared devices: none of the emulated testbed's own names existed.
    assert {"wdl1", "wdl2"} <= tb.seen_devices["ap"] and {"ldl1", "ldl2"} <= tb.seen_devices["enb"]
    assert {"up-wifi", "up-lte"} <= tb.seen_devices["snd"]
    assert not ({"rx1", "rx2", "to-ap", "to-enb"} & set().union(*tb.seen_devices.values()))

    recs = {(r["policy"], r["receiver"]): r for r in camp.records()}
    assert len(recs) == 4
    for r in recs.values():
        assert r["status"] == "ok", r["error"]
        assert r["bytes"] == FILE
        # What the kind declares, not what its kind string or attributes would suggest.
        assert r["testbed_kind"] == KIND and r["testbed"] == tb.name != prefix
        assert r["energy_source"] == "emulated"
        assert r["lte_access"] == "emulated-channel"
        assert r["steering"] == "nftables"
    for rx in ("n1", "n2"):
        ee = recs[("eemptcp", rx)]
        want = schemes.eemptcp(ee["probe_mbit"], schemes.PAPER_POWER)
        assert ee["caps_mbit"] == pytest.approx(dict(want.caps_mbit))
        assert ee["caps_by"] == "htb", "the caps are HTB on the devices the testbed declares"
        assert recs[("all-lte", rx)]["assignment"] == "lte"
    manifest = json.loads((camp.path / "manifest.json").read_text())
    assert manifest["testbed"]["kind"] == KIND
    assert manifest["testbed"]["energy_source"] == tb.energy_note()
    assert manifest["parallel"]["names"] == [tb.name]
    assert manifest["testbed"]["lte_access"] == {"n1": {"kind": "emulated-channel"},
                                                 "n2": {"kind": "emulated-channel"}}
