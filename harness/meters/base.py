"""The Meter interface (open, poll, close), its readings, and what a driver factory looks like."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from harness.errors import MeterError


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
    #: The power the device itself reports (UM: its 1 mW field), when it differs from ``watts`` (W).
    device_watts: float | None = None
    #: Wall time the poll that got this reading went out (polled meters). The device measured at some moment
    #: between it and ``wall_s``, the receipt: on a busy machine either side can wait milliseconds to be
    #: scheduled. None: a reading the meter pushed, timed by its receipt alone.
    polled_wall_s: float | None = None

    @property
    def time_unsure_s(self) -> float:
        """How long before its time stamp (``wall_s``) the device may have measured: the poll's round trip."""
        return 0.0 if self.polled_wall_s is None else max(0.0, self.wall_s - self.polled_wall_s)


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
    #: False: a reading is the power at the moment of the poll (a real UM or INA bridge). True: it is the
    #: device's own mean power since its previous answer (an integrating device), so the recorder holds
    #: it over that interval instead of interpolating between points (``recorder.integrate_means``).
    interval_mean: bool = False

    @abstractmethod
    def open(self) -> None:
        """Open the port and check that the device answers (raise ``MeterError`` otherwise)."""

    @abstractmethod
    def poll(self) -> Reading:
        """One reading (raise ``MeterError`` if none valid arrives within the device timeout)."""

    @abstractmethod
    def close(self) -> None:
        """Close the port; idempotent."""

    def __enter__(self) -> Meter:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} at {self.port}>"


class MeterFactory(Protocol):
    """Builds an unopened meter of one kind: ``factory(port, **options)``.

    Options every driver accepts: ``baudrate``, ``timeout_s``, ``rate_hz`` (None: the device's
    limit). Driver-specific ones (``line_format`` for ina-line) come from the inventory entry.
    """

    def __call__(self, port: str, **options: Any) -> Meter: ...


def open_serial(kind: str, port: str, baudrate: int):
    """Open a serial device or pyserial URL (``socket://``, ``rfc2217://``); ``MeterError`` naming it if that fails."""
    import serial  # pyserial; imported here so that planning code never needs it

    try:
        return serial.serial_for_url(port, baudrate=baudrate, timeout=0.05)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise MeterError(f"{kind} at {port}: cannot open ({exc})") from None


def close_serial(ser) -> None:
    """Close a port opened with ``open_serial``; a vanished port may fail to close, and is closed either way."""
    if ser is None:
        return
    try:
        ser.close()
    except Exception:  # noqa: BLE001 - see the docstring
        pass
