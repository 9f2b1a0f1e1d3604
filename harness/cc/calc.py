"""Run the coupled congestion controls' window arithmetic in the kernel, and the papers' equations in Python.

``BpfCalculator`` loads ``calc.bpf.o`` (the functions of ``bpf/mplab_math.h`` that the
struct_ops programs call) with libbpf through ctypes and runs its syscall program with
``BPF_PROG_TEST_RUN`` on chosen windows and RTTs. The ``reference_*`` functions are the
equations of RFC 6356 (LIA), Khalili et al. (OLIA), Peng et al. (BALIA) and Cao et al.
(wVegas) in floating point; tests compare the two.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass
from pathlib import Path

from harness.errors import PreflightError

MAX_SF = 8


class _Sf(ctypes.Structure):
    _fields_ = [("sk", ctypes.c_uint64), ("cwnd", ctypes.c_uint32), ("srtt_us", ctypes.c_uint32),
                ("rate", ctypes.c_uint64), ("loss_int", ctypes.c_uint32), ("pad", ctypes.c_uint32)]


class _Ctx(ctypes.Structure):
    _fields_ = [("sf", _Sf * MAX_SF), ("me", ctypes.c_uint32), ("total_alpha", ctypes.c_uint32),
                ("cwnd", ctypes.c_uint32), ("base_rtt_us", ctypes.c_uint32), ("rtt_us", ctypes.c_uint32),
                ("lia_cnt", ctypes.c_uint32), ("balia_cnt", ctypes.c_uint32), ("balia_md", ctypes.c_uint32),
                ("wvegas_alpha", ctypes.c_uint32), ("wvegas_diff", ctypes.c_uint32), ("olia_inc", ctypes.c_int64)]


class _TestRunOpts(ctypes.Structure):
    # struct bpf_test_run_opts (libbpf >= 0.7); sz tells libbpf which fields we know.
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p), ("data_out", ctypes.c_void_p),
                ("data_size_in", ctypes.c_uint32), ("data_size_out", ctypes.c_uint32),
                ("ctx_in", ctypes.c_void_p), ("ctx_out", ctypes.c_void_p),
                ("ctx_size_in", ctypes.c_uint32), ("ctx_size_out", ctypes.c_uint32),
                ("retval", ctypes.c_uint32), ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32), ("batch_size", ctypes.c_uint32)]


@dataclass(frozen=True)
class Subflow:
    """One subflow's inputs: window (packets), smoothed RTT (us), and the per-algorithm extras."""

    cwnd: int
    srtt_us: int
    loss_int: int = 0      # OLIA: bytes between the last two losses
    rate: int = 0          # wVegas: cwnd/rtt in 2^-16 packets per microsecond


@dataclass(frozen=True)
class Result:
    lia_cnt: int
    olia_inc: int
    balia_cnt: int
    balia_md: int
    wvegas_alpha: int
    wvegas_diff: int


