"""The kernel's TCP timers scaled per socket at a speed-up (``harness.cc.timers``): values, placement, subflows.

The root test runs an MPTCP transfer over both paths of an emulated testbed and reads each subflow's timers
twice: back from the sockets by the BPF program itself (its map), and from ``ss -ti`` (``rto``: the minimum
RTO is its floor). At S = 8 every subflow, on the sender and on the receiver, WiFi and LTE, must run the
scaled values; at S = 1 nothing is attached and the kernel's own 200 ms floor shows.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from harness.cc import timers
from harness.cc.timers import TimerScaling, TimerValues, cgroup2_mount
from harness.hosts.local import NamespaceHost
from harness.testbeds.emulated import EmulatedTestbed
from harness.upkeep.clean import clean_prefix
from tests.conftest import small_inventory

HYBRID = """cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


@pytest.mark.parametrize("s, hz, delack_us, rto_us", [
    (8, 1000, 5000, 25000),    # exact: whole jiffies
    (8, 250, 8000, 28000),     # 5 ms is under two jiffies (8 ms); 25 ms rounds up to 7 jiffies
    (16, 250, 8000, 16000),    # 2.5 ms would be refused by the kernel (one jiffy): two jiffies instead
    (2, 250, 20000, 100000),
])
def test_the_timers_are_the_real_time_ones_over_s_in_whole_jiffies_never_under_two(s, hz, delack_us, rto_us):
    v = TimerValues.for_speedup(s, hz)
    assert (v.delack_max_us, v.rto_min_us) == (delack_us, rto_us)
    assert v.delack_asked_us == pytest.approx(40000 / s) and v.rto_min_asked_us == pytest.approx(200000 / s)
    assert v.describe("0123456789abcdef") == (f"bpf:mplab_timers@sha256:0123456789abcdef "
                                              f"delack_max={delack_us / 1000:g}ms rto_min={rto_us / 1000:g}ms")


def test_the_cgroup_is_joined_before_the_namespace_is_entered():
    assert cgroup2_mount(HYBRID) == Path("/sys/fs/cgroup/unified")
    assert cgroup2_mount("cgroup /sys/fs/cgroup/cpu cgroup rw 0 0\n") is None
    host = NamespaceHost("snd", "mplab-x-snd")
    assert host.wrap_start(["iperf3", "-s"]) == ["ip", "netns", "exec", "mplab-x-snd", "iperf3", "-s"]
    host.cgroup = Path("/sys/fs/cgroup/unified/mplab-x-tcp")
    argv = host.wrap_start(["iperf3", "-s"])
    # `ip netns exec` mounts a fresh /sys, which hides the cgroup mount: the join must come first.
    assert argv[:2] == ["sh", "-c"] and argv[4] == "/sys/fs/cgroup/unified/mplab-x-tcp/cgroup.procs"
    assert argv[5:] == ["ip", "netns", "exec", "mplab-x-snd", "iperf3", "-s"]
    assert host.wrap(["ip", "link"]) == ["ip", "netns", "exec", "mplab-x-snd", "ip", "link"]  # short commands: no join


def _subflow_timers_ms(host: NamespaceHost) -> dict[str, tuple[float, float | None]]:
    """Established TCP sockets of the data connection (over 100 kB sent or received) -> ``rto``, ``ato`` (ms)."""
    out = host.run(["ss", "-tinH", "state", "established"]).stdout
    rto, peer = {}, None
    for line in out.splitlines():
        if line and not line[0].isspace():
            f = line.split()
            peer = f"{f[2]}>{f[3]}" if len(f) >= 4 else None
        elif peer and "tcp-ulp-mptcp" in line:
            moved = [int(m) for m in re.findall(r"bytes_(?:sent|received):(\d+)", line)]
            m = re.search(r"\brto:([\d.]+)", line)
            a = re.search(r"\bato:([\d.]+)", line)
            if m and max(moved, default=0) > 100_000:
                rto[peer] = (float(m.group(1)), float(a.group(1)) if a else None)
    return rto


