"""Coupled congestion control against theory at a router bottleneck (rigs/bottleneck.py).

One MPTCP connection (two subflows on disjoint access links) and one single-path TCP flow share
one router link: HTB at ``--rate`` Mbit/s over a byte FIFO of ``--buffers`` x BDP, with a base
delay from the project's delay line (``--delays``: one-way ms; the line holds the downlink for
twice that, so the round trip is the same as "that much each way"). Each MPTCP algorithm (coupled
LIA/OLIA/BALIA/wVegas, and ``cubic``: two uncoupled Cubic subflows) runs against each competitor
(``--competitors``: reno, cubic, or vegas: Linux's tcp_vegas.c as mplab's BPF struct_ops
``mplab_vegas``, which this kernel lacks; records name its object's SHA-256 too), with equal
subflow RTTs or the second path's doubled (``--rtts equal,unequal``). Rounds alternate the
algorithms (``--runs`` rounds), so slow drifts of the machine's load hit every algorithm alike.
Prints the median and range of MPTCP/TCP goodput per cell; ``--out`` appends every run (with
per-flow socket counters when ``--probe``) as JSON lines.

``--speedups 1,2,4``: each cell also at a speed-up S, as ``mplab run --speedup`` scales the emulated
testbed (docs/speedup.md): the bottleneck's rate x S, every delay, the run and its warm-up / S, the
FIFO unchanged in bytes (so its depth in BDPs and packets is the cell's). Records keep the cell in real
time (``delay_ms``, ``rate_mbit``, ``duration_s``, ``omit_s``) and say ``speedup``; what the rig
measured in its own time (the probe's RTTs, the traces' times) is in testbed units. The ratio at S
against S = 1 is how far the shared-bottleneck competition survives the scaling.

``--competitor-psh stripped`` (or ``both``, alternated run by run): the receiver's TCP never sees PSH on the
competing flow's data. Linux's TCP receiver (since 6.6) acknowledges a pushed full-sized segment at the read that
empties its queue, which ends its ACKs where the sender's pushes end; an MPTCP connection's subflows rarely can,
while the connection holds data out of order (docs/congestion-control.md). Without PSH the competitor's receiver
has no pushed segment to acknowledge early, as before 6.6. A diagnostic: records say ``competitor_psh``.

Theory (RFC 6356's goal; Khalili et al.; Peng et al.): a coupled connection takes about one TCP
share (0.8-1.25 of a Reno flow is the bench's goal), two uncoupled subflows about two. wVegas
(Cao et al.) splits one total alpha over its subflows, so against Vegas it takes what one Vegas flow
with that alpha would; docs/congestion-control.md says what that means with the reference's constants.

    nice -n 10 uv run --frozen python bench/cc_theory.py --delays 20,50 --buffers 1 \\
        --competitors reno,cubic --algorithms lia,olia,balia,cubic --runs 3 --duration 20
"""
from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness.cc import resolve
from rigs.cc import oracle
from harness.cc.bpfcc import (BPF_DIR, BUILD_DIR, COUPLED, SINGLE_PATH, BpfCC, by_socket, object_digest,
                              vegas_rounds, wvegas_rounds)
from rigs.bottleneck import TCP_PORT, Competition, SharedBottleneck

PREFIX = "mplab-bench-cct-"
#: ``--competitor-psh``: the receiver modes each run is made in.
PSH_MODES = {"kept": ("kept",), "stripped": ("stripped",), "both": ("kept", "stripped")}
PSH_LABEL = {"kept": "", "stripped": " (PSH stripped at the receiver)"}
MSS_WIRE = 1514
#: Smallest FIFO (bytes): at 0 ms the BDP is a few packets, and a FIFO shallower than ~10
#: packets measures the burstiness of the scheduler, not congestion control.
MIN_BUFFER = 15 * MSS_WIRE


def buffer_bytes(rate_mbit: float, rtt_ms: float, bdp: float) -> int:
    """``bdp`` x the bandwidth-delay product of the link at round trip ``rtt_ms`` (at least MIN_BUFFER)."""
    return max(MIN_BUFFER, int(rate_mbit * 1e6 / 8 * rtt_ms / 1000 * bdp))


