"""Run mplab's coupled-congestion-control C (``bpf/mplab_math.h`` through ``bpf/calc.bpf.c``) on chosen inputs.

Two backends run the very same source:

- ``BpfCalculator`` loads ``calc.bpf.o`` with libbpf (ctypes) and runs its syscall programs with
  ``BPF_PROG_TEST_RUN``: the arithmetic as the kernel's BPF JIT executes it (needs root).
- ``HostCalculator`` compiles ``calc.bpf.c`` for this machine (``-DMPLAB_HOST``) into a shared
  library and calls the same functions: no root, so the replay tests run anywhere a C compiler does.

Both take and return a ``CalcCtx`` (``struct calc_ctx``). ``harness.cc.replay`` feeds them events.
"""
from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

from harness.cc.bpfcc import BPF_DIR
from harness.errors import PreflightError
from harness.cc import libbpf

MAX_SF = 8
PROGRAMS = ("lia", "olia", "balia", "wvegas", "vegas")
EV_ACK, EV_LOSS, EV_SAMPLE, EV_ROUND = 0, 1, 2, 3


class SfC(ctypes.Structure):
    """struct mplab_sf."""

    _fields_ = [("sk", ctypes.c_uint64), ("cwnd", ctypes.c_uint32), ("srtt", ctypes.c_uint32),
                ("rate", ctypes.c_uint64), ("loss_int", ctypes.c_uint32), ("sampling", ctypes.c_uint32)]


class WinC(ctypes.Structure):
    """struct mplab_win."""

    _fields_ = [("cwnd", ctypes.c_uint32), ("ssthresh", ctypes.c_uint32), ("cnt", ctypes.c_uint32),
                ("clamp", ctypes.c_uint32), ("olia_cnt", ctypes.c_int32), ("mss", ctypes.c_uint32)]


class WvC(ctypes.Structure):
    """struct wvegas_state."""

    _fields_ = [("rate", ctypes.c_uint64), ("weight", ctypes.c_uint64), ("base_rtt", ctypes.c_uint32),
                ("sampled_rtt", ctypes.c_uint32), ("cnt_rtt", ctypes.c_uint32), ("alpha", ctypes.c_uint32),
                ("queue_delay", ctypes.c_uint32), ("doing", ctypes.c_uint32)]


class VgC(ctypes.Structure):
    """struct vegas_state (single-path Vegas)."""

    _fields_ = [("base_rtt", ctypes.c_uint32), ("min_rtt", ctypes.c_uint32), ("cnt_rtt", ctypes.c_uint32),
                ("doing", ctypes.c_uint32)]


class CalcCtx(ctypes.Structure):
    """struct calc_ctx: inputs, the window updated in place, and the arithmetic's outputs."""

    _fields_ = [("sf", SfC * MAX_SF), ("win", WinC), ("wv", WvC),
                ("me", ctypes.c_uint32), ("event", ctypes.c_uint32), ("acked", ctypes.c_uint32),
                ("rtt_us", ctypes.c_uint32), ("loss1", ctypes.c_uint32), ("loss2", ctypes.c_uint32),
                ("loss3", ctypes.c_uint32), ("retransmits", ctypes.c_uint32),
                ("lia_alpha", ctypes.c_uint64), ("lia_cnt", ctypes.c_uint32), ("balia_pad", ctypes.c_uint32),
                ("balia_ai", ctypes.c_uint64), ("balia_md", ctypes.c_uint64), ("olia_inc", ctypes.c_int64),
                ("olia_num", ctypes.c_int32), ("olia_den", ctypes.c_uint32), ("vg", VgC)]


class _TestRunOpts(ctypes.Structure):
    # struct bpf_test_run_opts (libbpf >= 0.7); sz tells libbpf which fields we know.
    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p), ("data_out", ctypes.c_void_p),
                ("data_size_in", ctypes.c_uint32), ("data_size_out", ctypes.c_uint32),
                ("ctx_in", ctypes.c_void_p), ("ctx_out", ctypes.c_void_p),
                ("ctx_size_in", ctypes.c_uint32), ("ctx_size_out", ctypes.c_uint32),
                ("retval", ctypes.c_uint32), ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32), ("batch_size", ctypes.c_uint32)]


class BpfCalculator:
    """``calc.bpf.o`` in the kernel, run by BPF_PROG_TEST_RUN; use as a context manager (root)."""

    name = "bpf"

    def __init__(self, obj: Path) -> None:
        lib = libbpf.library()
        lib.bpf_prog_test_run_opts.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
        self._lib = lib
        self._obj = libbpf.load(lib, obj)
        self._fds = {p: lib.bpf_program__fd(lib.bpf_object__find_program_by_name(self._obj, f"calc_{p}".encode()))
                     for p in PROGRAMS}

    def call(self, program: str, ctx: CalcCtx) -> CalcCtx:
        """Run ``calc_<program>`` on ``ctx``; a syscall program's context is copied back into it."""
        opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts))
        opts.ctx_in = ctypes.cast(ctypes.pointer(ctx), ctypes.c_void_p)
        opts.ctx_size_in = ctypes.sizeof(ctx)
        err = self._lib.bpf_prog_test_run_opts(self._fds[program], ctypes.byref(opts))
        if err:
            raise OSError(ctypes.get_errno(), f"BPF_PROG_TEST_RUN of calc_{program} failed ({err})")
        return ctx

    def close(self) -> None:
        if self._obj:
            self._lib.bpf_object__close(self._obj)
            self._obj = None

    def __enter__(self) -> BpfCalculator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def host_library_argv(out: Path, src_dir: Path = BPF_DIR, defines: tuple[str, ...] = ()) -> list[str]:
    """The compiler command that builds ``calc.bpf.c`` for this machine into the shared library ``out``."""
    # clang: what `make bpf` builds the BPF object with (harness/tools.py), so one compiler reads the source.
    return ["clang", "-O2", "-shared", "-fPIC", "-DMPLAB_HOST", *(f"-D{d}" for d in defines),
            "-o", str(out), str(src_dir / "calc.bpf.c")]


class HostCalculator:
    """The same C compiled for this machine (no BPF, no root): ``calc_<program>(ctx)`` called directly."""

    name = "host"

    def __init__(self, library: Path) -> None:
        self._lib = ctypes.CDLL(str(library))
        for p in PROGRAMS:
            getattr(self._lib, f"calc_{p}").argtypes = [ctypes.POINTER(CalcCtx)]

    @classmethod
    def build(cls, out_dir: Path, src_dir: Path = BPF_DIR) -> HostCalculator:
        """Compile ``calc.bpf.c`` from ``src_dir`` into ``out_dir`` and load it."""
        out = out_dir / "libmplab_calc.so"
        res = subprocess.run(host_library_argv(out, src_dir), capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise PreflightError(f"cannot build the host copy of calc.bpf.c: {res.stderr.strip()[-500:]}")
        return cls(out)

    def call(self, program: str, ctx: CalcCtx) -> CalcCtx:
        getattr(self._lib, f"calc_{program}")(ctypes.byref(ctx))
        return ctx

    def close(self) -> None:
        """Nothing to release (the library stays mapped until the process ends)."""

    def __enter__(self) -> HostCalculator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
