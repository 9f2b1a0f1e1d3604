"""The shared-bottleneck rig: its qdisc commands and its reading of `ss` (captured output); as root, its prefix
claim, its delay line's jitter and the receiver's ACK mode."""
from __future__ import annotations

import re
import statistics
import time

import pytest

from harness.cc import resolve
from harness.errors import TrafficError
from harness.hosts.local import ProcessResult
from rigs.bottleneck import (
    MPTCP_PORT, PSH_TABLE, TCP_PORT, Competition, NoStream, SharedBottleneck, htb_bottleneck_argvs, msk_memory,
    parse_ss, received,
)

#: ``ss -tinH state established`` in the rig's sender during an OLIA run (trimmed): the control
#: connections (a few bytes), both subflows of the data connection (v4-mapped peers, one with the
#: tcp-ulp-mptcp line on its own) and the competing TCP flow.
SS = """\
0      0      [::ffff:10.77.0.1]:5301 [::ffff:10.77.2.2]:47757
\t mplab_olia wscale:10,10 rto:244 rtt:40.023/11.288 mss:1448 cwnd:10 bytes_sent:2 bytes_acked:2 tcp-ulp-mptcp flags:Jec
0      133888 [::ffff:10.77.0.1]:5301 [::ffff:10.77.1.2]:51278
\t mplab_olia wscale:10,10 rto:272 rtt:70.405/0.83 ato:40 mss:1448 cwnd:9 ssthresh:6 bytes_acked:7934648 busy:17536ms unacked:9 retrans:0/74 rcv_space:14480
\t tcp-ulp-mptcp flags:Mmec token:0000(id:0)/1c5c6c43(id:0) seq:4f1d2 sfseq:7914000 ssnoff:0 maplen:1448
0      233764 [::ffff:10.77.0.1]:5301 [::ffff:10.77.2.2]:59077
\t mplab_olia wscale:10,10 rto:272 rtt:71.809/0.935 mss:1448 cwnd:33 ssthresh:21 bytes_acked:9629860 busy:17184ms sndbuf_limited:172ms(1.0%) unacked:33 retrans:0/42 notsent:101360
0      370688 [::ffff:10.77.0.1]:5302 [::ffff:10.77.1.2]:43396
\t cubic wscale:10,10 rto:272 rtt:70.794/1.747 minrtt:40.61 cwnd:77 ssthresh:58 bytes_acked:23671040 busy:17528ms rwnd_limited:52ms(0.3%) unacked:75 retrans:0/16
"""


#: ``ss -HMm`` in the rig's sender during a run with ``-w 4M``: the data connection's MPTCP-level socket
#: (8 MiB send buffer, 6.2 MB queued) and iperf3's control connection.
SS_MPTCP = """\
ESTAB 0      0      [::ffff:10.77.0.1]:5301 [::ffff:10.77.1.2]:60876
\t skmem:(r0,rb8388608,t0,tb8388608,f737,w6193284,o0,bl0,d0)
ESTAB 0      0      [::ffff:10.77.0.1]:5301 [::ffff:10.77.1.2]:60874
\t skmem:(r0,rb131072,t0,tb50176,f2736,w0,o0,bl0,d0)
"""


def test_the_mptcp_level_memory_is_the_data_connections_send_buffer_and_queue():
    assert msk_memory(SS_MPTCP) == (8388608, 6193284)   # tb and w of the busy one, not the control connection's
    assert msk_memory("") is None


def test_ss_gives_each_flow_its_window_and_limits():
    got = {s.flow: s for s in parse_ss(SS, 2.5)}
    assert set(got) == {"sf1", "sf2", "tcp"}      # control connections left out
    assert (got["sf1"].cwnd, got["sf1"].ssthresh, got["sf1"].retrans_total, got["sf1"].cc) == (9, 6, 74, "mplab_olia")
    assert (got["sf2"].cwnd, got["sf2"].notsent_bytes, got["sf2"].sndbuf_limited_pct) == (33, 101360, 1.0)
    assert (got["tcp"].cwnd, got["tcp"].send_q_bytes, got["tcp"].rwnd_limited_pct, got["tcp"].cc) == (77, 370688, 0.3, "cubic")
    assert (got["tcp"].min_rtt_ms, got["sf1"].min_rtt_ms) == (40.61, 0.0)   # the kernel's min RTT, when ss prints it
    assert all(s.t_s == 2.5 for s in got.values())


