"""OLIA's shared state during a rig run: what each subflow published and which epsilon it got.

Runs the random-loss cell of ``bench/cc_theory.py`` (one MPTCP connection with two subflows and one
Reno flow through one router link, ``--loss-pct`` random loss over a FIFO that never overflows) for
each named build of ``olia.bpf.o``, rounds alternated, and samples the coupling map (``bpftool map
dump``) about five times a second next to the rig's ``ss`` probe. For every map sample it computes
the epsilon each subflow's next ACK would get (``rigs.cc.oracle.olia_epsilon``: the reference's
rule over the published inputs), so a run shows whether a small subflow was ever counted as a best
path. Each record names the program that was really registered (the map's value layout and the
object's digest), because a name another rig left registered would otherwise be reused.

    flock /tmp/mplab-heavy.lock nice -n 10 uv run --frozen python bench/olia_state.py \\
        --build today=harness/cc/bpf/build --build previous=/tmp/old/build --rounds 3 --out runs.jsonl

``--model-seeds N`` prints the same shares from the packet-level model of the reference arithmetic
(rigs/cc/sim.py) at the same cell instead, without root (about 15 s a seed).
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import threading
import time
from pathlib import Path

from harness.cc import resolve
from harness.cc.bpfcc import BpfCC, map_name, object_digest
from rigs.cc import oracle, sim
from rigs.cc.oracle import Sf, olia_epsilon
from harness.hosts.local import LocalHost
from rigs.bottleneck import SharedBottleneck

PREFIX = "mplab-bench-olia-"


def dump_slots(root: LocalHost) -> list[list[dict]]:
    """Every connection entry of the OLIA coupling map: its occupied slots as bpftool formats them."""
    res = root.run(["bpftool", "-j", "map", "show"], check=False)
    ids = [m["id"] for m in json.loads(res.stdout or "[]") if m.get("name") == map_name("olia")]
    out = []
    for mid in ids:
        dump = json.loads(root.run(["bpftool", "-j", "map", "dump", "id", str(mid)], check=False).stdout or "[]")
        for entry in dump:
            slots = ((entry.get("formatted") or {}).get("value") or {}).get("sf", [])
            out.append([s for s in slots if s.get("sk")])
    return out


def srtt_of(slot: dict) -> int:
    """The published RTT in the kernel's unit (us << 3): today's layout keeps it, the previous kept microseconds."""
    return slot["srtt"] if "srtt" in slot else slot["srtt_us"] << 3


def epsilons(slots: list[dict]) -> list[tuple[int, int]]:
    """The reference's epsilon for each slot, over the inputs as published."""
    sfs = [Sf(cwnd=s["cwnd"], srtt=srtt_of(s), loss_int=s["loss_int"]) for s in slots]
    return [olia_epsilon(sfs, i) if sfs[i].active() else (0, 0) for i in range(len(sfs))]


