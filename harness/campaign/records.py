"""The sample record: one receiver in one sample, as ``runs/<campaign>/samples.jsonl`` holds it.

ONE schema, used by everything that writes or reads records: the runner builds each record
as a ``SampleRecord`` (so a record that does not fit the schema fails where it is made),
the dataset builder validates every line it reads with it, and the synthetic generator
(``rigs.synthetic``) fills it from a model. Every field and unit is documented
in docs/records.md; ``SampleKey`` (which sample, which receiver) is shared with the
dataset's row (``harness.dataset.build.DatasetRow``).

Fields only the runner knows (attempts, windows, versions) default to ``None`` so that a
generator without a testbed still writes complete records. Unknown fields are refused: a
field that is dropped one day is removed from old records by the store's one upgrade
function (``harness.campaign.store.upgrade_record``), which also refuses newer versions.
"""
from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.campaign.store import SCHEMA_VERSION
from harness.config.inventory import RADIOS
from harness.config.scenario import Mode


class SampleKey(BaseModel):
    """Which receiver in which sample of which case and campaign."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    campaign: str = Field(min_length=1)
    sample_id: str = Field(min_length=1)
    case_id: str = Field(min_length=1)
    cc: str = Field(min_length=1)
    n_receivers: int = Field(ge=1)
    mode: Mode
    sample_index: int = Field(ge=0)
    receiver: str = Field(min_length=1)


class RecordedRepair(BaseModel):
    """One repair the health check made on this receiver before an attempt of the sample."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Which attempt it preceded (1 = the first); None in records upgraded from schema 1 (which did not say).
    attempt: int | None = Field(default=None, ge=1)
    what: str


