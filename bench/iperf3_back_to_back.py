"""Back-to-back tests against the sender's iperf3 servers, as a sweep runs them: how many fail to start.

    uv run python bench/iperf3_back_to_back.py [--tests 150] [--busy 2] [--block 10] [--out FILE.json]

Reverse MPTCP clients of 1 MiB each, started one right after the other on this machine, in blocks of ``--block``
tests that take turns between two servers on two ports, so that the load falls on both alike:

- ``persistent``: one ``iperf3 -s -J`` kept for every test (how the testbeds ran it before);
- ``fresh``: ``harness.traffic.IperfServers.fresh`` before each test (how they run it now): the last server
  stopped, its listener gone, a new one-off server listening.

Both run through ``mptcpize`` at nice 19 in an autogroup of nice 19, so that they are scheduled late, as on a
loaded sender, with ``--busy N`` busy loops beside the run. Counted per kind: tests whose client reported an
error, by error text, and the time from the previous client's exit to the next one's start.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from harness.hosts.local import LocalHost
from harness.hosts.ready import listening_ports, wait_until
from harness.traffic import Iperf3, IperfServers
from rigs.ports import free_port

REPO = Path(__file__).resolve().parent.parent


#: Run a command at nice 19 in an autogroup of nice 19. Started in a session of its own (``LocalHost.start``), a
#: server gets an autogroup of its own, which the scheduler weighs against the busy loops' as a whole: nice alone
#: would not make it wait (measured: 0 of 60 back-to-back tests failed against 28 of 60 with the server in the
#: busy loops' autogroup).
_NICE = 'echo 19 > /proc/$$/autogroup 2>/dev/null; exec nice -n 19 "$@"'


class NicedIperf3(Iperf3):
    """This machine's iperf3, its servers scheduled late."""

    def server_argv(self, port: int, mptcp: bool = True, *, one_off: bool = False) -> list[str]:
        return ["sh", "-c", _NICE, "sh", *super().server_argv(port, mptcp, one_off=one_off)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=150, help="tests of each kind (default 150)")
    ap.add_argument("--busy", type=int, default=2, help="busy loops beside the run (default 2)")
    ap.add_argument("--block", type=int, default=10, help="tests in a row on one server (default 10)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "iperf3_back_to_back.json")
    args = ap.parse_args()
    host = LocalHost("sender")
    iperf3 = NicedIperf3(**vars(Iperf3.check(host)))
    ports = {"persistent": free_port(), "fresh": free_port()}
    fresh = IperfServers(host, iperf3, {"fresh": ports["fresh"]})
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    persistent = host.start(iperf3.server_argv(ports["persistent"]), label="iperf3-server:persistent")
    errors: dict[str, collections.Counter] = {k: collections.Counter() for k in ports}
    waited = dict.fromkeys(ports, 0.0)
    try:
        wait_until(lambda: ports["persistent"] in listening_ports(host), IperfServers.LISTEN_S, "the persistent server")
        for i in range(2 * args.tests):
            kind = "fresh" if (i // args.block) % 2 else "persistent"
            t0 = time.monotonic()
            if kind == "fresh":
                fresh.fresh()
            waited[kind] += time.monotonic() - t0
            argv = iperf3.client_argv("127.0.0.1", ports[kind], 2**20, bind=None, mptcp=True, cc=None)
            out = host.run(argv, check=False, timeout=60).stdout
            try:
                err = json.loads(out).get("error")
            except json.JSONDecodeError:
                err = f"not JSON: {out[:60]!r}"
            if err:
                errors[kind][err] += 1
    finally:
        fresh.stop()
        persistent.stop(grace_s=1.0)
        for p in busy:
            p.kill()
            p.wait()
    result = {
        "machine": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
        "iperf3": iperf3.version, "mptcp_mode": iperf3.mptcp_mode,
        "tests_per_kind": args.tests, "block": args.block, "busy_loops": args.busy,
        "kinds": {k: {"failed": sum(errors[k].values()), "errors": dict(errors[k]),
                      "mean_wait_ms": round(1000 * waited[k] / args.tests, 1)} for k in errors},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for k, v in result["kinds"].items():
        print(f"{k:10s} failed {v['failed']:4d} / {args.tests}  mean wait {v['mean_wait_ms']} ms  {v['errors']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