def _transfer_and_look(tb: EmulatedTestbed) -> tuple[dict, dict]:
    """A 4 s MPTCP transfer to n1 over both paths; the subflows' (rto, ato) on the sender and on the receiver."""
    n1 = tb.nodes["n1"]
    tb.ensure_servers(["n1"])
    argv = n1.iperf3.client_argv(tb.server_address, n1.port, None, bind="10.10.1.2", mptcp=True, cc=None,
                                 duration_s=4)
    proc = n1.host.start(argv)
    snd, rcv = {}, {}
    deadline = time.monotonic() + 15
    try:
        while proc.poll() is None and time.monotonic() < deadline and (len(snd) < 2 or len(rcv) < 2):
            snd.update(_subflow_timers_ms(tb.sender))
            rcv.update(_subflow_timers_ms(n1.host))
            time.sleep(0.2)
        res = proc.wait(30)
    finally:
        proc.stop()
    assert res.returncode == 0, res.stderr
    return snd, rcv


@pytest.mark.root
def test_at_speedup_8_every_subflow_runs_the_scaled_timers_and_clean_removes_them(prefix):
    tb = EmulatedTestbed(small_inventory(prefix, [(20, 8)]), speedup=8)
    assert tb.timers is not None and tb.timers.check() is None, tb.timers and tb.timers.check()
    want = tb.timers.values
    cgroup = tb.timers.cgroup
    try:
        tb.setup([])
        assert tb.tcp_timers == want.describe(tb.timers.digest) and tb.tcp_timers.startswith("bpf:mplab_timers@")
        snd, rcv = _transfer_and_look(tb)
        socks = timers.seen(tb.root, cgroup, tb.timers.hz)
        clean_prefix(prefix, nested=True)  # what `mplab clean` does after a crash
        assert not cgroup.exists(), "mplab clean must remove the testbed's cgroup"
    finally:
        tb.teardown()
    # The program read each socket back after setting it: both subflows, both ends.
    ends = {(s.op, s.local if s.op == "active" else s.remote) for s in socks}
    for path in ("10.10.1.2", "10.20.1.2"):
        assert ("active", path) in ends, f"no receiver-side subflow from {path} was set: {socks}"
        assert ("passive", path) in ends, f"no sender-side subflow to {path} was set: {socks}"
    for s in socks:
        assert (s.delack_err, s.rto_err) == (0, 0), s
        assert (s.delack_max_us, s.rto_min_us) == (want.delack_max_us, want.rto_min_us), s
    # ss: the sender's RTO has the minimum RTO as its floor: 28 ms + a few ms of RTT, not the kernel's 200 + ...;
    # the receiver's ato (the delayed-ACK timeout) is held to the scaled ceiling, 8 ms, not 40.
    assert len(snd) == 2 and len(rcv) >= 1, (snd, rcv)
    assert all(rto < 100 for rto, _ in snd.values()), snd
    atos = [ato for _, ato in rcv.values() if ato is not None]
    assert atos and all(ato == want.delack_max_us / 1000 for ato in atos), rcv
    assert not cgroup.exists()


@pytest.mark.root
def test_at_speedup_1_nothing_is_attached_and_the_kernels_floor_shows(prefix):
    tb = EmulatedTestbed(small_inventory(prefix, [(20, 8)]))
    assert tb.timers is None
    mount = cgroup2_mount()
    try:
        tb.setup([])
        assert tb.tcp_timers is None
        assert all(h.cgroup is None for h in (tb.sender, *(n.host for n in tb.nodes.values())))
        assert mount is None or not (mount / f"{prefix}tcp").exists()
        snd, rcv = _transfer_and_look(tb)
    finally:
        tb.teardown()
    assert len(snd) == 2 and all(rto >= 200 for rto, _ in snd.values()), snd
    atos = [ato for _, ato in rcv.values() if ato is not None]
    assert atos and all(ato >= 40 for ato in atos), rcv


def test_an_unscalable_machine_says_why_and_records_no_timers(tmp_path):
    t = TimerScaling("mplab-x-", 8, hz=250, mount=None)
    t.mount = None
    assert "cgroup v2" in (t.check() or "")
    assert t.describe() is None
    assert TimerScaling("mplab-x-", 8, hz=250, mount=tmp_path).cgroup == tmp_path / "mplab-x-tcp"
