"""Parallel testbeds on one machine: K copies of an emulated testbed run one campaign.

``mplab run SCENARIO --testbeds K`` builds K copies of the inventory's emulated testbed.
Copy *i* is the same inventory with the namespace prefix ``<prefix>tb<i>-``: its own
namespaces, meter devices and state directory (addresses are namespace-local, so the
copies' identical address plans never meet). Each copy has its own ``Runner`` and
``Recorder`` in a thread that takes the next sample from one queue over the (shuffled,
seeded) plan, so the plan order is kept as far as K workers can keep it, and samples of
one case may run on different copies. Records go to the one store under the one campaign
lock; each says which copy ran it (``testbed``).

``check_testbeds`` refuses K beyond ``max_testbeds()`` (the rule bench/parallel.py measured,
see ``CORES_PER_TESTBED``) unless forced. ``Interference`` measures what the copies do to each
other (CPU load, start skew, achieved / configured rate per copy) for the manifest.
"""
from __future__ import annotations

import logging
import os
import queue
import resource
import statistics
import threading
import time
from collections.abc import Callable

from harness.campaign.plan import SamplePlan
from harness.config.inventory import RADIOS, Inventory
from harness.errors import ConfigError

log = logging.getLogger("mplab.parallel")

#: Cores to allow per emulated testbed copy. bench/parallel.py on the 2-core shared development
#: machine: throughput per case stayed within 2 % of K = 1 up to K = 4, but the energy of WiFi-only
#: cases moved by up to 16 % at K = 3 and 4 (8 % at K = 2); the rule keeps K = 2 (every case within
#: 10 %) per 2 cores (README, "Campaigns beyond one testbed").
CORES_PER_TESTBED = 1.0
#: Mean achieved / configured rate of a copy below this fraction of what one copy alone
#: achieves is a loss of fidelity (bench/parallel.py reports the ratios).
MIN_RATE_RATIO = 0.9
COPY_SUFFIX = "tb{i}-"


def copy_prefix(prefix: str, i: int) -> str:
    """The namespace prefix of copy ``i`` (1-based) of a testbed with ``prefix``."""
    return prefix + COPY_SUFFIX.format(i=i)


def testbed_copies(inventory: Inventory, k: int) -> list[Inventory]:
    """``k`` copies of an emulated inventory, each with its own namespace prefix (k = 1: the inventory itself)."""
    if inventory.emulation is None:
        raise ConfigError(f"--testbeds needs an emulated inventory; {inventory.name!r} is a {inventory.kind} testbed "
                          "(across machines use --cluster)", field="testbeds")
    if k == 1:
        return [inventory]
    out = []
    for i in range(1, k + 1):
        emu = inventory.emulation.model_copy(update={"namespace_prefix": copy_prefix(inventory.emulation.namespace_prefix, i)})
        # Validate the new prefix (length, characters) as the inventory file would be.
        out.append(Inventory.model_validate({**inventory.model_dump(), "emulation": emu.model_dump()}))
    return out


