"""Replay one event sequence through the reference model and through mplab's C, window by window.

Two worlds start from the same subflow states. Each event (an ACK of some packets with a new
smoothed RTT, a loss, a wVegas or Vegas RTT sample or end of round) is applied to both: in one by
``rigs.cc.oracle`` (the multipath-tcp.org modules and Linux's tcp_vegas.c in Python), in the other by
``calc.bpf.c`` (mplab_math.h, through a ``HostCalculator`` or a ``BpfCalculator``). After every
event the windows of every subflow, and the arithmetic the update used, must be equal.

The kernel's own part of a loss (the window set to the new ssthresh at the end of recovery,
snd_cwnd_cnt cleared) and of the ACK path (snd_una, the subflow's published window and RTT)
is the same Python in both worlds: what is compared is what mplab wrote.
"""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field

from rigs.cc import oracle as ref
from rigs.cc.calc import EV_ACK, EV_LOSS, EV_ROUND, EV_SAMPLE, CalcCtx, SfC, VgC, WinC, WvC


@dataclass(frozen=True)
class Event:
    kind: str            # "ack", "loss", "sample", "round"
    sf: int
    acked: int = 1
    srtt: int = 0        # ack: the subflow's smoothed RTT from now on (kernel units, us << 3)
    rtt_us: int = 0      # sample: one RTT sample (us)


@dataclass
class Subflow:
    win: ref.Win
    srtt: int
    snd_una: int = 0
    loss: list[int] = field(default_factory=lambda: [0, 0, 0])
    wv: ref.WvState = field(default_factory=ref.WvState)
    vg: ref.VegasState = field(default_factory=ref.VegasState)
    pub: ref.Sf | None = None


class Mismatch(AssertionError):
    """The two worlds disagree after an event."""


def _publish(sub: Subflow, algorithm: str) -> None:
    p = sub.pub
    p.cwnd, p.srtt = sub.win.cwnd, sub.srtt
    if algorithm == "olia":
        p.loss_int = ref.olia_loss_int(*sub.loss)
    if algorithm == "wvegas":
        p.rate, p.sampling = sub.wv.rate, int(sub.wv.sampled_rtt > 0)


