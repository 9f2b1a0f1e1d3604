"""What the related schemes measure: ``ss -tin`` of MPTCP subflows and ``tc -s -j qdisc`` queue fill,
parsed from output captured on this machine (tests/data: an mptcpize'd iperf3 over two addresses in a
namespace, kernel 6.18, iproute2 6.1; an HTB class over a 30000-byte bfifo flooded with UDP)."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import TrafficError
from harness.testbeds.base import LossCounters, loss_over, parse_loss_counters

from controller.measure import (Fifo, fifos, interval_occupancy, mean_occupancy, network_of, occupancy, parse_ss, path_stats,
                                queue_fill)

DATA = Path(__file__).parent / "data"


def test_ss_subflows_of_a_real_mptcp_connection():
    subs = parse_ss((DATA / "ss-tin-mptcp.txt").read_text())
    assert len(subs) == 8 and all(s.mptcp for s in subs)
    first = subs[0]
    assert (first.local, first.peer) == ("10.99.0.2", "127.0.0.1")  # "%lo" scope and port stripped
    assert first.rtt_s == pytest.approx(0.018026) and first.min_rtt_s == pytest.approx(0.000001)
    assert first.cwnd_pkts == 12 and first.bytes_sent == 9232569
    assert {s.peer for s in subs} == {"127.0.0.1", "10.99.0.2"}  # "[::ffff:...]" mapped addresses unwrapped


def test_path_stats_takes_the_data_subflow_per_receiver_and_path():
    subs = parse_ss((DATA / "ss-tin-mptcp.txt").read_text())
    st = path_stats(subs, {"n1": {"wifi": "127.0.0.1", "lte": "10.99.0.2"}, "n2": {"wifi": "10.1.1.1"}})
    # Towards 127.0.0.1 the socket that sent 9969438 bytes, not the 41-byte control connection.
    # The base RTT (minrtt) is what the schemes use; the smoothed RTT is kept beside it.
    assert st["n1"]["wifi"].rtt_s == pytest.approx(0.000001) and st["n1"]["wifi"].srtt_s == pytest.approx(0.000543)
    assert st["n1"]["wifi"].loss == 0.0 and st["n1"]["wifi"].source["loss"] == "ss-retrans"
    assert st["n2"] == {}


def test_loss_is_the_retransmitted_share():
    # The captured format with a retransmission counter (a lossy path adds bytes_retrans and retrans:).
    text = ("ESTAB 0 0 10.0.0.1:5201 10.10.1.2:40000\n"
            "\t cubic rtt:25.5/3 cwnd:14 bytes_sent:100000 bytes_retrans:1000 data_segs_out:70 retrans:0/1 "
            "tcp-ulp-mptcp flags:Jec\n")
    s = parse_ss(text)[0]
    assert s.loss == pytest.approx(0.01) and s.rtt_s == pytest.approx(0.0255) and s.retrans_total == 1


def test_queue_fill_counts_leaf_fifos_only():
    # The HTB root repeats its children's 29808-byte backlog; only the bfifo (limit 30000) counts.
    assert queue_fill((DATA / "tc-qdisc-bfifo-backlog.json").read_text()) == (29808.0, 30000.0)


def test_occupancy_per_network_and_its_mean():
    full = (DATA / "tc-qdisc-bfifo-backlog.json").read_text()
    occ = occupancy({"snd:to-ap": full, "snd:to-enb": "[]", "snd:lo": full, "ap:rx1": "error: gone"})
    assert occ == {"wifi": pytest.approx(0.9936), "lte": 0.0}
    assert network_of("enb:rx3") == "lte" and network_of("ap") == "wifi" and network_of("snd:lo") is None
    assert mean_occupancy([{"wifi": 1.0}, {"wifi": 0.5, "lte": 0.2}]) == {"lte": 0.1, "wifi": 0.75}


def test_interval_occupancy_counts_active_queues_only():
    full = (DATA / "tc-qdisc-bfifo-backlog.json").read_text()
    snap = fifos({"snd:to-ap": full})
    assert snap == {("snd:to-ap:", "11:"): Fifo("wifi", 29808.0, 30000.0, 158976)}
    idle = Fifo("wifi", 0.0, 30000.0, 500)
    s0 = {("snd:to-ap", "11:"): Fifo("wifi", 0.0, 30000.0, 1000), ("snd:to-ap", "12:"): idle,
          ("snd:to-enb", "11:"): Fifo("lte", 0.0, 90000.0, 0)}
    s1 = {**s0, ("snd:to-ap", "11:"): Fifo("wifi", 15000.0, 30000.0, 90000)}
    # The idle WiFi queue (no bytes, no backlog) and the idle LTE queue do not dilute the signal.
    assert interval_occupancy([s0, s1], how="sum") == {"lte": 0.0, "wifi": pytest.approx(0.25)}
    # The fullest active queue (default): a second active WiFi queue, empty, does not halve the signal.
    s2 = {k: (Fifo("wifi", 0.0, 30000.0, 2000) if k == ("snd:to-ap", "12:") else f) for k, f in s1.items()}
    assert interval_occupancy([s0, s2])["wifi"] == pytest.approx(0.25)
    assert interval_occupancy([s0, s2], how="sum")["wifi"] == pytest.approx(0.125)


# ------------------------------------------------------------------ path loss from the loss rules' counters


def test_loss_counters_parsed_from_captured_nft_output():
    # Captured in the AP of the paper links (two receivers, 1 % loss on WiFi) after 2 s of iperf3 to n1:
    # named counters rx<i>_seen / rx<i>_lost (harness.hosts.netcmd.radio_loss_argvs).
    got = parse_loss_counters((DATA / "nft-list-counters-radio.json").read_text(), "ap")
    assert got == {"rx1": LossCounters(4238, 41), "rx2": LossCounters(0, 0)}
    assert got["rx1"].loss == pytest.approx(41 / 4238) and got["rx2"].loss is None
    # A device with a _seen counter and no _lost one lost nothing; other counters are not ours.
    doc = ('{"nftables": [{"metainfo": {}}, {"counter": {"name": "rx3_seen", "packets": 7, "bytes": 1}}, '
           '{"counter": {"name": "other", "packets": 9, "bytes": 1}}]}')
    assert parse_loss_counters(doc, "enb") == {"rx3": LossCounters(7, 0)}
    with pytest.raises(TrafficError, match="enb: cannot read loss counters"):
        parse_loss_counters("nft: no such table", "enb")


def test_loss_over_a_window_is_the_difference_of_two_readings():
    before = {"n1": {"wifi": LossCounters(1000, 10), "lte": LossCounters(50, 0)}, "n2": {}}
    after = {"n1": {"wifi": LossCounters(3000, 31), "lte": LossCounters(50, 0)}, "n2": {"wifi": LossCounters(5, 0)}}
    win = loss_over(before, after)
    assert win == {"n1": {"wifi": LossCounters(2000, 21), "lte": LossCounters(0, 0)}, "n2": {}}
    assert win["n1"]["wifi"].loss == pytest.approx(0.0105) and win["n1"]["lte"].loss is None


def test_path_stats_take_loss_from_counters_and_rtt_from_minrtt():
    # A 3G-like subflow whose probe overflowed its own queue: 6 % of its bytes retransmitted and a
    # smoothed RTT twice the base RTT; the loss rule saw 770 packets and dropped none.
    text = ("ESTAB 0 0 10.0.0.1:5201 10.20.1.2:40000\n"
            "\t cubic rtt:120.4/8 minrtt:65.1 cwnd:20 bytes_sent:1000000 bytes_retrans:60500 data_segs_out:700 "
            "retrans:0/41 tcp-ulp-mptcp flags:Jec\n"
            "ESTAB 0 0 10.0.0.1:5201 10.10.1.2:40001\n"
            "\t cubic rtt:25.7/3 cwnd:14 bytes_sent:100000 bytes_retrans:1150 data_segs_out:70 retrans:0/1 "
            "tcp-ulp-mptcp flags:Jec\n")
    addrs = {"n1": {"wifi": "10.10.1.2", "lte": "10.20.1.2"}}
    st = path_stats(parse_ss(text), addrs, {"n1": {"lte": LossCounters(770, 0), "wifi": LossCounters(0, 0)}})["n1"]
    lte, wifi = st["lte"], st["wifi"]
    assert lte.loss == 0.0 and lte.retrans_ratio == pytest.approx(0.0605) and lte.loss_pkts == {"seen": 770, "lost": 0}
    assert lte.source["loss"] == "nft-loss-counters" and lte.source["retrans_ratio"] == "ss-retrans"
    assert lte.rtt_s == pytest.approx(0.0651) and lte.srtt_s == pytest.approx(0.1204)
    assert lte.source["rtt_s"] == "ss-minrtt"
    # No packet counted on WiFi (and no minrtt printed): the retransmission ratio and srtt stand in, said so.
    assert wifi.loss == pytest.approx(0.0115) and wifi.source["loss"] == "ss-retrans" and wifi.loss_pkts is None
    assert wifi.rtt_s == pytest.approx(0.0257) and wifi.source["rtt_s"] == "ss-srtt"
    # No counters at all (a lab): the retransmission ratio.
    assert path_stats(parse_ss(text), addrs)["n1"]["lte"].source["loss"] == "ss-retrans"
