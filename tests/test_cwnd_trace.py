"""rigs/cwnd_trace.py: the kernel's tcp_probe / tcp_cong_state_set text, loss epochs, and Linux Cubic's climb.

No root: the line formats are this kernel's own (6.18, captured from a reverse-mode iperf3 on a dual-stack
server, so the addresses are IPv4-mapped), and the Cubic figures are worked by hand from net/ipv4/tcp_cubic.c
(beta 717/1024, C 410/1024, fast convergence, beta_scale 15), so a wrong constant gives a different number.
"""
from __future__ import annotations

import os

import pytest

from rigs.cwnd_trace import (
    Ack, StateChange, acked_segments, cubic_plateaus, cubic_regain_s, epochs, flow_report, follows, name_sockets,
    parse,
)

PROBE = ("          iperf3-32419   [000] ..s2. {t}: tcp_probe: family=AF_INET6 src=[::ffff:10.77.0.1]:{sport} "
         "dest=[::ffff:{dst}]:{dport} mark=0x0 data_len=0 snd_nxt=0x{nxt:x} snd_una=0x{una:x} snd_cwnd={cwnd} "
         "ssthresh={ssth} snd_wnd={wnd} srtt={srtt} rcv_wnd=65160 sock_cookie=2e44 skbaddr=000000003e272da5 "
         "skaddr=0000000041b4cf87")
STATE = ("          iperf3-32419   [000] ..s2. {t}: tcp_cong_state_set: family=AF_INET6 sport={sport} "
         "dport={dport} saddr=10.77.0.1 daddr={dst} saddrv6=::ffff:10.77.0.1 daddrv6=::ffff:{dst} cong_state={s}")
V4 = ("          iperf3-28811   [001] ..... 86180.013254: tcp_probe: family=AF_INET src=10.77.0.1:5302 "
      "dest=10.77.1.2:45838 mark=0x0 data_len=0 snd_nxt=0x00000010 snd_una=0xfffffff0 snd_cwnd=10 "
      "ssthresh=2147483647 snd_wnd=65483 srtt=28 rcv_wnd=65536 sock_cookie=3f17 skbaddr=0000000087d9935b "
      "skaddr=000000009ead3919")
HEADER = "# tracer: nop\n#\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
MSS = 1448


def probe(t, cwnd, sport=5301, dst="10.77.1.2", dport=45824, in_flight=None, srtt=40000, ssth=2147483647,
          wnd=4_000_000, una=1000):
    return PROBE.format(t=f"{t:.6f}", sport=sport, dst=dst, dport=dport, una=una,
                        nxt=una + (cwnd * MSS if in_flight is None else in_flight), cwnd=cwnd, ssth=ssth, srtt=srtt,
                        wnd=wnd)


def state(t, s, sport=5301, dst="10.77.1.2", dport=45824):
    return STATE.format(t=f"{t:.6f}", sport=sport, dst=dst, dport=dport, s=s)


def test_parse_reads_both_families_wraps_the_sequence_space_and_keeps_only_the_ports_asked_for():
    text = HEADER + "\n".join([V4, probe(10.0, 20), probe(10.1, 7, sport=22), state(10.2, 3)])
    acks, states = parse(text, [5301, 5302])
    assert [a.sock for a in acks] == [(5302, "10.77.1.2", 45838), (5301, "10.77.1.2", 45824)]
    # 0x10 - 0xfffffff0 across the 2^32 wrap is 32 bytes, not minus four billion.
    assert acks[0].in_flight == 32 and acks[0].cwnd == 10 and acks[0].srtt_us == 28 and acks[0].snd_wnd == 65483
    assert acks[1].in_flight == 20 * MSS and acks[1].t == 10.0
    assert states == [StateChange(10.2, (5301, "10.77.1.2", 45824), 3)]


def test_each_flow_is_its_busiest_socket_not_the_control_connection_on_the_same_port():
    text = "\n".join([probe(1.0, 10, dport=40000)] + [probe(1 + i / 100, 10) for i in range(5)]
                     + [probe(1.0, 10, dst="10.77.2.2", dport=40001)])
    acks, _ = parse(text, [5301])
    names = name_sockets(acks, lambda port, addr: "sf1" if addr.startswith("10.77.1.") else "sf2")
    assert names == {(5301, "10.77.1.2", 45824): "sf1", (5301, "10.77.2.2", 40001): "sf2"}


def trace_with_two_losses() -> tuple[list[Ack], list[StateChange]]:
    """Window 20 -> loss at t=1 (recovery until 1.1, window 14) -> back to 20 at 1.5 -> 24 at 2.0 -> loss at
    2.0 (recovery until 2.1, window 16) -> 22 at 2.6, never back to 24; the last ACK at 3.0."""
    lines = [probe(0.5, 20), probe(0.9, 20), state(1.0, 1), state(1.01, 3), probe(1.05, 20), state(1.1, 0),
             probe(1.12, 14), probe(1.3, 17), probe(1.5, 20), probe(1.9, 24), state(2.0, 3),
             probe(2.05, 18), state(2.1, 0), probe(2.11, 16), probe(2.6, 22), probe(3.0, 22)]
    return parse("\n".join(lines), [5301])


