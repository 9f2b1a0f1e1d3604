"""What the reference arithmetic predicts at the theory bench's cells, by loss process (rigs/cc/sim.py).

Each coupled algorithm (two subflows, every update a call into rigs/cc/oracle.py, the
multipath-tcp.org modules transliterated), two uncoupled subflows (``reno``, ``cubic``), against
one Reno or Cubic flow at one FIFO link, under three loss processes:

* ``smooth``: drop-tail, ACKs back at the exact time (a perfectly ACK-clocked sender): an overflow
  drops the packet that one flow's window increase added, so losses go by increase, not by size;
* ``bursty``: drop-tail, ACKs handed back in batches every ``--tick`` ms (as the rig's user-space
  delay line and a loaded host do): each flow sends bursts, and a slow flow's bursts meet the
  full FIFO about as often as a fast flow's, so slow flows lose more per packet;
* ``random``: an unlimited FIFO and independent loss ``--loss`` per packet: events go by packets sent.

wVegas against Vegas (``--algorithms wvegas --competitors vegas --processes smooth``) is the delay-based
pairing: the packets each side holds in the FIFO (mean after the warm-up) are what the shares follow.

Prints MPTCP/TCP goodput (median of ``--seeds`` runs; the seed spreads the flows' start times and
draws the random losses) and the MPTCP connection's congestion events per packet over the TCP
flow's (about 1 when losses go by packets sent). Pure Python, no root:

    nice -n 10 uv run --frozen python bench/cc_sim.py --delays 0,20,50 --buffers 0.5,1,2 --seeds 3
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from rigs.cc.sim import FlowSpec, bdp_packets, loss_per_packet, simulate

PROCESSES = ("smooth", "bursty", "random")


def one_run(algo: str, comp: str, process: str, rtts: tuple[float, float], bdp: float, args,
            seed: int) -> dict:
    """One simulated competition: ratio and congestion events per packet, MPTCP over TCP."""
    specs = [FlowSpec("mptcp", algo, rtts[0]), FlowSpec("mptcp", algo, rtts[1]), FlowSpec("tcp", comp, rtts[0])]
    if process == "random":
        kw = {"loss_p": args.loss}
    else:
        kw = {"buffer_pkts": max(15, int(bdp * bdp_packets(args.rate, rtts[0]))),
              "tick_s": args.tick / 1000 if process == "bursty" else 0.0}
    r = simulate(specs, rate_mbit=args.rate, seconds=args.seconds, warmup_s=args.warmup, seed=seed,
                 ack_jitter_s=args.jitter / 1000, wvegas_backoff_at=args.wvegas_backoff_at, **kw)
    return {"ratio": r.ratio("mptcp", "tcp"), "events_per_packet": loss_per_packet(r, "mptcp", "tcp"),
            "queued": [r.backlog("mptcp"), r.backlog("tcp")], "wvegas_rounds": r.round_means("mptcp"),
            "backoffs": sum(len(b) for s, b in zip(specs, r.backoffs) if s.conn == "mptcp")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="20,50", help="one-way base delays, ms")
    ap.add_argument("--buffers", default="1", help="drop-tail FIFO depths in BDPs")
    ap.add_argument("--rtts", default="equal", help="equal, unequal (the second path's delay doubled)")
    ap.add_argument("--algorithms", default="lia,olia,balia,reno,cubic",
                    help="MPTCP: coupled lia/olia/balia/wvegas, or reno/cubic for two uncoupled subflows")
    ap.add_argument("--competitors", default="reno,cubic", help="reno, cubic, or vegas (tcp_vegas.c)")
    ap.add_argument("--processes", default=",".join(PROCESSES))
    ap.add_argument("--rate", type=float, default=20.0, help="bottleneck Mbit/s")
    ap.add_argument("--loss", type=float, default=0.002, help="random loss per packet")
    ap.add_argument("--tick", type=float, default=10.0, help="bursty: ACK batches every this many ms")
    ap.add_argument("--seconds", type=float, default=140.0, help="simulated seconds per run")
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--jitter", type=float, default=0.0, help="each ACK up to this many ms later (uniform)")
    ap.add_argument("--wvegas-backoff-at", type=float, default=float("inf"), metavar="S",
                    help="plant one wVegas backoff per subflow at S seconds (does it return to holding alpha?)")
    ap.add_argument("--out", type=Path, help="write every cell's result here (JSON)")
    args = ap.parse_args()
    rows, cells = [], []
    t0 = time.time()
    print("| delay (ms each way) | buffer (BDP) | RTTs | loss process | competitor | MPTCP | MPTCP/TCP median | range "
          "| congestion events per packet, MPTCP / TCP | packets queued, MPTCP / TCP | wVegas backoffs after the warm-up "
          "| wVegas by its rounds: diff (packets) / mean RTT - base (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in (float(x) for x in args.delays.split(",")):
        rtt = max(2 * d, 1.0) / 1000 + 0.0006    # the rig's idle RTT: the delay line plus ~0.6 ms of veths
        for rshape in args.rtts.split(","):
            rtts = (rtt, 2 * rtt if rshape == "unequal" else rtt)
            buffers = [float(x) for x in args.buffers.split(",")]
            for bdp in buffers:
                for process in args.processes.split(","):
                    if process == "random" and bdp != buffers[0]:
                        continue    # an unlimited FIFO: the depth does not matter
                    for comp in args.competitors.split(","):
                        for algo in args.algorithms.split(","):
                            runs = [one_run(algo, comp, process, rtts, bdp, args, s) for s in range(args.seeds)]
                            ratios = sorted(r["ratio"] for r in runs)
                            ev = statistics.median(r["events_per_packet"] for r in runs)
                            queued = [statistics.median(r["queued"][k] for r in runs) for k in (0, 1)]
                            backoffs = sorted(r["backoffs"] for r in runs)
                            wr = [r["wvegas_rounds"] for r in runs if r["wvegas_rounds"]]
                            wv = [statistics.median(x[k] for x in wr) for k in (0, 1)] if wr else None
                            cell = {"delay_ms": d, "bdp": bdp, "rtt": rshape, "process": process, "competitor": comp,
                                    "algorithm": algo, "ratios": ratios, "events_per_packet": ev, "queued": queued,
                                    "backoffs": backoffs, "wvegas_rounds": wv}
                            cells.append(cell)
                            line = (f"| {d:g} | {bdp:g} | {rshape} | {process} | {comp} | {algo} | "
                                    f"{statistics.median(ratios):.2f} | {ratios[0]:.2f}-{ratios[-1]:.2f} | {ev:.2f} | "
                                    f"{queued[0]:.1f} / {queued[1]:.1f} | {', '.join(map(str, backoffs))} | "
                                    + (f"{wv[0]:.1f} / {wv[1]:.1f} |" if wv else "- |"))
                            rows.append(line)
                            print(line, flush=True)
    print(f"({len(cells)} cells x {args.seeds} seeds in {time.time() - t0:.0f} s)")
    if args.out:
        args.out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "cells": cells},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
