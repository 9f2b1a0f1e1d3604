"""The seam through which the campaign runner reaches a controller (Setup II), and nothing more.

A scenario with ``policies:`` plans policy samples beside the mode samples. For each one the
runner asks a ``SampleControl`` to ``prepare`` it (probe, decide, steer: whatever the policy
needs) and gets back each receiver's interface mode and the fields the controller adds to that
receiver's record; it then waits until every receiver is idle again (the probes' radio tails
must not leak into the measured transfer, ``harness.meters.idle``), calls ``started`` (periodic
policies start their loop there), runs the transfer as MPTCP on every receiver, each connection
starting on a path its mode allows, and calls ``finish``. The harness never imports a
controller: ``mplab.cli`` passes a ``ControlFactory`` to the campaign, which builds the control
before anything starts (so a bad policy or model is refused first) and sets it up once the
testbed exists. A control steers the one testbed it was set up on: with ``--testbeds K`` the
factory is called once per copy, and on ``--cluster`` each node calls it for its own testbed
(``harness.campaign.campaign.build_controls``); copies never share one.

The record fields a control adds are listed in ``CONTROL_FIELDS`` (docs/records.md) and are
``None`` in records of mode samples.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from harness.campaign.plan import SamplePlan
    from harness.config.scenario import Scenario
    from harness.testbeds.base import Testbed
    from harness.upkeep.preflight import Check

#: Record fields a control fills for policy samples (None otherwise); documented in docs/records.md.
CONTROL_FIELDS: tuple[str, ...] = (
    "policy", "policy_params", "steering", "assignment", "probe_mbit", "predicted_energy_j",
    "predicted_energy_total_j", "adopted", "decision_latency_s", "control_s", "path_stats", "caps_mbit",
    "caps_by", "policy_trace", "control_epochs",
)


@dataclass(frozen=True)
class PreparedSample:
    """What a control decided for one sample."""

    #: Receiver -> "wifi", "lte" or "both".
    modes: dict[str, str]
    #: Receiver -> record fields (keys from CONTROL_FIELDS).
    fields: dict[str, dict] = field(default_factory=dict)


class SampleControl(Protocol):
    """A controller as the runner sees it."""

    def preflight(self, testbed: Testbed) -> list[Check]:
        """What the controller needs of ``testbed`` (e.g. a lab switch that speaks OpenFlow 1.3), checked with
        the testbed's preflight before anything is set up; no side effects. A control that needs nothing
        special returns []."""
        ...

    def describe(self) -> dict:
        """The manifest's ``control`` section (policies, steering, model); no side effects."""
        ...

    def setup(self, testbed: Testbed) -> None:
        """Once per campaign, after the testbed is up (install steering, open the model)."""
        ...

    def prepare(self, plan: SamplePlan) -> PreparedSample:
        """Before a policy sample's transfer: measure, decide and steer."""
        ...

    def started(self, plan: SamplePlan) -> None:
        """Right before the transfer is released (after the idle wait that follows ``prepare``): start
        what runs during the transfer (a periodic policy's loop)."""
        ...

    def finish(self, plan: SamplePlan) -> None:
        """After the transfer (also after a failed one): stop any periodic loop, record its epochs in the
        fields ``prepare`` returned (records are built after ``finish``), leave every receiver on both."""
        ...

    def teardown(self) -> None:
        """Once per campaign, before the testbed goes; idempotent."""
        ...

    def estimate_s(self, plan: SamplePlan) -> float:
        """Seconds ``prepare`` is expected to take for ``plan`` (the dry run's ETA); no side effects."""
        ...


#: Builds the control for a scenario (``source`` names the scenario file in errors). Called before
#: preflight: raising ``ConfigError`` there refuses the campaign before anything starts.
ControlFactory = Callable[["Scenario", str], SampleControl]
