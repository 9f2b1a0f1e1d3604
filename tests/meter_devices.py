"""Emulated meter devices for tests: real processes serving real ptys (no namespace needed)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from harness.config.inventory import LineFormat, PowerProfile
from harness.meters.emulated import device_argv

REPO = Path(__file__).resolve().parent.parent

#: How far ahead of now a test schedules a device's scripted transfer (its script is in wall time, fixed
#: before the device starts). The device's interpreter, its pty and the meter's first readings come first,
#: and on a loaded machine (the suite's other workers, two busy loops) that has taken over 1.5 s: a
#: transfer scheduled 0.5 s ahead ran before the device was up, and one 2.5 s ahead before the idle
#: power was learnt. DeviceProcess.start refuses a script whose first entry it came up too late for.
SCRIPT_LEAD_S = 4.0


def script_start(lead_s: float = SCRIPT_LEAD_S) -> float:
    """The wall time a test's scripted transfer starts at."""
    return time.time() + lead_s


def default_profile(**changes) -> PowerProfile:
    data = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())["emulation"]["power_profile"]
    data.update(changes)
    return PowerProfile.model_validate(data)


class DeviceProcess:
    """One emulated meter device; ``set_fault`` writes its control file."""

    def __init__(self, tmp: Path, name: str = "dev", *, model: str = "um25c", profile: PowerProfile | None = None,
                 script: list | None = None, noise_ma: float = 0.0, noise_mv: float = 0.0, seed: int = 1,
                 line_format: LineFormat | None = None, tail_control: bool = False) -> None:
        self.link = str(tmp / f"{name}.pty")
        self.control = tmp / f"{name}.control"
        #: The radio-tail fast-forward request file (``tail_control=True``).
        self.tail = tmp / f"{name}.tail"
        self.profile = profile or default_profile()
        self.argv = device_argv(self.link, self.profile, script=script, model=model, control=str(self.control),
                                tail_control=str(self.tail) if tail_control else None,
                                noise_ma=noise_ma, noise_mv=noise_mv, seed=seed, line_format=line_format)
        self.proc: subprocess.Popen | None = None
        #: The script's first entry (wall time): the device must be up before it.
        self.script_at = min(t for t, _ in script) if script else None

    def start(self) -> DeviceProcess:
        self.proc = subprocess.Popen(self.argv, cwd=REPO, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not os.path.lexists(self.link):
            if self.proc.poll() is not None:
                raise RuntimeError(f"device exited: {self.proc.stderr.read().decode()}")
            if time.monotonic() > deadline:
                raise RuntimeError("device did not publish its pty")
            time.sleep(0.01)
        late = time.time() - self.script_at if self.script_at is not None else 0.0
        if late > 0:
            self.stop()
            raise RuntimeError(f"the device came up {late:.1f} s after its script's first entry: the test's "
                               "set-up outran its schedule (start the script later: SCRIPT_LEAD_S)")
        return self

    def set_fault(self, text: str, timeout_s: float = 10.0) -> None:
        """Switch the device's fault mode and wait until it acknowledges (everything sent after follows it)."""
        tmp = self.control.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, self.control)  # a new inode: the device notices at its next wake-up
        active = Path(f"{self.control}.active")
        deadline = time.monotonic() + timeout_s
        while not (active.exists() and active.read_text() == text + "\n"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"device did not acknowledge fault mode {text!r}")
            time.sleep(0.01)

    def wait_link(self, present: bool, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while os.path.lexists(self.link) != present:
            if time.monotonic() > deadline:
                raise RuntimeError(f"link {'did not appear' if present else 'still there'}")
            time.sleep(0.01)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()

    def __enter__(self) -> DeviceProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