class BpfCalculator:
    """The BPF arithmetic, loaded once; use as a context manager."""

    def __init__(self, obj: Path) -> None:
        name = ctypes.util.find_library("bpf")
        if name is None:
            raise PreflightError("libbpf.so not found: apt install libbpf1 (or libbpf-dev)")
        lib = ctypes.CDLL(name, use_errno=True)
        lib.bpf_object__open_file.restype = ctypes.c_void_p
        lib.bpf_object__open_file.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        lib.bpf_object__load.argtypes = [ctypes.c_void_p]
        lib.bpf_object__find_program_by_name.restype = ctypes.c_void_p
        lib.bpf_object__find_program_by_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        lib.bpf_program__fd.argtypes = [ctypes.c_void_p]
        lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
        lib.bpf_object__close.argtypes = [ctypes.c_void_p]
        lib.libbpf_get_error.argtypes = [ctypes.c_void_p]
        lib.libbpf_get_error.restype = ctypes.c_long
        self._lib = lib
        self._obj = lib.bpf_object__open_file(str(obj).encode(), None)
        if not self._obj or lib.libbpf_get_error(self._obj):
            raise PreflightError(f"cannot open {obj}: run `make bpf`")
        err = lib.bpf_object__load(self._obj)
        if err:
            self.close()
            raise PreflightError(f"the kernel refused {obj} (error {err}); see `bpftool prog load {obj} ...`")
        self._fds = {}
        for algo in ("lia", "olia", "balia_ai", "balia_md", "wvegas"):
            prog = lib.bpf_object__find_program_by_name(self._obj, f"calc_{algo}".encode())
            self._fds[algo] = lib.bpf_program__fd(prog)

    def run(self, subflows: list[Subflow], me: int, *, total_alpha: int = 10, cwnd: int = 0,
            base_rtt_us: int = 0, rtt_us: int = 0) -> Result:
        """Every function of mplab_math.h for subflow ``me`` of ``subflows``."""
        ctx = _Ctx()
        for i, s in enumerate(subflows):
            ctx.sf[i] = _Sf(0x1000 + i, s.cwnd, s.srtt_us, s.rate, s.loss_int, 0)
        ctx.me, ctx.total_alpha = me, total_alpha
        ctx.cwnd, ctx.base_rtt_us, ctx.rtt_us = cwnd, base_rtt_us, rtt_us
        for fd in self._fds.values():
            opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts))
            opts.ctx_in = ctypes.cast(ctypes.pointer(ctx), ctypes.c_void_p)
            opts.ctx_size_in = ctypes.sizeof(ctx)
            err = self._lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts))
            if err:
                raise OSError(ctypes.get_errno(), f"BPF_PROG_TEST_RUN failed ({err})")
        # A syscall program's context is copied back into ctx_in.
        return Result(ctx.lia_cnt, ctx.olia_inc, ctx.balia_cnt, ctx.balia_md, ctx.wvegas_alpha, ctx.wvegas_diff)

    def close(self) -> None:
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> BpfCalculator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- reference equations (floating point)

def reference_lia_cnt(sf: list[Subflow], me: int) -> float:
    """RFC 6356: ACKed packets per +1 packet on subflow ``me`` = 1 / min(alpha/cwnd_total, 1/cwnd_me)."""
    if len(sf) <= 1:
        return float(sf[me].cwnd)
    total = sum(s.cwnd for s in sf)
    alpha = total * max(s.cwnd / s.srtt_us ** 2 for s in sf) / sum(s.cwnd / s.srtt_us for s in sf) ** 2
    return 1.0 / min(alpha / total, 1.0 / sf[me].cwnd)


def reference_olia_inc(sf: list[Subflow], me: int) -> float:
    """Khalili et al.: per-ACK increase of w_r, in packets (w_r/rtt_r^2 / (sum w_p/rtt_p)^2 + eps_r/w_r)."""
    r = sf[me]
    n = len(sf)
    first = (r.cwnd / r.srtt_us ** 2) / sum(s.cwnd / s.srtt_us for s in sf) ** 2
    max_w = max(s.cwnd for s in sf)
    quality = [s.loss_int / s.srtt_us ** 2 for s in sf]
    best = max(quality)
    in_m = [s.cwnd == max_w for s in sf]
    in_bm = [q == best and not m for q, m in zip(quality, in_m)]
    eps = 0.0
    if any(in_bm):
        if in_bm[me]:
            eps = 1.0 / (n * sum(in_bm))
        elif in_m[me]:
            eps = -1.0 / (n * sum(in_m))
    return first + eps / r.cwnd


def reference_balia(sf: list[Subflow], me: int) -> tuple[float, float]:
    """Peng et al.: (ACKed packets per +1 packet, packets removed on a loss) for subflow ``me``."""
    r = sf[me]
    if len(sf) <= 1:
        return float(r.cwnd), r.cwnd / 2
    x = [s.cwnd / s.srtt_us for s in sf]
    xr, total = x[me], sum(x)
    alpha = max(x) / xr
    inc = (xr / (r.srtt_us * total ** 2)) * (1 + alpha) / 2 * (4 + alpha) / 5
    return 1.0 / inc, r.cwnd / 2 * min(alpha, 1.5)


def reference_wvegas_alpha(sf: list[Subflow], me: int, total_alpha: int = 10) -> float:
    """Cao et al.: alpha_r = max(2, total_alpha * rate_r / sum rate)."""
    total = sum(s.rate for s in sf)
    weight = sf[me].rate / total if total and sf[me].rate else 1.0
    return max(2.0, weight * total_alpha)


def reference_wvegas_diff(cwnd: int, base_rtt_us: int, rtt_us: int) -> float:
    """Vegas backlog: cwnd * (rtt - base_rtt) / rtt."""
    return max(0.0, cwnd * (rtt_us - base_rtt_us) / rtt_us)
