"""rigs/capture.py's accounting of a two-sided capture: which arrivals a FIFO dropped, trains, loss events.

No root: the lines are tcpdump 4.99's own text for MPTCP data segments (captured on this machine), and the
packet sequences are built so that a wrong pairing, an off-by-one train boundary or an ungrouped loss event
gives a different number.
"""
from __future__ import annotations

import pytest

from rigs.capture import (
    Packet, came_after, capture_argv, dropped, flow_report, kernel_drops, loss_events, parse, phase_by_flow, since_departure,
    trains,
)

LINES = """\
1795738675.249117 IP 10.77.0.1.5301 > 10.77.1.2.57112: Flags [.], seq 1045888318:1045889766, ack 3945904798, \
win 64, options [nop,nop,TS val 3254249549 ecr 4072095809,mptcp 26 dss ack 17787990024430318711 seq \
4935666301476966304 subseq 1 len 1448,nop,nop], length 1448
1795738675.249125 IP 10.77.0.1.5301 > 10.77.2.2.40000: Flags [P.], seq 77:1525, ack 1, win 64, options \
[nop,nop,TS val 3254249549 ecr 4072095809,mptcp 26 dss ack 1 seq 9 subseq 2 len 1448,nop,nop], length 1448
1795738675.226923 IP 10.77.0.1.5301 > 10.77.1.2.57096: Flags [S.], seq 2215899542, ack 3828456002, win 65483, \
options [mss 65495,sackOK,TS val 1972353613 ecr 3860326233,nop,wscale 10,mptcp 12 capable v1], length 0
1795738675.251757 IP 10.77.0.1.5302 > 10.77.1.2.41000: Flags [.], seq 10:1458, ack 1, win 64, length 1448
1795738675.251800 IP 10.77.0.1.22 > 10.77.1.2.41001: Flags [.], seq 10:1458, ack 1, win 64, length 1448
"""


def flow_of(port: int, dst: str) -> str | None:
    if port == 5302:
        return "tcp"
    if port == 5301:
        return "sf1" if dst.startswith("10.77.1.") else "sf2"
    return None


def test_parse_takes_the_tcp_sequence_range_not_the_mptcp_options_and_skips_what_is_not_ours():
    pkts = parse(LINES, flow_of)
    # The SYN-ACK has no range; port 22 is not a flow of the rig.
    assert pkts == [Packet(1795738675.249117, "sf1", 1045888318, 1045889766, port=57112),
                    Packet(1795738675.249125, "sf2", 77, 1525, psh=True, port=40000),   # Flags [P.]
                    Packet(1795738675.251757, "tcp", 10, 1458, port=41000)]


def test_a_retransmitted_segment_counts_its_first_arrival_as_the_drop():
    a = [Packet(1.0, "tcp", 0, 1448), Packet(1.001, "tcp", 1448, 2896), Packet(1.5, "tcp", 0, 1448)]
    d = [Packet(1.01, "tcp", 1448, 2896), Packet(1.52, "tcp", 0, 1448)]
    assert dropped(a, d, max_sojourn_s=0.2) == [True, False, False]


def test_a_departure_before_an_arrival_or_after_the_longest_sojourn_is_not_its():
    a = [Packet(2.0, "sf1", 0, 1448), Packet(3.0, "sf2", 0, 1448)]
    d = [Packet(1.9, "sf1", 0, 1448), Packet(3.3, "sf2", 0, 1448)]
    assert dropped(a, d, max_sojourn_s=0.2) == [True, True]
    # Same sequence range on another flow is another segment.
    assert dropped([Packet(1.0, "sf1", 0, 1448)], [Packet(1.01, "sf2", 0, 1448)], 0.2) == [True]


def test_trains_break_at_the_gap_and_every_packet_carries_its_trains_length():
    # Binary fractions of a second, so the gaps are exact: 1/4096 s apart, then 1/1024 s apart.
    times = [0, 1 / 4096, 2 / 4096, 4 / 1024, 5 / 1024, 6 / 1024, 7 / 1024, 1.0]
    # Gap 1/1024 s: the first three are one train; the next four are 1/1024 s apart, at the gap: trains of one.
    assert trains(times, gap_s=1 / 1024) == [3, 3, 3, 1, 1, 1, 1, 1]
    assert trains(times, gap_s=1.1 / 1024) == [3, 3, 3, 4, 4, 4, 4, 1]
    assert trains([], 0.001) == []


