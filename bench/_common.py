"""Shared set-up for benches: an emulated testbed, a scratch campaign and the real Runner."""
from __future__ import annotations

import contextlib
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.campaign.campaign import resolve_ccs
from harness.upkeep.clean import clean_prefix
from harness.testbeds.emulated import EmulatedTestbed
from harness.config.inventory import Inventory, load_inventory
from harness.meters.recorder import Recorder
from harness.campaign.plan import SamplePlan, case_id
from harness.campaign.runner import Runner
from harness.config.scenario import Scenario
from harness.campaign.store import Campaign

REPO = Path(__file__).resolve().parent.parent


def inventory(prefix: str, path: Path = REPO / "inventory" / "emulated.yaml") -> Inventory:
    inv = load_inventory(path)
    data = inv.model_dump(mode="json")
    data["emulation"]["namespace_prefix"] = prefix
    return Inventory.model_validate(data)


def plan(cc: str, mode: str, receivers: tuple[str, ...], index: int) -> SamplePlan:
    cid = case_id(cc, len(receivers), mode)
    return SamplePlan(f"{cid}-{'_'.join(receivers)}-s{index:03d}", cid, cc, len(receivers), mode, index, receivers)


@contextlib.contextmanager
def runner(prefix: str, scenario: Scenario, inventory_path: Path = REPO / "inventory" / "emulated.yaml",
           ) -> Iterator[tuple[Runner, EmulatedTestbed]]:
    """A Runner on an inventory (default: the 9-receiver emulated one), recording into a throw-away campaign."""
    inv = inventory(prefix, inventory_path)
    tb = EmulatedTestbed(inv)
    ccs = resolve_ccs(scenario, tb)
    tb.preflight(list(ccs.values()))
    with tempfile.TemporaryDirectory(prefix="mplab-bench-") as tmp:
        campaign = Campaign.create(Path(tmp), "bench", {"plan": []})
        try:
            tb.setup(list(ccs.values()))
            meters = tb.meters()
            for m in meters.values():
                m.open()
            with Recorder(meters) as rec:
                yield Runner(tb, campaign, scenario, ccs, rec, {"kernel": None}), tb
        finally:
            tb.teardown()
            clean_prefix(prefix)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]
