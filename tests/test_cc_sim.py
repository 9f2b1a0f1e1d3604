"""The reference arithmetic at one shared FIFO: what each loss process lets a coupled connection take.

``harness/cc/sim.py`` drives the oracle's own per-ACK and per-loss updates (the multipath-tcp.org
modules transliterated) through a packet-level FIFO. The theory these pin: with losses by packets
sent (random loss) LIA's two subflows together take about one Reno share (RFC 6356's goal); when
every flow takes about as many congestion events per second whatever its rate (a drop-tail FIFO fed
in bursts, as the rig's is), the connection's aggregate increase of alpha = 1/2 packet per RTT
against Reno's 1 gives about half a share. Two uncoupled subflows take about two shares under
either. No root; about a second per simulated run.
"""
from __future__ import annotations

import statistics

import pytest

from harness.cc import oracle as ref
from harness.cc import sim
from harness.cc.sim import FlowSpec, bdp_packets, simulate

RATE, RTT = 20.0, 0.0406


def ratio(algo: str, seeds: int = 2, **kw) -> tuple[float, float]:
    """Median MPTCP/TCP against Reno, and median subflow/TCP congestion events, over ``seeds`` runs."""
    ratios, events = [], []
    for seed in range(seeds):
        r = simulate([FlowSpec("mptcp", algo, RTT), FlowSpec("mptcp", algo, RTT), FlowSpec("tcp", "reno", RTT)],
                     rate_mbit=RATE, seconds=100, seed=seed, **kw)
        ratios.append(r.ratio("mptcp", "tcp"))
        events.append(statistics.mean(len(e) for e in r.events_of("mptcp")) / len(r.events_of("tcp")[0]))
    return statistics.median(ratios), statistics.median(events)


RANDOM = {"loss_p": 0.002}
BURSTY = {"buffer_pkts": bdp_packets(RATE, RTT), "tick_s": 0.01}


def test_random_loss_gives_lia_one_reno_share_and_uncoupled_two():
    lia, lia_ev = ratio("lia", **RANDOM)
    reno2, _ = ratio("reno", **RANDOM)
    assert 0.75 <= lia <= 1.3, lia
    assert 1.6 <= reno2 <= 2.6, reno2
    # Losses by packets sent: each subflow, sending about half what the TCP flow sends, takes about half its events.
    assert lia_ev < 0.75, lia_ev


def test_bursty_drop_tail_gives_lia_half_a_share():
    lia, lia_ev = ratio("lia", **BURSTY)
    reno2, _ = ratio("reno", **BURSTY)
    # Every flow takes about as many congestion events whatever its rate ...
    assert lia_ev >= 0.8, lia_ev
    # ... so the aggregate increase (alpha = 1/2 per RTT) against Reno's 1 sets the share.
    assert 0.35 <= lia <= 0.8, lia
    assert reno2 >= 1.6, reno2


@pytest.mark.parametrize("algo", ["olia", "balia"])
def test_olia_and_balia_take_about_one_share_under_random_loss(algo):
    share, _ = ratio(algo, **RANDOM)
    assert 0.75 <= share <= 1.3, (algo, share)


def test_removing_the_coupling_fails_the_random_loss_bound(monkeypatch):
    """LIA with its linked increase replaced by Reno's (1/cwnd per ACK): two TCP shares, out of the bound."""
    monkeypatch.setattr(ref, "lia_ai_cnt", lambda sfs, cwnd: cwnd)
    share, _ = ratio("lia", **RANDOM)
    assert share > 1.5, share


def test_an_ack_clocked_sender_at_drop_tail_loses_by_increase():
    """With ACKs back at the exact time, an overflow drops the packet a window increase added:
    slowly increasing subflows lose seldom and LIA gets its share back. The burstiness is the cause."""
    lia, lia_ev = ratio("lia", seeds=1, buffer_pkts=bdp_packets(RATE, RTT))
    assert lia_ev < 0.75 and lia >= 0.8, (lia, lia_ev)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="either"):
        simulate([FlowSpec("t", "reno", RTT)], rate_mbit=RATE, buffer_pkts=10, loss_p=0.01)
    with pytest.raises(ValueError, match="no model"):
        simulate([FlowSpec("t", "vegas", RTT)], rate_mbit=RATE, buffer_pkts=10, seconds=1, warmup_s=0)


def test_synchronisation_counts_events_every_subflow_shares():
    r = sim.SimResult([FlowSpec("m", "lia", RTT), FlowSpec("m", "lia", RTT), FlowSpec("t", "reno", RTT)],
                      [1, 1, 1], [[1.0, 5.0], [1.02, 9.0], [1.01, 5.0]], 0, [], 10.0)
    assert sim.synchronisation(r, "m", "t", 0.05) == 0.5