def test_drops_within_one_rtt_of_an_events_first_drop_are_one_event():
    assert loss_events([1.0, 1.02, 1.039, 1.5, 1.51, 3.0], rtt_s=0.04) == 3
    assert loss_events([1.0, 1.03, 1.06, 1.09], rtt_s=0.04) == 2   # measured from the event's first drop
    assert loss_events([], rtt_s=0.04) == 0


def test_flow_report_says_which_trains_the_drops_fell_in():
    # sf1 sends a train of 10 and loses its last 3; tcp sends 5 pairs 1 ms apart and loses one packet.
    a = [Packet(1.0 + i * 1e-5, "sf1", i * 1448, (i + 1) * 1448) for i in range(10)]
    a += [Packet(1.0 + k * 1e-3 + j * 1e-5, "tcp", (2 * k + j) * 1448, (2 * k + j + 1) * 1448)
          for k in range(5) for j in range(2)]
    drops = [i >= 7 for i in range(10)] + [k == 6 for k in range(10)]
    rep = flow_report(a, drops, gap_s=0.0003, rtt_s=0.04)
    assert rep["sf1"] == pytest.approx({"packets": 10, "drops": 3, "drops_per_packet": 0.3, "loss_events": 1,
                                        "events_per_1k_packets": 100.0, "train_mean": 10.0, "train_p95": 10.0,
                                        "train_of_drops_mean": 10.0})
    assert rep["tcp"]["train_mean"] == 2.0 and rep["tcp"]["train_of_drops_mean"] == 2.0
    assert rep["tcp"]["drops"] == 1
    # The warm-up is left out after the trains are cut: a train that straddles it keeps its length.
    late = flow_report(a, drops, gap_s=0.0003, rtt_s=0.04, since=1.00005)
    assert late["sf1"]["packets"] == 5 and late["sf1"]["train_mean"] == 10.0


def test_capture_argv_filters_data_from_the_sender_in_one_direction():
    argv = capture_argv("b0", "in", "/tmp/x.pcap", "10.77.0.1")
    assert argv[:5] == ["tcpdump", "-i", "b0", "-Q", "in"]
    assert argv[-1] == "tcp and src host 10.77.0.1 and greater 200"
    assert kernel_drops("63 packets captured\n126 packets received by filter\n7 packets dropped by kernel") == 7
    assert kernel_drops("tcpdump: no summary") is None


def test_the_backlog_an_arrival_meets_counts_kept_arrivals_not_yet_gone():
    from rigs.capture import backlog_at_arrivals, backlog_by_flow

    a = [Packet(1.0, "tcp", 0, 1), Packet(1.1, "sf1", 0, 1), Packet(1.2, "sf1", 1, 2), Packet(1.3, "tcp", 1, 2),
         Packet(1.5, "sf1", 2, 3)]
    drops = [False, False, True, False, False]
    d = [Packet(1.25, "tcp", 0, 1), Packet(1.4, "sf1", 0, 1)]
    # Before 1.0: empty; 1.1: tcp#0 queued; 1.2: two; 1.3: tcp#0 left, sf1#1 dropped: one; 1.5: tcp#1 only.
    q = backlog_at_arrivals(a, drops, d)
    assert q == [0, 1, 2, 1, 1]
    by = backlog_by_flow(a, q, fifo_packets=2)
    assert by["sf1"] == pytest.approx({"backlog_met": (1 + 2 + 1) / 3 / 2, "met_full": 1 / 3})
    assert by["tcp"] == pytest.approx({"backlog_met": (0 + 1) / 2 / 2, "met_full": 0.0})