def test_htb_bottleneck_is_a_rate_over_a_byte_fifo():
    argvs = htb_bottleneck_argvs("b1", 20, 100_000)
    assert argvs[0][:7] == ["tc", "qdisc", "replace", "dev", "b1", "root", "handle"]
    assert "htb" in argvs[0] and "20000kbit" in argvs[1]
    assert argvs[2][-3:] == ["bfifo", "limit", "100000"]


def test_single_subflow_mptcp_connections_need_a_rig_without_the_second_subflow():
    from harness.cc import resolve

    cubic = resolve("cubic")
    with pytest.raises(ValueError, match="subflows=1"):
        SharedBottleneck("mplab-test-x-", [cubic], subflows=2).compete_single_path(cubic, tcp_cc=cubic, mptcp=True)


def test_unknown_qdisc_is_refused():
    with pytest.raises(ValueError, match="tbf or htb"):
        SharedBottleneck("mplab-test-x-", [], qdisc="red")


@pytest.mark.root
def test_a_second_rig_on_a_live_prefix_is_refused_and_the_first_is_left_alone():
    """The live rig holds its prefix's claim; a second rig on it raises Busy before cleaning anything."""
    from harness.errors import Busy
    from harness.hosts.local import LocalHost
    from harness.upkeep.claim import PrefixClaim

    prefix, root = "mplab-test-bnlive-", LocalHost("root")
    live = PrefixClaim(prefix, "a live shared-bottleneck rig")
    live.acquire()
    root.run(["ip", "netns", "add", f"{prefix}snd"])
    try:
        with pytest.raises(Busy, match="is held by"):
            with SharedBottleneck(prefix, []):
                pass
        assert f"{prefix}snd" in root.run(["ip", "netns", "list"]).stdout
    finally:
        root.run(["ip", "netns", "del", f"{prefix}snd"], check=False)
        live.release()


def test_a_head_start_is_whole_seconds_and_releases_the_side_that_leads_first():
    from rigs.bottleneck import lead_seconds, release

    assert lead_seconds(3) == 3 and lead_seconds(0.0) == 0 and lead_seconds(-2) == -2
    with pytest.raises(ValueError, match="whole seconds"):
        lead_seconds(1.5)
    order = []

    class Gated:
        def __init__(self, name: str) -> None:
            self.name = name

        def release(self) -> None:
            order.append((self.name, time.monotonic()))

    procs = {"mptcp": Gated("mptcp"), "tcp": Gated("tcp")}
    release(procs, 0.2)
    assert [n for n, _ in order] == ["tcp", "mptcp"] and order[1][1] - order[0][1] >= 0.2
    order.clear()
    release(procs, -0.2)   # the other side ahead
    assert [n for n, _ in order] == ["mptcp", "tcp"] and order[1][1] - order[0][1] >= 0.2
    order.clear()
    release(procs, 0.0)
    assert [n for n, _ in order] == ["mptcp", "tcp"]   # together, in the given order


def test_the_rig_jitters_its_delay_line_and_the_receiver_acknowledges_at_once_when_asked(prefix):
    """``jitter_ms`` reaches the running delay line (each packet held 5 ms plus up to 2 ms: pings 10 ms apart never
    queue behind one another, so their round trips spread over the jitter), and ``receiver_quickack`` the kernel's
    routes in the receiver."""
    with SharedBottleneck(prefix, [], base_delay_ms=5, jitter_ms=2, receiver_quickack=True) as bn:
        routes = bn.rcv.run(["ip", "route", "show", "table", "all"]).stdout
        assert sum("quickack 1" in line for line in routes.splitlines() if line.startswith("default")) == 2
        out = bn.snd.run(["ping", "-n", "-c", "60", "-i", "0.01", "-W", "2", "10.77.1.2"], check=False).stdout
        rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
        assert len(rtts) >= 50, out[-300:]
        assert min(rtts) >= 5.0
        # Fixed delay alone: a spread of tenths of a millisecond (bench/delayline.py: mdev 0.08 ms).
        assert max(rtts) - min(rtts) > 1.0, rtts
        assert statistics.median(rtts) > min(rtts) + 0.4


