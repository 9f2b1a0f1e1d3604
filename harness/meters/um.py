"""RuiDeng (RDTech) UM24C / UM25C / UM34C USB meters.

The host sends ``0xF0``; the meter answers with a 130-byte status frame, all fields
big-endian (layout: docs/meters.md, "UM protocol", after
sigrokproject/libsigrok src/hardware/rdtech-um and rfinnie/rdserialtool). Frames
start with the model id and end with the trailer ``0xFFF1`` (UM24C, UM25C) or carry an
XOR checksum in byte 129 (UM34C). A reader that meets garbage slides byte by byte
until it finds the model id again, as libsigrok does.

Ports are device paths (``/dev/rfcomm0``) or pyserial URLs (``rfc2217://host:port``,
``socket://host:port``), both opened with ``serial.serial_for_url``.
"""
from __future__ import annotations

import math
import struct
import termios
import time
from dataclasses import dataclass

from harness.errors import MeterError
from harness.meters.base import Meter, MeterFactory, Reading, close_serial, open_serial

FRAME_LEN = 130
POLL = b"\xf0"
TRAILER = b"\xff\xf1"
#: Shortest interval between polls while a reader waits for a valid frame (libsigrok: 100 ms period).
REPOLL_S = 0.1
FMT = ">HHHIHHH20IHHHIIHIHHHIHH"
assert struct.calcsize(FMT) == FRAME_LEN


@dataclass(frozen=True)
class Model:
    """What differs between the models."""

    name: str
    model_id: int
    volt_step: float
    amp_step: float
    checksum: bool  # True: XOR checksum in byte 129 (UM34C); False: trailer 0xFFF1
    #: True: V x I on the host is finer than the device's 1 mW power field (UM25C: 1 mV x 0.1 mA);
    #: False: the 1 mA current step (~5 mW at 5 V) is coarser, so the device's power field is used.
    host_power: bool


MODELS: dict[str, Model] = {
    "um24c": Model("UM24C", 0x0963, 0.01, 0.001, False, False),
    "um25c": Model("UM25C", 0x09C9, 0.001, 0.0001, False, True),
    "um34c": Model("UM34C", 0x0D4C, 0.01, 0.001, True, False),
}

UM34C_CHECKSUM_POS = (1, 3, 7, 9, 15, 17, 19, 23, 31, 39, 41, 45, 49, 53, 55, 57, 59, 63,
                      67, 69, 73, 79, 83, 89, 97, 99, 109, 111, 113, 119, 121, 127)


@dataclass(frozen=True)
class Frame:
    """A decoded status frame (SI units)."""

    volts: float
    amps: float
    watts: float
    temp_c: int
    group: int
    #: Per data group: (charge Ah, energy Wh).
    groups: tuple[tuple[float, float], ...]


def um34c_checksum(buf: bytes) -> int:
    c = 0
    for i in UM34C_CHECKSUM_POS:
        c ^= buf[i]
    return c


def frame_valid(buf: bytes, model: Model) -> bool:
    """Length, model id and trailer (or checksum) all match."""
    if len(buf) != FRAME_LEN or int.from_bytes(buf[:2], "big") != model.model_id:
        return False
    if model.checksum:
        return um34c_checksum(buf) == buf[129]
    return buf[128:130] == TRAILER


def decode_frame(buf: bytes, model: Model) -> Frame:
    """Decode a valid frame; raise ``MeterError`` on an invalid one."""
    if not frame_valid(buf, model):
        raise MeterError(f"{model.name}: invalid frame ({len(buf)} bytes, starts {buf[:2].hex()})")
    f = struct.unpack(FMT, buf)
    groups = tuple((f[7 + 2 * i] * 1e-3, f[8 + 2 * i] * 1e-3) for i in range(10))
    return Frame(volts=f[1] * model.volt_step, amps=f[2] * model.amp_step, watts=f[3] * 1e-3,
                 temp_c=f[4], group=f[6], groups=groups)


def encode_frame(model: Model, *, volts: float, amps: float, watts: float, temp_c: int = 25, group: int = 0,
                 groups: tuple[tuple[float, float], ...] = ()) -> bytes:
    """A status frame as the device sends it, at the device's resolution (used by the emulated meter).

    Live values are rounded to the model's steps; the accumulated charge and energy
    are whole mAh and mWh, truncated as a counter would be.
    """
    g = list(groups) + [(0.0, 0.0)] * (10 - len(groups))
    flat: list[int] = []
    for ah, wh in g[:10]:
        flat += [int(math.floor(ah * 1000 + 1e-9)), int(math.floor(wh * 1000 + 1e-9))]
    def u16(x: float) -> int:  # the fields are unsigned: a noisy value below zero reads 0
        return min(0xFFFF, max(0, int(round(x))))

    fields = [model.model_id, u16(volts / model.volt_step), u16(amps / model.amp_step),
              max(0, int(round(watts * 1000))), temp_c, int(temp_c * 9 / 5 + 32), group, *flat,
              0, 0, 0,          # D+, D-, charging mode
              0, 0, 0, 0, 0,    # threshold-recording charge, energy, threshold, duration, active
              1, 5, 0, 0,       # screen timeout, backlight, load resistance, screen index
              0]                # trailer / checksum, filled below
    buf = bytearray(struct.pack(FMT, *fields))
    if model.checksum:
        buf[129] = um34c_checksum(bytes(buf))
    else:
        buf[128:130] = TRAILER
    return bytes(buf)


@dataclass
class ReadStats:
    """What a reader has seen since it was created: frames accepted and why others were rejected."""

    frames: int = 0
    #: Bytes dropped while looking for the model id (garbage, or frames of another model).
    skipped_bytes: int = 0
    #: Complete 130-byte frames that began with the model id but failed the trailer/checksum.
    bad_frames: int = 0
    #: Polls that ended with fewer than 130 bytes (truncated frame or no answer).
    timeouts: int = 0