class MapSampler(threading.Thread):
    """Samples the coupling map every ``period_s`` until stopped."""

    def __init__(self, root: LocalHost, period_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.period_s = root, period_s
        self.samples: list[dict] = []
        self._halt = threading.Event()
        self.t0 = time.monotonic()

    def run(self) -> None:
        while not self._halt.is_set():
            t = time.monotonic() - self.t0
            for slots in dump_slots(self.root):
                self.samples.append({"t_s": round(t, 2), "slots": [
                    {"sk": s["sk"], "cwnd": s["cwnd"], "srtt": srtt_of(s), "loss_int": s["loss_int"]} for s in slots],
                    "eps": epsilons(slots), "layout": "srtt" if slots and "srtt" in slots[0] else "srtt_us"})
            self._halt.wait(self.period_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


def summary(samples: list[dict]) -> dict:
    """The data connection's two subflows over the run's second half (the most sampled pair of sockets:
    iperf3's control connection has an entry too): per subflow the mean window, mean published RTT (ms)
    and median inter-loss bytes (kB); the share of samples in which every epsilon was 0, and in which
    the subflow with the smaller window at that instant was a best path (epsilon +1)."""
    pairs = collections.Counter(frozenset(x["sk"] for x in s["slots"]) for s in samples if len(s["slots"]) == 2)
    if not pairs:
        return {}
    conn = pairs.most_common(1)[0][0]
    mine = [s for s in samples if frozenset(x["sk"] for x in s["slots"]) == conn]
    half = [s for s in mine if s["t_s"] >= mine[-1]["t_s"] / 2]
    out: dict = {}
    for k, sk in enumerate(sorted(conn)):
        slots = [x for s in half for x in s["slots"] if x["sk"] == sk]
        out[f"sf_slot{k}"] = {"cwnd": round(statistics.mean(x["cwnd"] for x in slots), 1),
                              "srtt_ms": round(statistics.mean(x["srtt"] for x in slots) / 8000, 1),
                              "loss_int_kB": round(statistics.median(x["loss_int"] for x in slots) / 1000, 1)}
    unequal = [s for s in half if s["slots"][0]["cwnd"] != s["slots"][1]["cwnd"]]
    smaller_best = sum(1 for s in unequal
                       if s["eps"][min((0, 1), key=lambda i: s["slots"][i]["cwnd"])][0] == 1)
    out["eps_all_zero"] = round(sum(1 for s in half if all(e[0] == 0 for e in s["eps"])) / max(1, len(half)), 2)
    out["smaller_window_is_best"] = round(smaller_best / max(1, len(unequal)), 2)
    out["samples"] = len(half)
    return out


def one_run(label: str, build: Path, args) -> dict:
    """One competition of the build's OLIA against Reno, with the map sampled throughout."""
    olia = BpfCC("olia", build_dir=build)
    reno = resolve("reno")
    buf = int(args.rate * 1e6 / 8 * 2 * args.delay / 1000 * args.buffer)
    paths = (2 * args.delay, 2 * args.delay)
    with SharedBottleneck(PREFIX, [olia, reno], rate_mbit=args.rate, buffer_bytes=buf, qdisc="htb",
                          path_delay_ms=paths, random_loss_pct=args.loss_pct) as bn:
        sampler = MapSampler(bn.root)
        sampler.start()
        try:
            c = bn.compete(olia, duration_s=args.duration, omit_s=args.omit, tcp_cc=reno, probe=True)
        finally:
            sampler.stop()
    flows: dict[str, dict] = {}
    t_end = max((s.t_s for s in c.samples), default=0)
    for flow in sorted({s.flow for s in c.samples}):
        ss = [s for s in c.samples if s.flow == flow and s.t_s >= t_end / 2]
        if ss:
            flows[flow] = {"cwnd": round(statistics.mean(s.cwnd for s in ss), 1),
                           "unacked": round(statistics.mean(s.unacked for s in ss), 1),
                           "notsent_kB": round(statistics.mean(s.notsent_bytes for s in ss) / 1000, 1),
                           "rtt_ms": round(statistics.mean(s.rtt_ms for s in ss), 1),
                           "retrans": ss[-1].retrans_total}
    layouts = {s["layout"] for s in sampler.samples}
    return {"build": label, "object_sha256": object_digest(olia), "map_layout": sorted(layouts),
            "ratio": round(c.ratio, 3), "mptcp_bytes": c.mptcp_bytes, "tcp_bytes": c.tcp_bytes,
            "delay_ms": args.delay, "buffer_bdp": args.buffer, "loss_pct": args.loss_pct,
            "duration_s": args.duration, "omit_s": args.omit, "flows": flows, "olia": summary(sampler.samples),
            "map_samples": sampler.samples,
            "ss_samples": [s.__dict__ for s in c.samples], "counters": c.counters,
            "load": Path("/proc/loadavg").read_text().split()[:3], "time": time.time()}


def model_epsilons(seed: int, args) -> dict:
    """The same two shares in the packet-level model (rigs/cc/sim.py: the reference arithmetic, every
    subflow window-limited, no MPTCP scheduler), counted at every ACK of a coupled subflow. The model's
    OLIA calls oracle.olia_epsilon through the module, so it is wrapped for the run and restored after."""
    counts = {"acks": 0, "all_zero": 0, "unequal": 0, "smaller_best": 0}
    reference = oracle.olia_epsilon

    def counting(sfs: list[Sf], me: int) -> tuple[int, int]:
        if sum(1 for x in sfs if x.active()) == 2:
            eps = [reference(sfs, i) for i in range(2)]
            counts["acks"] += 1
            counts["all_zero"] += all(e[0] == 0 for e in eps)
            if sfs[0].cwnd != sfs[1].cwnd:
                counts["unequal"] += 1
                counts["smaller_best"] += eps[0 if sfs[0].cwnd < sfs[1].cwnd else 1][0] == 1
        return reference(sfs, me)

    rtt = 2 * args.delay / 1000 + 0.0006   # the rig's idle RTT: 40.6 ms at 20 ms each way
    specs = [sim.FlowSpec("mp", "olia", rtt), sim.FlowSpec("mp", "olia", rtt), sim.FlowSpec("tcp", "reno", rtt)]
    oracle.olia_epsilon = counting
    try:
        r = sim.simulate(specs, rate_mbit=args.rate, loss_p=args.loss_pct / 100, seconds=60, warmup_s=10, seed=seed)
    finally:
        oracle.olia_epsilon = reference
    return {"seed": seed, "ratio": round(r.ratio("mp", "tcp"), 2),
            "eps_all_zero": round(counts["all_zero"] / max(1, counts["acks"]), 2),
            "smaller_window_is_best": round(counts["smaller_best"] / max(1, counts["unequal"]), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="append", default=[], metavar="LABEL=DIR",
                    help="a build of olia.bpf.o to run (repeatable; rounds alternate the builds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--delay", type=float, default=20.0, help="one-way base delay, ms")
    ap.add_argument("--buffer", type=float, default=4.0, help="FIFO depth in BDPs (4: never overflows here)")
    ap.add_argument("--loss-pct", type=float, default=0.2)
    ap.add_argument("--rate", type=float, default=20.0)
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--omit", type=int, default=5)
    ap.add_argument("--out", type=Path, help="append each run as a JSON line here")
    ap.add_argument("--model-seeds", type=int, default=0,
                    help="instead of the rig: the packet-level model's shares, this many seeds of 60 s (no root)")
    args = ap.parse_args()
    if args.model_seeds:
        for seed in range(args.model_seeds):
            print(json.dumps(model_epsilons(seed, args)), flush=True)
        return
    if not args.build or not args.out:
        ap.error("give --build LABEL=DIR (one or more) and --out, or --model-seeds N")
    builds = [(b.split("=", 1)[0], Path(b.split("=", 1)[1])) for b in args.build]
    for rnd in range(args.rounds):
        for label, build in (builds if rnd % 2 == 0 else builds[::-1]):
            rec = one_run(label, build, args)
            rec["round"] = rnd
            with args.out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"round {rnd} {label:10} ratio {rec['ratio']:.2f} layout {rec['map_layout']} "
                  f"load {' '.join(rec['load'])}", flush=True)
            for k, v in rec["olia"].items():
                print(f"    {k}: {v}", flush=True)
            for k, v in rec["flows"].items():
                print(f"    {k}: {v}", flush=True)


if __name__ == "__main__":
    main()