def test_each_arrival_knows_how_long_since_the_fifo_last_sent_and_late_comers_to_a_full_fifo_are_told_apart():
    # Departures every 1 ms (binary-exact times would not matter here: the phases are compared to 0.5).
    deps = [Packet(k / 1000, "x", 0, 1) for k in range(1, 6)]
    arr = [Packet(0.0005, "tcp", 0, 1), Packet(0.0011, "tcp", 1, 2), Packet(0.0019, "sf1", 0, 1),
           Packet(0.0031, "sf1", 1, 2), Packet(0.0038, "sf1", 2, 3), Packet(0.0041, "tcp", 2, 3)]
    gaps = since_departure(arr, deps)
    assert gaps[0] is None and gaps[1:] == pytest.approx([0.0001, 0.0009, 0.0001, 0.0008, 0.0001])
    # Every arrival met a full FIFO (10 packets of 10); the late ones were dropped.
    drops = [False, False, True, False, True, False]
    report = phase_by_flow(arr, drops, [10] * 6, gaps, fifo_packets=10, service_s=0.001)
    assert report["tcp"] == {"full_arrivals": 2, "phase_median": 0.1, "dropped_early": 0.0, "dropped_late": None}
    assert report["sf1"]["phase_median"] == pytest.approx(0.8)
    assert report["sf1"]["dropped_early"] == 0.0 and report["sf1"]["dropped_late"] == 1.0
    # Who came first since the last departure: the sf1 packet at 1.9 ms came behind the tcp one at 1.1 ms (no
    # departure between), and the sf1 packet at 3.8 ms behind the sf1 one at 3.1 ms.
    after = came_after(arr, gaps)
    assert after == [None, None, "tcp", None, "sf1", None]
    report = phase_by_flow(arr, drops, [10] * 6, gaps, fifo_packets=10, service_s=0.001, after=after)
    assert report["sf1"]["behind_another"] == pytest.approx(2 / 3, abs=1e-4) and report["sf1"]["behind_whom"] == {"sf1": 1,
                                                                                                          "tcp": 1}
    assert report["sf1"]["dropped_first"] == 0.0 and report["sf1"]["dropped_behind"] == 1.0
    assert report["tcp"]["behind_another"] == 0.0 and report["tcp"]["dropped_behind"] is None
    # An arrival that met a FIFO with room is not counted.
    assert phase_by_flow(arr, drops, [5] * 6, gaps, fifo_packets=10, service_s=0.001) == {}


ACK_LINES = """\
1795770147.407056 IP 10.77.1.2.50846 > 10.77.0.1.5302: Flags [.], ack 829544965, win 1239, options \
[nop,nop,TS val 2967811486 ecr 4032265058], length 0
1795770150.142810 IP 10.77.2.2.41453 > 10.77.0.1.5301: Flags [.], ack 945585661, win 1082, options \
[nop,nop,TS val 1097944526 ecr 885047591,mptcp 12 dss ack 17455193117584217022], length 0
1795770188.763891 IP 10.77.1.2.52208 > 10.77.0.1.5301: Flags [S], seq 1995019394, win 64240, options \
[mss 1460,sackOK,TS val 3265113025 ecr 0,nop,wscale 10,mptcp 4 capable v1], length 0
1795770150.142811 IP 10.77.2.2.41453 > 10.77.0.1.22: Flags [.], ack 5, win 1082, length 0
"""


def ack_flow_of(port: int, src: str) -> str | None:
    return flow_of(port, src)


def test_parse_acks_reads_the_tcp_ack_the_window_and_the_dss_ack_and_skips_what_is_not_an_ack_of_ours():
    from rigs.capture import AckSeen, ack_capture_argv, parse_acks

    assert parse_acks(ACK_LINES, ack_flow_of) == [
        AckSeen(1795770147.407056, "tcp", 829544965, 50846, 1239, None),
        AckSeen(1795770150.14281, "sf2", 945585661, 41453, 1082, 17455193117584217022)]
    assert ack_capture_argv("s0", "/tmp/a.pcap", "10.77.0.1")[3:5] == ["-Q", "in"]
    assert ack_capture_argv("s0", "/tmp/a.pcap", "10.77.0.1")[-1] == "tcp and dst host 10.77.0.1 and less 200"


