"""CPU per wall second of one emulated meter device and of the radio loop, alone, at a speed-up S.

    uv run python bench/tick_cpu.py [--speedups 8,16] [--seconds 10] [--rounds 3] [--out FILE] [--stage LABEL]

``bench/speedup_cpu.py`` measures a whole campaign, where the kernel's packet path runs in whatever process is
on the CPU when its softirqs fire (this kernel has no IRQ time accounting), so a component's system time carries
other traffic's. This bench runs each part alone, without traffic, to see what its own wakes cost:

- ``meter``: ``python -m harness.meters.emulated`` on ``lo`` (both radios), its control and tail files in a
  temporary directory (absent and present, as on a testbed), counters sampled every 0.1 / S s, polled at 20 Hz
  over its pty as the recorder does;
- ``radio loop``: ``RadioLoop.run`` at 20 x S Hz in a child process, reading this namespace's ``net/dev``
  through a stand-in for its tc process (nine stations on each radio, none of them moving: the steady state of
  a tick, whose active set is the previous tick's).

Each figure is the child's CPU time over the wall time it ran for, its start-up left out: for the meter,
``/proc/<pid>/schedstat`` (nanoseconds on the CPU) from its first poll to its last, split into user and system
by ``/proc/<pid>/stat``; the radio loop reports its own ``getrusage`` around ``run``. Run it against another
checkout with ``PYTHONPATH=<checkout>`` (the children inherit it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

from harness.config.inventory import load_inventory
from harness.emulation.speedup import scale_profile
from harness.meters.emulated import device_argv

REPO = Path(__file__).resolve().parent.parent
POLL_HZ = 20.0

RADIO_CHILD = """
import json, os, signal, sys, time
from harness.emulation.radiolink import LinkConfig, RadioLoop
from harness.emulation.sharing import AccessNetwork
s, seconds = float(sys.argv[1]), float(sys.argv[2])
class Tc:  # stands in for the tc process: its pid shows this namespace's net/dev, its stdin takes the lines
    pid = os.getpid()
    stdin = open(os.devnull, "w")
st = {r: {f"n{i}": (f"mplab-none{i}", rate * s) for i in range(1, 10)} for r, rate in (("wifi", 20.0), ("lte", 15.0))}
cfg = LinkConfig({"wifi": "a", "lte": "e"}, {"wifi": AccessNetwork("dcf", 40 * s),
                 "lte": AccessNetwork("proportional-fair", 36 * s)}, st, 1.0, hz=20 * s, hold_s=0.25 / s)
loop = RadioLoop(cfg)
loop.tc = {"wifi": Tc(), "lte": Tc()}
loop.apply(cfg.solo_rates())
loop.last_bytes = {r: loop._counters(r) for r in loop.tc}
signal.signal(signal.SIGALRM, lambda *_: setattr(loop, "running", False))
signal.setitimer(signal.ITIMER_REAL, seconds)
r0, t0 = __import__("resource").getrusage(0), time.monotonic()
loop.run()
r1, t1 = __import__("resource").getrusage(0), time.monotonic()
print(json.dumps({"wall_s": t1 - t0, "user_s": r1.ru_utime - r0.ru_utime, "system_s": r1.ru_stime - r0.ru_stime}))
"""


def _on_cpu(pid: int) -> tuple[float, float, float]:
    """(seconds on the CPU, user ticks, system ticks) of ``pid``."""
    run_ns = int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return run_ns / 1e9, int(fields[11]), int(fields[12])


def meter(s: float, seconds: float) -> dict:
    profile = scale_profile(load_inventory(REPO / "inventory" / "emulated.yaml").emulation.power_profile, s)
    with tempfile.TemporaryDirectory(prefix="mplab-tick-") as tmp:
        link = f"{tmp}/meter"
        Path(f"{tmp}/meter.tail").write_text("0\n")  # present (answered once), the control file absent
        argv = device_argv(link, profile, ifaces={"wifi": "lo", "lte": "lo"}, control=f"{tmp}/meter.control",
                           tail_control=f"{tmp}/meter.tail", period_s=0.1 / s, seed=1)
        proc = subprocess.Popen(argv, cwd=REPO)
        try:
            deadline = time.monotonic() + 30
            while not os.path.lexists(link):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the meter device did not publish its pty")
                time.sleep(0.01)
            fd = os.open(os.readlink(link), os.O_RDWR | os.O_NOCTTY)
            tty.setraw(fd)
            time.sleep(0.5)  # past its start-up
            a, t0 = _on_cpu(proc.pid), time.monotonic()
            while time.monotonic() - t0 < seconds:
                os.write(fd, b"\xf0")
                time.sleep(1 / POLL_HZ)
                os.read(fd, 4096)
            b, t1 = _on_cpu(proc.pid), time.monotonic()
            os.close(fd)
        finally:
            proc.terminate()
            proc.wait(10)
    cpu, ticks = b[0] - a[0], max(1, (b[1] - a[1]) + (b[2] - a[2]))
    return {"part": "meter", "speedup": s, "wall_s": t1 - t0, "user_s": cpu * (b[1] - a[1]) / ticks,
            "system_s": cpu * (b[2] - a[2]) / ticks}


def radio(s: float, seconds: float) -> dict:
    out = subprocess.run([sys.executable, "-c", RADIO_CHILD, str(s), str(seconds)], cwd=REPO, check=True,
                         timeout=seconds + 60, capture_output=True, text=True).stdout
    return {"part": "radio loop", "speedup": s, **json.loads(out.splitlines()[-1])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speedups", default="8,16")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="append the results as JSON lines here")
    ap.add_argument("--stage", default=None, help="a label for what was measured")
    args = ap.parse_args()
    for rnd in range(args.rounds):
        for s in (float(x) for x in args.speedups.split(",")):
            for fn in (meter, radio):
                res = fn(s, args.seconds)
                res.update(round=rnd, stage=args.stage, load=os.getloadavg()[0])
                ms = (res["user_s"] + res["system_s"]) / res["wall_s"] * 1000
                print(f"{res['part']:10s} S = {s:g}: {ms:6.1f} ms CPU per wall s (user "
                      f"{res['user_s'] / res['wall_s'] * 1000:5.1f}, system {res['system_s'] / res['wall_s'] * 1000:5.1f})"
                      f"  load {res['load']:.1f}", flush=True)
                if args.out:
                    with args.out.open("a") as f:
                        f.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
