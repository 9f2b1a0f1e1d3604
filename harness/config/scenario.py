"""Scenarios: what a sweep runs.

Congestion controls x receiver counts x interface modes x samples per case, with
the file size, deadlines and the shuffle seed. Pure data, checked before anything
runs; ``harness.campaign.plan`` turns a scenario and an inventory into a list of samples.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from harness.cc import ALGORITHMS
from harness.config.load import Strict, load_yaml_model

SCHEMA_VERSION = 1

#: wifi: single-path TCP over WiFi; lte: single-path TCP over LTE; both: MPTCP over both.
Mode = Literal["wifi", "lte", "both"]
MODES: tuple[Mode, ...] = ("wifi", "lte", "both")
#: The radios each mode uses.
MODE_RADIOS: dict[str, tuple[str, ...]] = {"wifi": ("wifi",), "lte": ("lte",), "both": ("wifi", "lte")}

#: Physical bounds (the schema states them; docs/records.md): a sample moves at most 100 GiB per
#: receiver, a case has at most 100,000 samples, and a whole plan at most 1,000,000 (checked before it
#: is built: a plan is a list in memory).
MAX_FILE_BYTES = 100 * 1024**3
MAX_SAMPLES_PER_CASE = 100_000
MAX_PLAN_SAMPLES = 1_000_000
MAX_RECEIVERS = 1000
DAY_S = 86_400.0

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """Bytes in ``text``: a plain number or a K/M/G suffix, binary as in iperf3 (``60M`` = 60 MiB)."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {text!r} (use e.g. 60M, 512K or a number of bytes)")
    mult = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2).upper()]
    try:
        return int(float(m.group(1)) * mult)
    except (OverflowError, ValueError):  # 400 digits: float gives inf
        raise ValueError(f"not a size: {text!r} is out of range") from None


