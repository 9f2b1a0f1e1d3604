"""Pure pieces of the harness: command builders, planning, iperf3 parsing, integration, path checks."""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import TrafficError
from harness.config.inventory import Channel
from harness.meters.base import Reading
from harness.meters.recorder import integrate
from harness.hosts.netcmd import htb_class_argv, radio_qdisc_argvs, veth_argv
from harness.campaign.plan import plan_campaign
from harness.campaign.runner import check_paths
from harness.config.scenario import Scenario
from harness.traffic import IPERF3_BLOCK, MIN_BLOCK, Iperf3, block_bytes, parse_iperf3
from tests.conftest import small_inventory

DATA = Path(__file__).parent / "data"


def test_receiver_downlink_is_htb_over_a_byte_fifo():
    cmds = radio_qdisc_argvs("rx1", 20, 25000)
    assert cmds[0] == ["tc", "qdisc", "replace", "dev", "rx1", "root", "handle", "1:", "htb", "default", "1"]
    assert cmds[1][cmds[1].index("rate") + 1] == "20000kbit" and cmds[1][cmds[1].index("ceil") + 1] == "20000kbit"
    assert cmds[2][-2:] == ["limit", "25000"] and cmds[2][cmds[2].index("parent") + 1] == "1:1"


def test_buffer_depth_is_delay_at_rate():
    assert Channel(rate_mbit=20, buffer_ms=10).buffer_bytes == 25000
    assert Channel(rate_mbit=8, buffer_ms=60).buffer_bytes == 60000
    assert Channel(rate_mbit=0.1, buffer_ms=1).buffer_bytes == 3000  # never below two packets


def test_commands_are_argument_lists():
    assert veth_argv("a", "ns1", "b", "ns2") == ["ip", "link", "add", "a", "netns", "ns1", "type", "veth",
                                                 "peer", "name", "b", "netns", "ns2"]
    argv = htb_class_argv("d", "1:", "1:1", 0.5)
    assert argv[argv.index("rate") + 1] == "500kbit"


def _scenario(**kw) -> Scenario:
    base = dict(name="t", congestion_controls=["cubic", "reno"], receiver_counts=[1, 2], modes=["wifi", "lte", "both"],
                samples_per_case=3, file_size="1M", seed=5)
    base.update(kw)
    return Scenario(**base)


def test_plan_is_complete_stable_and_shuffled_by_seed():
    inv = small_inventory("mplab-x-", [(10, 10), (5, 5)])
    plans = plan_campaign(_scenario(), inv)
    ids = [p.sample_id for p in plans]
    assert len(ids) == len(set(ids)) == 2 * 2 * 3 * 3
    assert ids == [p.sample_id for p in plan_campaign(_scenario(), inv)], "same seed, same order"
    assert ids != [p.sample_id for p in plan_campaign(_scenario(seed=6), inv)], "another seed, another order"
    assert sorted(ids) == sorted(p.sample_id for p in plan_campaign(_scenario(shuffle=False), inv))
    p = next(p for p in plans if p.sample_id == "reno-n2-both-s003")
    assert p.receivers == ("n1", "n2") and p.mode == "both" and p.index == 3


def test_parse_real_reverse_outputs():
    t = parse_iperf3((DATA / "iperf3-3.12-reverse-mptcp.json").read_text())
    assert t.bytes == 4 * 2**20
    assert t.seconds > 0 and t.throughput_mbit == pytest.approx(t.bytes * 8 / t.seconds / 1e6, rel=0.01)
    assert t.sender_cc == "cubic" and t.iperf3_version == "3.12"
    assert t.retransmits is not None  # from the server's own output (--get-server-output)
    assert len(t.streams) == 1 and t.streams[0].bytes == t.bytes
    tcp = parse_iperf3((DATA / "iperf3-3.12-reverse-tcp.json").read_text())
    assert tcp.bytes == 4 * 2**20 and tcp.throughput_mbit < t.throughput_mbit


@pytest.mark.parametrize("text,match", [
    ((DATA / "iperf3-3.12-refused.json").read_text(), "Connection refused"),
    ("iperf3: error - unable to connect", "not JSON"),
    ("", "not JSON"),
    ('{"start": {}, "end": {"sum_received": {"bytes": 10}}}', "missing or malformed field"),
    ('{"end": {"sum_received": {"bytes": 0, "seconds": 0, "bits_per_second": 0}}}', "is not a transfer"),
    ("[1, 2]", "JSON object"),
])
def test_parse_rejects_bad_output(text, match):
    with pytest.raises(TrafficError, match=match) as ei:
        parse_iperf3(text, "iperf3 client of n7")
    assert "n7" in str(ei.value)