def max_testbeds(cpus: int | None = None) -> int:
    """The most copies this machine sustains without losing fidelity (the measured rule)."""
    n = cpus if cpus is not None else (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    return max(1, int(n / CORES_PER_TESTBED))


def check_testbeds(k: int, force: bool = False, cpus: int | None = None) -> None:
    """Refuse ``k`` < 1, and ``k`` beyond ``max_testbeds`` unless ``force``."""
    if k < 1:
        raise ConfigError(f"--testbeds {k}: at least 1", field="testbeds")
    limit = max_testbeds(cpus)
    if k > limit and not force:
        raise ConfigError(f"--testbeds {k}: this machine sustains {limit} emulated testbed(s) without losing fidelity "
                          f"({CORES_PER_TESTBED:g} core(s) per testbed, measured by bench/parallel.py); "
                          "--force runs more anyway, with the interference recorded in the manifest", field="testbeds")


# ---------------------------------------------------------------- the work queue

def run_queue(plans: list[SamplePlan], workers: dict[str, Callable[[SamplePlan], object]],
              stop: threading.Event, on_done: Callable[[object], None] | None = None,
              poll_s: float = 0.2) -> list[BaseException]:
    """Run ``plans`` in order on ``workers`` (name -> run one sample), one sample per worker at a time.

    Each worker thread takes the next plan from one queue; ``stop`` ends every worker after
    (or, through the runner's ``cancel``, inside) its current sample. Returns the exceptions
    the workers ended with (a worker that fails stops taking samples; the others go on).
    The caller's thread only waits, so signal handlers run there.
    """
    q: queue.Queue[SamplePlan] = queue.Queue()
    for p in plans:
        q.put(p)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(name: str, fn: Callable[[SamplePlan], object]) -> None:
        while not stop.is_set():
            try:
                plan = q.get_nowait()
            except queue.Empty:
                return
            try:
                out = fn(plan)
            except BaseException as exc:  # noqa: BLE001 - reported to the caller, which decides
                log.warning("testbed %s stopped: %s", name, exc)
                with lock:
                    errors.append(exc)
                return
            if on_done:
                with lock:
                    on_done(out)

    threads = [threading.Thread(target=work, args=(n, fn), name=f"testbed:{n}", daemon=True)
               for n, fn in workers.items()]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(poll_s)
    except BaseException:
        stop.set()  # a signal in the waiting thread: cancel the samples in flight, then wait for them
        for t in threads:
            t.join()
        raise
    return errors


# ---------------------------------------------------------------- interference

def _own_cpu_s() -> float:
    """CPU seconds of this process and its reaped children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as f:
        vals = [float(x) for x in f.readline().split()[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0.0)
    return sum(vals) - idle, sum(vals)


class Interference:
    """Measures what parallel testbeds do to each other during one session.

    A thread samples the machine's CPU busy fraction every ``interval_s``; ``summary``
    adds, per testbed, the start skew of its samples (spread of the receivers' release
    times) and its achieved / configured rate (``configured_rate_mbit``) over ok records.
    """

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.busy: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at = time.time()
        self.load_start = os.getloadavg()[0]
        self.cpu_start_s = _own_cpu_s()

    def __enter__(self) -> Interference:
        self._thread = threading.Thread(target=self._sample, name="interference", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _sample(self) -> None:
        prev = _cpu_times()
        while not self._stop.wait(self.interval_s):
            cur = _cpu_times()
            dt = cur[1] - prev[1]
            if dt > 0:
                self.busy.append((cur[0] - prev[0]) / dt)
            prev = cur

    def summary(self, records: list[dict], inventory: Inventory) -> dict:
        """The manifest's account of one session (records: those written in it)."""
        per: dict[str, dict] = {}
        by_sample: dict[str, list[dict]] = {}
        for r in records:
            by_sample.setdefault(r["sample_id"], []).append(r)
        for recs in by_sample.values():
            tb = per.setdefault(str(recs[0].get("testbed")), {"samples": 0, "skews_s": [], "ratios": []})
            tb["samples"] += 1
            starts = [r["started_at"] for r in recs if r.get("started_at") is not None]
            if len(starts) > 1:
                tb["skews_s"].append(max(starts) - min(starts))
            for r in recs:
                if r["status"] == "ok" and r.get("throughput_mbit"):
                    want = configured_rate_mbit(inventory, r["receiver"], r["mode"], r["n_receivers"])
                    tb["ratios"].append(r["throughput_mbit"] / want)
        testbeds = {}
        for name, tb in sorted(per.items()):
            testbeds[name] = {
                "samples": tb["samples"],
                "start_skew_median_s": statistics.median(tb["skews_s"]) if tb["skews_s"] else None,
                "start_skew_max_s": max(tb["skews_s"]) if tb["skews_s"] else None,
                "rate_ratio_mean": statistics.fmean(tb["ratios"]) if tb["ratios"] else None,
            }
        return {
            "started_at": self.started_at,
            "ended_at": time.time(),
            "cpus": len(os.sched_getaffinity(0)),
            "cpu_busy_mean": statistics.fmean(self.busy) if self.busy else None,
            "cpu_busy_max": max(self.busy) if self.busy else None,
            "loadavg_1m_start": self.load_start,
            "loadavg_1m_end": os.getloadavg()[0],
            # This process (runner, recorders) and the children it reaped (iperf3 clients), in cores: what
            # the campaign itself used, apart from the rest of a shared machine (kernel forwarding not included).
            "own_cpu_cores": (_own_cpu_s() - self.cpu_start_s) / max(time.time() - self.started_at, 1e-9),
            "testbeds": testbeds,
        }


def configured_rate_mbit(inventory: Inventory, receiver: str, mode: str, n_receivers: int) -> float:
    """What the testbed is configured to give one receiver: its channel rate(s), capped by a fair share
    of the shared AP / cell capacity (emulated), summed over the radios the mode uses."""
    emu = inventory.emulation
    rx = inventory.receiver(receiver)
    rates = {}
    for radio in RADIOS:
        ch = rx.interfaces[radio].channel
        cap = (emu.wifi_ap if radio == "wifi" else emu.lte_cell).capacity_mbit if emu else None
        rate = ch.rate_mbit if ch else 10.0
        rates[radio] = min(rate, cap / n_receivers) if cap else rate
    return rates["wifi"] + rates["lte"] if mode == "both" else rates[mode]
