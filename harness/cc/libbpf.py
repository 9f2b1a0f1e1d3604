"""libbpf through ctypes: the library with the signatures mplab calls, and a BPF object opened and loaded.

``harness.cc.timers`` attaches the timer-scaling sock_ops program with it; the benches' arithmetic checker
(``rigs.cc.calc``) and ``bench/ack_callers.py`` load their own programs through it too.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

from harness.errors import PreflightError

_P, _S, _I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
#: name -> (return type, argument types)
SIGNATURES = {
    "bpf_object__open_file": (_P, [_S, _P]),
    "bpf_object__load": (_I, [_P]),
    "bpf_object__close": (None, [_P]),
    "bpf_object__find_program_by_name": (_P, [_P, _S]),
    "bpf_object__find_map_by_name": (_P, [_P, _S]),
    "bpf_program__fd": (_I, [_P]),
    "bpf_program__attach": (_P, [_P]),
    "bpf_link__destroy": (_I, [_P]),
    "bpf_map__fd": (_I, [_P]),
    "bpf_map_get_next_key": (_I, [_I, _P, _P]),
    "bpf_map_lookup_elem": (_I, [_I, _P, _P]),
    "bpf_map_update_elem": (_I, [_I, _P, _P, ctypes.c_uint64]),
    "bpf_prog_attach": (_I, [_I, _I, _I, ctypes.c_uint]),
    "libbpf_get_error": (ctypes.c_long, [_P]),
}


def library() -> ctypes.CDLL:
    """libbpf, its functions typed (``SIGNATURES``); errno kept for the caller."""
    name = ctypes.util.find_library("bpf")
    if name is None:
        raise PreflightError("libbpf.so not found: apt install libbpf1 (or libbpf-dev)")
    lib = ctypes.CDLL(name, use_errno=True)
    for fn, (res, args) in SIGNATURES.items():
        getattr(lib, fn).restype, getattr(lib, fn).argtypes = res, args
    return lib


def load(lib: ctypes.CDLL, obj: Path) -> int:
    """The object file ``obj`` opened and loaded into the kernel (closed again if the kernel refuses it)."""
    handle = lib.bpf_object__open_file(str(obj).encode(), None)
    if not handle or lib.libbpf_get_error(handle):
        raise PreflightError(f"cannot open {obj}: run `make bpf`")
    err = lib.bpf_object__load(handle)
    if err:
        lib.bpf_object__close(handle)
        raise PreflightError(f"the kernel refused {obj} (error {err}); see `bpftool prog load {obj} ...`")
    return handle
