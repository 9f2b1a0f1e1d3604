"""An emulated UM-series meter: a pseudo-terminal that answers the real protocol byte for byte.

Run as a process inside a receiver's network namespace (so that /sys shows the
receiver's own interfaces)::

    python -m harness.meters.emulated --link /run/mplab/x/meter-n1 \
        --profile '{...PowerProfile JSON...}' --iface wifi=wlan0 --iface lte=lte0

Power comes from ``harness.meters.power.PowerModel`` (board base power, per-radio theta +
b x throughput, LTE promotion and tail, WiFi tail) driven either by the interfaces'
byte counters (read every 100 ms) or, for tests and benches, by a rate schedule in
wall-clock time (``--script``). The device keeps its own mAh/mWh counters (data group
0), adds measurement noise, and answers each ``0xF0`` with a frame at the model's
resolution (UM25C: 1 mV, 0.1 mA, 1 mW); its live values are the mean since the previous poll (an
integrating device: a host polling slower than the device samples loses no sample). With ``--model ina-line`` it instead prints
text lines as an INA2xx bridge does. The pty's slave path is published as a symlink
at ``--link``, so the host reads it with the same driver as a real meter.

Faults for tests are set through ``--control FILE`` (re-read when it changes; one line):

    ok                 answer normally
    (the device writes the mode it now follows to ``FILE.active`` once it has switched)

    silent             stop answering (the port stays open)
    short N            send only the first N bytes of each frame (UM) or a partial line (INA)
    garbage N          N random bytes before each frame (UM) or a garbage line first (INA)
    bad-trailer        corrupt the trailer/checksum byte; ``bad-trailer+good`` sends a good frame after it
    wrong-id           another model's id; ``wrong-id+good`` sends a good frame after it
    vanish             close the pty and remove the link (the device disappears) until the mode changes

The radio tail can be fast-forwarded through ``--tail-control FILE``: each time the file
changes (it holds a request token), the device brings its model up to now, works out what
the tail still holds if nothing moves (``PowerModel.tail_remaining``: seconds and joules,
base power included), puts every radio back to idle, and answers in ``FILE.done`` with one
JSON object ``{"token", "at_wall", "remaining_s", "remaining_j"}``. Readings after
``at_wall`` show idle power. The tail is the model's state, not a radio: skipping it changes
nothing a later sample sees (its radios start idle, as after a waited tail), and the runner
accounts the skipped energy from the answer. The device's own mAh/mWh counters do not
include the skipped part (it never drew it).
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import json
import math
import os
import random
import select
import signal
import struct
import sys
import termios
import time
import tty
from dataclasses import dataclass

from harness.config.metering import RADIOS, LineFormat, PowerProfile
from harness.meters.ina import format_line
from harness.meters.um import MODELS, POLL, encode_frame
from harness.meters.power import PowerModel

#: How often the byte counters are read (s).
SAMPLE_PERIOD_S = 0.1
#: Integration step of a scripted rate schedule (s): the power model is stepped this often, and a step
#: breaks at each of the script's entries, so a transition lands at its time.
SCRIPT_STEP_S = 0.005
#: Default noise: standard deviations of the current and voltage readings.
DEFAULT_NOISE_MA = 0.2
DEFAULT_NOISE_MV = 1.0


class SysfsRates:
    """Per-radio throughput from the interfaces' byte counters, measured between calls.

    The counter files stay open and are read again from offset 0 (sysfs shows the current value on each
    read from the start): at S x 10 Hz, opening four files a tick in text mode was most of an emulated
    meter's CPU (84 us a tick against 12; nine meters were the largest CPU user of a testbed at S = 8 and 16,
    ``bench/speedup_cpu.py``). A file that stops reading (its device replaced) is opened again.
    """

    def __init__(self, ifaces: dict[str, str]) -> None:
        self.ifaces = ifaces
        self._fds: dict[str, int] = {}
        #: (radio, (rx_bytes path, tx_bytes path)) of every interface: a tick formats no path.
        self._files = [(radio, self._paths(iface)) for radio, iface in ifaces.items()]
        self.last_t = time.monotonic()
        self.last_bytes = {r: self._counter(i) for r, i in ifaces.items()}

    def _read(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            try:
                return int(os.pread(fd, 32, 0))
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    os.close(fd)
                del self._fds[path]
        fd = self._fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return int(os.pread(fd, 32, 0))

    @staticmethod
    def _paths(iface: str) -> tuple[str, str]:
        return f"/sys/class/net/{iface}/statistics/rx_bytes", f"/sys/class/net/{iface}/statistics/tx_bytes"

    def _counter(self, iface: str) -> int:
        rx, tx = self._paths(iface)
        return self._read(rx) + self._read(tx)

    def measure(self, now: float) -> dict[str, float]:
        dt = now - self.last_t
        rates = {}
        last, read = self.last_bytes, self._read
        for radio, (rx, tx) in self._files:
            b = read(rx) + read(tx)
            rates[radio] = (b - last[radio]) * 8 / dt / 1e6 if dt > 0 else 0.0
            last[radio] = b
        self.last_t = now
        return rates


class ScriptRates:
    """A rate schedule: ``[[wall_s, {"lte": 10.0}], ...]``, each entry holding until the next."""

    def __init__(self, steps: list) -> None:
        self.steps = sorted((float(t), {r: float(v) for r, v in rates.items()}) for t, rates in steps)
        for _, rates in self.steps:
            unknown = set(rates) - set(RADIOS)
            if unknown:
                raise ValueError(f"unknown radio(s) {sorted(unknown)} in script (use {RADIOS})")

    def next_after(self, wall_s: float) -> float | None:
        """The time of the first entry after ``wall_s`` (None when the schedule has none left)."""
        return next((t for t, _ in self.steps if t > wall_s), None)

    def at(self, wall_s: float) -> dict[str, float]:
        current: dict[str, float] = {}
        for t, rates in self.steps:
            if t > wall_s:
                break
            current = rates
        return current


@dataclass
class Fault:
    mode: str = "ok"
    arg: int = 0
    then_good: bool = False

    @classmethod
    def parse(cls, text: str) -> Fault:
        words = text.split()
        if not words:
            return cls()
        mode, then_good = words[0], False
        if mode.endswith("+good"):
            mode, then_good = mode[:-5], True
        if mode not in ("ok", "silent", "short", "garbage", "bad-trailer", "bad-checksum", "wrong-id", "vanish"):
            raise ValueError(f"unknown fault mode {words[0]!r}")
        arg = int(words[1]) if len(words) > 1 else {"short": 64, "garbage": 37}.get(mode, 0)
        return cls(mode, arg, then_good)


class Device:
    """The device state: power model, rate source, noise, accumulated charge and energy."""

    def __init__(self, profile: PowerProfile, *, ifaces: dict[str, str] | None = None,
                 script: ScriptRates | None = None, model: str = "um25c", noise_ma: float = DEFAULT_NOISE_MA,
                 noise_mv: float = DEFAULT_NOISE_MV, seed: int | None = None) -> None:
        self.model = PowerModel(profile)
        self.volts = profile.volts
        self.um = MODELS.get(model)
        self.kind = model
        self.script = script
        self.sysfs = None if script is not None else SysfsRates(ifaces or {})
        self.noise_a = noise_ma / 1000
        self.noise_v = noise_mv / 1000
        self.rng = random.Random(seed)
        self.t = time.monotonic()
        self.wall_offset = time.time() - self.t
        self.watts = self.model.power_w(self.t, self._script_rates(self.t))
        self.mah = 0.0
        self.mwh = 0.0
        #: (monotonic time, energy in J) at the previous answer: the start of the next answer's mean.
        self.answered: tuple[float, float] | None = None

    def _script_rates(self, t: float) -> dict[str, float]:
        return self.script.at(t + self.wall_offset) if self.script else {}

    def _integrate_to(self, t1: float) -> None:
        dt = t1 - self.t
        if dt > 0:
            self.mwh += self.watts * 1000 * dt / 3600
            self.mah += self.watts / self.volts * 1000 * dt / 3600
            self.t = t1

    def tick(self, now: float) -> None:
        """Advance the device to ``now`` (monotonic): integrate its counters and update its power."""
        if self.sysfs is not None:
            self._integrate_to(now)
            self.watts = self.model.power_w(now, self.sysfs.measure(now))
            return
        assert self.script is not None
        while self.t < now - 1e-9:
            t1 = min(now, self.t + SCRIPT_STEP_S)
            wall1 = t1 + self.wall_offset
            # A step breaks at the script's next entry, so the power changes exactly when the script does
            # (not up to a step later: at S = 8, 5 ms is 2 % of a 0.25 s window).
            change = self.script.next_after(self.t + self.wall_offset)
            if change is not None and self.t < change - self.wall_offset < t1:
                t1, wall1 = change - self.wall_offset, change
            self._integrate_to(t1)
            self.watts = self.model.power_w(t1, self.script.at(wall1))

    def skip_tail(self, now: float) -> dict[str, float]:
        """Bring the model to ``now`` (monotonic), then drop what its tail still holds: the skipped part."""
        self.tick(now)
        remaining_s, remaining_j = self.model.tail_remaining(now)
        self.model.reset()
        self.watts = self.model.power_w(now, {})
        # The next answer's mean starts here: readings after ``at_wall`` show idle power only (the runner
        # pins a reading just before it asks, so the tail up to here is metered, not mixed into idle).
        self.answered = (now, self.energy_j(now))
        return {"at_wall": now + self.wall_offset, "remaining_s": remaining_s, "remaining_j": remaining_j}

    def energy_j(self, now: float) -> float:
        """The device's exact integral (J) up to ``now`` (monotonic): its counters plus the held power since."""
        return self.mwh * 3.6 + self.watts * max(0.0, now - self.t)

    def mean_watts(self, now: float) -> float:
        """The mean power since the previous answer (the power now at the first one), and start the next mean.

        The device samples its model every ``--period`` (0.1 / S at speed-up S) and integrates it; a host
        that polls slower than that still gets every sample's energy, held over the interval it covers,
        instead of one point of a staircase (``Meter.interval_mean``). That keeps the recorder's poll
        rate, and its CPU, from having to grow with S.
        """
        e = self.energy_j(now)
        prev, self.answered = self.answered, (now, e)
        if prev is None or now - prev[0] < 1e-6:
            return self.watts
        return (e - prev[1]) / (now - prev[0])

    def measure(self) -> tuple[float, float]:
        """(volts, amps) as the device's ADC reports them: the mean since the previous answer, plus noise."""
        now = time.monotonic()
        if self.script is not None:
            self.tick(now)
        watts = self.mean_watts(now)
        volts = self.volts + (self.rng.gauss(0, self.noise_v) if self.noise_v else 0.0)
        amps = watts / self.volts + (self.rng.gauss(0, self.noise_a) if self.noise_a else 0.0)
        return volts, max(0.0, amps)

    def frame(self) -> bytes:
        volts, amps = self.measure()
        assert self.um is not None
        # The power field is the device's own V x I at 1 mW; counters are data group 0.
        return encode_frame(self.um, volts=volts, amps=amps, watts=volts * amps,
                            groups=((self.mah / 1000, self.mwh / 1000),))

    def line(self, fmt: LineFormat) -> bytes:
        volts, amps = self.measure()
        values = {"volts": volts, "amps": amps, "watts": volts * amps, "energy_wh": self.mwh / 1000}
        return (format_line(values, fmt) + "\n").encode()