def summarise(runs: list[Competition]) -> dict:
    """Median and range of the MPTCP/TCP ratio, and the link use, over one cell's runs."""
    ratios = [c.ratio for c in runs]
    return {"n": len(ratios), "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def flow_means(c: Competition) -> dict:
    """Mean window, in-flight and unsent bytes per flow over the probe's samples (second half of the run)."""
    out: dict[str, dict] = {}
    if not c.samples:
        return out
    t_end = max(s.t_s for s in c.samples)
    for flow in sorted({s.flow for s in c.samples}):
        ss = [s for s in c.samples if s.flow == flow and s.t_s >= t_end / 2]
        if ss:
            out[flow] = {k: round(statistics.mean(getattr(s, k) for s in ss), 1)
                         for k in ("cwnd", "unacked", "notsent_bytes", "send_q_bytes", "rtt_ms")}
            out[flow]["retrans"] = ss[-1].retrans_total
            out[flow]["first_seen_s"] = min(s.t_s for s in c.samples if s.flow == flow)
            out[flow]["rwnd_limited_pct"] = ss[-1].rwnd_limited_pct
            out[flow]["sndbuf_limited_pct"] = ss[-1].sndbuf_limited_pct
            out[flow]["min_rtt_ms"] = ss[-1].min_rtt_ms
    return out


def loss_events(c: Competition) -> dict:
    """Per flow, the sampling intervals in which its ssthresh changed (a congestion event), and how
    many of those intervals saw every flow react at once (losses synchronised by the drop-tail FIFO)."""
    by_t: dict[float, dict[str, int | None]] = {}
    for s in c.samples:
        by_t.setdefault(s.t_s, {})[s.flow] = s.ssthresh
    times = sorted(by_t)
    events: dict[str, set[int]] = {}
    for k in range(1, len(times)):
        for flow, th in by_t[times[k]].items():
            prev = by_t[times[k - 1]].get(flow)
            if prev is not None and th is not None and th != prev:
                events.setdefault(flow, set()).add(k)
    flows = sorted(events)
    out = {f: len(v) for f, v in events.items()}
    if len(flows) >= 2:
        out["all_at_once"] = len(set.intersection(*(events[f] for f in flows)))
    out["intervals"] = len(times) - 1
    return out


def vegas_variant(alpha: int, beta: int, build_dir: Path | None) -> Path:
    """A build directory whose vegas.bpf.o keeps alpha..beta packets queued instead of tcp_vegas.c's
    2..4 (what its ``alpha``/``beta`` module parameters set), beside copies of ``build_dir``'s coupled
    objects: the source with the two constants replaced, compiled with `make bpf`'s flags. Records name
    the variant by its object's digest and by ``vegas_alpha_beta``."""
    out = Path(tempfile.mkdtemp(prefix="mplab-vegas-variant-"))
    for obj in (build_dir or BUILD_DIR).glob("*.bpf.o"):
        shutil.copy(obj, out / obj.name)
    src = out / "src"
    shutil.copytree(BPF_DIR, src, ignore=shutil.ignore_patterns("build"))
    math = src / "mplab_math.h"
    text = math.read_text()
    for old, new in (("#define VEGAS_ALPHA 2\n", f"#define VEGAS_ALPHA {alpha}\n"),
                     ("#define VEGAS_BETA 4\n", f"#define VEGAS_BETA {beta}\n")):
        if text.count(old) != 1:
            raise SystemExit(f"cc_theory: {math.name} no longer has {old.strip()!r}; update vegas_variant")
        text = text.replace(old, new)
    math.write_text(text)
    subprocess.run(["clang", "-target", "bpf", "-O2", "-g", "-mcpu=v3", "-Wall", "-Wno-unused-variable",
                    f"-fdebug-prefix-map={src}=.", f"-I{BUILD_DIR}", "-c", str(src / "vegas.bpf.c"),
                    "-o", str(out / "vegas.bpf.o")], check=True)
    return out


def competitor(name: str, build_dir: Path | None):
    """The single-path flow's congestion control: the kernel's, or mplab's BPF program (Vegas)."""
    if name in SINGLE_PATH:
        return BpfCC(name, build_dir=build_dir)
    return resolve(name)


def scaled(seconds: int, speedup: float, what: str) -> int:
    """A run's length in testbed seconds at ``speedup`` (iperf3 takes whole seconds)."""
    t = seconds / speedup
    if t != int(t) or t < 1:
        raise ValueError(f"--{what} {seconds} is not a whole number (>= 1) of seconds at speed-up {speedup:g}; "
                         "pick one that --speedups divides")
    return int(t)


def run_cell(args, delay_ms: float, bdp: float, rtt: str, competitors: list[str], log,
             speedup: float = 1.0) -> list[str]:
    """Every (algorithm, competitor) of one rig (delay, buffer, RTT shape), ``--runs`` alternated rounds,
    the rig ``speedup`` times faster than the cell (rate x S, delays and times / S, the FIFO's bytes kept)."""
    rtt_ms = 2 * delay_ms if delay_ms else 1.0
    buf = buffer_bytes(args.rate, rtt_ms, bdp)
    paths = (2 * delay_ms / speedup, (4 if rtt == "unequal" else 2) * delay_ms / speedup)
    duration, omit = scaled(args.duration, speedup, "duration"), scaled(args.omit, speedup, "omit")
    # --build-dir: another build of the BPF programs (an earlier commit's, for before/after tables).
    algos = [BpfCC(a, build_dir=args.build_dir) if args.build_dir and a in COUPLED else resolve(a)
             for a in args.algorithms]
    comps = {c: competitor(c, args.build_dir) for c in competitors}
    ccs = {cc.sock_name: cc for cc in algos + list(comps.values())}
    results: dict[tuple[str, str], list[Competition]] = {}
    with SharedBottleneck(PREFIX, list(ccs.values()), rate_mbit=args.rate * speedup, buffer_bytes=buf, qdisc="htb",
                          path_delay_ms=paths, sender_sysctls=dict(args.sysctl),
                          receiver_sysctls=dict(args.rcv_sysctl), random_loss_pct=args.loss_pct,
                          jitter_ms=args.jitter / speedup if delay_ms else 0.0) as bn:
        psh_modes = PSH_MODES[args.competitor_psh]
        for rnd in range(args.runs):
            order = algos if rnd % 2 == 0 else algos[::-1]
            for cc, (comp_name, comp), psh in itertools.product(order, comps.items(),
                                                                psh_modes if rnd % 2 == 0 else psh_modes[::-1]):
                bn.strip_psh((TCP_PORT,) if psh == "stripped" else ())
                t0_ns = time.monotonic_ns()
                c = bn.compete(cc, duration_s=duration, omit_s=omit, tcp_cc=comp, probe=args.probe)
                results.setdefault((cc.algorithm, comp_name + PSH_LABEL[psh]), []).append(c)
                rec = {"delay_ms": delay_ms, "bdp": bdp, "buffer_bytes": buf, "rtt": rtt, "round": rnd,
                       "competitor_psh": psh, "psh_stripped": bn.psh_stripped(),
                       "algorithm": cc.algorithm, "cc_impl": cc.implementation,
                       "cc_object_sha256": object_digest(cc), "competitor": comp_name,
                       "competitor_impl": comp.implementation,
                       "competitor_object_sha256": object_digest(comp),
                       "duration_s": args.duration, "omit_s": args.omit, "rate_mbit": args.rate,
                       "speedup": speedup,
                       "mptcp_bytes": c.mptcp_bytes, "tcp_bytes": c.tcp_bytes, "ratio": round(c.ratio, 3),
                       "link_use": round((c.mptcp_bytes + c.tcp_bytes) * 8 / args.duration / args.rate / 1e6, 3),
                       "mptcp_retransmits": c.mptcp_retransmits, "tcp_retransmits": c.tcp_retransmits,
                       "coupled_subflows": c.coupled_subflows, "flows": flow_means(c),
                       "counters": c.counters, "loss_events": loss_events(c),
                       "sysctls": dict(args.sysctl), "rcv_sysctls": dict(args.rcv_sysctl),
                       "random_loss_pct": args.loss_pct, "jitter_ms": args.jitter if delay_ms else 0.0,
                       "vegas_alpha_beta": args.vegas_alpha_beta if "vegas" in competitors else None,
                       "vegas_rounds": compact_rounds(vegas_rounds(bn.root, t0_ns), t0_ns, ROUND_FIELDS)
                       if comp_name == "vegas" else None,
                       "wvegas_rounds": compact_rounds(wvegas_rounds(bn.root, t0_ns), t0_ns, WV_ROUND_FIELDS)
                       if cc.algorithm == "wvegas" else None,
                       "time": time.time()}
                log(rec)
                print(f"  {delay_ms:g} ms {bdp:g} BDP {rtt:8} S {speedup:g} {cc.algorithm:6} vs {comp_name:5}"
                      f"{PSH_LABEL[psh]} round {rnd}: {c.ratio:.2f} (link {rec['link_use']:.2f})", flush=True)
    lines = []
    for (algo, comp), runs in results.items():
        s = summarise(runs)
        lines.append(f"| {delay_ms:g} | {bdp:g} | {rtt} | {speedup:g} | {comp} | {algo} | {s['median']:.2f} | "
                     f"{s['min']:.2f}-{s['max']:.2f} | {s['n']} |")
    return lines


#: Fields of each round end in a record's ``vegas_rounds`` (harness.cc.bpfcc.vegas_rounds; t_s from the run's start).
ROUND_FIELDS = ("t_s", "kind", "base_rtt", "min_rtt", "cnt_rtt", "srtt_us", "packets_out", "cwnd_before",
                "cwnd_after")


def recorded(paths: list[Path]):
    """Every run recorded in ``paths`` (``--out`` files), in order."""
    for path in paths:
        for line in path.read_text().splitlines():
            yield json.loads(line)


#: Fields of each subflow round end in a record's ``wvegas_rounds`` (harness.cc.bpfcc.wvegas_rounds).
WV_ROUND_FIELDS = ("t_s", "port", "dport", "slot", "kind", "base_rtt", "rtt", "cnt_rtt", "srtt_us", "packets_out",
                   "cwnd_before", "cwnd_after", "ssthresh_before", "alpha_before", "alpha_after", "weight_after",
                   "queue_delay_before", "queue_delay_after")


def compact_rounds(rounds: list[dict], t0_ns: int, fields: tuple[str, ...]) -> dict:
    """A flow's round ends as columns (a run at 100 ms holds about 250 of them per socket)."""
    rows = [[round((r["t_ns"] - t0_ns) / 1e9, 4), *(r[k] for k in fields[1:])] for r in rounds]
    return {"fields": list(fields), "rows": rows}


def _late_rows(rec: dict, key: str) -> list[dict]:
    """A recorded trace's rows from the second half of the measured time (all of them if none are)."""
    tr = rec.get(key)
    if not tr or not tr["rows"]:
        return []
    rows = [dict(zip(tr["fields"], r)) for r in tr["rows"]]
    half = (rec["omit_s"] + rec["duration_s"] / 2) / rec.get("speedup", 1)   # the trace's times are the rig's
    return [r for r in rows if r["t_s"] >= half] or rows


def round_view(rec: dict) -> dict | None:
    """What the Vegas flow's own rounds saw over the second half of the measured time: Vegas' ``diff``
    (cwnd (minRTT - baseRTT) / baseRTT, its rule's input, integer as tcp_vegas.c computes it) beside the
    packets its window keeps queued by the smoothed RTT (cwnd (srtt - base) / srtt), and how far the
    round's minimum sat below the smoothed RTT. Where diff stays within alpha..beta while the queue by the
    smoothed RTT is many times beta, the per-round minimum hides the queue from the rule."""
    rows = _late_rows(rec, "vegas_rounds")
    if not rows:
        return None
    alpha, beta = rec.get("vegas_alpha_beta") or (2, 4)
    ruled = [r for r in rows if r["kind"] == "vegas"]
    diffs = [r["cwnd_before"] * (r["min_rtt"] - r["base_rtt"]) // r["base_rtt"] for r in ruled]
    med = statistics.median
    return {
        "rounds": len(rows), "ruled": len(ruled),
        "reno": sum(r["kind"] == "reno" for r in rows), "idle": sum(r["kind"] == "idle" for r in rows),
        "cwnd": med(r["cwnd_before"] for r in rows),
        "base_ms": med(r["base_rtt"] for r in rows) / 1000,
        "min_over_base_ms": med((r["min_rtt"] - r["base_rtt"]) / 1000 for r in ruled) if ruled else None,
        "srtt_over_min_ms": med((r["srtt_us"] - r["min_rtt"]) / 1000 for r in ruled) if ruled else None,
        "diff": med(diffs) if diffs else None,
        "grow": sum(d < alpha for d in diffs), "hold": sum(alpha <= d <= beta for d in diffs),
        "shrink": sum(d > beta for d in diffs),
        "queued_by_srtt": med(r["cwnd_before"] * max(0, r["srtt_us"] - r["base_rtt"]) / r["srtt_us"] for r in rows),
        "samples": med(r["cnt_rtt"] for r in ruled) if ruled else None,
    }


def _fmt(x, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def round_lines(paths: list[Path]) -> str:
    """Per run with a Vegas competitor: its own rounds (``--vegas-rounds``, round_view)."""
    rows = ["| delay (ms each way) | buffer (BDP) | MPTCP | round | MPTCP/Vegas | Vegas rounds (ruled / Reno / idle) | "
            "RTT samples per round | cwnd | base RTT (ms) | minRTT - base (ms) | srtt - minRTT (ms) | diff | "
            "rounds grow / hold / shrink | packets queued by srtt |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    for r in recorded(paths):
        v = round_view(r)
        if v is not None:
            rows.append(f"| {r['delay_ms']:g} | {r['bdp']:g} | {r['algorithm']} | {r['round']} | {r['ratio']:.2f} | "
                        f"{v['rounds']} ({v['ruled']} / {v['reno']} / {v['idle']}) | {_fmt(v['samples'], 'g')} | "
                        f"{v['cwnd']:g} | {v['base_ms']:.1f} | {_fmt(v['min_over_base_ms'])} | "
                        f"{_fmt(v['srtt_over_min_ms'])} | {_fmt(v['diff'], 'g')} | "
                        f"{v['grow']} / {v['hold']} / {v['shrink']} | {v['queued_by_srtt']:.1f} |")
    return "\n".join(rows)


def wvegas_view(rec: dict) -> list[dict]:
    """What each wVegas subflow's own rounds saw over the second half of the measured time: its diff
    (cwnd (rtt - base) / rtt from the round's *mean* RTT, the rule's input, integer as mptcp_wvegas.c
    computes it) against its alpha (total_alpha weighted by its share of the rate, floor 2), beside
    the packets its window keeps queued by the smoothed RTT, and how often the queueing-delay backoff
    cut the window (a rule round that took more than the one packet the rule moves)."""
    rows = _late_rows(rec, "wvegas_rounds")
    med = statistics.median
    out = []
    for _, mine in sorted(by_socket(rows).items()):
        ruled = [r for r in mine if r["kind"] == "wvegas" and r["rtt"]]
        if len(ruled) < max(10, len(mine) / 2):
            continue    # an iperf3 control connection (the namespace's default is the algorithm too)
        slot = mine[-1]["slot"]
        diffs = [oracle.wvegas_diff(r["cwnd_before"], r["base_rtt"], r["rtt"]) for r in ruled]
        out.append({
            "slot": slot, "rounds": len(mine), "ruled": len(ruled),
            "cwnd": med(r["cwnd_before"] for r in mine), "base_ms": med(r["base_rtt"] for r in mine) / 1000,
            "rtt_over_base_ms": med((r["rtt"] - r["base_rtt"]) / 1000 for r in ruled),
            "srtt_over_rtt_ms": med((r["srtt_us"] - r["rtt"]) / 1000 for r in ruled),
            "diff": med(diffs), "diff_mean": statistics.mean(diffs),
            "alpha": med(r["alpha_before"] for r in ruled),
            "weight": med(r["weight_after"] for r in ruled) / 65536,
            "grow": sum(r["cwnd_after"] == r["cwnd_before"] + 1 for r in ruled),
            "hold": sum(r["cwnd_after"] == r["cwnd_before"] for r in ruled),
            "shrink": sum(r["cwnd_after"] == r["cwnd_before"] - 1 for r in ruled),
            "backoffs": sum(r["cwnd_after"] < r["cwnd_before"] - 1 for r in ruled),
            "queued_by_srtt": med(r["cwnd_before"] * max(0, r["srtt_us"] - r["base_rtt"]) / r["srtt_us"]
                                  for r in mine),
            "samples": med(r["cnt_rtt"] for r in ruled),
        })
    return out


def wvegas_round_lines(paths: list[Path]) -> str:
    """Per run of wVegas, per subflow: its own rounds (``--wvegas-rounds``, wvegas_view)."""
    rows = ["| delay (ms each way) | buffer (BDP) | competitor | round | MPTCP/TCP | subflow | rounds (ruled) | "
            "RTT samples per round | cwnd | base RTT (ms) | mean RTT - base (ms) | srtt - mean RTT (ms) | diff (mean) | "
            "alpha | weight | rounds grow / hold / shrink / backoff | packets queued by srtt |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    for r in recorded(paths):
        for v in wvegas_view(r):
            rows.append(f"| {r['delay_ms']:g} | {r['bdp']:g} | {r['competitor']} | {r['round']} | {r['ratio']:.2f} | "
                        f"{v['slot']} | {v['rounds']} ({v['ruled']}) | {v['samples']:g} | {v['cwnd']:g} | "
                        f"{v['base_ms']:.1f} | {v['rtt_over_base_ms']:.1f} | {v['srtt_over_rtt_ms']:.1f} | "
                        f"{v['diff']:g} ({v['diff_mean']:.1f}) | {v['alpha']:g} | {v['weight']:.2f} | "
                        f"{v['grow']} / {v['hold']} / {v['shrink']} / {v['backoffs']} | {v['queued_by_srtt']:.1f} |")
    return "\n".join(rows)


def loss_per_packet(rec: dict) -> tuple[float, float] | None:
    """Retransmitted segments per segment delivered, MPTCP (both subflows) and TCP, from the probe's last samples."""
    flows = rec.get("flows") or {}
    if "tcp" not in flows or not rec["tcp_bytes"] or not rec["mptcp_bytes"]:
        return None
    mp = sum(v["retrans"] for k, v in flows.items() if k.startswith("sf"))
    return mp / (rec["mptcp_bytes"] / 1448), flows["tcp"]["retrans"] / (rec["tcp_bytes"] / 1448)


def events_per_packet(rec: dict) -> float | None:
    """Congestion events per packet delivered, the MPTCP connection's over the TCP flow's, in one run:
    about 1 when losses go by packets sent (random loss; RFC 6356's premise), several when the
    subflows' bursts meet a full drop-tail FIFO about as often as the TCP flow's (rigs/cc/sim.py)."""
    ev = rec.get("loss_events") or {}
    mp = sum(v for k, v in ev.items() if k.startswith("sf"))
    if not mp or not ev.get("tcp") or not rec["mptcp_bytes"] or not rec["tcp_bytes"]:
        return None
    return (mp / rec["mptcp_bytes"]) / (ev["tcp"] / rec["tcp_bytes"])


def queued_packets(rec: dict) -> tuple[float, float] | None:
    """Packets each side keeps queued at the bottleneck, from the probe's means (second half of the run):
    in-flight x (RTT - base RTT) / RTT per flow, the base being the configured round trip (the rig's own
    adds well under a millisecond). The quantity Vegas and wVegas steer (their ``diff``), MPTCP (both
    subflows) and the TCP flow: at one FIFO, goodput shares follow these backlogs."""
    flows = rec.get("flows") or {}
    base = 2 * rec["delay_ms"] / rec.get("speedup", 1)   # the probe's RTTs are the rig's
    if "tcp" not in flows or not base:
        return None

    def q(f: dict) -> float:
        return f["unacked"] * max(0.0, f["rtt_ms"] - base) / f["rtt_ms"] if f["rtt_ms"] else 0.0
    return sum(q(v) for k, v in flows.items() if k.startswith("sf")), q(flows["tcp"])


def vegas_implied_base(rec: dict) -> tuple[float, float] | None:
    """The base RTT (ms) a Vegas competitor must be steering by to hold still at its mean window and RTT:
    diff = cwnd (rtt - base) / base within [alpha, beta] gives base in [rtt cwnd / (cwnd + beta),
    rtt cwnd / (cwnd + alpha)]. Far above the configured round trip, it took a queue for the path's delay."""
    tcp = (rec.get("flows") or {}).get("tcp")
    if rec["competitor"] != "vegas" or not tcp or not tcp["cwnd"]:
        return None
    alpha, beta = rec.get("vegas_alpha_beta") or (2, 4)
    w, rtt = tcp["cwnd"], tcp["rtt_ms"]
    return rtt * w / (w + beta), rtt * w / (w + alpha)


def backlog_lines(paths: list[Path]) -> str:
    """Per run: the ratio, each side's queued packets, the TCP flow's RTT and retransmissions (``--backlog``)."""
    rows = ["| delay (ms each way) | buffer (BDP) | competitor | MPTCP | round | MPTCP/TCP | queued packets, "
            "MPTCP / TCP | TCP flow's RTT (ms) | its min RTT (ms) | Vegas' implied base RTT (ms) | retransmissions, "
            "MPTCP / TCP |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in recorded(paths):
        qp = queued_packets(r)
        tcp = (r.get("flows") or {}).get("tcp", {})
        base = vegas_implied_base(r)
        rows.append(f"| {r['delay_ms']:g} | {r['bdp']:g} | {r['competitor']} | {r['algorithm']} | {r['round']} | "
                        f"{r['ratio']:.2f} | {f'{qp[0]:.1f} / {qp[1]:.1f}' if qp else '-'} | "
                        f"{tcp.get('rtt_ms', '-')} | {tcp.get('min_rtt_ms') or '-'} | "
                        f"{f'{base[0]:.1f}-{base[1]:.1f}' if base else '-'} | "
                        f"{r['mptcp_retransmits']} / {r['tcp_retransmits']} |")
    return "\n".join(rows) + "\n\n" + backlog_cells(paths)


def competitor_label(rec: dict) -> str:
    """The competitor's name, with its alpha and beta where a Vegas variant ran (not Linux's 2 and 4)."""
    ab = rec.get("vegas_alpha_beta")
    return (rec["competitor"] + (f" alpha {ab[0]} beta {ab[1]}" if ab and ab != [2, 4] else "")
            + PSH_LABEL[rec.get("competitor_psh", "kept")])


def backlog_cells(paths: list[Path]) -> str:
    """Per cell: the ratio's median (range), the median queued packets per side, the TCP flow's RTT range."""
    cells: dict[tuple, list[dict]] = {}
    for r in recorded(paths):
        cells.setdefault((r["delay_ms"], r["bdp"], competitor_label(r), r["algorithm"], r.get("speedup", 1)),
                         []).append(r)
    rows = ["| delay (ms each way) | buffer (BDP) | competitor | MPTCP | MPTCP/TCP median (range) | queued packets, "
            "MPTCP / TCP (median) | TCP flow's RTT (ms) | runs |", "|---|---|---|---|---|---|---|---|"]
    for key in sorted(cells):
        runs = cells[key]
        ratios = sorted(r["ratio"] for r in runs)
        qs = [q for q in (queued_packets(r) for r in runs) if q]
        rtts = sorted(r["flows"]["tcp"]["rtt_ms"] for r in runs if "tcp" in (r.get("flows") or {}))
        q = f"{statistics.median(a for a, _ in qs):.1f} / {statistics.median(b for _, b in qs):.1f}" if qs else "-"
        rt = f"{rtts[0]:.0f}-{rtts[-1]:.0f}" if rtts else "-"
        d, bdp, comp, algo, s = key
        rows.append(f"| {d:g}{f' (S {s:g})' if s != 1 else ''} | {bdp:g} | {comp} | {algo} | {statistics.median(ratios):.2f} "
                    f"({ratios[0]:.2f}-{ratios[-1]:.2f}) | {q} | {rt} | {len(runs)} |")
    return "\n".join(rows)


def table_from(paths: list[Path]) -> str:
    """The README table from recorded runs (``--out`` files): one row per cell, algorithm and build."""
    cells: dict[tuple, list[dict]] = {}
    for r in recorded(paths):
        comp = competitor_label(r) + (
            f" ({r['competitor_object_sha256'][:8]})" if r.get("competitor_object_sha256") else "")
        key = (r["delay_ms"], r["bdp"], r["rtt"], r.get("random_loss_pct", 0.0), r.get("jitter_ms", 0.0), comp,
               r["algorithm"], (r.get("cc_object_sha256") or "kernel")[:8], r["duration_s"], r.get("speedup", 1))
        cells.setdefault(key, []).append(r)
    rows = ["| delay (ms each way) | buffer (BDP) | RTTs | random loss % | jitter (ms) | competitor | MPTCP | build | "
            "run (s) | speed-up | MPTCP/TCP median | range | runs | retransmissions per packet, MPTCP/TCP (median) | "
            "congestion events per packet, MPTCP/TCP (median) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(cells):
        runs = cells[key]
        ratios = sorted(r["ratio"] for r in runs)
        lpp = [x for x in (loss_per_packet(r) for r in runs) if x and x[1] > 0]
        lr = f"{statistics.median(a / b for a, b in lpp):.2f}" if lpp else "-"
        evs = [x for x in (events_per_packet(r) for r in runs) if x is not None]
        er = f"{statistics.median(evs):.2f}" if evs else "-"
        d, bdp, rtt, loss, jitter, comp, algo, build, dur, s = key
        rows.append(f"| {d:g} | {bdp:g} | {rtt} | {loss:g} | {jitter:g} | {comp} | {algo} | {build} | {dur} | {s:g} | "
                    f"{statistics.median(ratios):.2f} | {ratios[0]:.2f}-{ratios[-1]:.2f} | {len(ratios)} | {lr} | {er} |")
    return "\n".join(rows)


def speedup_table(paths: list[Path]) -> str:
    """Per cell, the MPTCP/TCP ratio at each speed-up beside S = 1's: the median and range of its runs,
    the median's ratio to S = 1's, and whether it lies within S = 1's own range (with a few runs per
    cell, the spread between runs is wider than 3 %: a median outside S = 1's range is a change the runs
    can show, one inside it is not)."""
    cells: dict[tuple, dict[float, list[float]]] = {}
    for r in recorded(paths):
        key = (r["delay_ms"], r["bdp"], r["rtt"], competitor_label(r), r["algorithm"])
        cells.setdefault(key, {}).setdefault(r.get("speedup", 1), []).append(r["ratio"])
    rows = ["| delay (ms each way) | buffer (BDP) | RTTs | competitor | MPTCP | S | MPTCP/TCP median (range) | "
            "x S = 1 | within S = 1's range | runs |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(cells):
        by_s = cells[key]
        base = sorted(by_s[1]) if 1 in by_s else None
        for s in sorted(by_s):
            xs = sorted(by_s[s])
            med = statistics.median(xs)
            rel = f"{med / statistics.median(base):.2f}" if base and s != 1 else "-"
            inside = ("yes" if base[0] <= med <= base[-1] else "no") if base and s != 1 else "-"
            d, bdp, rtt, comp, algo = key
            rows.append(f"| {d:g} | {bdp:g} | {rtt} | {comp} | {algo} | {s:g} | {med:.2f} ({xs[0]:.2f}-{xs[-1]:.2f}) "
                        f"| {rel} | {inside} | {len(xs)} |")
    return "\n".join(rows)


def compare_table(before: Path, after: Path) -> str:
    """Before/after per cell: median (range) of MPTCP/TCP over the runs of each recorded file."""
    def cells(path: Path) -> dict[tuple, list[float]]:
        out: dict[tuple, list[float]] = {}
        for r in recorded([path]):
            out.setdefault((r["delay_ms"], r["bdp"], r["rtt"], r["competitor"], r["algorithm"]), []).append(r["ratio"])
        return out

    def fmt(xs: list[float] | None) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"

    b, a = cells(before), cells(after)
    rows = ["| delay (ms each way) | buffer (BDP) | RTTs | competitor | MPTCP | before | after | runs |",
            "|---|---|---|---|---|---|---|---|"]
    for key in sorted(set(a) | set(b), key=lambda k: (k[0], k[3], k[4])):
        n = f"{len(b.get(key, []))}/{len(a.get(key, []))}"
        d, bdp, rtt, comp, algo = key
        rows.append(f"| {d:g} | {bdp:g} | {rtt} | {comp} | {algo} | {fmt(b.get(key))} | {fmt(a.get(key))} | {n} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="20,50", help="one-way base delays, ms (0, 20, 50)")
    ap.add_argument("--buffers", default="1", help="FIFO depths in BDPs (0.5, 1, 2)")
    ap.add_argument("--competitors", default="reno,cubic", help="reno, cubic, vegas (mplab's BPF port)")
    ap.add_argument("--algorithms", default="lia,olia,balia,wvegas,cubic")
    ap.add_argument("--rtts", default="equal", help="equal, unequal (the second path's delay doubled)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=20, help="measured seconds per run")
    ap.add_argument("--omit", type=int, default=5, help="warm-up seconds left out of each run")
    ap.add_argument("--rate", type=float, default=20.0, help="bottleneck Mbit/s")
    ap.add_argument("--speedups", default="1", help="comma list of speed-ups S: each cell at rate x S, delays and "
                    "times / S, the FIFO's bytes kept (as `mplab run --speedup`)")
    ap.add_argument("--probe", action="store_true", help="sample the sender's sockets (ss) twice a second")
    ap.add_argument("--sysctl", action="append", default=[], type=lambda s: tuple(s.split("=", 1)),
                    help="key=value set in the sender's namespace (repeatable)")
    ap.add_argument("--rcv-sysctl", action="append", default=[], type=lambda s: tuple(s.split("=", 1)),
                    help="key=value set in the receiver's namespace (repeatable)")
    ap.add_argument("--loss-pct", type=float, default=0.0,
                    help="independent random loss on the bottleneck (with --buffers large enough that the FIFO "
                         "never overflows, losses are then random rather than tail drops)")
    ap.add_argument("--vegas-alpha-beta", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4],
                    metavar="A,B", help="the Vegas competitor's alpha,beta (tcp_vegas.c's module parameters; "
                    "default 2,4 as Linux ships it); another pair builds a variant object")
    ap.add_argument("--jitter", type=float, default=0.0,
                    help="the delay line holds each packet up to this many ms longer (uniform, order kept; / S)")
    ap.add_argument("--competitor-psh", choices=sorted(PSH_MODES), default="kept",
                    help="stripped: the competing flow's receiver never sees PSH (since 6.6 Linux's TCP acknowledges "
                         "a pushed full-sized segment at the read that empties the queue); both: each run with PSH "
                         "kept and stripped, alternated")
    ap.add_argument("--out", type=Path, help="append each run as a JSON line here")
    ap.add_argument("--build-dir", type=Path, help="load the BPF objects (coupled algorithms, vegas) from here "
                    "(default: harness/cc/bpf/build); records name each object's SHA-256")
    ap.add_argument("--table", type=Path, nargs="+", help="print the table of these recorded runs and exit")
    ap.add_argument("--backlog", type=Path, nargs="+", help="print each recorded run's queued packets per side "
                    "(with --probe records) and exit")
    ap.add_argument("--vegas-rounds", type=Path, nargs="+", help="print what each recorded run's Vegas flow "
                    "saw in its own rounds (the trace mplab_vegas keeps) and exit")
    ap.add_argument("--wvegas-rounds", type=Path, nargs="+", help="print what each recorded wVegas run's subflows "
                    "saw in their own rounds (the trace mplab_wvegas keeps) and exit")
    ap.add_argument("--speedup-table", type=Path, nargs="+", help="print each cell's ratio at every recorded "
                    "speed-up beside S = 1's and exit")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                    help="print a before/after table of two recorded files and exit")
    args = ap.parse_args()
    if args.table:
        print(table_from(args.table))
        return
    if args.compare:
        print(compare_table(*args.compare))
        return
    if args.speedup_table:
        print(speedup_table(args.speedup_table))
        return
    if args.backlog:
        print(backlog_lines(args.backlog))
        return
    if args.vegas_rounds:
        print(round_lines(args.vegas_rounds))
        return
    if args.wvegas_rounds:
        print(wvegas_round_lines(args.wvegas_rounds))
        return
    args.algorithms = args.algorithms.split(",")
    if args.vegas_alpha_beta != [2, 4]:
        args.build_dir = vegas_variant(*args.vegas_alpha_beta, args.build_dir)

    def log(rec: dict) -> None:
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")

    speedups = [float(s) for s in args.speedups.split(",")]
    try:                   # refused before anything is built
        for s in speedups:
            scaled(args.duration, s, "duration")
            scaled(args.omit, s, "omit")
    except ValueError as e:
        ap.error(str(e))
    table = ["| delay (ms, each way) | buffer (BDP) | RTTs | speed-up | competitor | MPTCP | MPTCP/TCP median | "
             "range | runs |", "|---|---|---|---|---|---|---|---|---|"]
    for delay in (float(d) for d in args.delays.split(",")):
        for bdp in (float(b) for b in args.buffers.split(",")):
            for rtt in args.rtts.split(","):
                for s in speedups:
                    table += run_cell(args, delay, bdp, rtt, args.competitors.split(","), log, s)
    print("\n".join(table))


if __name__ == "__main__":
    main()
