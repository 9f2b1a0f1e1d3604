"""What an emulated meter does on each wake (``harness.meters.emulated``), made cheaper without changing a reading.

At a speed-up S the device wakes 10 x S times a second. Its counters are read through kept paths and its control
files are watched by inotify instead of two ``stat`` calls a wake (``DirWatch``). The power model's integration
is the one it was: a counter schedule gives the same energies, to the last bit, as the model stepped by hand.
"""
from __future__ import annotations

import os
import signal
import threading
import time

from meter_devices import default_profile

from harness.meters import emulated
from harness.meters.emulated import Control, Device, DirWatch, TailControl
from harness.meters.power import PowerModel

S = 16
PERIOD = 0.1 / S


def _scripted_counters(monkeypatch) -> dict[str, int]:
    """Counter files that read what the test writes into the returned dict (path -> bytes)."""
    values: dict[str, int] = {}
    monkeypatch.setattr(emulated.SysfsRates, "_read", lambda self, path: values.setdefault(path, 0))
    return values


def test_a_counter_driven_device_integrates_exactly_what_the_model_gives(monkeypatch):
    values = _scripted_counters(monkeypatch)
    profile = default_profile()
    dev = Device(profile, ifaces={"wifi": "wlan0", "lte": "lte0"}, noise_ma=0, noise_mv=0, seed=1)
    # The reference: the model stepped by hand every PERIOD on the rates the counters give, power held between.
    model = PowerModel(profile)
    t, last_t = dev.t, dev.sysfs.last_t
    watts, mwh, mah = model.power_w(t, {}), 0.0, 0.0
    last = {"wifi": 0, "lte": 0}
    levels = set()
    # 2 s at S = 16 of transfers on either radio and both, pauses past the promotion and tail, and a trickle.
    pattern = [(0, 0), (90_000, 0), (90_000, 40_000), (0, 40_000), (0, 0), (300, 0), (0, 0), (120_000, 120_000)]
    for k in range(1, 321):
        wifi, lte = pattern[(k // 12) % len(pattern)]
        for path, n in (("/sys/class/net/wlan0/statistics/rx_bytes", wifi),
                        ("/sys/class/net/wlan0/statistics/tx_bytes", wifi // 20),
                        ("/sys/class/net/lte0/statistics/rx_bytes", lte),
                        ("/sys/class/net/lte0/statistics/tx_bytes", lte // 20)):
            values[path] = values.get(path, 0) + n
        now = t + k * PERIOD
        dev.tick(now)
        dt = now - (t + (k - 1) * PERIOD)
        mwh += watts * 1000 * dt / 3600
        mah += watts / profile.volts * 1000 * dt / 3600
        rates = {}
        for radio, iface in (("wifi", "wlan0"), ("lte", "lte0")):
            b = (values[f"/sys/class/net/{iface}/statistics/rx_bytes"]
                 + values[f"/sys/class/net/{iface}/statistics/tx_bytes"])
            rates[radio] = (b - last[radio]) * 8 / (now - last_t) / 1e6
            last[radio] = b
        last_t = now
        watts = model.power_w(now, rates)
        assert dev.watts == watts, k
        levels.add(round(watts, 3))
    assert (dev.mwh, dev.mah) == (mwh, mah)
    assert len(levels) >= 5  # idle, promotion, one radio, both, tails: the schedule went through the model's states


def test_the_watch_sees_the_files_change_and_nothing_else(tmp_path):
    ctl, tail = tmp_path / "m.control", tmp_path / "m.tail"
    watch = DirWatch([str(ctl), str(tail)])
    assert watch.fd is not None
    assert not watch.changed()
    (tmp_path / "other").write_text("x")  # another meter's file, a reply, a log: not ours
    (tmp_path / "m.control.active").write_text("ok\n")
    assert not watch.changed()
    tmp = tmp_path / "m.control.tmp"
    tmp.write_text("silent\n")
    os.replace(tmp, ctl)  # renamed into place
    assert watch.changed()
    with open(ctl, "w") as f:  # written in place
        f.write("ok\n")
    assert watch.changed()
    os.utime(ctl, (1, 1))  # touched
    assert watch.changed()
    ctl.unlink()  # removed
    assert watch.changed()
    tail.write_text("token\n")
    assert watch.changed()
    assert not watch.changed()
    watch.close()


def test_a_watch_whose_directory_goes_away_falls_back_to_checking_every_wake(tmp_path):
    folder = tmp_path / "state"
    folder.mkdir()
    watch = DirWatch([str(folder / "m.control")])
    folder.rmdir()
    assert watch.changed() and watch.fd is None
    assert DirWatch([str(tmp_path / "absent" / "m.control")]).fd is None  # nothing to watch: check every wake


def _serve_for(tmp_path, seconds: float, control: Control, tail: TailControl) -> None:
    """Run the device's loop in this process for ``seconds`` (then SIGTERM, which it handles), handlers restored."""
    dev = Device(default_profile(), script=emulated.ScriptRates([[0, {}]]), noise_ma=0, noise_mv=0, seed=1)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        emulated.serve(str(tmp_path / "m.pty"), dev, control, tail=tail, period_s=PERIOD)
    finally:
        timer.cancel()
        for s, h in saved.items():
            signal.signal(s, h)


def test_the_device_stats_no_control_file_while_nothing_changes(tmp_path, monkeypatch):
    ctl, tail = tmp_path / "m.control", tmp_path / "m.tail"
    stats = []
    real_stat = os.stat
    watched = {str(ctl), str(tail)}
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: (str(p) in watched and stats.append(p)) or real_stat(p, *a, **k))
    control = Control(str(ctl))
    answered = threading.Thread(target=lambda: (time.sleep(0.2), ctl.write_text("silent\n")), daemon=True)
    answered.start()
    _serve_for(tmp_path, 0.5, control, TailControl(str(tail)))  # about 80 sample wakes
    answered.join(5)
    monkeypatch.undo()
    # At the start (both files), then for the change (both again, on its creation and on its close): not two a wake.
    assert len(stats) <= 6, len(stats)
    assert control.fault.mode == "silent"  # the change was seen, and acknowledged
    assert (tmp_path / "m.control.active").read_text() == "silent\n"


def test_without_inotify_the_device_checks_on_every_wake_and_still_sees_a_change(tmp_path, monkeypatch):
    monkeypatch.setattr(DirWatch, "__init__", lambda self, paths: setattr(self, "fd", None))
    ctl = tmp_path / "m.control"
    control = Control(str(ctl))
    changer = threading.Thread(target=lambda: (time.sleep(0.2), ctl.write_text("garbage 5\n")), daemon=True)
    changer.start()
    _serve_for(tmp_path, 0.5, control, TailControl(None))
    changer.join(5)
    assert (control.fault.mode, control.fault.arg) == ("garbage", 5)
    assert (tmp_path / "m.control.active").read_text() == "garbage 5\n"