class SampleRecord(SampleKey):
    """One line of ``samples.jsonl`` (docs/records.md). Units are in the names."""

    schema_version: int = SCHEMA_VERSION
    status: Literal["ok", "failed"]
    sample_status: str
    error: str | None = None
    attempts: int | None = None
    flags: list[str]
    #: What the health check before each attempt repaired on this receiver (empty normally).
    repairs: list[RecordedRepair] = Field(default_factory=list)
    #: ``sha256:`` of the record without this field (``harness.campaign.store.record_checksum``), set when it is
    #: appended; None in records of schema 1.
    checksum: str | None = None
    file_bytes: int | None = None
    started_at: float | None = None
    window_start: float | None = None
    window_end: float | None = None
    bytes: int | None = Field(default=None, ge=0)
    duration_s: float | None = Field(default=None, gt=0)
    throughput_mbit: float | None = Field(default=None, ge=0)
    retransmits: int | None = None
    iface_bytes: dict[str, int] | None = None
    iface_throughput_mbit: dict[str, float] | None = None
    energy_j: float | None = Field(default=None, ge=0)
    mean_power_w: float | None = Field(default=None, ge=0)
    #: How much of ``energy_j`` rests on where, inside the meter readings that straddle the window's edges,
    #: the power changed (``harness.meters.recorder.edge_uncertainty``); None in older records.
    energy_edge_j: float | None = Field(default=None, ge=0)
    #: From the client's release to its exit, less iperf3's transfer time: the most the window (which ends at
    #: the exit) can sit late against the data; iperf3's own exchanges before and after the data are in it.
    exit_lag_s: float | None = Field(default=None, ge=0)
    #: From the client's release to the first look that saw its data (emulated testbeds look at the receiver's
    #: byte counters every millisecond until then): the window starts there. None where nobody looked (a lab):
    #: the window then ends at the exit.
    start_lag_s: float | None = Field(default=None, ge=0)
    #: How far the data's start can lie before ``window_start``: the time since the look before, which saw none.
    start_unsure_s: float | None = Field(default=None, ge=0)
    #: Emulated testbed: how long the sender's iperf3 server was paused between its last write and the client's
    #: last read (``harness.emulation.sendertail``: it would otherwise spin on the cores the testbed shares).
    #: None where nothing was paused on purpose (a lab, ``MPLAB_SENDER_PAUSE=off``, older records).
    sender_paused_s: float | None = Field(default=None, ge=0)
    #: The radio tail after the transfer window, until the receiver was idle again (not in ``energy_j``).
    tail_energy_j: float | None = Field(default=None, ge=0)
    #: How long after ``window_end`` the receiver was idle again.
    idle_wait_s: float | None = Field(default=None, ge=0)
    #: Of ``idle_wait_s``, the tail the emulated power model fast-forwarded (its energy is in ``tail_energy_j``).
    tail_skipped_s: float | None = Field(default=None, ge=0)
    #: Policy samples: how long the runner waited for idle after the controller's probes, before the release.
    probe_idle_wait_s: float | None = Field(default=None, ge=0)
    meter_readings: int = 0
    meter_counter_j: float | None = None
    meter_kind: str
    energy_source: str
    testbed_kind: str
    testbed: str | None = None
    kernel: str | None = None
    cc_impl: str | None = None
    sender_cc: str | None = None
    mptcp_mode: str | None = None
    iperf3_version: str | None = None
    mplab_version: str | None = None
    power_profile: str | None = None
    #: How much faster than real time the testbed ran (``mplab run --speedup``); every duration, throughput
    #: and energy of the record is already scaled back to testbed (real) time. 1 on a lab and in older records.
    speedup: float = Field(default=1.0, ge=1)
    #: The kernel's TCP timers scaled per socket with ``speedup`` (``harness.cc.timers``): the BPF program, its
    #: object's digest and the values its sockets ran with (``bpf:mplab_timers@sha256:<16 hex> delack_max=8ms
    #: rto_min=28ms``); None: the kernel's own timers (S = 1, a lab, older records, or a machine that cannot).
    tcp_timers: str | None = None
    #: the receiver's LTE path: "emulated-channel", or a real cell's kind ("srsran-zmq": srsRAN over ZeroMQ)
    lte_access: str | None = None
    #: a real cell's attach time (s) from starting its EPC to the UE's address (None: emulated channel)
    lte_attach_s: float | None = Field(default=None, ge=0)
    # Controller fields (harness.campaign.control.CONTROL_FIELDS): policy samples only, None otherwise.
    policy: str | None = None
    policy_params: dict | None = None
    steering: str | None = None
    assignment: Mode | None = None
    probe_mbit: dict[str, float] | None = None
    predicted_energy_j: dict[str, float] | None = None
    predicted_energy_total_j: dict[str, float] | None = None
    adopted: Literal["is", "tuned"] | None = None
    decision_latency_s: float | None = Field(default=None, ge=0)
    control_s: float | None = Field(default=None, ge=0)
    #: Related schemes: per network {rtt_s, loss, cwnd_pkts, source} read from the sender's subflows.
    path_stats: dict[str, dict] | None = None
    #: Per-path rate caps (Mbit/s) applied before the transfer (EEMPTCP's split, MP-SDN's Tier 2).
    caps_mbit: dict[str, float] | None = None
    #: What enforced the caps: "htb" (a qdisc on a port) or "openflow-meter" (meters on the steering switch).
    caps_by: Literal["htb", "openflow-meter"] | None = None
    #: What the policy weighed for this receiver (ranking, objective per candidate set, ...).
    policy_trace: dict | None = None
    #: Periodic policies: one entry per epoch during the transfer (time, occupancy, limits, caps, rates).
    control_epochs: list[dict] | None = None

    @field_validator("iface_bytes", "iface_throughput_mbit")
    @classmethod
    def _radios(cls, v: dict | None) -> dict | None:
        if v is None:
            return v
        unknown = set(v) - set(RADIOS)
        if unknown:
            raise ValueError(f"unknown interface(s) {sorted(unknown)} (expected {list(RADIOS)})")
        if any(x < 0 or (isinstance(x, float) and not math.isfinite(x)) for x in v.values()):
            raise ValueError(f"negative or non-finite value in {v}")
        return v

    def to_json(self) -> dict:
        """The record as ``samples.jsonl`` stores it."""
        return self.model_dump(mode="json")


def unusable_reason(rec: SampleRecord, keep_flagged: bool = False) -> str | None:
    """Why a record's measurement cannot be used (a dataset leaves it out; ``--make-up`` counts its case short of
    it), or None. A controller policy's sample is usable here: only a dataset leaves those out."""
    if rec.sample_status != "ok":
        return f"sample {rec.sample_status}"
    if rec.status != "ok":
        return "receiver failed"
    if rec.energy_j is None:
        return "no energy"
    if rec.duration_s is None or rec.throughput_mbit is None or rec.bytes is None:
        return "no transfer result"
    if rec.iface_throughput_mbit is None or rec.iface_bytes is None:
        return "no interface counters"
    if rec.flags and not keep_flagged:
        return "flagged: " + rec.flags[0].split(":", 1)[0]
    return None