class Port:
    """The pty and its published link; can vanish and come back."""

    def __init__(self, link: str) -> None:
        self.link = link
        self.master: int | None = None
        self.slave: int | None = None
        self.slave_path = ""

    def publish(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave, termios.TCSANOW)
        os.set_blocking(master, False)  # a reader that stops reading must not block the device
        self.master, self.slave, self.slave_path = master, slave, os.ttyname(slave)
        tmp = f"{self.link}.tmp{os.getpid()}"
        os.makedirs(os.path.dirname(self.link) or ".", exist_ok=True)
        os.symlink(self.slave_path, tmp)
        os.replace(tmp, self.link)

    def withdraw(self) -> None:
        try:
            if os.readlink(self.link) == self.slave_path:
                os.unlink(self.link)
        except OSError:
            pass
        for fd in (self.master, self.slave):
            if fd is not None:
                os.close(fd)
        self.master = self.slave = None

    def write(self, data: bytes) -> None:
        if self.master is None:
            return
        try:
            os.write(self.master, data)
        except BlockingIOError:
            pass  # nobody reads: the bytes are lost, as on a serial line
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EAGAIN):
                raise


class WatchedFile:
    """A control file re-read whenever it changes (inode, mtime or size), answered beside it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.key: tuple | None = None

    def changed(self) -> str | None:
        """The file's text if it changed since the last call, else None (``FileNotFoundError`` when absent)."""
        st = os.stat(self.path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self.key:
            return None
        self.key = key
        with open(self.path) as f:
            return f.read()

    def reply(self, suffix: str, text: str) -> None:
        """Write ``<file><suffix>`` atomically (what the reader waits for)."""
        tmp = f"{self.path}{suffix}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, f"{self.path}{suffix}")


class DirWatch:
    """Says when a control file may have changed: inotify on the files' directories, not a stat per wake.

    At a speed-up S the device wakes 10 x S times a second to sample its counters; checking the fault and
    tail files on each wake was two ``stat`` calls a wake (one raising, for a file that is not there), a
    fifth of an idle device's CPU. Instead ``fd`` joins the device's ``select`` (a change wakes it at once,
    sooner than the next sample would) and ``changed()`` drains the events and says whether one named a
    watched file; the files are then read exactly as before (``WatchedFile``: inode, mtime, size). A change is
    seen when its writer closes the file, renames it into place, removes it or touches it. Where inotify is not
    available, or a watched directory goes away, ``fd`` is None and the device checks the files on every
    wake, as it always did.
    """

    IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO = 0x4, 0x8, 0x40, 0x80
    IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
    IN_Q_OVERFLOW, IN_IGNORED = 0x4000, 0x8000
    IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC
    MASK = (IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
            | IN_MOVE_SELF)
    #: The directory itself went away, or events were lost: fall back to checking on every wake.
    LOST = IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF
    EVENT = struct.Struct("iIII")

    def __init__(self, paths: list[str]) -> None:
        self.fd: int | None = None
        self.names: dict[int, set[bytes]] = {}
        if not paths:
            return
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(self.IN_NONBLOCK | self.IN_CLOEXEC)
        except (OSError, AttributeError):
            return
        if fd < 0:
            return
        for path in paths:
            folder, name = os.path.split(os.path.abspath(path))
            wd = libc.inotify_add_watch(fd, os.fsencode(folder), self.MASK)
            if wd < 0:
                os.close(fd)
                self.names = {}
                return
            self.names.setdefault(wd, set()).add(os.fsencode(name))
        self.fd = fd

    def changed(self) -> bool:
        """Drain the pending events: True if one may have changed a watched file (or the watch is lost)."""
        hit = False
        while self.fd is not None:
            try:
                buf = os.read(self.fd, 4096)
            except BlockingIOError:
                break
            off = 0
            while off < len(buf):
                wd, mask, _, size = self.EVENT.unpack_from(buf, off)
                name = buf[off + 16:off + 16 + size].rstrip(b"\0")
                off += 16 + size
                if mask & self.LOST:
                    self.close()
                    return True
                hit = hit or name in self.names.get(wd, ())
        return hit

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class Control:
    """The fault mode, re-read from a file when it changes; acknowledged in ``<file>.active``.

    Everything the device sends after the acknowledgement follows the new mode, so tests
    wait for it instead of sleeping.
    """

    def __init__(self, path: str | None) -> None:
        self.file = WatchedFile(path) if path else None
        self.fault = Fault()

    def current(self) -> Fault:
        if self.file is not None:
            try:
                text = self.file.changed()
                if text is not None:
                    self.fault = Fault.parse(text)
                    self.file.reply(".active", text)
            except FileNotFoundError:
                if self.file.key is not None:
                    self.file.key, self.fault = None, Fault()  # control file removed: behave again
                    self.file.reply(".active", "ok\n")
            except (OSError, ValueError) as exc:
                print(f"control {self.file.path}: {exc}", file=sys.stderr)
        return self.fault


class TailControl:
    """Requests to fast-forward the radio tail, answered in ``<file>.done`` (module docstring)."""

    def __init__(self, path: str | None) -> None:
        self.file = WatchedFile(path) if path else None

    def poll(self, device: Device, now: float) -> None:
        """Answer a new request in the file, if there is one."""
        if self.file is None:
            return
        try:
            text = self.file.changed()
        except FileNotFoundError:
            return
        except OSError as exc:
            print(f"tail control {self.file.path}: {exc}", file=sys.stderr)
            return
        if text is not None:
            self.file.reply(".done", json.dumps({"token": text.strip(), **device.skip_tail(now)}))


def _um_answer(device: Device, fault: Fault, rng: random.Random) -> bytes:
    good = device.frame()
    if fault.mode == "short":
        return good[:fault.arg]
    if fault.mode == "garbage":
        return bytes(rng.randrange(256) for _ in range(fault.arg)) + good
    if fault.mode in ("bad-trailer", "bad-checksum", "wrong-id"):
        bad = bytearray(good)
        if fault.mode == "wrong-id":
            other = next(m for m in MODELS.values() if m.model_id != device.um.model_id)
            bad[0:2] = other.model_id.to_bytes(2, "big")
        else:
            bad[129] ^= 0x5A
        return bytes(bad) + (good if fault.then_good else b"")
    return good


def _line_answer(device: Device, fmt: LineFormat, fault: Fault, rng: random.Random) -> bytes:
    good = device.line(fmt)
    if fault.mode == "short":
        return good[:max(1, min(fault.arg, len(good) - 2))]  # a partial line, no newline
    if fault.mode == "garbage":
        return bytes(rng.choice(b"xyz!?~%") for _ in range(max(1, fault.arg))) + b"\n" + good
    if fault.mode in ("bad-trailer", "bad-checksum", "wrong-id"):
        return b"nan nan nan\n" + (good if fault.then_good else b"")
    return good


def serve(link: str, device: Device, control: Control, line_format: LineFormat | None = None,
          line_rate_hz: float = 20.0, tail: TailControl | None = None, period_s: float = SAMPLE_PERIOD_S) -> None:
    """Answer polls (UM) or stream lines (INA) until SIGTERM/SIGINT."""
    port = Port(link)
    port.publish()
    running = True

    def _stop(*_):
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    rng = random.Random(device.rng.random())
    streaming = line_format is not None and line_format.poll_command is None
    files = [w.file.path for w in (control, tail) if w is not None and w.file is not None]
    watch = DirWatch(files)
    check = True  # read the control files on this wake (every wake without a watch)
    next_sample = time.monotonic() + period_s
    next_line = time.monotonic()
    try:
        while running:
            now = time.monotonic()
            deadline = min(next_sample, next_line) if streaming else next_sample
            fds = [port.master] if port.master is not None else []
            if watch.fd is not None:
                fds.append(watch.fd)
            try:
                ready, _, _ = select.select(fds, [], [], max(0.0, deadline - now))
            except InterruptedError:
                continue
            if watch.fd is None:
                check = bool(files)
            elif watch.fd in ready:
                check = watch.changed() or check
            if check:
                fault = control.current()
                if tail is not None:
                    tail.poll(device, time.monotonic())
                check = False
            polled = port.master is not None and port.master in ready
            if fault.mode == "vanish" and port.master is not None:
                port.withdraw()
                polled = False
            elif fault.mode != "vanish" and port.master is None:
                port.publish()
                polled = False
            if polled:
                try:
                    data = os.read(port.master, 256)
                except OSError:
                    data = b""
                if fault.mode != "silent":
                    if line_format is None:
                        for _ in range(data.count(POLL)):
                            port.write(_um_answer(device, fault, rng))
                    elif not streaming and line_format.poll_command and line_format.poll_command.encode() in data:
                        port.write(_line_answer(device, line_format, fault, rng))
            now = time.monotonic()
            if streaming and now >= next_line:
                if port.master is not None and fault.mode != "silent":
                    port.write(_line_answer(device, line_format, fault, rng))
                next_line = max(next_line + 1 / line_rate_hz, now)
            if now >= next_sample:
                device.tick(now)
                next_sample += period_s
                if next_sample < now:  # fell behind (e.g. suspended): do not burst
                    next_sample = now + period_s
    finally:
        port.withdraw()
        watch.close()


def device_argv(link: str, profile: PowerProfile, *, ifaces: dict[str, str] | None = None,
                script: list | None = None, model: str = "um25c", control: str | None = None,
                tail_control: str | None = None, period_s: float | None = None,
                noise_ma: float | None = None, noise_mv: float | None = None, seed: int | None = None,
                line_format: LineFormat | None = None, python: str = sys.executable) -> list[str]:
    """The argument list that starts an emulated meter device (for a Host's ``start``)."""
    argv = [python, "-m", "harness.meters.emulated", "--link", link, "--profile", profile.model_dump_json(),
            "--model", model]
    for radio, iface in (ifaces or {}).items():
        argv += ["--iface", f"{radio}={iface}"]
    if script is not None:
        argv += ["--script", json.dumps(script)]
    if control:
        argv += ["--control", control]
    if tail_control:
        argv += ["--tail-control", tail_control]
    if period_s is not None:
        argv += ["--period", repr(period_s)]
    if noise_ma is not None:
        argv += ["--noise-ma", str(noise_ma)]
    if noise_mv is not None:
        argv += ["--noise-mv", str(noise_mv)]
    if seed is not None:
        argv += ["--seed", str(seed)]
    if line_format is not None:
        argv += ["--line-format", line_format.model_dump_json()]
    return argv


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", required=True, help="where to publish the pty's path (symlink)")
    ap.add_argument("--profile", required=True, help="PowerProfile as JSON")
    ap.add_argument("--iface", action="append", default=[], help="radio=interface (byte counters drive the power)")
    ap.add_argument("--script", help="rate schedule instead of counters: JSON [[wall_s, {radio: Mbit/s}], ...]")
    ap.add_argument("--model", default="um25c", choices=[*MODELS, "ina-line"])
    ap.add_argument("--line-format", help="ina-line: LineFormat as JSON")
    ap.add_argument("--line-rate-hz", type=float, default=20.0, help="ina-line: lines per second when streaming")
    ap.add_argument("--control", help="fault-injection file (see the module docstring)")
    ap.add_argument("--period", type=float, default=SAMPLE_PERIOD_S,
                    help="how often the byte counters are read (s; a testbed at speedup S: 0.1 / S)")
    ap.add_argument("--tail-control", help="radio-tail fast-forward requests (see the module docstring)")
    ap.add_argument("--noise-ma", type=float, default=DEFAULT_NOISE_MA, help="current noise std (mA)")
    ap.add_argument("--noise-mv", type=float, default=DEFAULT_NOISE_MV, help="voltage noise std (mV)")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    profile = PowerProfile.model_validate_json(args.profile)
    ifaces = dict(item.split("=", 1) for item in args.iface)
    script = ScriptRates(json.loads(args.script)) if args.script else None
    fmt = None
    if args.model == "ina-line":
        if not args.line_format:
            ap.error("--model ina-line needs --line-format")
        fmt = LineFormat.model_validate_json(args.line_format)
    if math.isnan(args.noise_ma) or args.noise_ma < 0 or args.noise_mv < 0:
        ap.error("noise must be >= 0")
    device = Device(profile, ifaces=ifaces, script=script, model=args.model, noise_ma=args.noise_ma,
                    noise_mv=args.noise_mv, seed=args.seed)
    if not 0 < args.period <= 1:
        ap.error("--period must be in (0, 1] s")
    serve(args.link, device, Control(args.control), fmt, args.line_rate_hz, TailControl(args.tail_control),
          args.period)
    return 0


if __name__ == "__main__":
    sys.exit(main())
