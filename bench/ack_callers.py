"""Which kernel path sends the receiver's ACKs in the shared-bottleneck rig: a BPF program on the transmit tracepoint.

    sudo .venv/bin/python bench/ack_callers.py --out bench/results/cc_ack_callers.jsonl -- \\
        .venv/bin/python bench/cc_bursts.py --delay 20 --bdp 2 --runs 1 --duration 40 --omit 5 [--single-path]

While the command after ``--`` runs, ``bench/ack_callers.bpf.c`` (built here with clang against the vmlinux.h that
``make bpf`` writes) counts every pure ACK sent to the rig's servers (ports 5301-5304) by flow, by how many segments
it acknowledges beyond the socket's previous ACK (0: a window update or a connection-level acknowledgement), and by
the kernel stack at the tracepoint. Each ACK is put down to the innermost of these frames in its stack:

- ``reader (tcp_recvmsg)``: TCP's application read (``tcp_cleanup_rbuf``, inlined into ``tcp_recvmsg_locked``);
- ``reader (mptcp_cleanup_rbuf)``: an MPTCP connection's application read, which acknowledges on its subflows;
- ``arrival (tcp_v4_do_rcv)``: a segment's processing (``__tcp_ack_snd_check``), in softirq or from the socket's
  backlog;
- ``delayed-ACK timer``, ``compressed-ACK timer`` (SACK compression during loss recovery);
- ``other``.

This kernel has no kprobe events and refuses fentry programs, so there is no probe on ``tcp_send_ack`` itself;
the tracepoint's stack holds its caller. Prints one table per run and appends a JSON line per run to ``--out``.
"""
from __future__ import annotations

import argparse
import bisect
import ctypes as C
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from harness.cc import libbpf
from harness.errors import PreflightError

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ack_callers.bpf.c"
VMLINUX_DIR = HERE.parent / "harness" / "cc" / "bpf" / "build"
DEPTH = 32
#: (server port, third byte of the receiver's address) -> flow, as bench/cc_bursts.py names them.
FLOWS = {(5301, 1): "sf1", (5301, 2): "sf2", (5302, 1): "tcp", (5303, 1): "path1", (5304, 2): "path2"}
#: Innermost first: the frame that says what sent the ACK.
CONTEXTS = (("tcp_v4_do_rcv", "arrival (tcp_v4_do_rcv)"), ("tcp_recvmsg_locked", "reader (tcp_recvmsg)"),
            ("mptcp_cleanup_rbuf", "reader (mptcp_cleanup_rbuf)"), ("tcp_delack_timer", "delayed-ACK timer"),
            ("tcp_delack_timer_handler", "delayed-ACK timer"), ("tcp_compressed_ack_kick", "compressed-ACK timer"))
MARKERS = dict(CONTEXTS)


class Key(C.Structure):
    _fields_ = [("dport", C.c_uint16), ("path", C.c_uint8), ("segs", C.c_uint8), ("stack", C.c_int32)]


def build(tmp: str) -> Path:
    if not (VMLINUX_DIR / "vmlinux.h").exists():
        sys.exit(f"ack_callers: {VMLINUX_DIR / 'vmlinux.h'} is missing: run `make bpf` first")
    obj = Path(tmp) / "ack_callers.bpf.o"
    subprocess.run(["clang", "-target", "bpf", "-O2", "-g", "-mcpu=v3", "-Wall", f"-I{VMLINUX_DIR}", "-c",
                    str(SOURCE), "-o", str(obj)], check=True)
    return obj


def kernel_symbols() -> tuple[list[int], list[str]]:
    lines = Path("/proc/kallsyms").read_text().splitlines()
    syms = sorted((int(a, 16), name) for a, _, name, *_ in (line.split() for line in lines))
    return [a for a, _ in syms], [n.split(".")[0] for _, n in syms]


def context(stack: list[str]) -> str:
    for name in stack:
        if name in MARKERS:
            return MARKERS[name]
    return "other"


def read_counts(lib: C.CDLL, obj: int) -> list[dict]:
    acks = lib.bpf_map__fd(lib.bpf_object__find_map_by_name(obj, b"acks"))
    stacks = lib.bpf_map__fd(lib.bpf_object__find_map_by_name(obj, b"stacks"))
    addrs, names = kernel_symbols()
    out, prev, key, val = [], None, Key(), C.c_uint64()
    while lib.bpf_map_get_next_key(acks, C.byref(prev) if prev is not None else None, C.byref(key)) == 0:
        k = Key.from_buffer_copy(key)
        lib.bpf_map_lookup_elem(acks, C.byref(k), C.byref(val))
        frames, stack = (C.c_uint64 * DEPTH)(), []
        if k.stack >= 0 and lib.bpf_map_lookup_elem(stacks, C.byref(C.c_uint32(k.stack)), frames) == 0:
            stack = [names[bisect.bisect_right(addrs, f) - 1] for f in frames if f]
        out.append({"flow": FLOWS.get((k.dport, k.path), f"{k.dport}/{k.path}"), "segments": k.segs,
                    "context": context(stack), "count": val.value, "stack": stack})
        prev = k
    return out


def summary(rows: list[dict]) -> dict[str, dict]:
    """Per flow and segments acknowledged (0, 1, 2, 3+): ACKs, their share of the flow's, and the share per context."""
    by: dict[tuple[str, str], Counter] = defaultdict(Counter)
    total: Counter = Counter()
    for r in rows:
        seg = str(r["segments"]) if r["segments"] < 3 else "3+"
        by[(r["flow"], seg)][r["context"]] += r["count"]
        total[r["flow"]] += r["count"]
    out: dict[str, dict] = defaultdict(dict)
    for (flow, seg), c in sorted(by.items()):
        n = sum(c.values())
        out[flow][seg] = {"acks": n, "share": round(n / total[flow], 4),
                          "by_context": {k: round(v / n, 4) for k, v in c.most_common()}}
    return dict(out)


def table(rec: dict) -> str:
    lines = [f"{' '.join(rec['command'])}", "| flow | segments | ACKs (share) | by context |", "|---|---|---|---|"]
    for flow, segs in rec["summary"].items():
        for seg, s in segs.items():
            ctx = "; ".join(f"{k} {100 * v:.1f} %" for k, v in s["by_context"].items())
            lines.append(f"| {flow} | {seg} | {s['acks']} ({100 * s['share']:.1f} %) | {ctx} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="append the run as a JSON line here")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run while tracing")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command to run after --")
    lib = libbpf.library()
    with tempfile.TemporaryDirectory(prefix="mplab-ack-callers-") as tmp:
        try:
            obj = libbpf.load(lib, build(tmp))
        except PreflightError:
            sys.exit("ack_callers: the BPF program did not load (root, and a kernel with BTF, are needed)")
        link = lib.bpf_program__attach(lib.bpf_object__find_program_by_name(obj, b"on_xmit"))
        if not link or lib.libbpf_get_error(link):
            sys.exit("ack_callers: could not attach to the net_dev_start_xmit tracepoint")
        try:
            rc = subprocess.run(command).returncode
            rows = read_counts(lib, obj)
        finally:
            lib.bpf_link__destroy(link)
            lib.bpf_object__close(obj)
    rec = {"command": command, "exit": rc, "summary": summary(rows), "time": time.time()}
    print(table(rec), flush=True)
    if args.out:
        with args.out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    sys.exit(rc)


if __name__ == "__main__":
    main()
