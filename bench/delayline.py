"""The user-space delay line (harness/emulation/delayline.py): added delay, jitter, the rate it sustains, its CPU.

Three namespaces ``<prefix>a`` (sender) -- ``<prefix>b`` (router, TUN delay line) --
``<prefix>c`` (receiver). Pings a -> c (the request is delayed, the reply is not) without
and with the delay line, then an iperf3 TCP flow a -> c for a few seconds, unshaped, to
find the rate the line sustains and the CPU it costs per Mbit/s. Needs root.

    uv run python bench/delayline.py [--delay-ms 20] [--seconds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import time

from harness.upkeep.clean import clean_prefix
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import addr_add_argv, link_up_argv, netns_add_argv, offloads_off_argv, route_add_argv, \
    sysctl_argv, veth_argv
from harness.emulation import delayline
from harness.traffic import Iperf3

PREFIX = "mplab-bench-dly-"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ping(a: NamespaceHost, n: int) -> list[float]:
    out = a.run(["ping", "-n", "-q", "-c", str(n), "-i", "0.02", "10.9.2.2"], timeout=60).stdout
    # rtt min/avg/max/mdev = 0.041/0.060/0.095/0.012 ms
    line = [x for x in out.splitlines() if "min/avg/max" in x][0]
    return [float(v) for v in line.split("=")[1].split()[0].split("/")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rt-priority", type=int, default=delayline.RT_PRIORITY,
                    help="SCHED_FIFO priority of the delay line (0: normal scheduling)")
    args = ap.parse_args()
    root = LocalHost("root")
    clean_prefix(PREFIX, root)
    ns = {r: f"{PREFIX}{r}" for r in "abc"}
    a, b, c = (NamespaceHost(r, ns[r]) for r in "abc")
    line = None
    try:
        for n in ns.values():
            root.run(netns_add_argv(n))
        root.run(veth_argv("to-rcv", ns["a"], "to-snd", ns["b"]))
        root.run(veth_argv("rx1", ns["b"], "eth0", ns["c"]))
        for host, dev, cidr in ((a, "to-rcv", "10.9.1.1/24"), (b, "to-snd", "10.9.1.2/24"), (b, "rx1", "10.9.2.1/24"),
                                (c, "eth0", "10.9.2.2/24")):
            host.run(addr_add_argv(dev, cidr))
            host.run(link_up_argv(dev))
            host.run(offloads_off_argv(dev))
        for h in (a, b, c):
            h.run(link_up_argv("lo"))
        b.run(sysctl_argv("net.ipv4.ip_forward", 1))
        a.run(route_add_argv("10.9.2.0/24", via="10.9.1.2"))
        c.run(route_add_argv("default", via="10.9.2.1"))
        base = _ping(a, 100)
        delays = {"10.9.2.2": args.delay_ms}
        line = delayline.start(b, delays, rt_priority=args.rt_priority)
        with_line = _ping(a, 100)
        iperf = Iperf3.check(root)
        server = c.start(iperf.server_argv(5999, mptcp=False), label="iperf3-s")
        time.sleep(0.5)
        cpu0, t0 = _cpu_s(line.pid), time.monotonic()
        res = a.run(["iperf3", "-c", "10.9.2.2", "-p", "5999", "-t", str(args.seconds), "-J"], timeout=60)
        cpu = _cpu_s(line.pid) - cpu0
        wall = time.monotonic() - t0
        doc = json.loads(res.stdout)
        mbit = doc["end"]["sum_received"]["bits_per_second"] / 1e6
        server.stop()
        stats = line.stop().stderr.strip().splitlines()[-1:]
        line = None
        print(f"ping without the line: avg {base[1]:.3f} ms, mdev {base[3]:.3f} ms")
        print(f"ping with {args.delay_ms:g} ms: avg {with_line[1]:.3f} ms (added {with_line[1] - base[1]:.3f}, "
              f"ratio {(with_line[1] - base[1]) / args.delay_ms:.3f}), mdev {with_line[3]:.3f} ms, "
              f"max {with_line[2]:.3f} ms")
        print(f"TCP through the line, unshaped: {mbit:.1f} Mbit/s; delay line CPU {cpu / wall:.1%} of a core, "
              f"{cpu / wall / max(mbit, 1e-9) * 100 * 50:.1f}% of a core per 50 Mbit/s")
        print(" ".join(stats), f"load average {os.getloadavg()[0]:.1f}")
    finally:
        if line is not None:
            line.stop()
        clean_prefix(PREFIX, root)


if __name__ == "__main__":
    main()
