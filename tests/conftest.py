"""Shared fixtures: a small emulated inventory with a unique namespace prefix, and root gating.

Namespace tests are marked ``root``; they are skipped (with the reason) when not run
as root, and CI runs as root so they run there.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rigs import leaks
# The test inventories live with the rigs (benches use them too); tests import them from here.
from rigs.inventories import TEST_LTE_TAIL_S, emulated_inventory_doc, short_tail_profile, small_inventory  # noqa: F401 - re-exported for tests

REPO = Path(__file__).resolve().parent.parent
# Hugging Face libraries (datasets, huggingface_hub) never reach the Hub from a test: they read local folders.
# Set before any test module imports them (they read these variables once, at import).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


#: The slowest modules' wall time on one worker (seconds: the workers step with MPLAB_TEST_CPU_LOG on the 2-core
#: development machine, loaded by another engineer's benchmark; docs/research/2026-11-29-suite-time.md).
#: `make test` hands a worker a module at a time in collection order (``--dist loadfile
#: --no-loadscope-reorder``; xdist's default order is by test count, which put the long modules with few
#: tests last): these go first, longest first, so a worker's last module is a short one and no long one
#: starts while the others run out of work. A module missing here runs later; only the order matters.
MODULE_SECONDS = {
    "tests/faults/test_bad_input_corpus.py": 269, "tests/test_analysis.py": 269, "tests/test_wheel.py": 262,
    "tests/test_controller_campaign.py": 172, "tests/test_training_emulated.py": 145,
    "tests/test_schemes_campaign.py": 98, "tests/test_lab.py": 94, "tests/test_registry.py": 64,
    "tests/test_watch.py": 63, "tests/test_cc_bpf_conns.py": 63, "tests/test_cc_oracle.py": 60,
    "tests/test_analysis_browser.py": 57, "tests/test_lte_deploy.py": 56, "tests/test_lab_box.py": 55,
    "tests/test_parallel.py": 55, "tests/test_docs_browser.py": 46, "tests/test_cluster.py": 45,
    "tests/test_cc_sim.py": 43, "tests/test_controller_steering.py": 42, "tests/faults/test_bad_input.py": 39,
    "tests/faults/test_testbed_faults.py": 39, "tests/test_emulation.py": 36, "tests/test_schemes_report.py": 33,
    "tests/test_lte_cli.py": 32, "tests/test_training.py": 32, "tests/test_lte_cell.py": 32,
    "tests/faults/test_order_independence.py": 30, "tests/test_meters_emulated_testbed.py": 26,
}


def _longest_modules_first(items: list) -> None:
    """Reorder ``items`` in place: the modules of ``MODULE_SECONDS`` longest first, then the rest as collected."""
    def weight(item) -> float:
        return -MODULE_SECONDS.get(item.nodeid.split("::", 1)[0], 0)
    items.sort(key=weight)  # stable: a module's tests keep their order, the other modules theirs


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _longest_modules_first(items)
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (CI runs as root)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


#: Where each test's wall and CPU time go (one JSON line per test) when set: `bench/suite_cpu.py` runs the
#: suite with it and sums them per module. CPU is this process's and that of the children it reaped during the
#: test (subprocesses, daemons a fixture stopped); a module fixture counts with the first test that needs it.
CPU_LOG = os.environ.get("MPLAB_TEST_CPU_LOG")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not CPU_LOG:
        yield
        return
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    t0 = time.monotonic()
    yield
    wall = time.monotonic() - t0
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    own, children = (a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
    line = json.dumps({"test": item.nodeid, "wall_s": round(wall, 3), "cpu_s": round(own, 3),
                       "children_cpu_s": round(children, 3), "worker": os.environ.get("PYTEST_XDIST_WORKER")})
    # One write of a line under O_APPEND: the workers' lines never interleave.
    fd = os.open(CPU_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def default_sigint() -> None:
    """``preexec_fn`` of a child a test will send SIGINT: give it the default disposition.

    A suite started from a script as a background job (``make test &``) runs with SIGINT ignored, and
    children inherit that; Python then installs no KeyboardInterrupt handler and mplab keeps ignoring
    SIGINT, as it should (docs/exit-codes.md). A test of Ctrl-C must stand where a terminal's user does.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def prefix(monkeypatch) -> Iterator[str]:
    """A namespace prefix no other test run uses (so parallel runs never collide).

    The test fails (at teardown) if it leaves a namespace under the prefix or an iperf3 process
    it started running (``rigs.leaks``: its processes carry ``MPLAB_TEST_PREFIX``);
    what it left is then removed, so one leak does not spill into the next test.
    """
    p = f"mplab-t{uuid.uuid4().hex[:6]}-"
    monkeypatch.setenv(leaks.MARK, p)
    yield p
    fail_on_leftovers(p)


def allowed_ccs_apart_from_other_testbeds() -> list[str]:
    """The kernel's allowed congestion-control list without the names other live testbeds need.

    Call it while the test's own testbeds are down (before set-up, after teardown). On a shared
    machine other testbeds add and remove the names they need as they come and go (a name that is not
    the root namespace's default, cubic where the default is bbr); in CI's step of `machine` tests
    there are none, and the comparison is the whole list.
    """
    from harness import machine

    others = machine.names_needed()
    return [n for n in Path(f"/proc/sys/{machine.ALLOWED_CC.replace('.', '/')}").read_text().split()
            if n not in others]


def fail_on_leftovers(p: str) -> None:
    """Fail (after removing it) if anything is left under prefix ``p`` (for fixtures that make their own prefix:
    mark the processes with ``leaks.MARK`` too)."""
    found = leaks.leftovers(p)
    if found:
        leaks.remove(found)
        pytest.fail(found.describe() + " (clean up in a finally block or a fixture, also after a failure)",
                    pytrace=False)
