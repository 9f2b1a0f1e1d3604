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
from harness.campaign.store import Campaign, split_sample_id
from harness.config.scenario import Scenario
from harness.errors import StoreError


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


def usable_samples(campaign: Campaign) -> dict[str, bool]:
    """Per recorded sample: whether every one of its records is usable (``unusable_reason`` None). A record the
    schema refuses is ``StoreError`` naming it, as a dataset build refuses it."""
    out: dict[str, bool] = {}
    for raw in campaign.records():
        sid = raw.get("sample_id")
        try:
            ok = unusable_reason(SampleRecord.model_validate(raw)) is None
        except ValidationError as exc:
            err = exc.errors()[0]
            raise StoreError(f"{campaign.samples_path}: the record of sample {sid} receiver {raw.get('receiver')} "
                             f"is malformed ({'.'.join(str(x) for x in err['loc'])}: {err['msg']}); nothing was "
                             "added") from None
        out[sid] = out.get(sid, True) and ok
    return out


def _taken(campaign: Campaign) -> dict[str, int]:
    """Per case, the highest index any trace of the campaign uses: its plan, a damaged line of samples.jsonl, a
    raw output directory (an added sample never takes an id something was written under)."""
    ids = set(campaign.plan) | {d.sample_id for d in campaign.damaged() if isinstance(d.sample_id, str)}
    raw = campaign.path / "raw"
    if raw.is_dir():
        ids |= {d.name.removeprefix(".partial-") for d in raw.iterdir()}
    top: dict[str, int] = {}
    for sid in ids:
        split = split_sample_id(sid)
        if split is not None:
            top[split[0]] = max(top.get(split[0], 0), split[1])
    return top


def plan_make_up(campaign: Campaign, scenario: Scenario) -> MakeUp:
    """The samples that would make up ``campaign``'s short cases now (nothing is written)."""
    usable = usable_samples(campaign)   # every recorded sample (records() holds the complete ones), usable or not
    count: Counter = Counter()           # in plan order of the cases
    for sid in campaign.plan:
        split = split_sample_id(sid)
        if split is None:   # a plan made by hand: no case to make up
            continue
        count[split[0]] += usable.get(sid, sid not in usable)   # not recorded: pending, counted as usable
    short = {c: scenario.samples_per_case - n for c, n in count.items() if n < scenario.samples_per_case}
    top = _taken(campaign)
    samples = [f"{c}-s{top[c] + j:03d}" for c, n in short.items() for j in range(1, n + 1)]
    if scenario.shuffle:
        random.Random(f"{scenario.seed}:make-up:{len(campaign.make_ups())}").shuffle(samples)
    return MakeUp(short, samples)


def failed_in_short_cases(campaign: Campaign, scenario: Scenario) -> list[str]:
    """The failed samples of the cases a make-up would still find short (after a make-up's run: what is left)."""
    short = plan_make_up(campaign, scenario).short
    return sorted({r["sample_id"] for r in campaign.records() if r["sample_status"] != "ok" and r["case_id"] in short})


def make_up(campaign: Campaign, scenario: Scenario) -> MakeUp:
    """Add the samples that make up ``campaign``'s short cases to its plan (under its lock)."""
    with campaign.lock():
        added = plan_make_up(campaign, scenario)
        if added.samples:
            campaign.add_make_up(added.samples, added.short)
    return added
