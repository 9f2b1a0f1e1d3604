"""Where the shared FIFO's drops fall, packet by packet (rigs/capture.py on rigs/bottleneck.py).

Runs cells of ``bench/cc_theory.py`` (one MPTCP connection with two subflows and one single-path flow through
one router link: HTB at ``--rate`` Mbit/s over a byte FIFO of ``--bdp`` x BDP, ``--delay`` ms each way) with
tcpdump on both sides of the FIFO, and prints per flow: packets, drops per packet, loss events per 1000
packets, the mean and 95th-percentile train a packet arrives in, and the mean train a drop fell in.

The question it answers (docs/congestion-control.md): two uncoupled Cubic subflows against one Cubic
flow at 2 BDP took 0.69-0.70 of it on the rig where the packet model gives 1.46-1.98, with 3-6 times the Cubic
flow's loss events per packet. Were the subflows' packets arriving in longer trains than the Cubic flow's (they
were not: 2.0-2.2 packets for every flow), the drop-tail FIFO would drop the trains' tails. The controls: two
single-path flows in place of the connection (``--single-path``), one side starting first (``--tcp-lead``), and
a connection that keeps one subflow (``--subflows 1``).

``--cwnd`` adds each flow's window ACK by ACK (the kernel's tcp_probe, rigs/cwnd_trace.py: loss epochs, the cut,
the climb beside Linux Cubic's, how often the window was full), the MPTCP-level counters the run moved and the
MPTCP-level socket's send buffer; ``--wmem-max`` and ``--window`` change the sender's buffers (controls).
``--ack-clock`` adds a capture on the sender's own interface: how soon and with how many segments each flow answers
its ACKs, how long its ACKs take to come back, how the connection-level DATA_ACK moves, and what released each
segment the flow sent (its own ACK, an ACK of the other subflow, none) with the FIFO's drops by cause, and whether the
ACK covering each train starts at it, by the parity of the window it was sent into. ``--receiver`` adds captures on
the receiver's interfaces: what sent each ACK (a segment's arrival, another subflow's, or later).
``--single-path-mptcp`` is the control with MPTCP: an MPTCP connection of one subflow on each path. ``--jitter MS``
makes the delay line hold each packet up to MS longer (uniform, order kept): whether the subflows' extra drops are
a phase effect of the rig's clockwork timing. ``--quickack`` makes the receiver acknowledge every segment at once (its
routes' ``quickack 1``): without delayed ACKs each ACK covers one segment. ``--strip-psh tcp`` (or ``all``) clears
PSH on the TCP flow's data (every flow's) before the receiver's TCP sees it: Linux's TCP receiver acknowledges a
pushed full-sized segment as soon as a read empties its queue (since 6.6), which ends its ACKs where the sender's
pushes end.

    nice -n 10 uv run --frozen python bench/cc_bursts.py --delay 20 --bdp 2 --algorithms cubic,lia \\
        --competitor cubic --runs 2 --duration 30 --out bench/results/cc_bursts.jsonl
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.cc import resolve
from rigs.bottleneck import MPTCP_PORT, PATH_PORTS, SERVER, TCP_PORT, SharedBottleneck
from rigs.cwnd_trace import CwndTrace, follows, name_sockets
from rigs.cwnd_trace import flow_report as flow_windows
from rigs.capture import (
    SPREAD_BINS, Capture, ack_clock, ack_pairing, ack_return, ack_spread, backlog_at_arrivals, backlog_by_flow,
    came_after, data_acks, dropped, drops_by_cause, episode_shares, episodes, flow_report, phase_by_flow, receiver_acks,
    send_causes, since_departure, spread_bin, train_alignment,
)

PREFIX = "mplab-bench-bur-"
#: ``--strip-psh``: whose data reaches the receiver's TCP without PSH (server ports).
STRIP_PSH = {None: (), "tcp": (TCP_PORT,), "all": (MPTCP_PORT, TCP_PORT, *PATH_PORTS)}
MSS_WIRE = 1514
#: The rig's segment size (1500-byte MTU, IPv4, TCP timestamps).
MSS = 1448


def flow_of(port: int, dst: str) -> str | None:
    if port == TCP_PORT:
        return "tcp"
    if port == MPTCP_PORT:
        return "sf1" if dst.startswith("10.77.1.") else "sf2"
    if port in PATH_PORTS:
        return f"path{PATH_PORTS.index(port) + 1}"
    return None


def run(args, log) -> None:
    rtt_s = 2 * args.delay / 1000
    buf = int(args.rate * 1e6 / 8 * rtt_s * args.bdp)
    pkt_s = MSS_WIRE * 8 / (args.rate * 1e6)
    fifo_s = buf * 8 / (args.rate * 1e6)   # a full FIFO's wait
    max_sojourn = fifo_s + 0.05            # and HTB's bursts
    rtt_full = rtt_s + fifo_s              # the round trip through a full FIFO
    algos = [resolve(a) for a in args.algorithms]
    comp = resolve(args.competitor)
    ccs = {cc.sock_name: cc for cc in [*algos, comp]}
    with SharedBottleneck(PREFIX, list(ccs.values()), rate_mbit=args.rate, buffer_bytes=buf, qdisc="htb",
                          path_delay_ms=(2 * args.delay, 2 * args.delay), subflows=args.subflows,
                          window=args.window, block=args.block, jitter_ms=args.jitter,
                          receiver_quickack=args.quickack, receiver_strip_psh=STRIP_PSH[args.strip_psh]) as bn:
        if args.wmem_max:  # the sender's socket buffers' ceiling (an MPTCP connection's is its subflows' sum)
            bn.snd.run(["sysctl", "-qw", f"net.ipv4.tcp_wmem=4096 16384 {args.wmem_max}"])
        for rnd in range(args.runs):
            for cc in (algos if rnd % 2 == 0 else algos[::-1]):
                with tempfile.TemporaryDirectory(prefix="mplab-bursts-") as tmp, contextlib.ExitStack() as stack:
                    trace = (stack.enter_context(CwndTrace([MPTCP_PORT, TCP_PORT, *PATH_PORTS], tmp)) if args.cwnd
                             else None)
                    sent = (stack.enter_context(Capture.at_sender(bn.snd, "s0", SERVER, tmp)) if args.ack_clock
                            else None)
                    at_rcv = (stack.enter_context(Capture.at_receiver(bn.rcv, ("c1", "c2"), SERVER, tmp))
                              if args.receiver else None)
                    stripped_before = bn.psh_stripped()
                    with Capture(bn.bn, "b0", "b1", SERVER, tmp) as cap:
                        if args.single_path or args.single_path_mptcp:
                            c = bn.compete_single_path(cc, duration_s=args.duration, omit_s=args.omit, tcp_cc=comp,
                                                       tcp_lead_s=args.tcp_lead, mptcp=args.single_path_mptcp)
                        else:
                            c = bn.compete(cc, duration_s=args.duration, omit_s=args.omit, tcp_cc=comp,
                                           tcp_lead_s=args.tcp_lead, probe=args.cwnd)
                    stripped = bn.psh_stripped()
                    arrivals, departures = cap.read("in", flow_of), cap.read("out", flow_of)
                    stack.close()  # the trace and the sender's capture end with the run
                    clock = None
                    if sent and arrivals:
                        acks, sent_data = sent.read_acks("acks", flow_of), sent.read("data", flow_of)
                        clock = ack_clock(acks, sent_data, since=arrivals[0].t + args.omit,
                                          connections=[("sf1", "sf2")])
                        for flow, ret in ack_return(acks, departures, since=arrivals[0].t + args.omit).items():
                            clock.setdefault(flow, {}).update(ret)
                        for flow, pairing in ack_pairing(acks, sent_data, since=arrivals[0].t + args.omit).items():
                            clock.setdefault(flow, {})["pairing"] = pairing
                        for flow, aligned in train_alignment(acks, sent_data, since=arrivals[0].t + args.omit).items():
                            clock.setdefault(flow, {})["alignment"] = aligned
                        moved = data_acks(acks, ("sf1", "sf2"), since=arrivals[0].t + args.omit)
                    receiver = None
                    if at_rcv and arrivals:   # what sent each ACK at the receiver
                        got = [p for dev in ("c1", "c2") for p in at_rcv.read(dev, flow_of)]
                        sent_back = [a for dev in ("c1", "c2") for a in at_rcv.read_acks(dev, flow_of)]
                        receiver = {"flows": receiver_acks(got, sent_back, since=arrivals[0].t + args.omit,
                                                           connections=[("sf1", "sf2")],
                                                           sent=sent_data if sent else ()),
                                    "kernel_drops": at_rcv.kernel_drops}
                    sizes = segment_sizes(arrivals)
                    windows = cwnd_report(trace, args.omit, sizes) if trace else None
                if not arrivals:
                    sys.exit("cc_bursts: the capture saw no data packets")
                drops = dropped(arrivals, departures, max_sojourn)
                since = arrivals[0].t + args.omit
                if clock is not None:   # what released each segment the FIFO dropped
                    rel = send_causes(acks, sent_data, connections=[("sf1", "sf2")])
                    by_cause = drops_by_cause(sent_data, rel, arrivals, drops, since=since,
                                              spread=ack_spread(rel, sent_data, departures), service_s=pkt_s)
                flows = flow_report(arrivals, drops, pkt_s / 2, rtt_full, since=since)
                eps = episodes(arrivals, drops, rtt_full, since=since)
                backlog = backlog_at_arrivals(arrivals, drops, departures)
                met = backlog_by_flow(arrivals, backlog, buf / MSS_WIRE, since=since)
                gaps = since_departure(arrivals, departures)
                phase = phase_by_flow(arrivals, drops, backlog, gaps, buf / MSS_WIRE, pkt_s, since=since,
                                      after=came_after(arrivals, gaps))
                short = short_segments(arrivals, sizes, since)
                for flow, share in episode_shares(eps, flows).items():
                    flows[flow]["short_segments"] = short.get(flow)
                    flows[flow]["phase"] = phase.get(flow)
                    flows[flow].update(share)
                    flows[flow].update(met.get(flow, {}))
                    # When its first data packet reached the FIFO, after the run's first (its head start or lag).
                    flows[flow]["first_packet_s"] = round(min(p.t for p in arrivals if p.flow == flow)
                                                          - arrivals[0].t, 4)
                rec = {"delay_ms": args.delay, "bdp": args.bdp, "buffer_bytes": buf, "rate_mbit": args.rate,
                       "round": rnd, "algorithm": cc.algorithm, "cc_impl": cc.implementation,
                       "side": "two single-path flows" if args.single_path
                       else "two single-subflow MPTCP connections" if args.single_path_mptcp
                       else ("mptcp" if args.subflows == 2 else "mptcp, one subflow"), "tcp_lead_s": args.tcp_lead,
                       "competitor": comp.algorithm, "duration_s": args.duration, "omit_s": args.omit,
                       "wmem_max": args.wmem_max, "window": args.window, "block": args.block,
                       "jitter_ms": args.jitter, "receiver_quickack": args.quickack,
                       "receiver_strip_psh": args.strip_psh,
                       "psh_stripped": None if stripped is None else stripped - stripped_before,
                       "ratio": round(c.ratio, 3), "train_gap_s": pkt_s / 2,
                       "capture_kernel_drops": cap.kernel_drops, "flows": flows, "episodes": len(eps),
                       "episode_flows": [sorted(e) for e in eps], "time": time.time()}
                if clock is not None:
                    rec["ack_clock"] = {"flows": clock, "data_ack": moved, "kernel_drops": sent.kernel_drops,
                                        "by_cause": by_cause}
                    print(ack_clock_table([rec]), flush=True)
                    print(cause_table([rec]), flush=True)
                if receiver is not None:
                    rec["receiver"] = receiver
                    print(receiver_table([rec]), flush=True)
                if windows is not None:
                    rec["cwnd"] = windows
                    # The MPTCP-level counters the run moved (nstat in both namespaces: reinjections, duplicates).
                    rec["mptcp_counters"] = {k: v for k, v in (c.counters or {}).items() if ":MPTcp" in k}
                    rec["msk_memory"] = msk_summary(c.msk_memory, args.omit)
                log(rec)
                print(f"{cc.algorithm} vs {comp.algorithm} round {rnd}: ratio {c.ratio:.2f}", flush=True)
                print(table([rec]), flush=True)
                if windows is not None:
                    print(cwnd_table([rec]), flush=True)


def side_of(rec: dict) -> str:
    """A recorded run's other side (the MPTCP connection, the single-path pair, ...) and how the receiver ACKed."""
    return (rec.get("side", "mptcp") + (", receiver quickack" if rec.get("receiver_quickack") else "")
            + (f", PSH stripped ({rec['receiver_strip_psh']})" if rec.get("receiver_strip_psh") else ""))


