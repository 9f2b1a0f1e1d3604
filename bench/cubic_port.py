"""mplab's Cubic (harness/cc/bpf/cubic.bpf.c) against the kernel's, at real time and S times faster.

Run as root after `make bpf`:

    uv run python bench/cubic_port.py [--runs 2] [--duration 12] [--speedups 1,8] [--out FILE]

At each S, one shaped path (rigs/bottleneck.py: HTB 20 Mbit/s x S, a FIFO of one bandwidth-delay product in
bytes, 20 ms / S each way) carries three flows of one implementation at a time (two single-path flows and a
third TCP flow, all under it): the kernel's ``cubic`` and mplab's ``mplab_cubic_s<S>``. The kernel's
tcp_probe tracepoint gives every sender ACK's window (rigs/cwnd_trace.py), and per flow: loss epochs, W_max,
the cut at a loss (Cubic's beta, 0.7), how long the window took to climb back to W_max, and Linux Cubic's
climb for the same loss (in wall seconds at the path's RTT). At S = 1 both implementations should match each
other and Cubic's curve; at S = 8 the port should climb back about 8 x faster per wall second than the
kernel's Cubic, which, on the same path, climbs at its real-time pace (climb over Cubic's near 1 x S when Cubic's
climb is computed at the RTT the path has). Prints medians per implementation and S; ``--out`` keeps them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from harness.cc import KernelCC
from harness.cc.cubic import BpfCubic
from harness.upkeep.clean import clean_prefix
from rigs.bottleneck import MPTCP_PORT, PATH_PORTS, TCP_PORT, SharedBottleneck
from rigs.cwnd_trace import CwndTrace, flow_report, name_sockets

#: The segment size of a plain TCP flow on a 1,500-byte MTU with timestamps.
MSS = 1448


def flow_of(port: int, dst: str) -> str | None:
    if port == TCP_PORT:
        return "tcp"
    if port in PATH_PORTS:
        return f"path{PATH_PORTS.index(port) + 1}"
    return None


def one(s: int, impl: str, args: argparse.Namespace) -> dict:
    """One run of three flows of ``impl`` (``kernel`` or ``port``) at speed-up ``s``: per flow the window figures."""
    cc = KernelCC("cubic") if impl == "kernel" else BpfCubic(s, out_dir=Path(tempfile.mkdtemp(prefix="mplab-cub-")))
    prefix = f"mplab-cp{uuid.uuid4().hex[:4]}-"
    rate, delay = args.rate * s, args.delay / s
    buf = int(rate * 1e6 / 8 * (4 * delay / 1000))  # one BDP of the 2 x (2 x delay) round trip
    try:
        with SharedBottleneck(prefix, [cc], rate_mbit=rate, buffer_bytes=buf, qdisc="htb",
                              path_delay_ms=(2 * delay, 2 * delay)) as bn, \
                tempfile.TemporaryDirectory(prefix="mplab-cubic-port-") as tmp:
            with CwndTrace([MPTCP_PORT, TCP_PORT, *PATH_PORTS], tmp) as trace:
                c = bn.compete_single_path(cc, duration_s=args.duration, omit_s=args.omit, tcp_cc=cc)
            acks, states = trace.read()
    finally:
        clean_prefix(prefix)
    names = name_sockets(acks, flow_of)
    since = min(a.t for a in acks) + args.omit if acks else None
    flows = flow_report(acks, states, names, MSS, since=since)
    return {"s": s, "impl": cc.implementation, "mbit": round((c.mptcp_bytes + c.tcp_bytes) * 8 / 1e6
                                                             / args.duration / s, 2),
            "flows": {n: {k: f[k] for k in ("loss_epochs", "w_max_median", "cut_median", "regain_s_median",
                                             "cubic_regain_s_median", "regain_over_cubic_median", "cwnd_mean")}
                      for n, f in flows.items()}}


def _med(xs: list) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speedups", default="1,8")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=int, default=12, help="seconds of wall time per run")
    ap.add_argument("--omit", type=int, default=2)
    ap.add_argument("--rate", type=float, default=20.0, help="Mbit/s at S = 1")
    ap.add_argument("--delay", type=float, default=10.0, help="ms each way per hop pair at S = 1 (RTT 4 x this)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    recs = []
    for s in (int(x) for x in args.speedups.split(",")):
        for r in range(args.runs):
            for impl in (("kernel", "port") if r % 2 == 0 else ("port", "kernel")):
                rec = one(s, impl, args)
                recs.append(rec)
                print(json.dumps(rec), flush=True)
    print("\n| S | implementation | Mbit/s (testbed) | loss epochs | W_max | cut | climb (wall s) | Cubic's climb (wall s) "
          "| climb / Cubic's |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sorted({r["s"] for r in recs}):
        for impl in sorted({r["impl"] for r in recs if r["s"] == s}):
            mine = [r for r in recs if r["s"] == s and r["impl"] == impl]
            fl = [f for r in mine for f in r["flows"].values()]
            print(f"| {s} | {impl.split('@')[0]} | {_med([r['mbit'] for r in mine])} | "
                  f"{_med([f['loss_epochs'] for f in fl])} | {_med([f['w_max_median'] for f in fl])} | "
                  f"{_med([f['cut_median'] for f in fl])} | {_med([f['regain_s_median'] for f in fl])} | "
                  f"{_med([f['cubic_regain_s_median'] for f in fl])} | {_med([f['regain_over_cubic_median'] for f in fl])} |")
    if args.out:
        args.out.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