def test_ack_clock_tells_a_prompt_answer_from_a_late_one_an_unanswered_ack_and_an_answer_on_another_flow():
    from rigs.capture import AckSeen, ack_clock

    acks = [AckSeen(1.0000, "tcp", 100, 7), AckSeen(1.0020, "tcp", 200, 7),
            AckSeen(1.0021, "tcp", 150, 7),                       # older than the highest: not advancing
            AckSeen(1.0005, "sf1", 2**32 - 10, 9),                # sf1's sequence space wraps at its next ACK
            AckSeen(1.0010, "sf1", 5, 9), AckSeen(1.0040, "sf1", 30, 9), AckSeen(1.0060, "sf1", 60, 9),
            AckSeen(1.0030, "sf2", 500, 8),
            AckSeen(1.0050, "sf1", 7, 1), AckSeen(1.0051, "sf1", 1, 1)]   # iperf3's control connection: ignored
    data = [Packet(1.00002, "tcp", 0, 1), Packet(1.00202, "tcp", 1, 2),
            Packet(1.0025, "sf1", 0, 1),                          # 1.5 ms after sf1's ACK at 1.0 ms
            Packet(1.00301, "sf1", 1, 2), Packet(1.0031, "sf2", 0, 1),  # sf2's ACK first answered on sf1
            Packet(1.00605, "sf1", 2, 3)]
    # The first ACK of each flow only sets where it stands; since=1.0 counts every later one.
    clock = ack_clock(acks, data, since=1.0, connections=[("sf1", "sf2")])
    assert clock["tcp"] == {"advancing_acks": 1, "prompt": 1.0, "lag_ms_median": 0.02, "lag_ms_p90": 0.02,
                            "lag_ms_p99": 0.02, "unanswered": 0.0, "sent_per_ack": None}
    # sf1: answered 1.5 ms late; the ACK at 4.0 ms got nothing before its next advancing ACK at 6.0 ms, which was
    # answered in 0.05 ms.
    assert clock["sf1"]["advancing_acks"] == 3 and clock["sf1"]["unanswered"] == pytest.approx(1 / 3, abs=1e-4)
    assert clock["sf1"]["prompt"] == pytest.approx(1 / 3, abs=1e-4)
    assert (clock["sf1"]["lag_ms_median"], clock["sf1"]["lag_ms_p90"]) == pytest.approx((1.5, 1.5))
    # The TCP segment at 2.02 ms came first after sf1's ACK at 1.0 ms, but it is not of sf1's connection.
    assert clock["sf1"]["answered_elsewhere"] == 0.0
    # Between sf1's counted ACKs: 2 segments (2.5 and 3.01 ms), then none (before 6.0 ms); after its last ACK the
    # run ends, which counts nothing.
    assert clock["sf1"]["sent_per_ack"] == {"0": 0.5, "1": 0.0, "2": 0.5, "3": 0.0, "4+": 0.0}
    assert "sf2" not in clock   # its one ACK only set where it stands
    acks.append(AckSeen(1.0030, "sf2", 600, 8))
    clock = ack_clock(acks, data, since=1.0, connections=[("sf1", "sf2")])
    assert clock["sf2"]["answered_elsewhere"] == 1.0 and clock["sf2"]["lag_ms_median"] == pytest.approx(0.1)
    assert ack_clock(acks, data, since=1.0015)["sf1"]["advancing_acks"] == 2


def test_ack_return_times_each_ack_from_the_departure_of_the_segment_it_acknowledges():
    from rigs.capture import AckSeen, ack_return

    deps = [Packet(1.000, "tcp", 0, 100), Packet(1.001, "tcp", 100, 200), Packet(1.002, "sf1", 0, 100),
            Packet(1.500, "tcp", 100, 200)]               # a retransmission: the first departure is the one acked
    acks = [AckSeen(1.040, "tcp", 100, 7), AckSeen(1.045, "tcp", 200, 7), AckSeen(1.052, "sf1", 100, 9),
            AckSeen(1.060, "sf1", 150, 9),                # acknowledges inside a segment: not matched
            AckSeen(1.061, "sf1", 100, 1)]                # the control connection's: not the flow's
    ret = ack_return(acks, deps)
    assert ret["tcp"]["acks_matched"] == 2 and ret["tcp"]["return_ms_median"] == pytest.approx(44.0)
    assert ret["tcp"]["return_ms_p10"] == pytest.approx(40.0) and ret["tcp"]["return_ms_spread"] == pytest.approx(4.0)
    assert ret["sf1"] == {"acks_matched": 1, "return_ms_median": 50.0, "return_ms_p10": 50.0, "return_ms_p90": 50.0,
                          "return_ms_spread": 0.0}


def test_data_acks_counts_the_moves_of_the_connection_level_ack_across_a_wrap():
    from rigs.capture import AckSeen, data_acks

    top = 2**64 - 1000
    acks = [AckSeen(0.0, "sf1", 0, 9, 10, top), AckSeen(0.001, "sf2", 0, 8, 10, top),       # stood still
            AckSeen(0.002, "sf1", 0, 9, 10, (top + 2840) % 2**64),                           # moved across the wrap
            AckSeen(0.003, "sf2", 0, 8, 10, top),                                            # an older one: no move
            AckSeen(0.0035, "sf2", 0, 8, 10, (top + 2840) % 2**32),                          # the same, in 4 bytes
            AckSeen(0.010, "sf2", 0, 8, 10, (top + 2840 + 100_000) % 2**64),
            AckSeen(0.011, "tcp", 0, 7, 10, None),
            AckSeen(0.004, "sf1", 0, 3, 10, 5)]   # iperf3's control connection, an MPTCP connection of its own
    rep = data_acks(acks, ("sf1", "sf2"))
    assert rep["acks"] == 6 and rep["moved"] == pytest.approx(2 / 6, abs=1e-4)
    assert (rep["step_bytes_median"], rep["step_bytes_max"]) == (100_000, 100_000)
    assert rep["step_bytes_p99"] == 100_000 and rep["still_ms_max"] == pytest.approx(8.0)
    assert data_acks([AckSeen(0.0, "tcp", 0, 7)], ("sf1", "sf2")) is None
    # Another MPTCP connection's subflow numbers its data on its own: not counted with these.
    assert data_acks([*acks, AckSeen(0.005, "path1", 0, 4, 10, 12345)], ("sf1", "sf2")) == rep


