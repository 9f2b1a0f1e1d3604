"""The Meter interface and its registry."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """One power reading, timestamped by the orchestrator on receipt."""

    mono_s: float
    wall_s: float
    volts: float
    amps: float
    watts: float
    #: The device's own energy counter (selected data group), if it has one (Wh).
    counter_wh: float | None = None


class Meter(ABC):
    """A power meter in a receiver's supply.

    Example:
        >>> m = open_meter("um25c", "/dev/rfcomm0")      # doctest: +SKIP
        >>> m.open(); r = m.poll(); m.close()            # doctest: +SKIP
    """

    #: Recorded with every record: "um25c", "um34c", "ina-line", "emulated-um25c", ...
    kind: str
    #: Port or URL the meter is read through.
    port: str
    #: The fastest poll rate the device sustains (Hz); the recorder's default.
    max_rate_hz: float = 10.0

    @abstractmethod
    def open(self) -> None:
        """Open the port and check that the device answers (raise ``MeterError`` otherwise)."""

    @abstractmethod
    def poll(self) -> Reading:
        """One reading (raise ``MeterError`` if none valid arrives within the device timeout)."""

    @abstractmethod
    def close(self) -> None:
        """Close the port; idempotent."""


#: Meter kind -> factory(port) returning an unopened Meter.
DRIVERS: dict[str, Callable[[str], Meter]] = {}


def open_meter(kind: str, port: str) -> Meter:
    """An unopened meter of ``kind`` on ``port``."""
    try:
        factory = DRIVERS[kind]
    except KeyError:
        raise KeyError(f"unknown meter kind {kind!r} (known: {', '.join(sorted(DRIVERS))})") from None
    return factory(port)
