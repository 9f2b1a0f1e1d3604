"""Cubic whose clock runs S times faster: the kernel's Cubic for a testbed at speed-up S > 1.

Cubic's window is a function of wall-clock time since the last reduction. At speed-up S a testbed's round
trips are S times shorter but the kernel's clock is not, so the kernel's own Cubic climbs S times too slowly
per round trip. ``harness/cc/bpf/cubic.bpf.c`` is Cubic as a BPF ``tcp_congestion_ops`` whose every time
reading (the epoch, HyStart's round and ACK-train times, the update throttles) and RTT sample is multiplied
by S, a constant in the object's read-only data.

S is written when the object is registered, not when it is compiled: the shipped object is a template whose
``mplab_cubic_cfg`` (found by ``MAGIC``) holds S = 1 and whose struct_ops map is named ``PLACEHOLDER``;
``scaled_object`` writes a copy with S and the name ``mplab_cubic_s<S>`` into ``OUT_DIR``. Each S is then its
own object with its own digest, registered like mplab's other struct_ops (``harness.cc.bpfcc.BpfCC``): a
record's ``cc_impl`` is ``bpf:mplab_cubic_s8@sha256:<digest of that copy>``.

Only whole S from 2 to 64 get it (the kernel takes names of at most 15 characters); at S = 1, and at a
fractional S, a scenario's ``cubic`` is the kernel's own (``harness.cc.resolve``), and its records say so.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path

from harness.cc.bpfcc import BUILD_DIR, DIGEST_HEX, PREFIX, BpfCC, map_values, maps_named
from harness.cc.timers import kernel_hz
from harness.hosts.local import Host
from harness.machine import STATE_ROOT

#: The template object (``make bpf``; shipped in the wheel).
TEMPLATE = BUILD_DIR / "cubic.bpf.o"
#: The struct_ops map's symbol and ``.name`` in the template (NUL-terminated, as the object stores them).
PLACEHOLDER = b"mplab_cubic_s00"
#: The first field of ``mplab_cubic_cfg`` (``"mplabcub"``), followed by S and CONFIG_HZ (u32 each).
MAGIC = 0x6d706c6162637562
#: Where the per-S copies are written (regenerated whenever the template changes).
OUT_DIR = STATE_ROOT / "cubic"
#: The kernel's congestion-control names hold at most 15 characters: ``mplab_cubic_s64``.
MAX_SPEEDUP = 64
#: CONFIG_HZ when the kernel does not say (only the update throttles use it: one jiffy, HZ/32).
DEFAULT_HZ = 250


def scalable(speedup: float) -> bool:
    """Whether a run at ``speedup`` gets the scaled Cubic (a whole number from 2 to ``MAX_SPEEDUP``)."""
    return speedup > 1 and _whole(speedup)


def _whole(speedup: float) -> bool:
    """A whole S from 1 to ``MAX_SPEEDUP`` (S = 1: the port at real time, which tests compare with the kernel's)."""
    return float(speedup).is_integer() and 1 <= speedup <= MAX_SPEEDUP


def cubic_name(speedup: int) -> str:
    """The congestion control's name at ``speedup`` (``mplab_cubic_s8``)."""
    return f"{PREFIX}cubic_s{int(speedup)}"


def scaled_bytes(template: bytes, speedup: int, hz: int) -> bytes:
    """``template`` with S = ``speedup`` and CONFIG_HZ = ``hz`` in its configuration and its map renamed.

    ``ValueError`` if the template does not have exactly one configuration block and its placeholder name.
    """
    if not _whole(speedup):
        raise ValueError(f"speedup {speedup} is not a whole number in 1..{MAX_SPEEDUP}")
    magic = struct.pack("<Q", MAGIC)
    if template.count(magic) != 1:
        raise ValueError(f"the Cubic template has {template.count(magic)} configuration blocks, not 1: rebuild it")
    placeholder = PLACEHOLDER + b"\0"
    if placeholder not in template:
        raise ValueError(f"the Cubic template has no {PLACEHOLDER.decode()}: rebuild it (`make bpf`)")
    at = template.index(magic) + len(magic)
    out = template[:at] + struct.pack("<II", int(speedup), hz) + template[at + 8:]
    # The symbol, the BTF variable (libbpf names the map after it) and .name: the same 16 bytes each.
    return out.replace(placeholder, cubic_name(speedup).encode().ljust(len(placeholder), b"\0"))


def scaled_object(speedup: int, template: Path = TEMPLATE, out_dir: Path = OUT_DIR, hz: int | None = None) -> Path:
    """The object of Cubic at ``speedup``, written into ``out_dir`` unless it is there already (atomic)."""
    data = scaled_bytes(template.read_bytes(), speedup, hz or kernel_hz() or DEFAULT_HZ)
    out = out_dir / f"{cubic_name(speedup)}.bpf.o"
    try:
        if out.read_bytes() == data:
            return out
    except FileNotFoundError:
        pass
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".cubic-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    return out


class BpfCubic(BpfCC):
    """Cubic at speed-up S as mplab's BPF struct_ops (``mplab_cubic_s<S>``), registered like the coupled ones."""

    def __init__(self, speedup: int, template: Path = TEMPLATE, out_dir: Path = OUT_DIR) -> None:
        if not _whole(speedup):
            raise ValueError(f"speedup {speedup} is not a whole number in 1..{MAX_SPEEDUP}")
        self.algorithm = "cubic"
        self.speedup = int(speedup)
        self.sock_name = cubic_name(self.speedup)
        self.template = template
        self.obj = out_dir / f"{self.sock_name}.bpf.o"
        self._out_dir = out_dir
        self._unrecorded: set[str] = set()
        self._registered_digest: str | None = None

    def digest(self) -> str | None:
        """SHA-256 prefix of the per-S object (computed from the template before it is written; None: not built)."""
        if self._registered_digest:
            return self._registered_digest
        try:
            data = scaled_bytes(self.template.read_bytes(), self.speedup, kernel_hz() or DEFAULT_HZ)
            return hashlib.sha256(data).hexdigest()[:DIGEST_HEX]
        except (FileNotFoundError, ValueError):
            return None

    def _missing(self, host) -> str | None:
        """As ``BpfCC``'s, for the template; then the per-S copy is written (it is what registers)."""
        if not self.template.exists():
            return (f"{self.template} is not built: run `make bpf` (needs clang, llvm, libbpf-dev, bpftool: "
                    "apt install clang llvm libbpf-dev bpftool)")
        try:
            scaled_object(self.speedup, self.template, self._out_dir)
        except (OSError, ValueError) as exc:
            return f"cannot write Cubic at S = {self.speedup} ({self.obj}): {exc}"
        return super()._missing(host)


#: The trace map's name as the kernel lists it (cut to 15 characters); every S's object has one.
TRACE_MAP = "mplab_cubic_tra"
#: The curve's time unit: 1/1024 s (tcp_cubic's BICTCP_HZ).
CURVE_HZ = 1024
#: Cubic's C as the kernel holds it (410/1024) and the shift of its cube.
C_SCALED, CUBE_SHIFT = 410, 40


def trace(host: Host, speedup: int) -> list[dict]:
    """The cubic-function updates the object of ``speedup`` recorded (its last 4096), oldest first: per update
    the socket's ports, its raw clock (``wall_us``: tcp_mstamp) and the scaled one (``now_us``), the epoch's
    start, the curve's time ``t`` (1/1024 s, delay_min included), K, the plateau, the target and the window."""
    out = []
    for m in maps_named(host, TRACE_MAP):
        out += [rec for rec in map_values(host, m["id"]) if rec.get("seq") and rec.get("speedup") == speedup]
    return sorted(out, key=lambda r: (r["wall_us"], r["seq"]))


def curve_target(t: int, k: int, origin: int) -> int:
    """The cubic function's window at curve time ``t`` (1/1024 s) for plateau ``origin`` reached at ``k``: the
    kernel's arithmetic (``origin +- C (t - K)^3``, C = 410/1024, the cube shifted by 40 bits)."""
    offs = min(abs(t - k), 1 << 21)
    delta = (C_SCALED * offs ** 3) >> CUBE_SHIFT
    if t < k:
        return max(origin - delta, 0)
    return origin + min(delta, 0x7FFFFFFF)


def curve_clock_ratios(records: list[dict], min_step: int = 64) -> list[float]:
    """Per socket and epoch, how fast the curve's time ran against the kernel's clock: for each pair of updates
    of one epoch at least ``min_step`` curve units apart (1/16 s at 64), (delta t / 1024 s) / (delta wall_us / 1e6 s).
    S for a clock scaled by S, 1 for the kernel's own. Checks each update's arithmetic on the way:
    ``ValueError`` if a record's scaled clock is not its raw clock x S, or its target is not the curve's."""
    ratios = []
    last: dict[tuple, dict] = {}
    for r in records:
        if r["now_us"] != r["wall_us"] * r["speedup"]:
            raise ValueError(f"scaled clock {r['now_us']} != {r['wall_us']} x {r['speedup']} (record {r['seq']})")
        if r["target"] != curve_target(r["t"], r["k"], r["origin"]):
            raise ValueError(f"target {r['target']} is not the curve's {curve_target(r['t'], r['k'], r['origin'])} "
                             f"at t={r['t']} K={r['k']} origin={r['origin']} (record {r['seq']})")
        key = (r["port"], r["dport"], r["epoch_us"])
        prev = last.get(key)
        if prev is None or r["t"] - prev["t"] >= min_step:
            if prev is not None and r["wall_us"] > prev["wall_us"]:
                ratios.append(((r["t"] - prev["t"]) / CURVE_HZ) / ((r["wall_us"] - prev["wall_us"]) / 1e6))
            last[key] = r
    return ratios
