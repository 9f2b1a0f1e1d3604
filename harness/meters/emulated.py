"""An emulated UM25C: a pseudo-terminal that answers the real protocol.

Run as a process inside a receiver's network namespace (so that /sys shows the
receiver's own interfaces)::

    python -m harness.meters.emulated --link /run/mplab/x/meter-n1 \
        --profile '{...PowerProfile JSON...}' --iface wifi=wlan0 --iface lte=lte0

Every 100 ms it reads the interfaces' byte counters, turns the throughput into power
with ``harness.power.PowerModel`` and integrates its own mAh/mWh counters (data group
0). Each ``0xF0`` byte from the host is answered with a 130-byte UM25C frame at the
device's resolution. The pty's slave path is published as a symlink at ``--link``.
"""
from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import termios
import time
import tty

from harness.inventory import PowerProfile
from harness.meters.um import MODELS, POLL, encode_frame
from harness.power import PowerModel

SAMPLE_PERIOD_S = 0.1


def _read_counter(iface: str) -> int:
    total = 0
    for direction in ("rx_bytes", "tx_bytes"):
        with open(f"/sys/class/net/{iface}/statistics/{direction}") as f:
            total += int(f.read())
    return total


class Device:
    """The device state: power model, counters, accumulated charge and energy."""

    def __init__(self, profile: PowerProfile, ifaces: dict[str, str]) -> None:
        self.model = PowerModel(profile)
        self.volts = profile.volts
        self.ifaces = ifaces
        self.last_t = time.monotonic()
        self.last_bytes = {r: _read_counter(i) for r, i in ifaces.items()}
        self.watts = self.model.power_w(self.last_t, {})
        self.mah = 0.0
        self.mwh = 0.0

    def sample(self) -> None:
        now = time.monotonic()
        dt = now - self.last_t
        if dt <= 0:
            return
        rates = {}
        for radio, iface in self.ifaces.items():
            b = _read_counter(iface)
            rates[radio] = (b - self.last_bytes[radio]) * 8 / dt / 1e6
            self.last_bytes[radio] = b
        # Energy over the elapsed interval at the power that held during it.
        self.mwh += self.watts * 1000 * dt / 3600
        self.mah += self.watts / self.volts * 1000 * dt / 3600
        self.watts = self.model.power_w(now, rates)
        self.last_t = now

    def frame(self) -> bytes:
        amps = self.watts / self.volts
        return encode_frame(MODELS["um25c"], volts=self.volts, amps=amps, watts=self.watts,
                            groups=((self.mah / 1000, self.mwh / 1000),))


def serve(link: str, device: Device) -> None:
    master, slave = os.openpty()
    tty.setraw(slave, termios.TCSANOW)
    tmp = f"{link}.tmp{os.getpid()}"
    os.makedirs(os.path.dirname(link) or ".", exist_ok=True)
    os.symlink(os.ttyname(slave), tmp)
    os.replace(tmp, link)
    running = True

    def _stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    next_sample = time.monotonic() + SAMPLE_PERIOD_S
    try:
        while running:
            wait = max(0.0, next_sample - time.monotonic())
            try:
                ready, _, _ = select.select([master], [], [], wait)
            except InterruptedError:
                continue
            if ready:
                try:
                    data = os.read(master, 256)
                except OSError:
                    data = b""
                for _ in range(data.count(POLL)):
                    os.write(master, device.frame())
            if time.monotonic() >= next_sample:
                device.sample()
                next_sample += SAMPLE_PERIOD_S
                if next_sample < time.monotonic():  # fell behind (e.g. suspended): do not burst
                    next_sample = time.monotonic() + SAMPLE_PERIOD_S
    finally:
        try:
            if os.readlink(link) == os.ttyname(slave):
                os.unlink(link)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", required=True)
    ap.add_argument("--profile", required=True, help="PowerProfile as JSON")
    ap.add_argument("--iface", action="append", default=[], help="radio=interface")
    args = ap.parse_args(argv)
    profile = PowerProfile.model_validate_json(args.profile)
    ifaces = dict(item.split("=", 1) for item in args.iface)
    serve(args.link, Device(profile, ifaces))
    return 0


if __name__ == "__main__":
    sys.exit(main())