def test_send_causes_name_the_ack_that_released_each_segment_and_drops_are_counted_by_cause():
    from rigs.capture import AckSeen, drops_by_cause, send_causes

    acks = [AckSeen(1.0, "sf1", 100, 9), AckSeen(1.0, "sf2", 50, 8), AckSeen(1.0, "tcp", 10, 7),   # where each stands
            AckSeen(1.010, "sf1", 200, 9),             # advances sf1
            AckSeen(1.020, "sf2", 50, 8),              # sf2's ACK that acknowledges nothing new (a DATA_ACK, a window)
            AckSeen(1.0201, "sf1", 7, 1)]              # iperf3's control connection: ignored
    data = [Packet(1.01002, "sf1", 0, 1), Packet(1.01004, "sf1", 1, 2), Packet(1.01006, "sf1", 2, 3),
            Packet(1.02005, "sf1", 3, 4),              # sf1's own ACK is 10 ms old; sf2's came 50 us before
            Packet(1.02003, "sf2", 0, 1),
            Packet(1.02004, "tcp", 0, 1),              # sf2 is not the TCP flow's sibling
            Packet(1.5, "sf1", 0, 1)]                  # a retransmission of the first, by no ACK
    data.sort(key=lambda p: p.t)
    causes = send_causes(acks, data, connections=[("sf1", "sf2")])
    by_packet = {(p.flow, p.seq, p.t): c for p, c in zip(data, causes)}
    assert by_packet[("sf1", 0, 1.01002)] == ("own", 1, (100, 200))
    assert by_packet[("sf1", 1, 1.01004)] == ("own", 2, (100, 200))
    assert by_packet[("sf1", 2, 1.01006)] == ("own", 3, (100, 200))
    assert by_packet[("sf1", 3, 1.02005)][:2] == ("sibling", 1)
    assert by_packet[("sf2", 0, 1.02003)] == ("own-still", 1, None)
    assert by_packet[("tcp", 0, 1.02004)] == ("none", 0, None)
    assert by_packet[("sf1", 0, 1.5)] == ("none", 0, None)
    # A narrower window leaves the late ones unexplained.
    assert send_causes(acks, data, prompt_s=30e-6, connections=[("sf1", "sf2")])[2][:2] == ("none", 0)

    # The FIFO dropped the first sending of sf1's segment 0 and its third segment after the ACK, and the segment the
    # sibling's ACK released; the retransmission got through.
    arrivals = [Packet(p.t + 1e-6, p.flow, p.seq, p.end) for p in data]
    dropped_ = {("sf1", 0, 1.01002), ("sf1", 2, 1.01006), ("sf1", 3, 1.02005)}
    drops = [(p.flow, p.seq, p.t) in dropped_ for p in data]
    out = drops_by_cause(data, causes, arrivals, drops, since=1.0)
    assert out["sf1"]["own"] == {"segments": 3, "share": 0.6, "dropped": 2, "drop_rate": pytest.approx(2 / 3, abs=1e-5)}
    assert out["sf1"]["own 1"]["dropped"] == 1 and out["sf1"]["own 2"]["dropped"] == 0
    assert out["sf1"]["own 3+"] == {"segments": 1, "share": 0.2, "dropped": 1, "drop_rate": 1.0}
    assert out["sf1"]["sibling"]["dropped"] == 1
    assert out["sf1"]["none"] == {"segments": 1, "share": 0.2, "dropped": 0, "drop_rate": 0.0}
    assert out["sf2"] == {"own-still": {"segments": 1, "share": 1.0, "dropped": 0, "drop_rate": 0.0}}
    # since: the segments sent before it are not counted.
    assert "own" not in drops_by_cause(data, causes, arrivals, drops, since=1.02)["sf1"]


