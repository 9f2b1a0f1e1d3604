"""RuiDeng (RDTech) UM24C / UM25C / UM34C USB meters.

The host sends ``0xF0``; the meter answers with a 130-byte status frame, all fields
big-endian (layout: shared/reference/components.md section 1.1, after
sigrokproject/libsigrok src/hardware/rdtech-um and rfinnie/rdserialtool). Frames
start with the model id and end with the trailer ``0xFFF1`` (UM24C, UM25C) or carry an
XOR checksum in byte 129 (UM34C). A reader that meets garbage slides byte by byte
until it finds the model id again, as libsigrok does.

Ports are device paths (``/dev/rfcomm0``) or pyserial URLs (``rfc2217://host:port``,
``socket://host:port``), both opened with ``serial.serial_for_url``.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from harness.errors import MeterError
from harness.meters.base import DRIVERS, Meter, Reading

FRAME_LEN = 130
POLL = b"\xf0"
TRAILER = b"\xff\xf1"
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


MODELS: dict[str, Model] = {
    "um24c": Model("UM24C", 0x0963, 0.01, 0.001, False),
    "um25c": Model("UM25C", 0x09C9, 0.001, 0.0001, False),
    "um34c": Model("UM34C", 0x0D4C, 0.01, 0.001, True),
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
    """A status frame as the device sends it, at the device's resolution (used by the emulated meter)."""
    g = list(groups) + [(0.0, 0.0)] * (10 - len(groups))
    flat: list[int] = []
    for ah, wh in g[:10]:
        flat += [int(round(ah * 1000)), int(round(wh * 1000))]
    fields = [model.model_id, int(round(volts / model.volt_step)), int(round(amps / model.amp_step)),
              int(round(watts * 1000)), temp_c, int(temp_c * 9 / 5 + 32), group, *flat,
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


def read_frame(ser, model: Model, timeout_s: float = 1.0) -> bytes:
    """Poll once and read one frame, resynchronising on the model id after garbage.

    Raises ``MeterError`` if no valid frame arrives before ``timeout_s``.
    """
    ser.reset_input_buffer()
    ser.write(POLL)
    deadline = time.monotonic() + timeout_s
    head = model.model_id.to_bytes(2, "big")
    buf = bytearray()
    bad = 0
    while time.monotonic() < deadline:
        chunk = ser.read(FRAME_LEN - len(buf) if len(buf) >= 2 else 1)
        if not chunk:
            continue
        buf += chunk
        # Slide until the buffer starts with the model id (libsigrok's resynchronisation).
        while len(buf) >= 2 and bytes(buf[:2]) != head:
            del buf[0]
        if len(buf) == FRAME_LEN:
            if frame_valid(bytes(buf), model):
                return bytes(buf)
            bad += 1
            del buf[:2]  # a model id followed by a bad trailer: look for the next start
    raise MeterError(f"{model.name}: no valid frame within {timeout_s:.1f} s"
                     + (f" ({bad} invalid frame(s) rejected)" if bad else ""))


class UMMeter(Meter):
    """A UM-series meter on a serial port or pyserial URL."""

    max_rate_hz = 10.0  # libsigrok polls every 100 ms

    def __init__(self, port: str, model: str, kind: str | None = None, timeout_s: float = 1.0,
                 baudrate: int = 9600) -> None:
        self.port = port
        self.model = MODELS[model]
        self.kind = kind or model
        self.timeout_s = timeout_s
        self.baudrate = baudrate
        self._ser = None

    def open(self) -> None:
        import serial  # pyserial

        try:
            self._ser = serial.serial_for_url(self.port, baudrate=self.baudrate, timeout=0.05)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise MeterError(f"{self.kind} at {self.port}: cannot open ({exc})") from None
        self.poll()  # fails loudly if the device does not answer

    def poll(self) -> Reading:
        if self._ser is None:
            raise MeterError(f"{self.kind} at {self.port}: not open")
        try:
            buf = read_frame(self._ser, self.model, self.timeout_s)
        except OSError as exc:
            raise MeterError(f"{self.kind} at {self.port}: read failed ({exc})") from None
        mono, wall = time.monotonic(), time.time()
        fr = decode_frame(buf, self.model)
        # P = V * I on the host: finer than the 1 mW power field on the UM25C.
        return Reading(mono, wall, fr.volts, fr.amps, fr.volts * fr.amps, counter_wh=fr.groups[fr.group][1])

    def close(self) -> None:
        if self._ser is not None:
            try:
                self._ser.close()
            finally:
                self._ser = None


for _kind in MODELS:
    DRIVERS[_kind] = lambda port, _m=_kind: UMMeter(port, _m)
DRIVERS["emulated-um25c"] = lambda port: UMMeter(port, "um25c", kind="emulated-um25c")
