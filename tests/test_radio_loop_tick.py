"""The radio loop's tick (``harness.emulation.radiolink``) made cheap without changing a decision.

A tick whose active set is the previous tick's stops before working out the rates, and the ``net/dev`` files
stay open. The first test replays one seeded schedule of byte counters (stations starting, pausing past and
within the hold, finishing, on one radio and on both) through the loop and through a reference tick that works
the rates out and applies them on every tick, as the loop did before: the same ``tc`` lines, the same classes
after every tick and the same log. A skip that hid a change of the active set, or rates kept from another
set, fails it.
"""
from __future__ import annotations

import json
import os
import random
import subprocess

from harness.emulation import radiolink
from harness.emulation.radiolink import IDLE_BYTES, RADIOS, LinkConfig, NetDev, RadioLoop, read_tx_bytes
from harness.emulation.sharing import AccessNetwork, radio_rates


class _Pipe:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines += text.splitlines()

    def flush(self) -> None:
        pass


class _FakeTc:
    def __init__(self) -> None:
        self.stdin = _Pipe()


class _Scripted(RadioLoop):
    """The loop on scripted counters (no namespace, no tc)."""

    def __init__(self, cfg: LinkConfig, counters: dict[str, dict[str, int]], log_path: str) -> None:
        super().__init__(cfg, log_path)
        self.counters = counters
        self.tc = {"wifi": _FakeTc(), "lte": _FakeTc()}
        self.apply(cfg.solo_rates())
        self.last_bytes = {r: self._counters(r) for r in self.tc}

    def _counters(self, radio: str) -> dict[str, int]:
        return dict(self.counters[radio])


def reference_step(loop: RadioLoop, now: float) -> None:
    """The tick before the skip: the active set, then the rates worked out and applied on every tick."""
    active: dict[str, set[str]] = {}
    for radio in loop.tc:
        counters = loop._counters(radio)
        for s, (dev, _) in loop.cfg.stations[radio].items():
            if counters.get(dev, 0) - loop.last_bytes[radio].get(dev, 0) > IDLE_BYTES:
                loop.last_seen[radio][s] = now
            if now - loop.last_seen[radio].get(s, -1e9) <= loop.cfg.hold_s:
                active.setdefault(s, set()).add(radio)
        loop.last_bytes[radio] = counters
    solo = loop.cfg.solo_rates()
    rates = {r: dict(solo[r]) for r in RADIOS if r in solo}
    if active:
        shared = radio_rates(loop.cfg.networks["wifi"], loop.cfg.networks["lte"],
                             {s: v[1] for s, v in loop.cfg.stations["wifi"].items()},
                             {s: v[1] for s, v in loop.cfg.stations["lte"].items()},
                             {s: frozenset(v) for s, v in active.items()}, loop.cfg.coexistence_factor)
        for s, radios in active.items():
            for r in radios:
                rates[r][s] = shared[s][r]
    if loop.apply(rates) and loop.log:
        loop.log.write(json.dumps({"t": 0, "active": {s: sorted(v) for s, v in active.items()},
                                   "rates": {r: {s: round(x, 3) for s, x in per.items()}
                                             for r, per in loop.current.items()}}) + "\n")
        loop.log.flush()


def _config() -> LinkConfig:
    n = 5
    return LinkConfig({"wifi": "a", "lte": "e"},
                      {"wifi": AccessNetwork("dcf", 320), "lte": AccessNetwork("proportional-fair", 288,
                                                                                {1: 280, 3: 250, 5: 230})},
                      {"wifi": {f"n{i}": (f"rx{i}", 40.0 + 17 * i) for i in range(1, n + 1)},
                       "lte": {f"n{i}": (f"rx{i}", 30.0 + 11 * i) for i in range(1, n + 1)}},
                      {1: 0.9, 3: 0.8}, hz=320, hold_s=0.25 / 16)


def _schedule(ticks: int, seed: int = 7) -> list[dict[str, dict[str, int]]]:
    """Bytes moved per tick, per radio and device: transfers that start, pause and end at random."""
    rng = random.Random(seed)
    on = {(r, i): False for r in RADIOS for i in range(1, 6)}
    out = []
    for _ in range(ticks):
        for key in on:
            if rng.random() < 0.03:
                on[key] = not on[key]
        out.append({r: {f"rx{i}": (rng.randrange(2000, 60000) if on[(r, i)] else rng.randrange(0, IDLE_BYTES))
                        for i in range(1, 6)} for r in RADIOS})
    return out


def _replay(step, tmp_path, name: str, schedule) -> tuple[dict, list, list]:
    counters = {r: {f"rx{i}": 0 for i in range(1, 6)} for r in RADIOS}
    loop = _Scripted(_config(), counters, str(tmp_path / f"{name}.log"))
    after = []
    for k, moved in enumerate(schedule):
        for r, per in moved.items():
            for dev, n in per.items():
                counters[r][dev] += n
        step(loop, (k + 1) / 320)
        after.append({r: dict(per) for r, per in loop.current.items()})
    loop.log.close()
    log = [{k: v for k, v in json.loads(line).items() if k != "t"}
           for line in (tmp_path / f"{name}.log").read_text().splitlines()]
    return {r: tc.stdin.lines for r, tc in loop.tc.items()}, after, log


def test_skipping_unchanged_ticks_makes_every_decision_the_reference_makes(tmp_path, monkeypatch):
    schedule = _schedule(3000)
    ref = _replay(reference_step, tmp_path, "ref", schedule)
    calls = []
    real = radiolink.radio_rates
    monkeypatch.setattr(radiolink, "radio_rates", lambda *a: calls.append(1) or real(*a))
    got = _replay(RadioLoop.step, tmp_path, "new", schedule)
    lines, after, log = got
    assert sum(len(v) for v in ref[0].values()) > 50 and len(ref[2]) > 20  # the schedule re-shared often
    assert lines == ref[0]
    assert after == ref[1]
    assert log == ref[2]
    assert 0 < len(calls) < len(schedule) / 3  # and most ticks stopped before the rates


def test_net_dev_is_read_through_one_open_file_and_moves(monkeypatch):
    dev = NetDev("/proc/self/net/dev")
    before = read_tx_bytes(dev.text())["lo"]
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    subprocess.run(["ping", "-c", "3", "-i", "0.01", "-q", "127.0.0.1"], capture_output=True, check=False, timeout=30)
    after = read_tx_bytes(dev.text())["lo"]
    monkeypatch.undo()
    assert opened == []
    assert after > before
    os.close(dev.fd)  # the kept descriptor stops reading (EBADF): the next read opens the file again
    assert read_tx_bytes(dev.text())["lo"] >= after
    dev.close()


def test_net_dev_reads_past_one_chunk(tmp_path):
    f = tmp_path / "dev"
    f.write_text("x" * 100)
    dev = NetDev(str(f))
    dev.CHUNK = 16
    assert dev.text() == "x" * 100
    assert dev.text() == "x" * 100
    dev.close()
