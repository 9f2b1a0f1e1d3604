"""Making up the cases a campaign left short: ``mplab run --resume CAMPAIGN --make-up``.

A case is short when fewer of its samples are usable than the scenario's ``samples_per_case``: a sample
failed after its retries, or a record of it carries a flag (a fault under the congestion control, a meter
gap), which is what a dataset leaves out (``records.unusable_reason``). A sample still pending counts as
usable: it has not run yet. The make-up adds to each short case as many samples as it lacks, with the case's
next indices (``<case>-s046`` after ``-s045``), to the campaign's plan: one line of ``makeup.jsonl``
(``Campaign.add_make_up``); the manifest and the records are never rewritten, and the failed and flagged
records stay where they are, saying why. The added samples then run as any pending sample does, in an order
shuffled with the scenario's seed and the number of earlier additions. Each make-up adds what is short then,
once: a case that fails again is short again, for the technician to look at before asking for more.
"""
from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from pydantic import ValidationError

from harness.campaign.records import SampleRecord, unusable_reason
from harness.campaign.store import SAMPLE_ID, Campaign
from harness.config.scenario import Scenario


@dataclass(frozen=True)
class MakeUp:
    """What a make-up adds: the usable samples each short case lacked, and the ids of the samples added."""

    short: dict[str, int]
    samples: list[str]

    def describe(self, dry_run: bool = False) -> str:
        """One line: what was added (``dry_run``: what would be)."""
        if not self.samples:
            return (f"make-up: every case has its usable samples (or has them pending); nothing "
                    f"{'would be ' if dry_run else ''}added")
        cases = ", ".join(f"{c} {n}" for c, n in sorted(self.short.items()))
        return (f"make-up: {len(self.samples)} sample(s) {'would be ' if dry_run else ''}added to {len(self.short)} "
                f"short case(s): {cases}")


def usable_samples(records: list[dict]) -> dict[str, bool]:
    """Per recorded sample: whether every one of its records is usable (``unusable_reason`` None)."""
    out: dict[str, bool] = {}
    for raw in records:
        try:
            ok = unusable_reason(SampleRecord.model_validate(raw)) is None
        except ValidationError:
            ok = False
        sid = raw.get("sample_id")
        out[sid] = out.get(sid, True) and ok
    return out


def plan_make_up(campaign: Campaign, scenario: Scenario) -> MakeUp:
    """The samples that would make up ``campaign``'s short cases now (nothing is written)."""
    done = campaign.completed()
    usable = usable_samples(campaign.records())
    count: Counter = Counter()
    top: dict[str, int] = {}
    for sid in campaign.plan:
        m = SAMPLE_ID.match(sid)
        if m is None:   # a plan made by hand: no case to make up
            continue
        top[m["case"]] = max(top.get(m["case"], 0), int(m["index"]))
        count[m["case"]] += sid not in done or usable.get(sid, False)
    short = {c: scenario.samples_per_case - count[c] for c in top if count[c] < scenario.samples_per_case}
    samples = [f"{c}-s{top[c] + j:03d}" for c, n in short.items() for j in range(1, n + 1)]
    if scenario.shuffle:
        random.Random(f"{scenario.seed}:make-up:{len(campaign.make_ups())}").shuffle(samples)
    return MakeUp(short, samples)


def make_up(campaign: Campaign, scenario: Scenario) -> MakeUp:
    """Add the samples that make up ``campaign``'s short cases to its plan (under its lock)."""
    with campaign.lock():
        added = plan_make_up(campaign, scenario)
        if added.samples:
            campaign.add_make_up(added.samples, added.short)
    return added