def test_ack_spread_times_the_fifo_sending_the_segments_an_ack_acknowledged_and_bins_the_pairs_drops_by_it():
    from rigs.capture import AckSeen, Release, ack_spread, drops_by_cause, send_causes

    # sf1's ACK to 300 acknowledged 100:200 and 200:300, which left the FIFO 0.6 ms apart; the TCP flow's ACK to 30
    # acknowledged 10:20 and 20:30, which left 3 ms apart (other flows' packets between them).
    departures = [Packet(0.9000, "sf1", 100, 200), Packet(0.9006, "sf1", 200, 300),
                  Packet(0.9100, "tcp", 10, 20), Packet(0.9130, "tcp", 20, 30)]
    acks = [AckSeen(0.5, "sf1", 100, 9), AckSeen(0.5, "tcp", 10, 7),
            AckSeen(0.9410, "sf1", 300, 9), AckSeen(0.9530, "tcp", 30, 7)]
    data = [Packet(0.94102, "sf1", 300, 400), Packet(0.94103, "sf1", 400, 500),
            Packet(0.95302, "tcp", 30, 40), Packet(0.95303, "tcp", 40, 50),
            Packet(0.99, "tcp", 50, 60)]                 # by no ACK: no spread
    rel = send_causes(acks, data)
    spread = ack_spread(rel, data, departures)
    assert spread[:4] == pytest.approx([0.0006, 0.0006, 0.003, 0.003]) and spread[4] is None
    # A release whose acknowledged segments the FIFO capture never saw has no spread.
    assert ack_spread([Release("own", 1, (7, 9))], data[:1], departures) == [None]
    # The TCP pair's second segment was dropped: it lands in the 3-6 service-time bin (0.6 ms each), sf1's in 0-1.5.
    arrivals = [Packet(p.t + 1e-6, p.flow, p.seq, p.end) for p in data]
    drops = [False, False, False, True, False]
    out = drops_by_cause(data, rel, arrivals, drops, spread=spread, service_s=0.0006)
    assert out["sf1"]["own 2 spread 0-1.5"] == {"segments": 1, "share": 0.5, "dropped": 0, "drop_rate": 0.0}
    assert out["tcp"]["own 2 spread 3-6"]["dropped"] == 1
    assert "own 2 spread 0-1.5" not in out["tcp"]
    # The last bin is open.
    out = drops_by_cause(data, rel, arrivals, drops, spread=[None, None, None, 0.01, None], service_s=0.0006)
    assert out["tcp"]["own 2 spread 12+"]["dropped"] == 1


def test_ack_pairing_counts_the_segments_each_ack_covered_and_the_acks_that_straddle_two_sendings():
    from rigs.capture import AckSeen, ack_pairing

    # sf1 sends pairs at 1.000, 1.005, 1.010, 1.015 (segments of 10 bytes). Its receiver first ACKs each pair
    # (ACK 20), then one segment alone (ACK 30: a quick ACK), and from there each ACK covers the second segment of
    # one pair and the first of the next (ACK 50, ACK 70), sent 5 ms apart.
    data = []
    for i, t in enumerate((1.000, 1.005, 1.010, 1.015)):
        data += [Packet(t, "sf1", 20 * i, 20 * i + 10), Packet(t + 2e-5, "sf1", 20 * i + 10, 20 * i + 20)]
    data += [Packet(1.0152, "sf1", 10, 20)]   # a retransmission: its first sending counts
    acks = [AckSeen(0.9, "sf1", 0, 9), AckSeen(1.041, "sf1", 20, 9), AckSeen(1.045, "sf1", 30, 9),
            AckSeen(1.051, "sf1", 50, 9), AckSeen(1.056, "sf1", 70, 9),
            AckSeen(1.057, "sf1", 70, 9),           # a duplicate: not advancing
            AckSeen(1.058, "sf1", 75, 9),           # ends inside a segment: not along the sent segments, left out
            AckSeen(1.0565, "sf1", 3, 1)]           # iperf3's control connection
    out = ack_pairing(acks, data)["sf1"]
    assert out["acks"] == 4
    assert (out["segments_1"], out["segments_2"], out["segments_3+"]) == (0.25, 0.75, 0.0)
    # Of the three ACKs of two segments, the last two straddle two sendings.
    assert out["straddling"] == pytest.approx(2 / 3, abs=1e-4)
    # since leaves out the ACKs before it (the first still sets where the flow stood).
    assert ack_pairing(acks, data, since=1.05)["sf1"]["acks"] == 2
    # A threshold above the 5 ms between sendings calls every pair together.
    assert ack_pairing(acks, data, together_s=0.006)["sf1"]["straddling"] == 0.0


