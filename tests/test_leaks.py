"""The leak check of the tests' ``prefix`` fixture (rigs.leaks): a namespace or an
iperf3 process a test leaves under its prefix fails that test, and is removed."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

from harness.hosts.local import LocalHost
from harness.upkeep.clean import list_namespaces
from rigs import leaks
from tests.conftest import REPO

pytestmark = pytest.mark.root


def _fresh() -> str:
    return f"mplab-t{uuid.uuid4().hex[:6]}-"  # not the fixture's: this test checks the check


def test_leftovers_finds_namespaces_with_their_qdiscs_and_marked_iperf3(tmp_path):
    if shutil.which("iperf3") is None:
        pytest.skip("no iperf3")
    p = _fresh()
    root = LocalHost("root")
    ns = f"{p}n1"
    root.run(["ip", "netns", "add", ns])
    server = None
    try:
        root.run(["ip", "-n", ns, "link", "set", "lo", "up"])
        root.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb"])
        # Marked, started inside the namespace; and one unmarked (another test's) that must not count.
        server = subprocess.Popen(["ip", "netns", "exec", ns, "iperf3", "-s", "-p", "5299"],
                                  env={**os.environ, leaks.MARK: p}, stdout=subprocess.DEVNULL)
        other = subprocess.Popen(["iperf3", "-s", "-p", "5298", "-B", "127.0.0.1"],
                                 env={**os.environ, leaks.MARK: _fresh()}, stdout=subprocess.DEVNULL)
        try:
            found = leaks.Leftovers(p)
            for _ in range(200):  # until iperf3 has exec'd (the mark is read from /proc)
                found = leaks.leftovers(p)
                if found.processes:
                    break
                subprocess.run(["sleep", "0.02"])
            assert found and found.namespaces == (ns,)
            assert [pid for pid, _ in found.processes] == [server.pid]
            assert "iperf3 -s -p 5299" in found.processes[0][1]
            assert any("htb 1:" in q for q in found.qdiscs), found.qdiscs
            assert ns in found.describe() and str(server.pid) in found.describe()
            leaks.remove(found)
            assert server.wait(timeout=10) is not None
            assert not leaks.leftovers(p) and list_namespaces(root, p) == []
            assert other.poll() is None  # not ours: untouched
        finally:
            other.kill()
            other.wait()
    finally:
        if server is not None and server.poll() is None:
            server.kill()
        root.run(["ip", "netns", "del", ns], check=False)


def test_a_test_that_leaks_fails_and_one_that_cleans_passes(tmp_path):
    """The real fixture, in a pytest run of its own: the leaking test errors at teardown, naming the leak."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import prefix  # noqa: F401 - a fixture, found by name\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent('''
        import subprocess

        def test_leaks(prefix):
            subprocess.run(["ip", "netns", "add", prefix + "n1"], check=True)

        def test_cleans(prefix):
            subprocess.run(["ip", "netns", "add", prefix + "n1"], check=True)
            subprocess.run(["ip", "netns", "del", prefix + "n1"], check=True)
    '''))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                          str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "2 passed, 1 error" in out, out  # the leaking test's call passed; its teardown is the error
    assert "ERROR at teardown of test_leaks" in out, out
    leaked = re.search(r"left behind under (mplab-t[0-9a-f]{6}-): namespaces (\S+)", out)
    assert leaked and leaked.group(2) == f"{leaked.group(1)}n1", out
    assert list_namespaces(LocalHost("root"), leaked.group(1)) == [], "the check removed what it found"


def test_a_testbed_record_left_under_the_prefix_is_a_leak_and_goes():
    """A record in /run/mplab keeps the congestion controls it names allowed machine-wide: one left under the
    prefix fails the test (and is removed); another prefix's is not ours."""
    from harness import machine

    p = _fresh()
    other = _fresh()
    machine.write_state(p, {"prefix": p, "needs": []})
    machine.write_state(other, {"prefix": other, "needs": []})
    try:
        found = leaks.leftovers(p)
        assert found and found.records == (str(machine.state_dir(p)),), found
        assert "testbed records" in found.describe()
        leaks.remove(found)
        assert not machine.state_dir(p).exists() and not leaks.leftovers(p)
        assert machine.state_dir(other).exists(), "another prefix's record is not ours"
    finally:
        machine.forget(other, LocalHost("root"), nested=False)