def read_frame(ser, model: Model, timeout_s: float = 1.0, stats: ReadStats | None = None) -> bytes:
    """Poll once and read one frame, resynchronising on the model id after garbage.

    Bytes before the model id are dropped one by one (libsigrok's resynchronisation);
    a 130-byte candidate with a bad trailer or checksum is rejected, the search
    continues one byte further, and the meter is polled again when nothing is pending.

    Raises ``MeterError`` if no valid frame arrives before ``timeout_s``, saying what was seen.
    """
    stats = stats if stats is not None else ReadStats()
    ser.reset_input_buffer()  # a late answer to an earlier poll must not be taken for this one
    ser.write(POLL)
    polled = time.monotonic()
    deadline = polled + timeout_s
    head = model.model_id.to_bytes(2, "big")
    buf = bytearray()
    bad = skipped = 0
    repoll = False
    while time.monotonic() < deadline:
        if repoll and not ser.in_waiting and time.monotonic() - polled >= REPOLL_S:
            # A bad frame and nothing else pending: ask again, as libsigrok does (at most every
            # REPOLL_S, so a meter that only sends bad frames is not flooded with polls).
            ser.write(POLL)
            polled = time.monotonic()
            repoll = False
        want = FRAME_LEN - len(buf) if len(buf) >= 2 else 2 - len(buf)
        chunk = ser.read(want)
        buf += chunk
        # Slide until the buffer starts with the model id.
        while len(buf) >= 2 and bytes(buf[:2]) != head:
            del buf[0]
            skipped += 1
        if len(buf) == FRAME_LEN:
            if frame_valid(bytes(buf), model):
                stats.frames += 1
                stats.skipped_bytes += skipped
                stats.bad_frames += bad
                return bytes(buf)
            bad += 1
            repoll = True
            del buf[0]  # a model id followed by a bad trailer: look for the next start from the next byte
            while len(buf) >= 2 and bytes(buf[:2]) != head:
                del buf[0]
                skipped += 1
    stats.timeouts += 1
    stats.skipped_bytes += skipped
    stats.bad_frames += bad
    seen = []
    if len(buf) >= 2:  # it starts with the model id
        seen.append(f"a truncated frame ({len(buf)} of {FRAME_LEN} bytes)")
    if bad:
        seen.append(f"{bad} frame(s) with a bad {'checksum' if model.checksum else 'trailer'}")
    if skipped:
        seen.append(f"{skipped} byte(s) without the model id {head.hex()}")
    raise MeterError(f"{model.name}: no valid frame within {timeout_s:.1f} s"
                     + (f" (saw {', '.join(seen)})" if seen else " (no answer)"))


class UMMeter(Meter):
    """A UM-series meter on a serial port or pyserial URL.

    Example:
        >>> m = UMMeter("socket://sbc7:3333", "um25c")    # ser2net on a remote SBC  # doctest: +SKIP
        >>> with m: print(m.poll().watts)                  # doctest: +SKIP
    """

    max_rate_hz = 10.0  # libsigrok polls every 100 ms

    def __init__(self, port: str, model: str, kind: str | None = None, timeout_s: float = 1.0,
                 baudrate: int = 9600, rate_hz: float | None = None, interval_mean: bool = False) -> None:
        if model not in MODELS:
            raise MeterError(f"unknown UM model {model!r} (known: {', '.join(MODELS)})")
        self.port = port
        self.model = MODELS[model]
        self.kind = kind or model
        self.timeout_s = timeout_s
        self.baudrate = baudrate
        if rate_hz:
            self.max_rate_hz = rate_hz
        self.interval_mean = interval_mean
        self.stats = ReadStats()
        self._ser = None

    def open(self) -> None:
        self.close()
        self._ser = open_serial(self.kind, self.port, self.baudrate)
        try:
            self.poll()  # fails loudly if the device does not answer
        except MeterError:
            self.close()
            raise

    def poll(self) -> Reading:
        import serial

        if self._ser is None:
            raise MeterError(f"{self.kind} at {self.port}: not open")
        polled = time.time()   # a re-poll after a bad frame goes out later: the bound stays a bound
        try:
            buf = read_frame(self._ser, self.model, self.timeout_s, self.stats)
        except (OSError, termios.error, serial.SerialException) as exc:  # the port vanished (pty closed, socket reset)
            raise MeterError(f"{self.kind} at {self.port}: read failed ({exc})") from None
        except MeterError as exc:
            raise MeterError(f"{self.kind} at {self.port}: {exc}") from None
        mono, wall = time.monotonic(), time.time()
        fr = decode_frame(buf, self.model)
        watts = fr.volts * fr.amps if self.model.host_power else fr.watts
        return Reading(mono, wall, fr.volts, fr.amps, watts, counter_wh=fr.groups[fr.group][1],
                       device_watts=fr.watts, polled_wall_s=polled)

    def close(self) -> None:
        close_serial(self._ser)
        self._ser = None


def factory(model: str, kind: str, *, interval_mean: bool = False) -> MeterFactory:
    """The factory of UM meters of ``model`` that records ``kind`` (``harness.meters.drivers.DRIVERS``).

    ``interval_mean``: the device answers with its mean power since the previous poll (``Meter.interval_mean``).
    """
    def make(port: str, *, baudrate: int = 9600, timeout_s: float = 1.0, rate_hz: float | None = None) -> UMMeter:
        return UMMeter(port, model, kind=kind, timeout_s=timeout_s, baudrate=baudrate, rate_hz=rate_hz,
                       interval_mean=interval_mean)
    return make

