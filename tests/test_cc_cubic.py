"""Cubic whose clock runs S times faster (harness/cc/cubic.py, harness/cc/bpf/cubic.bpf.c).

What a broken scaling gets wrong: an object that keeps S = 1 or the placeholder name (the patch missed), a
resolve that hands a run at S > 1 the kernel's Cubic or one S's object to another, and, on the real kernel, a
curve whose time runs at the kernel's clock instead of S times faster (the read-back of every update of the
cubic function: the scaled clock is the raw one x S, the target is the curve's arithmetic, and the curve's
time over an epoch advanced S x the raw clock).
"""
from __future__ import annotations

import statistics
import struct

import pytest

from harness.cc import KernelCC, bpfcc, cubic, resolve
from harness.cc.cubic import BpfCubic, curve_clock_ratios, curve_target, scaled_bytes
from harness.hosts.local import LocalHost
from harness.upkeep.clean import list_namespaces

ROOT = LocalHost("root")
needs_build = pytest.mark.skipif(not cubic.TEMPLATE.exists(), reason="BPF objects not built: run `make bpf`")


def _template() -> bytes:
    return (b"\x7fELF..." + struct.pack("<Q", cubic.MAGIC) + struct.pack("<II", 1, 250) + b"..."
            + cubic.PLACEHOLDER + b"\0" + b"sym" + cubic.PLACEHOLDER + b"\0")


def test_each_speedup_is_its_own_object_with_s_and_name_written():
    out = scaled_bytes(_template(), 8, 250)
    at = out.index(struct.pack("<Q", cubic.MAGIC)) + 8
    assert struct.unpack("<II", out[at:at + 8]) == (8, 250)
    assert cubic.PLACEHOLDER not in out and out.count(b"mplab_cubic_s8\0\0") == 2
    assert len(out) == len(_template())
    assert scaled_bytes(_template(), 16, 250) != out
    with pytest.raises(ValueError, match="configuration blocks"):
        scaled_bytes(b"no magic here" + cubic.PLACEHOLDER + b"\0", 8, 250)
    with pytest.raises(ValueError, match="not a whole number"):
        scaled_bytes(_template(), 2.5, 250)
    with pytest.raises(ValueError, match="not a whole number"):
        scaled_bytes(_template(), 65, 250)  # mplab_cubic_s65 would fit, but nothing above 64 is offered


def test_resolve_gives_cubic_at_s_its_own_clock_and_the_kernel_at_s_1(tmp_path):
    at8, at16 = resolve("cubic", "upstream", 8), resolve("cubic", "upstream", 16)
    assert isinstance(at8, BpfCubic) and at8.sock_name == "mplab_cubic_s8" and at16.sock_name == "mplab_cubic_s16"
    for s in (1, 1.0, 2.5):  # S = 1 and a fractional S: the kernel's own, and the records say so
        assert isinstance(resolve("cubic", "upstream", s), KernelCC)
        assert resolve("cubic", "upstream", s).implementation == "kernel:cubic"
    assert resolve("cubic", "multipath-tcp.org", 8).implementation == "kernel:cubic"
    assert resolve("lia", "upstream", 8).sock_name == "mplab_lia"  # the coupled ones have no clock to scale
    if cubic.TEMPLATE.exists():
        assert at8.implementation.startswith("bpf:mplab_cubic_s8@sha256:")
        assert at8.digest() != at16.digest() and len(at8.digest()) == bpfcc.DIGEST_HEX
        # The digest is the registered copy's: the same bytes scaled_object writes.
        written = cubic.scaled_object(8, out_dir=tmp_path)
        assert bpfcc.file_digest(written) == at8.digest()
    assert len("mplab_cubic_s64") <= 15  # the kernel's TCP_CA_NAME_MAX less its NUL