def test_epochs_start_at_the_move_into_recovery_and_measure_the_climb_back_from_its_end():
    acks, states = trace_with_two_losses()
    sock = (5301, "10.77.1.2", 45824)
    first, second = epochs(acks, states, sock)
    # Disorder (1) at 1.0 is not a reduction; Recovery (3) at 1.01 is.
    assert (first.t, first.w_max, first.after) == (1.01, 20, 14)
    assert first.length_s == pytest.approx(2.0 - 1.01)
    assert first.regain_s == pytest.approx(1.5 - 1.1)
    assert (second.t, second.w_max, second.after) == (2.0, 24, 16)
    assert second.length_s is None and second.regain_s is None
    report = flow_report(acks, states, {sock: "sf1"}, MSS)["sf1"]
    assert report["loss_epochs"] == 2 and report["regained"] == "1/2"
    assert report["epoch_starts"] == [1.01, 2.0]
    assert report["w_max_median"] == 22 and report["cut_median"] == pytest.approx((14 / 20 + 16 / 24) / 2, abs=1e-4)
    # Every ACK had a full window in flight.
    assert report["window_limited"] == 1.0
    # From 0.5 s to 3.0 s, two reductions.
    assert report["loss_epochs_per_s"] == pytest.approx(2 / 2.5, abs=1e-4)


def test_a_flow_with_room_in_its_window_is_counted_as_not_window_limited():
    acks, states = parse("\n".join([probe(0.1, 20), probe(0.2, 20, in_flight=10 * MSS),
                                    probe(0.3, 20, in_flight=19 * MSS), probe(0.4, 20, wnd=20 * MSS)]), [5301])
    report = flow_report(acks, states, {acks[0].sock: "tcp"}, MSS)["tcp"]
    assert report["window_limited"] == pytest.approx(3 / 4, abs=1e-4)   # within one segment counts as full
    # The last ACK: 20 segments out and the receiver's window allowing 20: no room for one more.
    assert report["rwnd_limited"] == pytest.approx(1 / 4, abs=1e-4)


def test_window_limited_counts_in_the_flows_own_segment_size():
    # A subflow's segments are shorter (its DSS option): 40 of 1,400 bytes fill a window of 40, which in
    # 1,448-byte segments would read as 1.3 segments short of full.
    acks, states = parse(probe(0.1, 40, in_flight=40 * 1400), [5301])
    assert flow_report(acks, states, {acks[0].sock: "sf1"}, {"sf1": 1400})["sf1"]["window_limited"] == 1.0
    assert flow_report(acks, states, {acks[0].sock: "sf1"}, MSS)["sf1"]["window_limited"] == 0.0


def test_what_each_ack_acknowledged_shows_at_the_next_one_and_stretch_acks_are_counted():
    # snd_una as each ACK found it, wrapping past 2^32 on the way: the ACK at 0.1 moved it 2 segments, 0.2
    # moved it 2, 0.3 moved it 6 (a stretch ACK), 0.4 moved nothing (a duplicate), 0.5 moved 2; the last one's
    # is unseen.
    base = (1 << 32) - 5 * MSS
    unas = [(base + k * MSS) % (1 << 32) for k in (0, 2, 4, 10, 10, 12)]
    acks, states = parse("\n".join(probe(0.1 * (i + 1), 20, una=u) for i, u in enumerate(unas)), [5301])
    assert acked_segments(acks, MSS) == [2, 2, 6, 0, 2]
    report = flow_report(acks, states, {acks[0].sock: "sf1"}, MSS)["sf1"]
    assert report["stretch_acks"] == pytest.approx(1 / 4, abs=1e-4)
    assert report["acks_without_progress"] == pytest.approx(1 / 5, abs=1e-4)
    assert report["acked_segments_mean"] == pytest.approx(3, abs=1e-3)
    assert report["ack_gap_ms_median"] == pytest.approx(100, abs=1e-3)
    # Counted in a shorter segment, two 1,448-byte segments are more than two: the flow's own size matters.
    assert flow_report(acks, states, {acks[0].sock: "sf1"}, 1000)["sf1"]["stretch_acks"] > 0.5


def test_losses_that_follow_anothers_are_counted_against_what_chance_gives():
    leader = [1.0, 5.0, 9.0]
    # 1.1 and 5.25 follow a leader's loss within 0.25 s, 9.0 at the same instant; 3.0 does not, nor 0.9 (before).
    assert follows(leader, [0.9, 1.1, 3.0, 5.25, 9.0], 0.25)[0] == 3
    # By chance: 3 losses x 0.25 s cover 0.75 s of the 8.1 s both were traced, so 5 x 0.75 / 8.1 of them.
    assert follows(leader, [0.9, 1.1, 3.0, 5.25, 9.0], 0.25)[1] == pytest.approx(5 * 0.75 / 8.1)
    assert follows([], [1.0], 0.25) == (0, 0.0)


