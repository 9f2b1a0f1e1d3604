"""LocalHost: commands, deadlines, background processes, gates, atomic writes."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.campaign.runner import stop_on_signals
from harness.errors import CommandError, CommandTimeout, Interrupted
from harness.hosts.local import LocalHost, NamespaceHost


def test_run_and_errors():
    h = LocalHost("here")
    assert h.run(["echo", "hi"]).stdout == "hi\n"
    with pytest.raises(CommandError) as ei:
        h.run(["sh", "-c", "echo oops >&2; exit 3"])
    assert ei.value.returncode == 3 and "oops" in str(ei.value) and "[here]" in str(ei.value)
    assert h.run(["false"], check=False).returncode == 1
    with pytest.raises(CommandError, match="program not found"):
        h.run(["definitely-not-a-program-xyz"])
    with pytest.raises(CommandTimeout, match="killed after 0.2 s"):
        h.run(["sleep", "5"], timeout=0.2)
    assert h.run(["cat"], input="abc").stdout == "abc"
    assert h.which("sh") and h.which("no-such-thing-xyz") is None


def test_stop_kills_the_whole_process_group(tmp_path):
    h = LocalHost()
    pidfile = tmp_path / "child"
    # The shell ignores SIGINT/SIGTERM and has a child: only the group kill escalation gets both.
    p = h.start(["sh", "-c", f'trap "" INT TERM; sleep 60 & echo $! > {pidfile}; wait'])
    deadline = time.monotonic() + 5
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    child = int(pidfile.read_text())
    res = p.stop(grace_s=0.3)
    assert res.stopped and res.returncode is not None
    time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}") or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"
    assert p.stop() is res  # idempotent


def test_gated_process_starts_only_when_released():
    h = LocalHost()
    p = h.start(["sh", "-c", "date +%s.%N; echo err >&2"], gated=True)
    p.wait_ready(5)
    time.sleep(0.1)
    assert p.poll() is None, "a gated process must wait for its release"
    t_release = p.release()
    res = p.wait(5)
    assert res.returncode == 0
    assert res.stderr == "err\n", "the gate's own lines are not part of the command's stderr"
    assert res.released_at is not None and abs(res.released_at - t_release) < 1.0
    assert float(res.stdout) >= res.released_at  # the command ran after the gate opened
    unreleased = h.start(["echo", "never"], gated=True)
    unreleased.wait_ready(5)
    res2 = unreleased.stop()
    assert res2.stdout == "" and res2.returncode != 0  # never ran: EOF on the gate (97) or stopped by signal


def test_wait_deadline():
    p = LocalHost().start(["sleep", "5"])
    with pytest.raises(CommandTimeout):
        p.wait(0.1)
    p.stop()


def test_write_file_is_atomic_and_readable(tmp_path):
    h = LocalHost()
    f = tmp_path / "d" / "x.json"
    h.write_file(str(f), b"one", mode=0o600)
    assert h.read_file(str(f)) == b"one" and (f.stat().st_mode & 0o777) == 0o600
    h.write_file(str(f), b"two")
    assert f.read_text() == "two" and list(f.parent.iterdir()) == [f]


def test_wait_ready_reports_a_gate_that_never_started():
    # The namespace does not exist: `ip netns exec` fails before the gate runs.
    p = NamespaceHost("ghost", "mplab-no-such-namespace").start(["true"], gated=True)
    with pytest.raises(CommandError, match="exited before its release"):
        p.wait_ready(5)


# ------------------------------------------------------------------ readiness with a deadline (harness.hosts.ready)

def test_wait_until_returns_once_the_condition_holds():
    from harness.hosts.ready import wait_until

    calls = []
    wait_until(lambda: calls.append(1) or len(calls) >= 3, 5, "three polls", poll_s=0.001)
    assert len(calls) == 3


def test_wait_until_names_what_did_not_become_ready():
    from harness.errors import NotReady, PreflightError
    from harness.hosts.ready import wait_until

    seen = {"n": 0}

    def never() -> bool:
        seen["n"] += 1
        return False

    with pytest.raises(NotReady) as err:
        wait_until(never, 0.05, "the widget socket", poll_s=0.005, detail=lambda: "have nothing")
    assert isinstance(err.value, PreflightError)  # callers catching PreflightError keep working
    assert err.value.what == "the widget socket"
    assert "not ready within 0.05 s" in str(err.value) and "have nothing" in str(err.value)
    assert seen["n"] >= 2  # it polled, it did not just sleep


def test_wait_until_stops_at_once_when_the_process_exits():
    from harness.errors import NotReady
    from harness.hosts.ready import wait_until

    proc = LocalHost().start(["sh", "-c", "echo no-config-file >&2; exit 3"], label="widgetd")
    t0 = time.monotonic()
    with pytest.raises(NotReady) as err:
        wait_until(lambda: False, 30, "widgetd (its socket)", proc=proc)
    assert time.monotonic() - t0 < 10  # not the 30 s deadline
    assert "widgetd exited (3)" in str(err.value) and "no-config-file" in str(err.value)
    assert proc.poll() is not None  # reaped


def test_wait_until_raises_the_error_class_asked_for():
    from harness.errors import NotReady
    from harness.hosts.ready import wait_until

    class ServerDown(NotReady):
        pass

    with pytest.raises(ServerDown):
        wait_until(lambda: False, 0, "a server", error=ServerDown)


def test_output_files_of_a_starter_killed_outright_are_removed_by_clean():
    """A background process's output files go with it (wait/stop); a starter killed with SIGKILL cannot remove
    them, so `mplab clean` does, and only for starters that are gone (a live one's stay)."""
    import subprocess
    import sys
    from pathlib import Path

    from harness.upkeep.clean import remove_orphaned_temp_dirs

    code = ("import os, sys; from harness.hosts.local import LocalHost; "
            "p = LocalHost().start(['sleep', '2']); print(p._dir.name, flush=True); os.kill(os.getpid(), 9)")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    left = Path(child.stdout.split()[0])
    assert child.returncode == -9 and left.is_dir() and left.name.startswith("mplab-proc-")
    mine = LocalHost().start(["sleep", "30"])
    try:
        done = remove_orphaned_temp_dirs("mplab-", LocalHost(), True)
        assert f"scratch directory {left}" in done and not left.exists()
        assert Path(mine._dir.name).is_dir(), "a live starter's output files must stay"
    finally:
        mine.stop()
    assert not Path(mine._dir.name).exists()


def test_a_zombie_counts_as_stopped_for_namespace_cleanup():
    """A killed process its parent has not reaped yet (an orphan waits for pid 1, which may be slow) has
    stopped: cleanup waiting for its /proc entry to go spent seconds per namespace."""
    import subprocess as sp

    from harness.upkeep.clean import _running

    child = sp.Popen(["sleep", "30"])
    try:
        assert _running(child.pid)
        child.kill()
        deadline = time.monotonic() + 10
        while _running(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert Path(f"/proc/{child.pid}").exists() and not _running(child.pid)  # a zombie, not yet reaped
    finally:
        child.kill()
        child.wait()
    assert not _running(child.pid)


def _signalled_while_creating(signum: int) -> type[subprocess.Popen]:
    """A Popen that sends this process ``signum`` inside its own constructor, once the child exists: the
    moment a stop signal's exception used to orphan the child (the handler runs before it returns)."""
    real = subprocess.Popen

    class SignalledWhileCreating(real):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            os.kill(os.getpid(), signum)
            time.sleep(0.01)

    return SignalledWhileCreating


@pytest.mark.parametrize("signum, raised", [(signal.SIGTERM, Interrupted), (signal.SIGINT, KeyboardInterrupt)])
@pytest.mark.parametrize("how", ["run", "start"])
def test_a_stop_signal_while_a_child_is_created_stops_the_run_and_leaves_no_child(tmp_path, monkeypatch, signum,
                                                                                  raised, how):
    """A set-up interrupted by Ctrl-C once left a namespace behind: the signal's exception came while Popen
    was creating ``ip netns add``, Popen does not kill a child it forked when interrupted there, and the
    child made its namespace after the teardown. Here the signal comes at that moment every time: the run
    must still stop with the signal's exception, and the child must be gone (it would write a file 0.5 s
    later)."""
    marker = tmp_path / "late"
    monkeypatch.setattr(subprocess, "Popen", _signalled_while_creating(signum))
    # Default SIGINT whatever started the suite (a background job starts with it ignored; mplab keeps that).
    argv = ["sh", "-c", f"sleep 0.5; touch {marker}"]
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(raised), stop_on_signals():
            if how == "run":
                LocalHost("t").run(argv)
            else:
                LocalHost("t").start(argv)
    finally:
        signal.signal(signal.SIGINT, old_int)
    time.sleep(1.0)
    assert not marker.exists(), "the child outlived the interrupted run"


def test_a_stop_signal_while_a_creation_fails_still_stops_the_run(monkeypatch):
    """The signal held during a creation that then fails (a program not found) is not kept for later: the
    run stops with the signal's exception, not with the lesser error."""
    class SignalledThenMissing(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
            raise FileNotFoundError(2, "No such file or directory", args[0][0])

    monkeypatch.setattr(subprocess, "Popen", SignalledThenMissing)
    with pytest.raises(Interrupted), stop_on_signals():
        LocalHost("t").run(["true"])  # the fake Popen says it is missing


def test_a_stop_request_is_not_a_failed_step(monkeypatch):
    """The runner records a sample's step that raised ``MplabError`` as failed and goes on; a SIGTERM that
    came during such a step (a client's start) was recorded as "start: stopped by SIGTERM" and the run went
    on to its end with exit 0. ``Interrupted`` passes any ``except MplabError`` (and ``except Exception``)."""
    monkeypatch.setattr(subprocess, "Popen", _signalled_while_creating(signal.SIGTERM))
    with pytest.raises(Interrupted), stop_on_signals():
        try:
            LocalHost("t").run(["true"])
        except Exception:  # noqa: BLE001 - what a step's handler catches
            pytest.fail("the stop request was caught as a failed step")
