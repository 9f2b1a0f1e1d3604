"""What the related schemes measure: ``ss -tin`` of MPTCP subflows and ``tc -s -j qdisc`` queue fill,
parsed from output captured on this machine (tests/data: an mptcpize'd iperf3 over two addresses in a
namespace, kernel 6.18, iproute2 6.1; an HTB class over a 30000-byte bfifo flooded with UDP)."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.measure import Fifo, fifos, interval_occupancy, mean_occupancy, network_of, occupancy, parse_ss, path_stats, queue_fill

DATA = Path(__file__).parent / "data"


def test_ss_subflows_of_a_real_mptcp_connection():
    subs = parse_ss((DATA / "ss-tin-mptcp.txt").read_text())
    assert len(subs) == 8 and all(s.mptcp for s in subs)
    first = subs[0]
    assert (first.local, first.peer) == ("10.99.0.2", "127.0.0.1")  # "%lo" scope and port stripped
    assert first.rtt_s == pytest.approx(0.018026) and first.cwnd_pkts == 12 and first.bytes_sent == 9232569
    assert {s.peer for s in subs} == {"127.0.0.1", "10.99.0.2"}  # "[::ffff:...]" mapped addresses unwrapped


def test_path_stats_takes_the_data_subflow_per_receiver_and_path():
    subs = parse_ss((DATA / "ss-tin-mptcp.txt").read_text())
    st = path_stats(subs, {"n1": {"wifi": "127.0.0.1", "lte": "10.99.0.2"}, "n2": {"wifi": "10.1.1.1"}})
    # Towards 127.0.0.1 the socket that sent 9969438 bytes, not the 41-byte control connection.
    assert st["n1"]["wifi"].rtt_s == pytest.approx(0.000543)
    assert st["n1"]["wifi"].loss == 0.0 and "ss -tin" in st["n1"]["wifi"].source
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