def test_train_alignment_foretells_from_the_windows_parity_where_the_ack_covering_a_train_starts():
    from rigs.capture import AckSeen, train_alignment

    # Segments of 10 bytes. sf1 keeps 2 segments in flight when it sends a train (k even): each train's first
    # segment starts the ACK that covers it. sf2 keeps 1 (k odd, after a first train of 3): each ACK starts one
    # segment before the train, at the end of the previous one.
    def train(flow, t, *seqs):
        return [Packet(t + 1e-5 * i, flow, s, s + 10) for i, s in enumerate(seqs)]

    data = (train("sf1", 0.9, 0, 10) + train("sf1", 0.905, 20, 30) + train("sf1", 1.00001, 40, 50)
            + train("sf1", 1.00501, 60, 70)
            + train("sf2", 0.9, 0, 10, 20) + train("sf2", 1.00001, 30, 40) + train("sf2", 1.00501, 50, 60))
    acks = [AckSeen(0.8, f, 0, 9) for f in ("sf1", "sf2")]
    acks += [AckSeen(1.0, "sf1", 20, 9), AckSeen(1.005, "sf1", 40, 9), AckSeen(1.010, "sf1", 60, 9),
             AckSeen(1.015, "sf1", 80, 9),
             AckSeen(1.0, "sf2", 20, 9), AckSeen(1.005, "sf2", 40, 9), AckSeen(1.010, "sf2", 60, 9)]
    out = train_alignment(acks, data)
    # The trains sent before any ACK (no k) and those no ACK covers yet are not counted.
    assert out["sf1"] == {"trains": 2, "odd": 0.0, "starts_when_even": 1.0, "starts_when_odd": None}
    assert out["sf2"] == {"trains": 2, "odd": 1.0, "starts_when_even": None, "starts_when_odd": 0.0}
    # With a threshold below the 10 us between a train's segments each segment is a train of its own.
    assert train_alignment(acks, data, together_s=5e-6)["sf1"]["trains"] == 4


def test_receiver_acks_puts_each_ack_down_to_an_arrival_another_subflows_arrival_or_later():
    from rigs.capture import AckSeen, receiver_acks

    # At the receiver: sf1's first pair is acknowledged at once; its second pair is held and acknowledged right
    # after a segment of sf2 arrives; a fifth segment alone 3 ms after it arrived; then a window update.
    # The second and fourth segments carry PSH.
    arrivals = [Packet(1.0, "sf1", 0, 10), Packet(1.0006, "sf1", 10, 20, psh=True), Packet(1.002, "sf1", 20, 30),
                Packet(1.0026, "sf1", 30, 40, psh=True), Packet(1.00448, "sf2", 0, 10), Packet(1.006, "sf1", 40, 50)]
    acks = [AckSeen(0.99, "sf1", 0, 7), AckSeen(1.00061, "sf1", 20, 7), AckSeen(1.0045, "sf1", 40, 7),
            AckSeen(1.009, "sf1", 50, 7), AckSeen(1.0091, "sf1", 50, 7)]
    # The sender sent the first three segments together (one train), the fourth 1.5 ms later, then one train each.
    sent = [Packet(0.95, "sf1", 0, 10), Packet(0.95001, "sf1", 10, 20), Packet(0.95002, "sf1", 20, 30),
            Packet(0.9515, "sf1", 30, 40), Packet(0.96, "sf1", 40, 50), Packet(0.97, "sf1", 50, 60)]
    out = receiver_acks(arrivals, acks, connections=[("sf1", "sf2")], sent=sent)["sf1"]
    assert out["acks"] == 3
    assert (out["segments_1"], out["segments_2"], out["segments_3+"]) == (
        pytest.approx(1 / 3, abs=1e-4), pytest.approx(2 / 3, abs=1e-4), 0.0)
    assert [out[f"by_{g}"] for g in ("arrival", "sibling", "later")] == [pytest.approx(1 / 3, abs=1e-4)] * 3
    assert out["later_ms_median"] == pytest.approx(3.0)
    assert (out["acks_still"], out["still_by_later"]) == (1, 1.0)
    # Two arrivals left more than a segment unacknowledged; the second waited 1.9 ms.
    assert out["held"] == 0.5
    assert out["straddling"] == {"arrival": 0.0, "sibling": 1.0, "later": None}
    # The first ACK ends inside the first train, the second and the one-segment ACK where a train ends.
    assert out["ends_a_train"] == {"1": 1.0, "2": 0.5, "3+": None}
    assert out["one_segment_by"] == {"arrival": 0.0, "sibling": 0.0, "later": 1.0}
    # Two of five arrivals pushed; the two-segment ACKs end on them (their first segments do not), the lone
    # fifth segment is not pushed.
    assert (out["pushed"], out["ends_on_push"], out["one_segment_pushed"]) == (0.4, pytest.approx(2 / 3, abs=1e-4), 0.0)
    # Without the connection, the ACK after sf2's segment is a later one.
    alone = receiver_acks(arrivals, acks)["sf1"]
    assert (alone["by_sibling"], alone["by_later"]) == (0.0, pytest.approx(2 / 3, abs=1e-4))