def _records(speedup: int, clock: int, n: int = 40, step_us: int = 4000) -> list[dict]:
    """Updates of one epoch as the program writes them, its curve time advancing ``clock`` x the raw clock."""
    out = []
    for i in range(n):
        wall = 10_000_000 + i * step_us
        t = ((i * step_us * clock) << 10) // 1_000_000
        out.append({"seq": i + 1, "wall_us": wall, "now_us": wall * speedup, "epoch_us": 5, "t": t, "k": 300,
                    "origin": 120, "target": curve_target(t, 300, 120), "cwnd": 100, "speedup": speedup,
                    "port": 5201, "dport": 40000})
    return out


def test_the_checker_measures_the_curve_clock_and_refuses_what_a_broken_port_writes():
    assert statistics.median(curve_clock_ratios(_records(8, 8))) == pytest.approx(8, rel=0.03)
    assert statistics.median(curve_clock_ratios(_records(1, 1))) == pytest.approx(1, rel=0.03)
    # S ignored by the curve: its time runs at the kernel's clock although the object says 8.
    assert statistics.median(curve_clock_ratios(_records(8, 1))) == pytest.approx(1, rel=0.03)
    broken = _records(8, 8)
    broken[3]["now_us"] = broken[3]["wall_us"]           # the clock read without x S
    with pytest.raises(ValueError, match="scaled clock"):
        curve_clock_ratios(broken)
    wrong = _records(8, 8)
    wrong[5]["target"] += 1
    with pytest.raises(ValueError, match="not the curve's"):
        curve_clock_ratios(wrong)
    # The curve's arithmetic: the plateau at K, C = 0.4 per second cubed (10 s past K: 400 packets).
    assert curve_target(300, 300, 120) == 120
    assert curve_target(300 + 10 * 1024, 300, 120) == 120 + 400   # 410/1024 x 10^3 = 400.4, floored
    assert curve_target(0, 2048, 1000) == 1000 - 3                     # 8 s before: 0.4 x 8 = 3.2


# ---------------------------------------------------------------- root: the real kernel

def _run(prefix: str, cc: BpfCubic) -> list[dict]:
    from rigs.bottleneck import SharedBottleneck

    # A 20 Mbit/s FIFO of 100 kB, 40 ms each way: a few losses in 8 s, so the flows spend most of it on the curve.
    with SharedBottleneck(prefix, [cc], rate_mbit=20, buffer_bytes=100_000, qdisc="htb",
                          path_delay_ms=(40.0, 40.0)) as bn:
        bn.compete(cc, duration_s=8, omit_s=1)
        # Read while the rig holds the registration: its teardown unregisters the object, and the kernel frees
        # the trace map with it once the last socket lets go.
        records = cubic.trace(ROOT, cc.speedup)
    assert not list_namespaces(ROOT, prefix)
    return records


@pytest.mark.root
@pytest.mark.machine
@needs_build
@pytest.mark.parametrize("speedup", [1, 8])
def test_the_curve_runs_s_times_faster_than_the_kernels_clock(prefix, speedup, tmp_path):
    """On the real kernel (MPTCP and TCP flows through one shaped FIFO): every update of the cubic function
    read back, the scaled clock is the raw one x S and the target the curve's, and over each epoch the curve's
    time advanced S x the kernel's clock (median of the epochs' steps within 10 %). At S = 1 that is the
    kernel's Cubic's clock, the reference; a port that ignores S shows 1 at S = 8, which fails."""
    cc = BpfCubic(speedup, out_dir=tmp_path)
    records = _run(prefix, cc)
    assert records, f"{cc.sock_name} wrote no update of the cubic function (no epoch in 8 s?)"
    ratios = curve_clock_ratios(records)
    assert len(ratios) >= 5, f"too few steps on the curve ({len(ratios)}) to measure its clock"
    print(cc.sock_name, "curve clock / kernel clock: median", round(statistics.median(ratios), 3),
          "over", len(ratios), "steps; K values", sorted({r["k"] for r in records})[:5])
    assert statistics.median(ratios) == pytest.approx(speedup, rel=0.10)
    if speedup > 1:
        # The planted break: the same trace read as if the clock were not scaled.
        with pytest.raises(ValueError, match="scaled clock"):
            curve_clock_ratios([{**r, "speedup": 1} for r in records])
