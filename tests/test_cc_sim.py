"""The reference arithmetic at one shared FIFO: what each loss process lets a coupled connection take.

``rigs/cc/sim.py`` drives the oracle's own per-ACK and per-loss updates (the multipath-tcp.org
modules transliterated) through a packet-level FIFO. The theory these pin: with losses by packets
sent (random loss) LIA's two subflows together take about one Reno share (RFC 6356's goal); when a
slow flow's bursts meet the full FIFO about as often as a fast flow's (a drop-tail FIFO fed in
bursts, as the rig's is), the coupled subflows take several times the TCP flow's congestion events
per packet, and the connection's aggregate increase of alpha = 1/2 packet per RTT against Reno's 1
leaves it half a share or less. Two uncoupled subflows take about two shares under
either. No root; about a second per simulated run; the seeds are fixed, so the results are too.
"""
from __future__ import annotations

import statistics

import pytest

from rigs.cc import oracle as ref
from rigs.cc import sim
from rigs.cc.sim import FlowSpec, bdp_packets, loss_per_packet, simulate

RATE, RTT = 20.0, 0.0406


def ratio(algo: str, seeds: int = 3, **kw) -> tuple[float, float]:
    """Median MPTCP/TCP against Reno, and median MPTCP/TCP congestion events per packet, over ``seeds`` runs."""
    ratios, events = [], []
    for seed in range(seeds):
        r = simulate([FlowSpec("mptcp", algo, RTT), FlowSpec("mptcp", algo, RTT), FlowSpec("tcp", "reno", RTT)],
                     rate_mbit=RATE, seconds=100, seed=seed, **kw)
        ratios.append(r.ratio("mptcp", "tcp"))
        events.append(loss_per_packet(r, "mptcp", "tcp"))
    return statistics.median(ratios), statistics.median(events)


RANDOM = {"loss_p": 0.002}
BURSTY = {"buffer_pkts": bdp_packets(RATE, RTT), "tick_s": 0.01}


def test_random_loss_gives_lia_one_reno_share_and_uncoupled_two():
    lia, lia_ev = ratio("lia", **RANDOM)
    reno2, _ = ratio("reno", **RANDOM)
    assert 0.75 <= lia <= 1.3, lia
    assert 1.6 <= reno2 <= 2.6, reno2
    # Losses by packets sent: the connection takes about as many congestion events per packet as the TCP flow.
    assert 0.6 <= lia_ev <= 1.5, lia_ev


def test_bursty_drop_tail_gives_lia_half_a_share_or_less():
    lia, lia_ev = ratio("lia", **BURSTY)
    reno2, reno2_ev = ratio("reno", **BURSTY)
    # The coupled subflows' bursts meet the full FIFO about as often as the TCP flow's, for far fewer
    # packets: the connection takes more congestion events per packet than the TCP flow ...
    assert lia_ev >= 1.5, lia_ev
    # ... and ends at half a share or less (alpha = 1/2 packet per RTT against Reno's 1 with equal cuts).
    assert 0.2 <= lia <= 0.7, lia
    # Two uncoupled subflows, as aggressive as the TCP flow, lose as it does and keep two shares.
    assert reno2 >= 1.6 and reno2_ev < 1.5, (reno2, reno2_ev)


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
    lia, lia_ev = ratio("lia", buffer_pkts=bdp_packets(RATE, RTT))
    assert lia_ev < 1.3 and lia >= 0.8, (lia, lia_ev)


def wvegas_vs_vegas(seed: int):
    return simulate([FlowSpec("mptcp", "wvegas", RTT), FlowSpec("mptcp", "wvegas", RTT),
                     FlowSpec("tcp", "vegas", RTT)],
                    rate_mbit=RATE, buffer_pkts=bdp_packets(RATE, RTT), seconds=40, warmup_s=15, seed=seed)