def test_parse_gives_a_subflows_segment_its_data_sequence_number_from_the_mapping_and_the_initial_one():
    lines = """\
1795738675.100000 IP 10.77.0.1.5301 > 10.77.1.2.57112: Flags [S.], seq 1045888317, ack 3945904797, win 65160, \
options [mss 1460,sackOK,TS val 1 ecr 2,nop,wscale 10,mptcp 12 capable v1 {0x7cb6ac9da365ce74}], length 0
1795738675.249117 IP 10.77.0.1.5301 > 10.77.1.2.57112: Flags [.], seq 1045888318:1045889766, ack 3945904798, \
win 64, options [nop,nop,TS val 3254249549 ecr 4072095809,mptcp 26 dss ack 17787990024430318711 seq \
4935666301476966304 subseq 1 len 2896,nop,nop], length 1448
1795738675.249200 IP 10.77.0.1.5301 > 10.77.1.2.57112: Flags [P.], seq 1045889766:1045891214, ack 3945904798, \
win 64, options [nop,nop,TS val 3254249549 ecr 4072095809,mptcp 26 dss ack 17787990024430318711 seq \
4935666301476966304 subseq 1 len 2896,nop,nop], length 1448
1795738675.249300 IP 10.77.0.1.5301 > 10.77.2.2.40000: Flags [.], seq 77:1525, ack 1, win 64, options \
[nop,nop,TS val 3254249549 ecr 4072095809,mptcp 26 dss ack 1 seq 9 subseq 2 len 1448,nop,nop], length 1448
"""
    pkts = parse(lines, flow_of)
    # The mapping starts at the subflow's first byte (initial sequence number + 1); the second segment is 1448
    # bytes into it. Without the subflow's SYN-ACK in the capture the number is not known.
    assert [(p.dseq, p.port, p.psh) for p in pkts] == [(4935666301476966304, 57112, False),
                                                      (4935666301476966304 + 1448, 57112, True), (None, 40000, False)]


def test_out_of_order_follows_the_connections_gaps_across_its_subflows():
    from rigs.capture import out_of_order

    pkts = [Packet(1.0, "sf1", 100, 110, dseq=0, port=7), Packet(1.1, "sf2", 500, 510, dseq=20, port=8),
            Packet(1.15, "sf2", 3, 4, dseq=999, port=9),          # iperf3's control connection: not the data's
            Packet(1.2, "sf2", 510, 520, dseq=30, port=8),
            Packet(1.3, "sf1", 110, 120, dseq=10, port=7),        # fills the gap
            Packet(1.4, "sf1", 120, 130, dseq=40, port=7),
            Packet(1.5, "tcp", 0, 10, dseq=None)]
    assert out_of_order(pkts, [("sf1", "sf2")]) == {("sf1", 100): False, ("sf2", 500): True, ("sf2", 510): True,
                                                     ("sf1", 110): False, ("sf1", 120): False}


def test_receiver_acks_splits_the_one_segment_acks_by_the_connections_order():
    from rigs.capture import AckSeen, receiver_acks

    # sf1's segments: the first two arrive with the connection in order; sf2 then brings data from beyond a gap, so
    # sf1's next three arrive with it out of order. Two ACKs of one segment each in order; out of order, one ACK of two
    # segments and one of one.
    arrivals = [Packet(1.0, "sf1", 0, 10, dseq=0), Packet(1.001, "sf1", 10, 20, dseq=10),
                Packet(1.002, "sf2", 0, 10, dseq=100), Packet(1.003, "sf1", 20, 30, dseq=20),
                Packet(1.004, "sf1", 30, 40, dseq=30), Packet(1.005, "sf1", 40, 50, dseq=40)]
    acks = [AckSeen(0.9, "sf1", 0, 7), AckSeen(1.0005, "sf1", 10, 7), AckSeen(1.0015, "sf1", 20, 7),
            AckSeen(1.0045, "sf1", 40, 7), AckSeen(1.0055, "sf1", 50, 7)]
    out = receiver_acks(arrivals, acks, connections=[("sf1", "sf2")])["sf1"]
    assert out["out_of_order"] == 0.6
    assert out["one_segment_after"] == {"in_order": 1.0, "out_of_order": 0.5}
    # Without the connection the order is not known.
    assert "out_of_order" not in receiver_acks(arrivals, acks)["sf1"]