def test_cubic_plateaus_use_the_kernels_fast_convergence():
    # A loss below the last plateau leaves W (1 + 717/1024) / 2, not W; at or above it, W.
    assert cubic_plateaus([100, 80, 90, 120]) == pytest.approx([100, 80 * 1741 / 2048, 90, 120])


def test_cubic_regain_follows_the_kernels_curve_where_it_is_faster_and_the_reno_estimate_where_that_is():
    # Large window, long RTT: the cubic curve (the estimate would take 300 x 15/8 x 0.1 = 56 s). Cut from
    # 1000 to 700 with plateau 1000:
    # K = cbrt(300 / (410/1024)) = 9.08 s; w_max = origin, so the climb is K less delay_min.
    assert cubic_regain_s(1000, 700, 1000, rtt_s=0.1, delay_min_s=0.01) == pytest.approx(
        (300 / (410 / 1024)) ** (1 / 3) - 0.01, rel=1e-6)
    # Small window: the TCP-friendly estimate, 8/15 packet per round trip: 6 packets x 15/8 x 0.1 s.
    assert cubic_regain_s(20, 14, 20, rtt_s=0.1) == pytest.approx(6 * 15 / 8 * 0.1)
    # Fast convergence put the plateau below w_max: the curve's K to 85 and then the convex part to 100.
    plateau = 100 * 1741 / 2048
    k = ((plateau - 70) / (410 / 1024)) ** (1 / 3)
    assert cubic_regain_s(100, 70, plateau, rtt_s=1.0) == pytest.approx(  # the estimate: 56 s
        k + ((100 - plateau) / (410 / 1024)) ** (1 / 3), rel=1e-6)


@pytest.mark.root
def test_the_kernels_tracepoints_show_a_cubic_flows_losses_at_a_shallow_fifo(prefix, tmp_path):
    """A real Cubic flow (reverse-mode iperf3, the server sending) through a 10 Mbit/s FIFO of 20 kB for 4 s:
    the trace must see its ACKs, several loss reductions cut to Linux Cubic's 0.7, and a climb back; a tracer
    that read the wrong socket, the wrong port or a lost buffer would not."""
    from harness.hosts.local import LocalHost, NamespaceHost
    from harness.hosts.ready import listening_ports, wait_until
    from harness.hosts.netcmd import addr_add_argv, link_up_argv, netns_add_argv, offloads_off_argv, veth_argv
    from harness.upkeep.clean import clean_prefix
    from rigs.cwnd_trace import INSTANCE_PREFIX, TRACEFS, CwndTrace

    root = LocalHost("root")
    snd, rcv = f"{prefix}snd", f"{prefix}rcv"
    try:
        for ns in (snd, rcv):
            root.run(netns_add_argv(ns))
        root.run(veth_argv("cw0", snd, "cw1", rcv))
        a, b = NamespaceHost("snd", snd), NamespaceHost("rcv", rcv)
        for host, dev, cidr in ((a, "cw0", "10.78.0.1/24"), (b, "cw1", "10.78.0.2/24")):
            host.run(addr_add_argv(dev, cidr))
            host.run(link_up_argv(dev))
            host.run(offloads_off_argv(dev), check=False)
        a.run(["tc", "qdisc", "add", "dev", "cw0", "root", "tbf", "rate", "10mbit", "burst", "3028", "limit", "20000"])
        server = a.start(["iperf3", "-s", "-1", "-p", "5399"], label="iperf3-server")
        wait_until(lambda: 5399 in listening_ports(a), 10, "iperf3 server", poll_s=0.05)
        with CwndTrace([5399], str(tmp_path)) as trace:
            # -C reaches the sending (server) socket by setsockopt, which root may do whatever the machine's
            # allowed list says (a namespace's sysctl default may not: cubic is not on this machine's list).
            # The cut below checks that Cubic ran: Reno's is 0.5.
            b.run(["iperf3", "-c", "10.78.0.1", "-p", "5399", "-R", "-t", "4", "-C", "cubic"], timeout=30)
        server.stop()
        assert not list((TRACEFS / "instances").glob(f"{INSTANCE_PREFIX}{os.getpid()}-*"))
        acks, states = trace.read()
        names = name_sockets(acks, lambda port, addr: "flow" if addr == "10.78.0.2" else None)
        report = flow_report(acks, states, names, MSS)["flow"]
        assert trace.overrun == 0
        assert report["acks"] > 1000, report
        assert report["loss_epochs"] >= 3, report
        assert report["cut_median"] == pytest.approx(0.7, abs=0.08), report
        assert int(report["regained"].split("/")[0]) >= 1, report
    finally:
        clean_prefix(prefix)
