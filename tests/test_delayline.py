"""The delay line's hold (harness/emulation/delayline.py): fixed delay, and jitter that keeps each FIFO's order.

No TUN device and no root: ``DelayLine.hold`` is the whole of the timing decision; reading and writing
packets is exercised by the emulated testbed's own tests (``test_units``: a path's base delay).
"""
from __future__ import annotations

import random
import statistics

import pytest

from harness.emulation import delayline
from harness.emulation.delayline import DelayLine


def _line(jitter_s: float = 0.0, seed: int = 1) -> DelayLine:
    return DelayLine(-1, {"10.0.0.2": 0.040}, jitter_s=jitter_s, rng=random.Random(seed))


def test_without_jitter_every_packet_is_held_exactly_its_delay():
    line = _line()
    dues = [line.hold(t, 0.040, b"p") for t in (0.0, 0.0001, 0.0002, 1.5)]
    assert dues == pytest.approx([0.040, 0.0401, 0.0402, 1.540])


def test_jitter_adds_a_uniform_extra_to_packets_that_arrive_far_apart():
    # Arrivals 10 ms apart, jitter 1 ms: no packet can be held behind another, so each extra is its own draw.
    line = _line(jitter_s=0.001)
    extras = [line.hold(i * 0.010, 0.040, b"p") - (i * 0.010 + 0.040) for i in range(2000)]
    assert min(extras) >= 0 and max(extras) < 0.001
    assert statistics.mean(extras) == pytest.approx(0.0005, abs=0.00003)
    # Spread over the whole range, not a constant offset.
    assert min(extras) < 0.00005 and max(extras) > 0.00095


def test_jitter_never_reorders_a_fifo():
    # Arrivals 0.1 ms apart with 1 ms of jitter: a late draw holds the packets behind it.
    line = _line(jitter_s=0.001)
    dues = [line.hold(i * 0.0001, 0.040, bytes([i % 256])) for i in range(5000)]
    assert all(b >= a for a, b in zip(dues, dues[1:]))
    assert all(d >= i * 0.0001 + 0.040 for i, d in enumerate(dues))
    # The queue releases in arrival order.
    q = line.queues[0.040]
    assert [p for _, p in q] == [bytes([i % 256]) for i in range(5000)]
    # Still jittered: the gaps between departures vary (a plain shift would keep them all at 0.1 ms).
    gaps = {round(b - a, 7) for a, b in zip(dues, dues[1:])}
    assert len(gaps) > 100


def test_each_delay_keeps_its_own_fifo():
    line = DelayLine(-1, {"10.0.0.2": 0.040, "10.0.0.3": 0.010}, jitter_s=0.005, rng=random.Random(3))
    slow = line.hold(0.0, 0.040, b"a")
    fast = line.hold(0.0001, 0.010, b"b")
    # The short path's packet is not held behind the long path's.
    assert fast < slow
    assert fast < 0.0001 + 0.010 + 0.005


def test_the_argument_list_names_the_jitter_only_when_there_is_one():
    plain = delayline.delayline_argv({"10.0.0.2": 40}, python="py")
    assert "--jitter" not in plain
    jittered = delayline.delayline_argv({"10.0.0.2": 40}, python="py", jitter_ms=0.6)
    assert jittered[jittered.index("--jitter") + 1] == "0.6"


@pytest.mark.parametrize("bad", ["-1", "nan", "5000"])
def test_a_jitter_out_of_range_is_refused_before_the_tun_device_is_touched(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        delayline.main(["--dev", "nosuch0", "--delay", "10.0.0.2=40", "--jitter", bad])
    assert exc.value.code == 2
    assert "--jitter must be 0 to 1000 ms" in capsys.readouterr().err


def test_the_rig_refuses_jitter_without_a_delay_line():
    from rigs.bottleneck import SharedBottleneck

    with pytest.raises(ValueError, match="jitter_ms needs a path delay"):
        SharedBottleneck("mplab-t-jit-", [], jitter_ms=0.6)