def test_client_argv_modes():
    legacy = Iperf3("3.12", native_mptcp=False, mptcpize="/usr/bin/mptcpize")
    argv = legacy.client_argv("10.0.0.1", 5201, 1000, bind="10.10.1.2", mptcp=True, cc="cubic")
    assert argv[:3] == ["mptcpize", "run", "iperf3"] and "-R" in argv and argv[argv.index("-n") + 1] == "1000"
    assert argv[argv.index("-C") + 1] == "cubic" and argv[argv.index("-B") + 1] == "10.10.1.2"
    assert legacy.client_argv("10.0.0.1", 5201, 1000, bind=None, mptcp=False, cc=None)[0] == "iperf3"
    modern = Iperf3("3.19", native_mptcp=True, mptcpize=None)
    argv = modern.client_argv("10.0.0.1", 5201, 1000, bind=None, mptcp=True, cc=None)
    assert argv[:2] == ["iperf3", "-m"] and "mptcpize" not in argv
    timed = legacy.client_argv("10.0.0.1", 5201, None, bind=None, mptcp=False, cc="reno", duration_s=12, omit_s=3)
    assert timed[timed.index("-t") + 1] == "12" and timed[timed.index("-O") + 1] == "3" and "-n" not in timed
    for bad in ({"nbytes": None}, {"nbytes": 1000, "duration_s": 5}):
        with pytest.raises(ValueError, match="either nbytes or duration_s"):
            legacy.client_argv("10.0.0.1", 5201, bind=None, mptcp=False, cc=None, **bad)


@pytest.mark.parametrize("nbytes, block", [
    (65536, 65536),            # under one default block: the file is the block (iperf3 sent 131,072 without it)
    (1000, 1000),
    (62_914_560, None),        # 60 MiB: 480 default blocks already
    (6 * 1024 * 1024, None),
    (60_000_000, 125_000),     # 480 blocks of 125,000 (iperf3 sent 60,030,976 without it)
    (131_101, None),           # a prime over one block: no divisor of at least MIN_BLOCK
    (417_792, 104_448),        # 3.19 default blocks: 4 of 104,448
])
def test_the_block_makes_iperf3_move_exactly_the_file(nbytes, block):
    assert block_bytes(nbytes) == block
    if block:
        assert nbytes % block == 0 and block <= IPERF3_BLOCK and (block >= MIN_BLOCK or block == nbytes)
        # The largest such divisor: one block fewer would not divide, or would exceed the default block.
        assert all(nbytes % k for k in range(-(-nbytes // IPERF3_BLOCK), nbytes // block))
    argv = Iperf3("3.12", native_mptcp=False, mptcpize="/usr/bin/mptcpize").client_argv(
        "10.0.0.1", 5201, nbytes, bind=None, mptcp=True, cc=None)
    assert argv[argv.index("-n") + 1] == str(nbytes)
    assert (argv[argv.index("-l") + 1] if "-l" in argv else None) == (str(block) if block else None)


def _readings(points):
    return [Reading(t, t, 5.0, w / 5.0, w) for t, w in points]


def test_integrate_trapezoid_with_interpolated_edges():
    rs = _readings([(0.0, 2.0), (1.0, 4.0), (2.0, 4.0), (3.0, 2.0)])
    e, n, gap = integrate(rs, 0.5, 2.5)
    # 0.5..1: (3+4)/2*0.5 ; 1..2: 4 ; 2..2.5: (4+3)/2*0.5
    assert e == pytest.approx(1.75 + 4 + 1.75)
    assert n == 2 and gap == pytest.approx(1.0)
    with pytest.raises(ValueError):
        integrate(rs, -1, 2)


def test_path_checks():
    assert check_paths("wifi", {"wifi": 1_100_000, "lte": 300}, 1_000_000) == []
    assert any("path-leak: lte" in f for f in check_paths("wifi", {"wifi": 1_100_000, "lte": 900_000}, 1_000_000))
    assert check_paths("both", {"wifi": 600_000, "lte": 500_000}, 1_000_000) == []
    assert any("mptcp-single-path: lte" in f for f in check_paths("both", {"wifi": 1_100_000, "lte": 0}, 1_000_000))
