"""The emulated sender's idle tail: an iperf3 server paused from its last write until its client has read all.

In reverse mode with ``-n`` (what the runner asks for), iperf3's server keeps its data socket in its ``select``
write set after it has written the last byte (3.12: ``iperf_send`` returns without writing once ``bytes_sent``
reaches ``-n``; 3.16 to 3.21 do the same in a sending thread, without even the ``select``). From the moment the
socket has room again until the client's ``TEST_END`` arrives, the server spins: ``select`` returns at once, there
is nothing to write, again. That lasts while the kernel delivers what the socket still holds: tens of ms for one
receiver alone; with nine, the spinning servers take the cores from the clients still reading, which then take
longer, and one server spun for seconds (68,704 ``select`` calls in 4 s and no write).

On a lab the sender is a machine of its own and nobody minds. On the emulated testbed the nine servers share the
cores with everything the measurement depends on (the receivers' clients, the kernel's packet path, the meters):
``bench/speedup_cpu.py`` found them using 0.6-0.75 of a core, nine receivers on WiFi, S = 4 and 16
(``docs/research/2026-11-29-sender-tail.md``).

``SenderTail`` removes that spin without touching a packet. It looks at each server every ``LOOK_S``:

- once the server has written at least the file (``wchar`` of ``/proc/<pid>/io``: the data plus a few kB of its
  own) and, over the last ``SPIN_WINDOW_S``, ran on a CPU for at least ``SPIN_SHARE`` of the time
  (``/proc/<pid>/schedstat``) without writing a byte, it is spinning: it is stopped (``SIGSTOP``). The kernel goes
  on sending what the socket holds (TCP needs no help from the process);
- it is continued (``SIGCONT``) as soon as its client has read nothing for ``IDLE_S``: the client then has all
  the data and waits for its server's answer to ``TEST_END``, or the kernel has nothing to deliver for now. The
  server then answers, or spins again and is stopped again. The client's transfer time ends at its last byte,
  and the energy window is that long from the data's start: neither depends on the pause; the client's exit comes
  ``IDLE_S`` or so later. The client's own count of bytes read cannot say when it has the file: it holds the
  libraries and the random block iperf3 read at its start, a few hundred kB, so it is not used.

Every server is continued when the sample ends, whatever happened (``release``). Records keep how long each
receiver's server was paused (``sender_paused_s``).
"""
from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import InitVar, dataclass, field

log = logging.getLogger("mplab.emulation")

#: How often the servers are looked at (wall time). The runner's wait loop calls ``look`` more often.
LOOK_S = 0.01
#: A server that wrote nothing over this long (wall) ...
SPIN_WINDOW_S = 0.02
#: ... while on a CPU for this share of it, is spinning. A server waiting for room in its socket sleeps in
#: ``select`` (no CPU); one that has room writes.
SPIN_SHARE = 0.25
#: A stopped server's client that reads nothing for this long (wall) gets its server back.
IDLE_S = 0.02
#: Set to ``off`` to leave the servers spinning (what ran before; the comparison in the report).
SENDER_PAUSE_ENV = "MPLAB_SENDER_PAUSE"


def sender_pause(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the emulated testbed pauses its idle iperf3 servers (``SENDER_PAUSE_ENV``; on by default)."""
    return environ.get(SENDER_PAUSE_ENV, "on").strip().lower() not in ("off", "0", "no")


def io_field(pid: int, name: str) -> int:
    """A counter of ``/proc/<pid>/io`` (``wchar``, ``rchar``: bytes through read/write calls, any file)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith(name):
                return int(line.split()[1])
    raise OSError(f"/proc/{pid}/io has no {name}")


def cpu_ns(pid: int) -> int:
    """The nanoseconds ``pid`` has run on a CPU (``/proc/<pid>/schedstat``'s first figure)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


@dataclass
class _Pair:
    server: int
    client: int
    state: str = "sending"  # sending <-> paused; done once either process is gone or the sample is over
    window: tuple[float, int, int] | None = None  # (wall, wchar, cpu ns) where the quiet stretch began
    paused_at: float | None = None
    paused_s: float = 0.0
    pauses: int = 0
    read: int = 0  # the client's rchar at the last look while paused
    read_grew_at: float = 0.0


@dataclass
class SenderTail:
    """Per receiver: its iperf3 server's pid and its client's, on this machine; ``nbytes`` the file."""

    pids: InitVar[Mapping[str, tuple[int, int]]]
    nbytes: int
    clock: Callable[[], float] = time.monotonic
    pairs: dict[str, _Pair] = field(init=False)
    _last_look: float = field(init=False, default=float("-inf"))

    def __post_init__(self, pids: Mapping[str, tuple[int, int]]) -> None:
        self.pairs = {rx: _Pair(server, client) for rx, (server, client) in pids.items()}

    def look(self) -> None:
        """Stop the servers found spinning, continue those whose client reads nothing (at most every ``LOOK_S``)."""
        now = self.clock()
        if now - self._last_look < LOOK_S:
            return
        self._last_look = now
        for rx, p in self.pairs.items():
            try:
                if p.state == "sending":
                    self._watch(rx, p, now)
                elif p.state == "paused":
                    self._wait_read(rx, p, now)
            except OSError:  # the server or the client has exited: nothing left to pause
                self._continue(rx, p, now)

    def _watch(self, rx: str, p: _Pair, now: float) -> None:
        wrote = io_field(p.server, "wchar")
        if wrote < self.nbytes:
            p.window = None
            return
        ran = cpu_ns(p.server)
        if p.window is None or p.window[1] != wrote:
            p.window = (now, wrote, ran)
            return
        t0, _, ran0 = p.window
        if now - t0 >= SPIN_WINDOW_S and (ran - ran0) / 1e9 >= SPIN_SHARE * (now - t0):
            read = io_field(p.client, "rchar")
            os.kill(p.server, signal.SIGSTOP)
            p.state, p.paused_at, p.pauses = "paused", now, p.pauses + 1
            p.read, p.read_grew_at = read, now
            log.debug("%s: iperf3 server %d stopped after its last write (spinning)", rx, p.server)

    def _wait_read(self, rx: str, p: _Pair, now: float) -> None:
        read = io_field(p.client, "rchar")
        if read != p.read:
            p.read, p.read_grew_at = read, now
        elif now - p.read_grew_at >= IDLE_S:
            self._continue(rx, p, now, "sending")

    def _continue(self, rx: str, p: _Pair, now: float, then: str = "done") -> None:
        if p.state == "paused":
            try:
                os.kill(p.server, signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.paused_s += now - (p.paused_at or now)
        p.state, p.window = then, None

    def release(self) -> None:
        """Continue every server still stopped (the sample is over, or was cut short)."""
        now = self.clock()
        for rx, p in self.pairs.items():
            self._continue(rx, p, now)

    def paused_s(self, rx: str) -> float:
        """How long (wall) ``rx``'s server was stopped."""
        return self.pairs[rx].paused_s
