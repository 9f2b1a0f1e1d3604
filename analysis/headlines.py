"""The related papers' headline results (``harness/data/paper/related-schemes.yaml``): loaded, checked, compared.

Each mplab policy that stands for a published scheme carries the paper's headlines: a claim, the
metric it is about, the paper's relative change against the paper's baseline, the mplab policy of
the same kind as that baseline (``all-both`` for "MPTCP"), where the number holds (simulator or
testbed, sizes) and whether it was checked against the paper's own numbers. The report puts each
beside the same kind of change computed from mplab's records (``analysis.schemes``).

A bad file is one ``ConfigError`` line naming the file and the field (exit 2 on the command line).
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import ConfigError
from harness.resources import paper_file

HEADLINES_FILE = paper_file("related-schemes.yaml")

Metric = Literal["energy", "throughput", "efficiency", "completion_time", "power"]
#: metric -> (what it is called in a sentence, True when higher is better)
METRIC_WORDS: dict[str, tuple[str, bool]] = {
    "energy": ("energy", False), "throughput": ("throughput", True),
    "efficiency": ("energy efficiency (bits/J)", True), "completion_time": ("completion time", False),
    "power": ("power", False),
}
#: the mplab policies a headline's baseline may map to (the fixed assignments)
BASELINE_POLICIES = ("all-both", "all-wifi", "all-lte")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Baseline(_Frozen):
    paper: str
    mplab: str | None
    match: str

    @model_validator(mode="after")
    def _known(self) -> Baseline:
        if self.mplab is not None and self.mplab not in BASELINE_POLICIES:
            raise ValueError(f"baseline.mplab must be one of {', '.join(BASELINE_POLICIES)} or null, "
                             f"not {self.mplab!r}")
        return self


class Headline(_Frozen):
    claim: str
    metric: Metric
    change_pct: float
    baseline: Baseline
    source: str
    verified: bool
    paper_value: float | None = None
    baseline_value: float | None = None
    unit: str | None = None
    caveat: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Headline:
        # Where the paper gives both numbers, the change must be theirs (a transcription check).
        if self.paper_value is not None and self.baseline_value is not None:
            got = (self.paper_value / self.baseline_value - 1) * 100
            if abs(got - self.change_pct) > 0.5:
                raise ValueError(f"change_pct {self.change_pct} disagrees with paper_value/baseline_value "
                                 f"({got:+.1f} %)")
        return self

    @property
    def paper_text(self) -> str:
        """``-16.2 % energy vs lowRTT ...``: the paper's side of the comparison."""
        return f"{self.change_pct:+.4g} % {METRIC_WORDS[self.metric][0]} vs {self.baseline.paper}"


class Scheme(_Frozen):
    paper: str
    setting: str
    headlines: list[Headline] = Field(default_factory=list)
    note: str | None = None


class Headlines(_Frozen):
    """The data file: per mplab policy, the paper it stands for and its headlines."""

    schema_version: Literal[1]
    source: str
    schemes: dict[str, Scheme]

    def of(self, policy: str) -> Scheme | None:
        return self.schemes.get(policy)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def load_headlines(path: Path = HEADLINES_FILE) -> Headlines:
    """Read and check the headlines file (``ConfigError``, one line naming the file and field, otherwise)."""
    try:
        doc = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read the papers' headlines: {exc.strerror}", source=str(path)) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {_one_line(exc)}", source=str(path)) from None
    try:
        return Headlines.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"malformed headlines: {_one_line(err['msg'])}", source=str(path),
                          field=".".join(map(str, err["loc"])) or None) from None
