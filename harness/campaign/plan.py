"""Campaign planning: scenario x inventory -> an ordered list of samples.

Every sample has a stable id (``<cc>-n<receivers>-<mode>-s<index>``) so that a resumed
campaign skips the ones already recorded. The order is shuffled with the scenario's
seed (as Flent's BATCH_SHUFFLE does) so that slow drifts of the testbed do not line up
with one case. Pure: no root, no hosts.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from harness.errors import ConfigError
from harness.campaign.store import split_sample_id
from harness.config.inventory import Inventory
from harness.config.scenario import Scenario


@dataclass(frozen=True)
class SamplePlan:
    """One sample to run: a case and an index, and the receivers that take part."""

    sample_id: str
    case_id: str
    cc: str
    n_receivers: int
    mode: str
    index: int
    receivers: tuple[str, ...]
    #: A controller policy decides each receiver's interfaces (``mode`` is then "both": MPTCP on every
    #: receiver, the assignment restricts it); None for a plain mode sample.
    policy: str | None = None


def case_id(cc: str, n_receivers: int, mode: str) -> str:
    """``<cc>-n<k>-<mode>``."""
    return f"{cc}-n{n_receivers}-{mode}"


def policy_case_id(cc: str, n_receivers: int, policy: str) -> str:
    """``<cc>-n<k>-policy-<name>``: a case decided by a controller policy."""
    return f"{cc}-n{n_receivers}-policy-{policy}"


def select_receivers(names: list[str], k: int, index: int, how: str = "first") -> tuple[str, ...]:
    """The receivers of sample ``index`` (1-based) of a ``k``-receiver case, in inventory order."""
    if how == "first" or k >= len(names):
        return tuple(names[:k])
    start = (index - 1) % len(names)
    picked = {(start + j) % len(names) for j in range(k)}
    return tuple(n for j, n in enumerate(names) if j in picked)


def plan_campaign(scenario: Scenario, inventory: Inventory, source: str = "scenario") -> list[SamplePlan]:
    """All samples of ``scenario`` on ``inventory``, in run order.

    With ``receiver_selection: first`` the first *k* receivers of the inventory take part in a
    *k*-receiver case (the paper); with ``rotate`` sample *i* takes *k* consecutive receivers
    starting at receiver *i* (wrapping), so over N samples every receiver appears equally often.
    """
    n_max = len(inventory.receivers)
    too_many = [k for k in scenario.receiver_counts if k > n_max]
    if too_many:
        raise ConfigError(f"{too_many} receivers asked for, but inventory {inventory.name!r} has {n_max}",
                          source=source, field="receiver_counts")
    names = [r.name for r in inventory.receivers]
    plans = []
    for cc in scenario.congestion_controls:
        for k in scenario.receiver_counts:
            for mode in scenario.modes:
                cid = case_id(cc, k, mode)
                for i in range(1, scenario.samples_per_case + 1):
                    plans.append(SamplePlan(f"{cid}-s{i:03d}", cid, cc, k, mode, i,
                                            select_receivers(names, k, i, scenario.receiver_selection)))
            for pol in scenario.policies:
                cid = policy_case_id(cc, k, pol.name)
                for i in range(1, scenario.samples_per_case + 1):
                    plans.append(SamplePlan(f"{cid}-s{i:03d}", cid, cc, k, "both", i,
                                            select_receivers(names, k, i, scenario.receiver_selection), pol.name))
    if scenario.shuffle:
        random.Random(scenario.seed).shuffle(plans)
    return plans


def plan_samples(scenario: Scenario, inventory: Inventory, sample_ids: list[str],
                 source: str = "scenario") -> list[SamplePlan]:
    """The samples ``sample_ids`` name, in that order: the scenario's own, and those beyond its
    ``samples_per_case`` that ``mplab run --resume --make-up`` adds to a case (same case, the next indices; their
    receivers chosen as the scenario chooses them for that index)."""
    base = plan_campaign(scenario, inventory, source)
    by_id = {p.sample_id: p for p in base}
    by_case = {p.case_id: p for p in base}
    names = [r.name for r in inventory.receivers]
    out = []
    for sid in sample_ids:
        p = by_id.get(sid)
        if p is None:
            case, i = split_sample_id(sid) or ("", 0)
            like = by_case.get(case)
            if like is None:
                raise ConfigError(f"sample {sid!r} is of no case of scenario {scenario.name!r}", source=source)
            p = replace(like, sample_id=sid, index=i,
                        receivers=select_receivers(names, like.n_receivers, i, scenario.receiver_selection))
        out.append(p)
    return out