class OracleWorld:
    """The reference, in Python."""

    def __init__(self, algorithm: str, subflows: list[Subflow], choices: ref.Choices) -> None:
        self.algorithm, self.subs, self.choices = algorithm, subflows, choices
        self.last: dict = {}
        #: Which branches of the arithmetic the sequence reached (a replay that never reaches one proves nothing about it).
        self.seen: set[str] = set()

    def sfs(self) -> list[ref.Sf]:
        return [s.pub for s in self.subs]

    def ack(self, i: int, acked: int) -> None:
        s, a, ch = self.subs[i], self.algorithm, self.choices
        if a == "lia":
            self.last = {"lia_alpha": ref.lia_alpha(self.sfs())[0], "lia_cnt": ref.lia_ai_cnt(self.sfs(), s.win.cwnd)}
            self.seen.add("coupled" if self.last["lia_cnt"] > s.win.cwnd else "capped")
            ref.lia_on_ack(s.win, self.sfs(), i, acked, ch)
        elif a == "olia":
            self.last = {"olia_inc": ref.olia_inc(self.sfs(), i, s.win.cwnd)}
            self.seen.add(f"epsilon {ref.olia_epsilon(self.sfs(), i)[0]}")
            ref.olia_on_ack(s.win, self.sfs(), i, acked, ch)
        elif a == "balia":
            ai, md = ref.balia_params(self.sfs(), i, s.win.cwnd, s.win.mss)
            self.last = {"balia_ai": ai, "balia_md": md}
            self.seen.add("alpha >= 2" if md > s.win.cwnd // 2 else "alpha 1")
            if max((x.cwnd * s.win.mss * 8_000_000 // x.srtt for x in self.sfs() if x.active()), default=0) > 1 << 25:
                self.seen.add("rates scaled down")
            ref.balia_on_ack(s.win, self.sfs(), i, acked, ch)
        elif s.win.cwnd < s.win.ssthresh:
            ref.slow_start(s.win, acked)

    def loss(self, i: int) -> None:
        s, a = self.subs[i], self.algorithm
        if a == "olia":
            s.loss[0], s.loss[1] = ref.olia_on_loss(*s.loss)
        if a == "balia":
            s.win.ssthresh = ref.balia_ssthresh(self.sfs(), i, s.win.cwnd, s.win.mss)
        else:
            s.win.ssthresh = ref.reno_ssthresh(s.win.cwnd)

    def sample(self, i: int, rtt_us: int) -> None:
        if self.algorithm == "vegas":
            ref.vegas_sample(self.subs[i].vg, rtt_us)
        else:
            ref.wvegas_sample(self.subs[i].wv, rtt_us)

    def round(self, i: int, acked: int) -> None:
        s = self.subs[i]
        if self.algorithm == "vegas":
            self._vegas_round(s, acked)
            return
        before = (s.win.cwnd, s.wv.alpha)
        ref.wvegas_round(s.win, s.wv, self.sfs(), i, acked, self.choices)
        if s.wv.alpha != before[1]:
            self.seen.add("alpha reweighted")
        if s.win.cwnd < before[0]:
            self.seen.add("window down")

    def _vegas_round(self, s: Subflow, acked: int) -> None:
        before, in_ss, enough = s.win.cwnd, s.win.cwnd < s.win.ssthresh, s.vg.cnt_rtt > 2
        ref.vegas_round(s.win, s.vg, acked)
        if not enough:
            self.seen.add("reno fallback")
        elif in_ss:
            # slow start only grows the window; the exit (diff > gamma) never does
            self.seen.add("slow-start exit" if s.win.cwnd <= before else "slow start")
        else:
            self.seen.add({-1: "window down", 0: "window held", 1: "window up"}.get(s.win.cwnd - before, "clamped"))


class CWorld(OracleWorld):
    """mplab's C, through a calculator."""

    def __init__(self, algorithm: str, subflows: list[Subflow], calc) -> None:
        super().__init__(algorithm, subflows, ref.Choices())
        self.calc = calc

    def _ctx(self, i: int, event: int, acked: int = 0, rtt_us: int = 0) -> CalcCtx:
        ctx = CalcCtx()
        for j, s in enumerate(self.subs):
            p = s.pub
            ctx.sf[j] = SfC(0x1000 + j if p.present else 0, p.cwnd, p.srtt, p.rate, p.loss_int, p.sampling)
        w, st = self.subs[i].win, self.subs[i].wv
        ctx.win = WinC(w.cwnd, w.ssthresh, w.cnt, w.clamp, w.olia_cnt, w.mss)
        ctx.wv = WvC(st.rate, st.weight, st.base_rtt, st.sampled_rtt, st.cnt_rtt, st.alpha, st.queue_delay, st.doing)
        vg = self.subs[i].vg
        ctx.vg = VgC(vg.base_rtt, vg.min_rtt, vg.cnt_rtt, vg.doing)
        ctx.me, ctx.event, ctx.acked, ctx.rtt_us = i, event, acked, rtt_us
        ctx.loss1, ctx.loss2, ctx.loss3 = self.subs[i].loss
        return ctx

    def _run(self, i: int, event: int, acked: int = 0, rtt_us: int = 0) -> CalcCtx:
        ctx = self.calc.call(self.algorithm, self._ctx(i, event, acked, rtt_us))
        w, st = self.subs[i].win, self.subs[i].wv
        w.cwnd, w.ssthresh, w.cnt, w.olia_cnt = ctx.win.cwnd, ctx.win.ssthresh, ctx.win.cnt, ctx.win.olia_cnt
        (st.rate, st.weight, st.base_rtt, st.sampled_rtt, st.cnt_rtt, st.alpha, st.queue_delay, st.doing) = (
            ctx.wv.rate, ctx.wv.weight, ctx.wv.base_rtt, ctx.wv.sampled_rtt, ctx.wv.cnt_rtt, ctx.wv.alpha,
            ctx.wv.queue_delay, ctx.wv.doing)
        vg = self.subs[i].vg
        vg.base_rtt, vg.min_rtt, vg.cnt_rtt, vg.doing = ctx.vg.base_rtt, ctx.vg.min_rtt, ctx.vg.cnt_rtt, ctx.vg.doing
        self.subs[i].loss[0], self.subs[i].loss[1] = ctx.loss1, ctx.loss2
        return ctx

    def ack(self, i: int, acked: int) -> None:
        ctx = self._run(i, EV_ACK, acked)
        self.last = {"lia": {"lia_alpha": ctx.lia_alpha, "lia_cnt": ctx.lia_cnt},
                     "olia": {"olia_inc": ctx.olia_inc},
                     "balia": {"balia_ai": ctx.balia_ai, "balia_md": ctx.balia_md}}.get(self.algorithm, {})

    def loss(self, i: int) -> None:
        self._run(i, EV_LOSS)

    def sample(self, i: int, rtt_us: int) -> None:
        self._run(i, EV_SAMPLE, rtt_us=rtt_us)

    def round(self, i: int, acked: int) -> None:
        self._run(i, EV_ROUND, acked)


def apply(world: OracleWorld, ev: Event) -> None:
    """One event in one world, with the kernel's own steps around mplab's."""
    s = world.subs[ev.sf]
    if ev.kind == "ack":
        s.srtt = ev.srtt or s.srtt
        s.snd_una = (s.snd_una + ev.acked * s.win.mss) & ref.U32
        s.loss[2] = s.snd_una
        _publish(s, world.algorithm)
        world.ack(ev.sf, ev.acked)
    elif ev.kind == "loss":
        _publish(s, world.algorithm)
        world.loss(ev.sf)
        s.win.cwnd, s.win.cnt = s.win.ssthresh, 0   # the kernel: recovery ends at ssthresh
        if world.algorithm == "wvegas":             # .set_state(Open) after recovery: a new round
            base = s.wv.base_rtt
            s.wv = ref.WvState(base_rtt=base)
        if world.algorithm == "vegas":              # tcp_vegas_state(Open): vegas_enable
            ref.vegas_enable(s.vg)
    elif ev.kind == "sample":
        world.sample(ev.sf, ev.rtt_us)
    elif ev.kind == "round":
        world.round(ev.sf, ev.acked)
    _publish(s, world.algorithm)


def state(world: OracleWorld) -> list[tuple]:
    """What must agree: every subflow's window, counters and (wVegas) round state."""
    return [(s.win.cwnd, s.win.ssthresh, s.win.cnt, s.win.olia_cnt, s.loss[0], s.loss[1],
             s.wv.rate, s.wv.weight, s.wv.alpha, s.wv.base_rtt, s.wv.queue_delay, s.wv.cnt_rtt,
             s.vg.base_rtt, s.vg.min_rtt, s.vg.cnt_rtt, s.vg.doing)
            for s in world.subs]


def start(rng: random.Random, n: int, short_rtt: bool) -> list[Subflow]:
    """``n`` subflows, mostly in congestion avoidance, with RTTs of a few ms (short) or 10-150 ms."""
    subs = []
    for _ in range(n):
        cwnd = rng.randint(2, 400 if short_rtt else 120)
        ssthresh = rng.choice([cwnd + rng.randint(1, 40), max(2, cwnd - rng.randint(0, 5)), 0x7FFFFFFF])
        rtt_us = rng.randint(300, 5_000) if short_rtt else rng.randint(10_000, 150_000)
        sub = Subflow(ref.Win(cwnd, ssthresh), rtt_us << 3)
        sub.pub = ref.Sf(0, 0)
        subs.append(sub)
    return subs


def events(algorithm: str, rng: random.Random, subs: list[Subflow], count: int) -> list[Event]:
    """A plausible sequence: ACKs of 1-2 packets (now and then a stretch ACK of up to 8), RTTs
    drifting by a few percent, losses at about one per hundred ACKs; wVegas adds RTT samples and
    ends rounds, and so does Vegas (independent single-path flows: no coupling)."""
    out: list[Event] = []
    srtt = [s.srtt for s in subs]
    for _ in range(count):
        i = rng.randrange(len(subs))
        srtt[i] = max(8, int(srtt[i] * rng.uniform(0.97, 1.03)))
        r = rng.random()
        if r < 0.01:
            out.append(Event("loss", i))
        elif algorithm in ("wvegas", "vegas") and r < 0.5:
            out.append(Event("sample", i, rtt_us=max(1, (srtt[i] >> 3) + rng.randint(-200, 3_000))))
        elif algorithm in ("wvegas", "vegas") and r < 0.6:
            out.append(Event("round", i, acked=rng.choice([1, 2])))
        else:
            acked = rng.choice([1, 1, 2, 2, 2, 3]) if rng.random() > 0.02 else rng.randint(4, 8)
            out.append(Event("ack", i, acked=acked, srtt=srtt[i]))
    return out


@dataclass
class Result:
    events: int
    windows_compared: int
    cwnd_changes: int
    seen: set[str]


def replay(algorithm: str, calc, seed: int, count: int = 2000, n_subflows: int = 2,
           short_rtt: bool = False, choices: ref.Choices = ref.Choices()) -> Result:
    """Replay ``count`` random events; raise ``Mismatch`` at the first event where the worlds differ."""
    rng = random.Random(seed)
    subs = start(rng, n_subflows, short_rtt)
    for s in subs:
        s.pub = ref.Sf(s.win.cwnd, s.srtt)
    evs = events(algorithm, rng, subs, count)
    a = OracleWorld(algorithm, copy.deepcopy(subs), choices)
    b = CWorld(algorithm, copy.deepcopy(subs), calc)
    compared = changes = 0
    for k, ev in enumerate(evs):
        before = state(a)
        apply(a, ev)
        apply(b, ev)
        if ev.kind == "ack" and a.last != b.last:
            raise Mismatch(f"{algorithm} seed {seed} event {k} {ev}: arithmetic reference {a.last} != mplab {b.last}")
        if state(a) != state(b):
            raise Mismatch(f"{algorithm} seed {seed} event {k} {ev}: windows reference {state(a)} != mplab {state(b)}")
        compared += len(subs)
        changes += sum(x[0] != y[0] for x, y in zip(before, state(a)))
    return Result(len(evs), compared, changes, a.seen)