def ack_clock_table(recs: list[dict]) -> str:
    """Per run and flow (``--ack-clock``): how the sender answered the flow's ACKs (rigs/capture.py ``ack_clock``)."""
    lines = ["| side | round | ratio | flow | advancing ACKs | answered within 0.1 ms | lag median / p90 / p99 (ms) | "
             "unanswered before the next | first answer on another flow | ACK back after the FIFO sent: median, "
             "p10-p90 (ms) | segments sent per advancing ACK: 0 / 1 / 2 / 3 / 4+ |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        for flow, f in (r.get("ack_clock") or {}).get("flows", {}).items():
            lines.append(f"| {r.get('side', 'mptcp')} | {r['round']} | {r['ratio']:.2f} | {flow} | {f['advancing_acks']} | "
                         f"{f['prompt']:.3f} | {f['lag_ms_median']} / {f['lag_ms_p90']} / {f['lag_ms_p99']} | "
                         f"{f['unanswered']:.3f} | {f.get('answered_elsewhere', '-')} | {f.get('return_ms_median', '-')}, "
                         f"{f.get('return_ms_p10', '-')}-{f.get('return_ms_p90', '-')} | "
                         f"{' / '.join(f'{v:.3f}' for v in f['sent_per_ack'].values()) if f.get('sent_per_ack') else '-'} |")
    return "\n".join(lines)


def receiver_table(recs: list[dict]) -> str:
    """Per run and flow (``--receiver``): what sent its ACKs at the receiver (rigs/capture.py ``receiver_acks``), and
    from the sender's capture (``--ack-clock``) whether the ACK covering a train starts at it, by the window's parity
    (``train_alignment``)."""
    lines = ["| side | round | ratio | flow | advancing ACKs | 1 / 2 / 3+ segments | sent at an arrival / another "
             "subflow's / later | later: median, p90 (ms) | held at a second segment | ACKs without progress: "
             "arrival / other / later | straddling, by trigger | trains with k odd; start when even / odd | "
             "PSH: arrivals / ACKs ending on one / 1-segment ACKs on one | connection out of order after an "
             "arrival; 1-segment ACKs after one in order / out of order |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        for flow, f in sorted(((r.get("receiver") or {}).get("flows") or {}).items()):
            st = f.get("straddling") or {}
            al = ((r.get("ack_clock") or {}).get("flows", {}).get(flow) or {}).get("alignment")
            aligned = f"{al['odd']}; {al['starts_when_even']} / {al['starts_when_odd']}" if al else "-"
            lines.append(
                f"| {side_of(r)} | {r['round']} | {r['ratio']:.2f} | {flow} | {f['acks']} | "
                f"{f['segments_1']:.3f} / {f['segments_2']:.3f} / {f['segments_3+']:.3f} | "
                f"{f['by_arrival']:.3f} / {f['by_sibling']:.3f} / {f['by_later']:.3f} | "
                f"{f['later_ms_median']}, {f['later_ms_p90']} | {f['held']} | {f['acks_still']}: "
                f"{f['still_by_arrival']} / {f['still_by_sibling']} / {f['still_by_later']} | "
                f"{' / '.join(str(st.get(g)) for g in ('arrival', 'sibling', 'later')) if st else '-'} | "
                f"{aligned} | {f.get('pushed', '-')} / {f.get('ends_on_push', '-')} / "
                f"{f.get('one_segment_pushed', '-')} | {f.get('out_of_order', '-')}; "
                f"{' / '.join(str(v) for v in f['one_segment_after'].values()) if f.get('one_segment_after') else '-'} |")
    return "\n".join(lines)


def cause_table(recs: list[dict]) -> str:
    """Per recorded run and flow: what released the segments it sent (``rigs.capture.send_causes``), each cause's
    share of its segments and the share of those the FIFO dropped (per 1000)."""
    names = ("own 1", "own 2", "own 3+", "own-still", "sibling", "none")
    lines = ["| side | jitter (ms) | round | ratio | flow | " + " | ".join(
             f"{n}: share / drops per 1000" for n in names) + " | ACKs of 1 segment / straddling |",
             "|---|---|---|---|---|" + "---|" * (len(names) + 1)]
    for r in recs:
        for flow, causes in sorted(((r.get("ack_clock") or {}).get("by_cause") or {}).items()):
            cells = [f"{100 * c['share']:.1f} % / {1000 * c['drop_rate']:.2f}" if (c := causes.get(n)) else "-"
                     for n in names]
            pr = ((r["ack_clock"].get("flows") or {}).get(flow) or {}).get("pairing")
            cells.append(f"{100 * pr['segments_1']:.1f} % / {100 * (pr['straddling'] or 0):.1f} %" if pr else "-")
            lines.append(f"| {side_of(r)} | {r.get('jitter_ms') or 0:g} | {r['round']} | "
                         f"{r['ratio']:.2f} | {flow} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def spread_table(recs: list[dict]) -> str:
    """Per cell (side, jitter) and flow, the runs pooled: the second segment of each pair its own ACK released, by
    how long the FIFO took to send the segments that ACK acknowledged (``rigs.capture.ack_spread``, in service times):
    segments and the FIFO's drops per 1000."""
    bins = [spread_bin(b) for b in SPREAD_BINS]
    pooled: dict[tuple, dict[str, list[int]]] = {}
    for r in recs:
        for flow, causes in ((r.get("ack_clock") or {}).get("by_cause") or {}).items():
            cell = pooled.setdefault((side_of(r), r.get("jitter_ms") or 0, flow), {})
            for b in bins:
                c = causes.get(f"own 2 spread {b}")
                if c:
                    tot = cell.setdefault(b, [0, 0])
                    tot[0] += c["segments"]
                    tot[1] += c["dropped"]
    lines = ["| side | jitter (ms) | flow | " + " | ".join(f"spread {b}: segments, drops per 1000" for b in bins) + " |",
             "|---|---|---|" + "---|" * len(bins)]
    for (side, jitter, flow), cell in sorted(pooled.items()):
        cells = [f"{cell[b][0]}, {1000 * cell[b][1] / cell[b][0]:.2f}" if b in cell else "-" for b in bins]
        lines.append(f"| {side} | {jitter:g} | {flow} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def msk_summary(memory: tuple, omit_s: float) -> dict | None:
    """The MPTCP-level socket's send buffer over the run after the warm-up: medians of its size and of what it
    held, and how often it held at least 90 % of it (the application cannot write more; the subflows get no
    new data)."""
    kept = [(tb, w) for t, tb, w in memory if t >= omit_s]
    if not kept:
        return None
    return {"samples": len(kept), "sndbuf_median": statistics.median(tb for tb, _ in kept),
            "queued_median": statistics.median(w for _, w in kept),
            "at_least_90pct_full": round(sum(1 for tb, w in kept if w >= 0.9 * tb) / len(kept), 3)}


def segment_sizes(arrivals: list) -> dict[str, int]:
    """Each flow's usual data segment (bytes), as the capture saw them."""
    sizes: dict[str, collections.Counter] = {}
    for p in arrivals:
        sizes.setdefault(p.flow, collections.Counter())[p.end - p.seq] += 1
    return {flow: c.most_common(1)[0][0] for flow, c in sizes.items()}


def short_segments(arrivals: list, usual: dict[str, int], since: float) -> dict[str, float]:
    """Per flow, the share of its data packets after ``since`` shorter than its usual segment (``usual``:
    ``segment_sizes``): a window counted in bytes over the usual segment reads short ones as room that is not
    there."""
    counts: dict[str, list[int]] = {}
    for p in arrivals:
        if p.t >= since:
            c = counts.setdefault(p.flow, [0, 0])
            c[0] += p.end - p.seq < usual[p.flow]
            c[1] += 1
    return {flow: round(short / n, 4) for flow, (short, n) in counts.items()}


def cwnd_report(trace: CwndTrace, omit_s: float, mss: dict[str, int]) -> dict:
    """Per flow, what its window did after the warm-up (rigs/cwnd_trace.py), and whether the trace lost events."""
    acks, states = trace.read()
    if not acks:
        sys.exit("cc_bursts: the window trace saw no ACKs (tracefs, or the tcp_probe tracepoint, missing?)")
    since = min(a.t for a in acks) + omit_s
    names = name_sockets(acks, flow_of)
    return {"overrun": trace.overrun, "mss": mss,
            "flows": flow_windows(acks, states, names, {n: mss.get(n, MSS) for n in names.values()}, since=since)}


def cwnd_table(recs: list[dict]) -> str:
    """Per run and flow (``--cwnd``): loss epochs per second, W_max, the cut, the epoch, the climb back to
    W_max against Linux Cubic's for the same loss, and how often, at an ACK, the flow had a full window out and
    how often the receiver's window had no room; and the ACKs: segments each acknowledged (mean), the share
    that acknowledged more than two (stretch ACKs), and the median gap between ACKs that moved the window."""
    lines = ["| side | round | ratio | flow | mean cwnd | loss epochs/s | W_max | cut | epoch (s) | climb (s) | "
             "Cubic's climb (s) | climb / Cubic's | window-limited | receiver-window-limited | segments per ACK | "
             "stretch ACKs | ACK gap (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        # Runs recorded before each flow's own segment size was kept counted every window in 1,448-byte
        # segments, which reads an MPTCP subflow's full window (shorter segments) as not full: not shown.
        sized = "mss" in (r.get("cwnd") or {})
        for flow, f in (r.get("cwnd") or {}).get("flows", {}).items():
            if not sized:
                f = {**f, "window_limited": "-", "rwnd_limited": "-"}
            lines.append(f"| {r.get('side', 'mptcp')} | {r['round']} | {r['ratio']:.2f} | {flow} | {f['cwnd_mean']:.1f} | "
                         f"{f['loss_epochs_per_s']} | {f['w_max_median']} | {f['cut_median']} | {f['epoch_s_median']} | "
                         f"{f['regain_s_median']} ({f['regained']}) | {f['cubic_regain_s_median']} | "
                         f"{f['regain_over_cubic_median']} | {f['window_limited']} | {f['rwnd_limited']} | "
                         f"{f.get('acked_segments_mean', '-')} | {f.get('stretch_acks', '-')} | "
                         f"{f.get('ack_gap_ms_median', '-')} |")
    return "\n".join(lines)


def table(recs: list[dict]) -> str:
    lines = ["| algorithm | round | ratio | flow | packets | drops/pkt | events/1k pkts | train (mean) | "
             "train p95 | train of a drop | overflow episodes hit (alone) of all | drops per episode hit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recs:
        for flow, f in r["flows"].items():
            tod, dpe = f["train_of_drops_mean"], f.get("drops_per_episode_hit")
            side = "" if r.get("side", "mptcp") == "mptcp" else f" ({r['side']})"
            lead = r.get("tcp_lead_s") or 0
            side += (f", TCP {lead:g} s ahead" if lead > 0 else f", TCP {-lead:g} s behind") if lead else ""
            lines.append(f"| {r['algorithm']}{side} | {r['round']} | {r['ratio']:.2f} | {flow} | {f['packets']} | "
                         f"{f['drops_per_packet']:.4f} | {f['events_per_1k_packets']:.2f} | {f['train_mean']:.1f} | "
                         f"{f['train_p95']:.0f} | {'-' if tod is None else f'{tod:.1f}'} | "
                         f"{f.get('episodes_hit', '-')} ({f.get('episodes_alone', '-')}) of {r.get('episodes', '-')} | "
                         f"{'-' if dpe is None else f'{dpe:.1f}'} |")
    return "\n".join(lines)


def summary(recs: list[dict]) -> str:
    """Per cell (delay, the delay line's jitter, the MPTCP connection or the single-path pair, the head start): the
    share's median and range, and per flow the medians of drops per 1000 packets, overflow episodes hit (of all)
    and drops per episode hit, and when its first packet came."""
    cells: dict[tuple, list[dict]] = {}
    for r in recs:
        cells.setdefault((r["delay_ms"], r.get("jitter_ms") or 0, side_of(r), r.get("tcp_lead_s") or 0), []).append(r)
    med = statistics.median
    lines = ["| delay (ms) | jitter (ms) | side | TCP head start (s) | share of the TCP flow | per flow: drops per 1000 "
             "packets, episodes hit of all, drops per episode hit, first packet (s) |", "|---|---|---|---|---|---|"]
    for (delay, jitter, side, lead), rs in sorted(cells.items(), key=lambda kv: (*kv[0][:3], -kv[0][3])):
        ratios = [r["ratio"] for r in rs]
        flows = []
        for f in rs[0]["flows"]:
            fs = [r["flows"][f] for r in rs if f in r["flows"]]
            dpe = [x["drops_per_episode_hit"] for x in fs if x.get("drops_per_episode_hit") is not None]
            first = [x["first_packet_s"] for x in fs if "first_packet_s" in x]
            full = [x["met_full"] for x in fs if "met_full" in x]
            flows.append(f"{f} {1000 * med(x['drops_per_packet'] for x in fs):.2f}, "
                         f"{med(x['episodes_hit'] for x in fs):g} of {med(r['episodes'] for r in rs):g}, "
                         f"{med(dpe) if dpe else float('nan'):.1f}" + (f", {med(first):.2f}" if first else "")
                         + (f", met it 95 % full {100 * med(full):.1f} %" if full else ""))
        lines.append(f"| {delay:g} | {jitter:g} | {side} | {lead:g} | {med(ratios):.2f} "
                     f"({min(ratios):.2f}-{max(ratios):.2f}, n {len(ratios)}) | {'; '.join(flows)} |")
    return "\n".join(lines)


def receiver_summary(recs: list[dict]) -> str:
    """Per cell (algorithms, side, how the receiver ACKed) and flow, over the runs with captures at the receiver
    (``--receiver --ack-clock``): medians of the share of one-segment ACKs, of ACKs ending on a pushed segment, of the
    sender's pairs an ACK straddled, of the trains sent into an odd window whose ACK starts at them, and for a
    connection's subflows of the arrivals after which it held out-of-order data and of one-segment ACKs after an
    arrival in order and out of order."""
    cells: dict[tuple, list[dict]] = {}
    for r in recs:
        if r.get("receiver"):
            cells.setdefault((r["delay_ms"], r["algorithm"], r["competitor"], side_of(r)), []).append(r)

    def med(xs) -> str:
        xs = [x for x in xs if x is not None]
        return f"{statistics.median(xs):.3f}" if xs else "-"

    lines = ["| delay (ms) | algorithm / competitor | side | runs | share of the TCP flow: median (range) | flow | "
             "1-segment ACKs | ACKs ending on PSH | pairs straddled | odd-window trains an ACK starts at | "
             "connection out of order after an arrival | 1-segment ACKs after one in order / out of order |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (delay, algo, comp, side), rs in sorted(cells.items()):
        ratios = [r["ratio"] for r in rs]
        share = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        for flow in sorted({f for r in rs for f in r["receiver"]["flows"]}):
            fs = [r["receiver"]["flows"].get(flow) or {} for r in rs]
            clock = [((r.get("ack_clock") or {}).get("flows") or {}).get(flow) or {} for r in rs]
            after = [f.get("one_segment_after") or {} for f in fs]
            lines.append(
                f"| {delay:g} | {algo} / {comp} | {side} | {len(rs)} | {share} | {flow} | "
                f"{med(f.get('segments_1') for f in fs)} | {med(f.get('ends_on_push') for f in fs)} | "
                f"{med((c.get('pairing') or {}).get('straddling') for c in clock)} | "
                f"{med((c.get('alignment') or {}).get('starts_when_odd') for c in clock)} | "
                f"{med(f.get('out_of_order') for f in fs)} | "
                f"{med(a.get('in_order') for a in after)} / {med(a.get('out_of_order') for a in after)} |")
    return "\n".join(lines)


def coupling_table(recs: list[dict], window_s: float) -> str:
    """Per pair of flows over the runs with a window trace (``--cwnd``): of the second flow's loss epochs, how
    many began within ``window_s`` after one of the first's, against chance. Subflows whose losses follow each
    other more than they follow the TCP flow's are coupled by more than the FIFO they share."""
    pairs: dict[tuple[str, str], list[float]] = {}
    for r in recs:
        flows = {f: v.get("epoch_starts") for f, v in (r.get("cwnd") or {}).get("flows", {}).items()}
        for a, ta in flows.items():
            for b, tb in flows.items():
                if a != b and ta is not None and tb is not None:
                    hits, chance = follows(ta, tb, window_s)
                    acc = pairs.setdefault((a, b), [0, 0.0, 0])
                    acc[0] += hits
                    acc[1] += chance
                    acc[2] += len(tb)
    lines = [f"| leader | follower | follower's epochs within {window_s:g} s after the leader's | by chance |",
             "|---|---|---|---|"]
    for (a, b), (hits, chance, n) in sorted(pairs.items()):
        lines.append(f"| {a} | {b} | {hits} of {n} ({100 * hits / n:.0f} %) | {chance:.1f} ({100 * chance / n:.0f} %) |"
                     if n else f"| {a} | {b} | 0 of 0 | - |")
    return "\n".join(lines)


def recorded(paths: list[Path]) -> list[dict]:
    """Every run recorded in ``paths`` (``--out`` files), in order."""
    return [json.loads(line) for p in paths for line in p.read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay", type=float, default=20.0, help="one-way base delay, ms")
    ap.add_argument("--bdp", type=float, default=2.0, help="FIFO depth in BDPs")
    ap.add_argument("--rate", type=float, default=20.0, help="bottleneck Mbit/s")
    ap.add_argument("--algorithms", default="cubic", help="MPTCP side: cubic (uncoupled), lia, olia, balia")
    ap.add_argument("--competitor", default="cubic")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=int, default=30)
    ap.add_argument("--omit", type=int, default=5)
    ap.add_argument("--single-path", action="store_true",
                    help="the control: one single-path TCP flow running the algorithm on each path, no MPTCP")
    ap.add_argument("--single-path-mptcp", action="store_true",
                    help="the control with MPTCP: an MPTCP connection of one subflow on each path (implies --subflows 1)")
    ap.add_argument("--tcp-lead", type=float, default=0.0,
                    help="start the TCP flow this many whole seconds before the other side (negative: after it)")
    ap.add_argument("--subflows", type=int, choices=(1, 2), default=2,
                    help="1: the MPTCP connection keeps its first subflow only (is the cap per connection?)")
    ap.add_argument("--cwnd", action="store_true",
                    help="also trace every flow's window ACK by ACK (the kernel's tcp_probe; rigs/cwnd_trace.py)")
    ap.add_argument("--ack-clock", action="store_true",
                    help="also capture the sender's interface (ACKs in, data out): how soon each flow answers its ACKs")
    ap.add_argument("--wmem-max", type=int, default=None,
                    help="raise the sender's tcp_wmem ceiling to this many bytes (default: the kernel's 4 MiB)")
    ap.add_argument("--window", default=None,
                    help="iperf3 -w for the other side (e.g. 4M): a fixed socket buffer at both ends, not autotuned")
    ap.add_argument("--block", default=None,
                    help="iperf3 -l for the other side: the sending application's write size (default 128K)")
    ap.add_argument("--jitter", type=float, default=0.0,
                    help="the delay line holds each packet up to this many ms longer (uniform, order kept)")
    ap.add_argument("--receiver", action="store_true",
                    help="add captures on the receiver's interfaces: what sent each ACK (an arrival, another subflow's "
                         "arrival, or later)")
    ap.add_argument("--strip-psh", choices=sorted(k for k in STRIP_PSH if k), default=None,
                    help="the receiver's TCP never sees PSH on the TCP flow's data (tcp) or on every flow's (all)")
    ap.add_argument("--quickack", action="store_true",
                    help="the receiver acknowledges every segment at once (route quickack), not every second one")
    ap.add_argument("--coupling", type=Path, nargs="+",
                    help="print how often each flow's losses follow another's in these recorded --cwnd runs and exit")
    ap.add_argument("--coupling-window", type=float, default=0.25, help="seconds after a loss, for --coupling")
    ap.add_argument("--out", type=Path, help="append each run as a JSON line here")
    ap.add_argument("--table", type=Path, nargs="+", help="print the table of these recorded runs and exit")
    ap.add_argument("--summary", type=Path, nargs="+", help="print the medians per cell of these recorded runs and exit")
    args = ap.parse_args()
    if args.coupling:
        print(coupling_table(recorded(args.coupling), args.coupling_window))
        return
    if args.summary:
        recs = recorded(args.summary)
        print(summary(recs))
        if any(r.get("receiver") for r in recs):
            print(receiver_summary(recs))
        return
    if args.table:
        recs = recorded(args.table)
        print(table(recs))
        if any("cwnd" in r for r in recs):
            print(cwnd_table([r for r in recs if "cwnd" in r]))
        if any("ack_clock" in r for r in recs):
            print(ack_clock_table([r for r in recs if "ack_clock" in r]))
        if any("receiver" in r for r in recs):
            print(receiver_table([r for r in recs if "receiver" in r]))
        if any((r.get("ack_clock") or {}).get("by_cause") for r in recs):
            with_causes = [r for r in recs if (r.get("ack_clock") or {}).get("by_cause")]
            print(cause_table(with_causes))
            print(spread_table(with_causes))
        return
    if args.jitter and not args.delay:
        ap.error("--jitter needs --delay above 0 (the delay line adds it)")
    args.algorithms = args.algorithms.split(",")
    if args.single_path_mptcp:
        args.subflows = 1

    def log(rec: dict) -> None:
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")

    run(args, log)


if __name__ == "__main__":
    main()