class PolicySpec(Strict):
    """A controller policy and its parameters (``controller.policy.POLICIES`` names them)."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]
    params: dict[str, float | int | str] = Field(default_factory=dict)


class ControlSpec(Strict):
    """How a controller measures and steers for policy samples (Setup II)."""

    steering: Literal["nftables", "openflow", "host"] = "nftables"
    probe_s: Annotated[float, Field(gt=0, le=3600)] = Field(default=2.0, description="probing window per network (all on WiFi, "
                                                             "then all on LTE), after warm_s")
    probe_bytes: Annotated[int, Field(gt=0, le=MAX_FILE_BYTES)] | None = Field(
        default=None, description="probe by size instead of time: bytes per receiver per network")
    measure_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        default=2.0, description="re-measurement window under an assignment (ref-is-tuned), after warm_s")
    warm_s: Annotated[float, Field(ge=0, le=600)] = Field(default=0.5, description="slow start left out of every window")


class Scenario(Strict):
    """A sweep definition."""

    schema_version: Literal[1] = 1
    # At most 80 characters: a campaign's id is <name>-<UTC time> (16 more), and ids are at most 100.
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)]
    description: Annotated[str, Field(max_length=10_000)] = ""
    inventory: Annotated[str, Field(min_length=1, max_length=4096)] = Field(default="../inventory/emulated.yaml",
                           description="inventory used unless the command line names another; a relative "
                                       "path is relative to the scenario file's folder")
    congestion_controls: list[str] = Field(min_length=1)
    receiver_counts: list[Annotated[int, Field(gt=0, le=MAX_RECEIVERS)]] = Field(min_length=1, max_length=100)
    modes: list[Mode] = Field(default_factory=list)
    #: Controller policies run as cases beside the modes (names, or {name, params}).
    policies: list[PolicySpec] = Field(default_factory=list)
    model: str | None = Field(default=None, description="exported model for policies that need one: a "
                                                        "models/<name> folder (relative to the scenario file's "
                                                        "folder, as `inventory` is) or a registered model, "
                                                        "models:/NAME@alias or models:/NAME/VERSION")
    control: ControlSpec = Field(default_factory=ControlSpec)
    samples_per_case: Annotated[int, Field(gt=0, le=MAX_SAMPLES_PER_CASE)]
    file_size: str = Field(description="bytes per receiver per sample, e.g. 60M (MiB, as iperf3 counts)")
    transfer_timeout_s: Annotated[float, Field(gt=0, le=DAY_S)] = 300.0
    retries: Annotated[int, Field(ge=0, le=10)] = 2
    settle_s: Annotated[float, Field(ge=0, le=3600)] = Field(
        default=0.0, description="extra pause between samples (s, testbed time: / S at a speed-up); the "
                                 "testbed's shaping queues are waited empty by measurement and radio tails are "
                                 "accounted by each sample anyway")
    idle_tolerance_w: Annotated[float, Field(ge=0, le=1000)] = Field(
        default=0.05, description="between samples a receiver is idle when its mean power is within this of its "
                                  "idle power (W)")
    idle_timeout_s: Annotated[float, Field(gt=0, le=DAY_S)] = Field(
        default=30.0, description="longest wait for receivers to be idle after a sample; beyond it the records are "
                                  "flagged tail-unsettled (s)")
    speedup: Annotated[float, Field(ge=1, le=64)] = Field(
        default=1.0, description="run the emulated testbed this many times faster than real time: rates x S, "
                                 "delays and radio time constants / S, buffers unchanged in bytes; records are "
                                 "written in real time (harness.emulation.speedup). Setup I mode samples only; "
                                 "`mplab run --speedup S` overrides it")
    speedup_by_mode: dict[Mode, Annotated[float, Field(ge=1, le=64)]] | None = Field(
        default=None, description="per interface mode, a speed-up in place of `speedup` for that mode's samples "
                                  "(what `mplab run --speedup auto` writes where the validation let modes go "
                                  "different speeds); the campaign runs one phase per speed-up, each on testbeds "
                                  "built for it")
    shuffle: bool = True
    seed: Annotated[int, Field(ge=0, lt=2**63)] = 1
    receiver_selection: Literal["first", "rotate"] = Field(
        default="first", description="which receivers a k-receiver case uses: first (the first k of the inventory, "
                                     "as the paper) or rotate (sample i starts at receiver i, so every receiver "
                                     "appears in each count)")

    @field_validator("congestion_controls")
    @classmethod
    def _known_cc(cls, v: list[str]) -> list[str]:
        for name in v:
            if name not in ALGORITHMS:
                raise ValueError(f"unknown congestion control {name!r} (known: {', '.join(ALGORITHMS)})")
        if len(set(v)) != len(v):
            raise ValueError("congestion controls repeated")
        return v

    @field_validator("receiver_counts", "modes")
    @classmethod
    def _unique(cls, v: list) -> list:
        if len(set(v)) != len(v):
            raise ValueError("values repeated")
        return v

    @field_validator("policies", mode="before")
    @classmethod
    def _policy_names(cls, v: object) -> object:
        # A bare name is a policy with default parameters.
        if isinstance(v, list):
            return [{"name": p} if isinstance(p, str) else p for p in v]
        return v

    @field_validator("policies")
    @classmethod
    def _unique_policies(cls, v: list[PolicySpec]) -> list[PolicySpec]:
        names = [p.name for p in v]
        if len(set(names)) != len(names):
            raise ValueError(f"policies repeated: {names}")
        return v

    @model_validator(mode="after")
    def _something_to_run(self) -> Scenario:
        if not self.modes and not self.policies:
            raise ValueError("give at least one of modes (wifi, lte, both) or policies")
        total = self.n_cases * self.samples_per_case
        if total > MAX_PLAN_SAMPLES:  # before a plan of that size is ever built
            raise ValueError(f"{self.n_cases} case(s) x {self.samples_per_case} samples = {total:,} samples, more "
                             f"than a campaign may plan ({MAX_PLAN_SAMPLES:,}): split the sweep")
        return self

    @field_validator("file_size")
    @classmethod
    def _size(cls, v: str) -> str:
        n = parse_size(v)
        if n <= 0:
            raise ValueError("file size must be positive")
        if n > MAX_FILE_BYTES:
            raise ValueError(f"file size {n:,} bytes is more than {MAX_FILE_BYTES // 1024**3} GiB per receiver and "
                             "sample")
        return v

    @property
    def file_bytes(self) -> int:
        """File size in bytes."""
        return parse_size(self.file_size)

    def speedup_for(self, mode: str, policy: bool = False) -> float:
        """The S a sample of ``mode`` runs at (a policy sample: ``speedup``, which policies hold to 1)."""
        if policy or not self.speedup_by_mode:
            return self.speedup
        return self.speedup_by_mode.get(mode, self.speedup)  # type: ignore[call-overload]

    @property
    def speedups(self) -> list[float]:
        """Every S this scenario's samples run at, highest first (one phase of a campaign each)."""
        used = {self.speedup_for(m) for m in self.modes} | ({self.speedup} if self.policies else set())
        return sorted(used, reverse=True)

    @property
    def n_cases(self) -> int:
        """Number of (cc, receiver count, mode or policy) cases."""
        return len(self.congestion_controls) * len(self.receiver_counts) * (len(self.modes) + len(self.policies))


def scenario_inventory(scenario: Scenario, scenario_path: str | Path) -> Path:
    """The inventory a scenario file names, resolved from the scenario's folder (not the current directory)."""
    p = Path(scenario.inventory).expanduser()
    return p if p.is_absolute() else Path(scenario_path).parent / p


def with_model_resolved(scenario: Scenario, scenario_path: str | Path) -> Scenario:
    """The scenario with its ``model`` resolved from the scenario's folder, as its inventory is (a registered
    model, ``models:/NAME@alias``, is pinned to ``models:/NAME/VERSION``: the version the alias names now).

    The campaign's manifest then holds the absolute path, so ``--resume`` finds the same model
    from any directory.
    """
    if scenario.model is None:
        return scenario
    if scenario.model.startswith("models:/"):  # a registered model: pinned to the version its alias names now
        from harness.model_registry import pin

        return scenario.model_copy(update={"model": pin(scenario.model)})
    p = Path(scenario.model).expanduser()
    if p.is_absolute():
        return scenario
    return scenario.model_copy(update={"model": str((Path(scenario_path).parent / p).resolve())})


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file (``ConfigError`` naming file, field and reason)."""
    return load_yaml_model(Scenario, path)
