"""The parts of the inventory an emulated meter needs: the radios, the power profile, a bridge's line format.

Kept apart from ``harness.config.inventory`` (which re-exports them) so that each emulated meter, a process
of its own per receiver, builds these few models and not the inventory's thirty.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.config.load import Strict

#: Physical bounds the schema states: a link rate (Mbit/s) of at most 100 Gbit/s, a power of at most
#: 1 kW (a receiver on a USB supply draws a few W).
MAX_RATE_MBIT = 100_000.0
MAX_MW = 1_000_000.0

#: The two radios of a receiver. Interface modes are built from these.
Radio = Literal["wifi", "lte"]
RADIOS: tuple[Radio, ...] = ("wifi", "lte")


class LineFormat(Strict):
    """How an INA219/INA226 bridge prints one reading per text line (e.g. ``5.102,0.512,2.611``)."""

    fields: list[Literal["volts_v", "volts_mv", "amps_a", "amps_ma", "watts_w", "watts_mw",
                         "energy_wh", "energy_mwh", "skip"]] = Field(
        min_length=1, description="the columns in order, each with its unit (skip: ignore that column)")
    separator: str | None = Field(default=None, description="column separator (default: any whitespace)")
    comment: str = Field(default="#", description="lines starting with this are ignored (sketch banners)")
    poll_command: str | None = Field(
        default=None, description="text sent before each reading (bridges that answer on request); "
                                  "default: the bridge streams lines by itself")

    @model_validator(mode="after")
    def _has_power(self) -> LineFormat:
        have = set(self.fields)
        if not (have & {"watts_w", "watts_mw"} or (have & {"volts_v", "volts_mv"} and have & {"amps_a", "amps_ma"})):
            raise ValueError(f"line format {self.fields} gives no power: needs watts_*, or volts_* and amps_*")
        for f in set(self.fields) - {"skip"}:
            if self.fields.count(f) > 1:
                raise ValueError(f"field {f!r} appears twice in {self.fields}")
        return self


class RadioPower(Strict):
    """Power drawn by one radio (linear model P = theta + b * x while active, plus tails)."""

    active_mw: float = Field(ge=0, le=MAX_MW, description="theta: extra power while the radio carries traffic (mW)")
    mw_per_mbit: float = Field(ge=0, le=MAX_MW, description="b: power per Mbit/s of downlink throughput (mW per Mbit/s)")
    promotion_s: float = Field(default=0.0, ge=0, le=600, description="idle-to-active promotion delay (s)")
    promotion_mw: float = Field(default=0.0, ge=0, le=MAX_MW, description="power during promotion (mW)")
    tail_s: float = Field(default=0.0, ge=0, le=600, description="time the radio stays in a high-power state after traffic (s)")
    tail_mw: float = Field(default=0.0, ge=0, le=MAX_MW, description="power during the tail (mW)")


class BothPower(Strict):
    """Extra power while both radios of a receiver carry data (MPTCP: reassembly, two busy dongles)."""

    active_mw: float = Field(default=0.0, ge=0, le=MAX_MW, description="extra power while both are active (mW)")
    mw_per_mbit: float = Field(default=0.0, ge=0, le=MAX_MW,
                               description="extra power per Mbit/s of the two radios' total throughput (mW per Mbit/s)")


class PowerProfile(Strict):
    """How an emulated receiver's power follows its traffic."""

    name: str
    source: str = Field(description="where the constants come from (recorded with every emulated record)")
    base_w: float = Field(ge=0, le=MAX_MW / 1000, description="board plus idle dongles (W); 0 when the meter saw the radios only")
    volts: Annotated[float, Field(gt=0, le=60)] = Field(default=5.1, description="supply voltage the emulated meter reports (V)")
    active_threshold_mbit: float = Field(default=0.05, ge=0, le=MAX_RATE_MBIT,
                                         description="throughput above which a radio counts as active (Mbit/s)")
    wifi: RadioPower
    lte: RadioPower
    both: BothPower | None = Field(default=None, description="extra cost while both radios carry data")