def test_the_receivers_tcp_sees_no_psh_on_the_flows_it_is_told_to_strip(prefix):
    """``receiver_strip_psh`` clears PSH on the TCP flow's data before the receiver's TCP takes it, and only there. A
    chain after the rig's counts the pushed segments that get through: none of the TCP flow's, many of the MPTCP
    connection's. The TCP flow still delivers (nftables keeps its checksum right: a wrong one drops every segment),
    and the rig's counter counts what it cleared."""
    cubic = resolve("cubic")
    with SharedBottleneck(prefix, [cubic], receiver_strip_psh=(TCP_PORT,)) as bn:
        assert bn.psh_stripped() == 0
        for argv in (["nft", "add", "chain", "ip", PSH_TABLE, "seen", "{", "type", "filter", "hook", "prerouting",
                      "priority", "0", ";", "}"],
                     ["nft", "add", "counter", "ip", PSH_TABLE, "tcp_pushed"],
                     ["nft", "add", "counter", "ip", PSH_TABLE, "mptcp_pushed"],
                     ["nft", "add", "rule", "ip", PSH_TABLE, "seen", "tcp", "sport", str(TCP_PORT), "tcp", "flags",
                      "&", "psh", "==", "psh", "counter", "name", "tcp_pushed"],
                     ["nft", "add", "rule", "ip", PSH_TABLE, "seen", "tcp", "sport", str(MPTCP_PORT), "tcp", "flags",
                      "&", "psh", "==", "psh", "counter", "name", "mptcp_pushed"]):
            bn.rcv.run(argv)
        c = bn.compete(cubic, duration_s=3, omit_s=1, tcp_cc=cubic)

        def counted(name: str) -> int:
            out = bn.rcv.run(["nft", "list", "counter", "ip", PSH_TABLE, name]).stdout
            return int(re.search(r"packets (\d+)", out).group(1))

        assert c.tcp_bytes > 1_000_000 and c.mptcp_bytes > 1_000_000
        assert counted("tcp_pushed") == 0
        assert counted("mptcp_pushed") > 100
        assert bn.psh_stripped() > 100
        bn.strip_psh(())   # PSH passes again
        assert bn.psh_stripped() is None
        assert PSH_TABLE not in bn.rcv.run(["nft", "list", "tables"]).stdout


#: What an MPTCP client printed in a loaded test run (trimmed): its control connection up, its data stream never
#: connected (``connected`` empty), then the server closed the control connection.
NEVER_CONNECTED = """{
\t"start":\t{"connected":\t[], "version":\t"iperf 3.12", "connecting_to":\t{"host":\t"10.77.0.1", "port":\t5301}},
\t"intervals":\t[],
\t"end":\t{},
\t"error":\t"control socket has closed unexpectedly"
}"""

#: A client whose stream connected and then lost its control connection: something was measured, and went wrong.
CONNECTED_THEN_LOST = NEVER_CONNECTED.replace('"connected":\t[]', '"connected":\t[{"socket": 5}]')


def _result(stdout: str) -> ProcessResult:
    return ProcessResult(0, stdout, "", released_at=0.0, exited_at=4.5, stopped=False)


def test_a_client_whose_stream_never_connected_is_told_apart_from_one_that_failed_measuring():
    cubic = resolve("cubic")
    with pytest.raises(NoStream, match="mptcp flow under cubic: its data stream never connected"):
        received({"mptcp": _result(NEVER_CONNECTED)}, cubic)
    with pytest.raises(TrafficError, match="no result") as info:
        received({"mptcp": _result(CONNECTED_THEN_LOST)}, cubic)
    assert not isinstance(info.value, NoStream)


def test_a_run_whose_stream_never_connected_runs_once_more_then_says_what_the_servers_saw():
    """Nothing was measured in a run whose stream never connected: it is run again, once. A second such run is
    raised with the running servers' output; a failure of another kind is never run again."""
    class Server:
        label = "iperf3-mptcp"

        def poll(self):
            return None

        def output_so_far(self):
            return '{"error": "unable to receive cookie at server"}', ""

    rig = SharedBottleneck.__new__(SharedBottleneck)
    rig._servers = [Server()]
    won = Competition("lia", 1, 2, None)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            received({"mptcp": _result(NEVER_CONNECTED)}, resolve("cubic"))
        return won
    assert rig._once_more_without_a_stream(flaky) is won and len(calls) == 2

    calls.clear()
    with pytest.raises(NoStream, match=r"twice; servers: iperf3-mptcp: .*unable to receive cookie"):
        rig._once_more_without_a_stream(lambda: calls.append(1) or received({"mptcp": _result(NEVER_CONNECTED)},
                                                                           resolve("cubic")))
    assert len(calls) == 2

    calls.clear()
    with pytest.raises(TrafficError, match="no result"):
        rig._once_more_without_a_stream(lambda: calls.append(1) or received({"mptcp": _result(CONNECTED_THEN_LOST)},
                                                                           resolve("cubic")))
    assert len(calls) == 1
