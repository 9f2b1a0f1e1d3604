"""INA219/INA226 bridges that print one reading per text line (Arduino or Pi sketches).

Sketches differ in what they print, so the line format is configuration
(``harness.config.inventory.LineFormat``): the columns in order, each with its unit, the
separator, and an optional command to send before each reading. A bridge that streams
by itself is read by taking the newest complete line at each poll; lines that do not
parse (banners, partial lines after a reconnect) are counted and skipped, never guessed.

Ports are device paths (``/dev/ttyUSB0``, ``/dev/ttyACM0``) or pyserial URLs, as for the
UM meters.
"""
from __future__ import annotations

import math
import termios
import time
from dataclasses import dataclass

from harness.errors import MeterError
from harness.config.metering import LineFormat
from harness.meters.base import Meter, Reading, close_serial, open_serial

#: Field name -> (quantity, factor to SI).
_UNITS: dict[str, tuple[str, float]] = {
    "volts_v": ("volts", 1.0), "volts_mv": ("volts", 1e-3),
    "amps_a": ("amps", 1.0), "amps_ma": ("amps", 1e-3),
    "watts_w": ("watts", 1.0), "watts_mw": ("watts", 1e-3),
    "energy_wh": ("energy_wh", 1.0), "energy_mwh": ("energy_wh", 1e-3),
}
#: Longest line accepted before the buffer is treated as garbage.
MAX_LINE = 512


def parse_line(text: str, fmt: LineFormat) -> dict[str, float]:
    """SI values (volts, amps, watts, energy_wh as present) of one line; ``ValueError`` saying why not."""
    cols = text.split(fmt.separator) if fmt.separator is not None else text.split()
    cols = [c.strip() for c in cols]
    if len(cols) != len(fmt.fields):
        raise ValueError(f"{len(cols)} column(s), format has {len(fmt.fields)}: {text!r}")
    out: dict[str, float] = {}
    for name, col in zip(fmt.fields, cols):
        if name == "skip":
            continue
        try:
            value = float(col)
        except ValueError:
            raise ValueError(f"column {name}: not a number {col!r} in {text!r}") from None
        if not math.isfinite(value):
            raise ValueError(f"column {name}: {col!r} is not finite")
        quantity, factor = _UNITS[name]
        out[quantity] = value * factor
    if "watts" not in out:
        out["watts"] = out["volts"] * out["amps"]
    return out


def format_line(values: dict[str, float], fmt: LineFormat, digits: int = 4) -> str:
    """A line as a bridge with format ``fmt`` prints it (used by the emulated bridge and tests)."""
    cols = []
    for name in fmt.fields:
        if name == "skip":
            cols.append("0")
            continue
        quantity, factor = _UNITS[name]
        cols.append(f"{values.get(quantity, 0.0) / factor:.{digits}f}")
    return (fmt.separator if fmt.separator is not None else " ").join(cols)


@dataclass
class LineStats:
    lines: int = 0
    bad_lines: int = 0
    #: Lines read but superseded by a newer one before a poll took them.
    superseded: int = 0


class InaLineMeter(Meter):
    """An INA2xx bridge on a serial port or pyserial URL, with a configurable line format.

    Example:
        >>> fmt = LineFormat(fields=["volts_v", "amps_ma"], separator=",")
        >>> m = InaLineMeter("/dev/ttyACM0", fmt, baudrate=115200)      # doctest: +SKIP
        >>> with m: m.poll().watts                                      # doctest: +SKIP
    """

    kind = "ina-line"
    max_rate_hz = 10.0

    def __init__(self, port: str, line_format: LineFormat, *, baudrate: int = 115200, timeout_s: float = 1.0,
                 rate_hz: float | None = None) -> None:
        self.port = port
        self.fmt = line_format
        self.baudrate = baudrate
        self.timeout_s = timeout_s
        if rate_hz:
            self.max_rate_hz = rate_hz
        self.stats = LineStats()
        self._ser = None
        self._buf = bytearray()
        self._last_error = ""

    def open(self) -> None:
        self.close()
        self._ser = open_serial(self.kind, self.port, self.baudrate)
        self._buf.clear()
        try:
            self.poll()
        except MeterError:
            self.close()
            raise

    def _lines(self) -> list[bytes]:
        """Complete lines read so far (the partial tail stays buffered)."""
        assert self._ser is not None
        n = self._ser.in_waiting
        chunk = self._ser.read(n if n else 1)
        if chunk:
            self._buf += chunk
        *lines, rest = bytes(self._buf).replace(b"\r", b"\n").split(b"\n")
        if len(rest) > MAX_LINE:  # no newline for too long: garbage, not a reading
            self.stats.bad_lines += 1
            self._last_error = f"{len(rest)} bytes without a newline"
            rest = b""
        self._buf = bytearray(rest)
        return [ln for ln in lines if ln.strip()]

    def poll(self) -> Reading:
        import serial

        if self._ser is None:
            raise MeterError(f"{self.kind} at {self.port}: not open")
        deadline = time.monotonic() + self.timeout_s
        self._last_error = ""
        try:
            if self.fmt.poll_command is not None:
                self._ser.reset_input_buffer()
                self._buf.clear()
                self._ser.write(self.fmt.poll_command.encode())
            while time.monotonic() < deadline:
                good = None
                for raw in self._lines():
                    text = raw.decode("ascii", errors="replace").strip()
                    if text.startswith(self.fmt.comment):
                        continue
                    try:
                        values = parse_line(text, self.fmt)
                    except ValueError as exc:
                        self.stats.bad_lines += 1
                        self._last_error = str(exc)
                        continue
                    self.stats.lines += 1
                    if good is not None:
                        self.stats.superseded += 1
                    good = values
                if good is not None:
                    return Reading(time.monotonic(), time.time(), good.get("volts", float("nan")),
                                   good.get("amps", float("nan")), good["watts"], counter_wh=good.get("energy_wh"))
        except (OSError, termios.error, serial.SerialException) as exc:
            raise MeterError(f"{self.kind} at {self.port}: read failed ({exc})") from None
        why = f" (last rejected line: {self._last_error})" if self._last_error else " (no line)"
        raise MeterError(f"{self.kind} at {self.port}: no valid line within {self.timeout_s:.1f} s{why}")

    def close(self) -> None:
        close_serial(self._ser)
        self._ser = None


def make(port: str, *, line_format: LineFormat | None = None, baudrate: int = 115200, timeout_s: float = 1.0,
          rate_hz: float | None = None) -> InaLineMeter:
    if line_format is None:
        raise MeterError(f"ina-line meter at {port}: no line_format given (set it in the inventory)")
    return InaLineMeter(port, line_format, baudrate=baudrate, timeout_s=timeout_s, rate_hz=rate_hz)