def test_wvegas_holds_its_total_alpha_in_the_fifo_and_vegas_between_alpha_and_beta():
    """wVegas' subflows hold total_alpha = 10 packets in the FIFO between them, Vegas 2-4 (its diff
    is taken from the round's minimum RTT over base RTT, so a little more by the mean): the
    shares follow the backlogs, 2.4-3.4 at 20 ms. Seeds 0 and 1 start with every base RTT right;
    seed 2's wVegas subflows come out of slow start with a queue in their base RTT (49 ms on a
    41 ms path) and hold twice as much."""
    for seed in (0, 1):
        r = wvegas_vs_vegas(seed)
        assert 9.0 <= r.backlog("mptcp") <= 11.5, (seed, r.queued)
        assert 2.0 <= r.backlog("tcp") <= 4.5, (seed, r.queued)
        assert 2.2 <= r.ratio("mptcp", "tcp") <= 3.5, (seed, r.ratio("mptcp", "tcp"))
        assert r.drops < 50 and not any(r.events), "delay-based flows lose nothing after the warm-up"
        assert not any(r.backoffs), "the queueing delay holds steady: wVegas' backoff never fires"
        # By its own rounds (as the rig's trace reads them), each subflow holds diff at its alpha, and
        # the alphas (total_alpha x weight, rounded down) add up to 9.
        diff, qdelay_ms = r.round_means("mptcp")
        assert diff == pytest.approx(9, abs=0.5) and 6 < qdelay_ms < 10, (seed, diff, qdelay_ms)
        assert r.round_means("tcp") is None, "only wVegas' rounds are kept"


def test_wvegas_with_a_vegas_sized_total_alpha_takes_under_two_shares(monkeypatch):
    """A planted total alpha of 4 (what a wrong scale or weight would do): the backlog and the ratio
    fall out of the bounds above."""
    monkeypatch.setattr(ref, "WVEGAS_TOTAL_ALPHA", 4)
    r = wvegas_vs_vegas(0)
    assert r.backlog("mptcp") < 6.5 and r.ratio("mptcp", "tcp") < 2.0, (r.queued, r.ratio("mptcp", "tcp"))


def test_one_wvegas_backoff_locks_the_reference_into_backing_off():
    """The reference's backoff (the window times base/(2 rtt) once the queueing delay is twice the smallest
    seen since the last backoff, which the backoff forgets) is bistable: after one backoff the smallest
    delay it records is the Vegas flow's queue alone, wVegas' own growth doubles that before wVegas
    reaches its alpha, and it backs off again, every few rounds. One planted backoff at 25 s turns
    seed 0's 2.9 shares into under 1.2 (the rig's low runs at 20 and 50 ms: backoffs every 5-8 rounds)."""
    specs = [FlowSpec("mptcp", "wvegas", RTT), FlowSpec("mptcp", "wvegas", RTT), FlowSpec("tcp", "vegas", RTT)]
    kw = {"rate_mbit": RATE, "buffer_pkts": bdp_packets(RATE, RTT), "seconds": 60, "warmup_s": 30, "seed": 0}
    assert simulate(specs, **kw).ratio("mptcp", "tcp") > 2.4       # not planted: holds alpha
    r = simulate(specs, **kw, wvegas_backoff_at=25)
    assert r.ratio("mptcp", "tcp") < 1.2 and r.backlog("mptcp") < 5, (r.ratio("mptcp", "tcp"), r.queued)
    assert min(len(b) for b in r.backoffs[:2]) > 30, "a backoff every few rounds, not one"
    assert r.round_means("mptcp")[0] < 4, "by its own rounds, the cycle holds well under its alpha"


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="either"):
        simulate([FlowSpec("t", "reno", RTT)], rate_mbit=RATE, buffer_pkts=10, loss_p=0.01)
    with pytest.raises(ValueError, match="no model"):
        simulate([FlowSpec("t", "bbr", RTT)], rate_mbit=RATE, buffer_pkts=10, seconds=1, warmup_s=0)


def test_synchronisation_counts_events_every_subflow_shares():
    r = sim.SimResult([FlowSpec("m", "lia", RTT), FlowSpec("m", "lia", RTT), FlowSpec("t", "reno", RTT)],
                      [1, 1, 1], [[1.0, 5.0], [1.02, 9.0], [1.01, 5.0]], 0, [], 10.0)
    assert sim.synchronisation(r, "m", "t", 0.05) == 0.5
