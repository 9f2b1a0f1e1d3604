"""The compiled delay line (``harness/emulation/delayline.c``) against the Python one: same arguments, same delay.

Three namespaces a -- b -- c; the line in b holds what a sends to c. Both implementations must add the
configured delay to the request (the reply is not delayed), let a destination without a delay pass at once,
and print the same readiness and stats lines.
"""
from __future__ import annotations

import re

import pytest

from harness.emulation import delayline
from harness.errors import PreflightError
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import addr_add_argv, link_up_argv, netns_add_argv, route_add_argv, sysctl_argv, veth_argv
from harness.upkeep.clean import clean_prefix

BUILT = delayline.PROGRAM.exists()


def test_auto_runs_the_compiled_line_where_it_is_built_and_c_refuses_without_it(tmp_path):
    absent = tmp_path / "mplab-delayline"
    argv = delayline.delayline_argv({"10.0.0.2": 40}, python="py", program=absent)
    assert argv[:3] == ["py", "-m", "harness.emulation.delayline"]
    with pytest.raises(PreflightError, match="make setup"):
        delayline.delayline_argv({"10.0.0.2": 40}, implementation="c", program=absent)
    absent.write_text("#!/bin/sh\n")
    absent.chmod(0o755)
    argv = delayline.delayline_argv({"10.0.0.2": 40}, python="py", jitter_ms=0.6, program=absent)
    assert argv[0] == str(absent)
    # The same options as the Python line's.
    assert argv[1:] == delayline.delayline_argv({"10.0.0.2": 40}, python="py", jitter_ms=0.6,
                                                implementation="python")[3:]
    with pytest.raises(ValueError):
        delayline.delayline_argv({}, implementation="rust")


def _rig(prefix: str) -> tuple[NamespaceHost, NamespaceHost]:
    root = LocalHost("root")
    ns = {r: f"{prefix}{r}" for r in "abc"}
    a, b, c = (NamespaceHost(r, ns[r]) for r in "abc")
    for n in ns.values():
        root.run(netns_add_argv(n))
    root.run(veth_argv("to-rcv", ns["a"], "to-snd", ns["b"]))
    root.run(veth_argv("rx1", ns["b"], "eth0", ns["c"]))
    for host, dev, cidr in ((a, "to-rcv", "10.9.1.1/24"), (b, "to-snd", "10.9.1.2/24"), (b, "rx1", "10.9.2.1/24"),
                            (c, "eth0", "10.9.2.2/24"), (c, "eth0", "10.9.2.3/24")):
        host.run(addr_add_argv(dev, cidr))
        host.run(link_up_argv(dev))
    for h in (a, b, c):
        h.run(link_up_argv("lo"))
    b.run(sysctl_argv("net.ipv4.ip_forward", 1))
    a.run(route_add_argv("10.9.2.0/24", via="10.9.1.2"))
    c.run(route_add_argv("default", via="10.9.2.1"))
    return a, b


def _avg_rtt_ms(a: NamespaceHost, dst: str) -> float:
    out = a.run(["ping", "-n", "-q", "-c", "20", "-i", "0.02", dst], timeout=30).stdout
    return float(re.search(r"= [\d.]+/([\d.]+)/", out).group(1))


@pytest.mark.root
@pytest.mark.skipif(not BUILT, reason="the compiled delay line is not built (make setup)")
@pytest.mark.parametrize("implementation", ["c", "python"])
def test_both_lines_add_the_delay_to_delayed_destinations_only(prefix, implementation):
    clean_prefix(prefix, nested=False)
    line = None
    try:
        a, b = _rig(prefix)
        # 10.9.2.3 is routed through the line (it has a route in its table) but has no delay: it passes at once.
        line = delayline.start(b, {"10.9.2.2": 20.0, "10.9.2.3": 0.0}, implementation=implementation)
        delayed, direct = _avg_rtt_ms(a, "10.9.2.2"), _avg_rtt_ms(a, "10.9.2.3")
        res = line.stop()
        line = None
    finally:
        if line is not None:
            line.stop()
        clean_prefix(prefix, nested=False)
    assert 19.5 < delayed < 23.0, delayed
    assert direct < 3.0, direct
    assert "delayline ready" in res.stdout
    stats = res.stderr.strip().splitlines()[-1]
    assert stats.startswith("delayline stats {'packets': ") and "'passed_undelayed': " in stats, stats
    assert int(re.search(r"'packets': (\d+)", stats).group(1)) >= 20
    assert int(re.search(r"'passed_undelayed': (\d+)", stats).group(1)) >= 20
