"""Progress (n/N, rate, ETA, sessions) and `mplab watch`: the live page of a campaign in a real browser.

The progress tests are plain files. The browser test is root-only: a small emulated campaign runs in
another process (the real `mplab run`) while Debian's Chromium, driven by Playwright, shows the page
of the real `mplab watch`.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.campaign.progress import compute, lock_holder_pid, read_events, sessions_from_events
from rigs import watchrig
from mplab.cli import run as mplab_run

REPO = Path(__file__).resolve().parents[1]


def _rec(sid, rx="n1", status="ok", flags=(), started=None, n=1):
    return {"schema_version": 1, "sample_id": sid, "case_id": sid.rsplit("-s", 1)[0], "cc": "cubic",
            "n_receivers": n, "mode": "wifi", "receiver": rx, "status": status, "sample_status": status,
            "error": None if status == "ok" else "boom", "flags": list(flags), "repairs": [], "started_at": started,
            "window_start": started, "window_end": started, "throughput_mbit": 10.0, "energy_j": 2.0,
            "mean_power_w": 3.0, "idle_wait_s": 1.0, "attempts": 1}


def test_a_run_and_a_resume_are_two_sessions_and_a_killed_one_is_named():
    events = [{"event": "start", "time": 100.0, "pid": 1, "pending": 10},
              {"event": "interrupted", "time": 150.0, "reason": "stopped by SIGTERM"},
              {"event": "resume", "time": 200.0, "pid": 2, "pending": 7},
              {"event": "finished", "time": 300.0, "samples_run": 7, "samples_failed": 1},
              {"event": "resume", "time": 400.0, "pid": 3, "pending": 0}]
    got = sessions_from_events(events, running_pid=None)
    assert [(s.kind, s.end) for s in got] == [("start", "interrupted"), ("resume", "finished"), ("resume", "killed")]
    assert got[0].reason == "stopped by SIGTERM" and got[1].samples_failed == 1
    assert sessions_from_events(events[:3], running_pid=2)[-1].end == "running"
    plan = [f"c-s{i:03d}" for i in range(1, 11)]
    recs = [_rec(p) for p in plan]
    assert compute(plan, recs, got, last_append_at=300.0, now=500.0).sessions == 3  # not 5 log lines


def test_rate_and_eta_come_from_the_last_session_and_only_a_running_one_has_an_eta():
    plan = [f"c-s{i:03d}" for i in range(1, 11)]
    # 3 samples recorded before a resume at t=1000 (pending 7); 4 more by t=1000+400.
    recs = [_rec(p, started=float(i)) for i, p in enumerate(plan[:7])]
    recs[5] = _rec(plan[5], flags=["tail-unsettled: x"])
    recs[6] = _rec(plan[6], status="failed")
    running = sessions_from_events([{"event": "start", "time": 0.0, "pid": 1, "pending": 10},
                                    {"event": "interrupted", "time": 50.0},
                                    {"event": "resume", "time": 1000.0, "pid": 2, "pending": 7}], running_pid=2)
    p = compute(plan, recs, running, last_append_at=1400.0, now=1450.0)
    assert (p.planned, p.recorded, p.ok, p.failed, p.flagged, p.pending) == (10, 7, 6, 1, 1, 3)
    assert p.rate_per_h == pytest.approx(4 / 400 * 3600)  # 4 samples in this session's 400 s
    assert p.eta_at == pytest.approx(1400.0 + 3 * 100.0) and p.eta_s == pytest.approx(250.0)
    assert p.line().startswith("7/10 (6 ok, 1 failed, 1 flagged), 36.0 samples/h, ETA")
    ended = sessions_from_events([{"event": "start", "time": 1000.0, "pid": 2, "pending": 7},
                                  {"event": "interrupted", "time": 1500.0}], running_pid=None)
    q = compute(plan, recs, ended, last_append_at=1400.0, now=1450.0)
    assert q.eta_s is None and q.rate_per_h == pytest.approx(36.0)


def test_a_record_outside_the_plan_is_not_counted():
    plan = ["c-s001", "c-s002"]
    p = compute(plan, [_rec("c-s001"), _rec("other-s009")], [], last_append_at=None, now=1.0)
    assert (p.recorded, p.pending, p.rate_per_h) == (1, 1, None)


def test_the_lock_holder_is_read_from_proc_locks_without_taking_the_lock(tmp_path):
    lock = tmp_path / ".lock"
    lock.write_text("")
    assert lock_holder_pid(lock) is None
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(lock)!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(30)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_holder_pid(lock) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder_pid(lock) is None


def _refusals_while_probing(lock: Path, probe: str, seconds: float = 3.0) -> int:
    """How often a runner's non-blocking exclusive lock is refused while another process runs ``probe``
    (``module:function``) on the lock in a loop for ``seconds``."""
    module, func = probe.split(":")
    prober = subprocess.Popen([sys.executable, "-c", (
        "import time\n"
        f"from {module} import {func} as probe\n"
        "print('go', flush=True)\n"
        f"end = time.monotonic() + {seconds}\n"
        f"while time.monotonic() < end: probe(__import__('pathlib').Path({str(lock)!r}))\n")],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    refused = 0
    fd = os.open(lock, os.O_RDWR)
    try:
        assert prober.stdout.readline().strip() == "go"
        while prober.poll() is None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                refused += 1
    finally:
        os.close(fd)
        prober.kill()
        prober.wait()
    return refused


def test_watching_never_makes_a_runner_taking_the_lock_fail(tmp_path):
    lock = tmp_path / ".lock"
    lock.write_text("")
    assert _refusals_while_probing(lock, "harness.campaign.progress:lock_holder_pid") == 0
    # The check catches a probe that takes the lock, however briefly (the store's own running_pid does).
    assert _refusals_while_probing(lock, "harness.files:held_lock_text") > 0


def test_status_counts_sessions_and_gives_rate_and_eta(tmp_path, capsys):
    from harness.campaign.store import Campaign

    plan = [f"cubic-n1-wifi-s{i:03d}" for i in range(1, 5)]
    c = Campaign.create(tmp_path, "st", {"plan": plan, "testbed": {"kind": "emulated"}})
    t0 = time.time() - 100
    for ev in ({"event": "start", "pending": 4, "pid": 1}, {"event": "interrupted", "reason": "stopped by SIGTERM"},
               {"event": "resume", "pending": 4, "pid": 2}, {"event": "finished", "samples_run": 2}):
        c.log_session(ev)
    lines = (c.path / "sessions.jsonl").read_text().splitlines()
    (c.path / "sessions.jsonl").write_text("".join(json.dumps({**json.loads(x), "time": t0 + i}) + "\n"
                                                   for i, x in enumerate(lines)))
    c.append([_rec(plan[0], started=t0 + 10)])
    c.append([_rec(plan[1], started=t0 + 20)])
    assert mplab_run(["status", str(c.path), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert st["sessions"] == 2 and len(read_events(c.path / "sessions.jsonl")) == 4
    assert (st["recorded"], st["pending"], st["running_pid"], st["eta_s"]) == (2, 2, None, None)
    assert st["rate_samples_per_h"] > 0
    assert mplab_run(["status", str(c.path)]) == 0
    out = capsys.readouterr().out
    assert "last session (2 in all)" in out and "samples/h in the last session" in out


@pytest.mark.parametrize("make, says", [
    (lambda p: p / "missing", "no such campaign directory"),
    (lambda p: p, "not a campaign directory (no manifest.json)"),
])
def test_a_bad_run_dir_is_one_line_and_exit_2(tmp_path, capsys, make, says):
    assert mplab_run(["watch", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err


def test_a_damaged_manifest_is_one_line_and_exit_4_as_for_every_reader(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{")
    assert mplab_run(["watch", str(tmp_path)]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "manifest.json: not valid JSON" in err[0], err


# ------------------------------------------------------------------ the page in a browser (root)

#: Samples of the browser test's campaign (one receiver, WiFi, 1 MB each).
N = 5

def _campaign_files(tmp_path: Path, prefix: str, samples: int) -> Path:
    from tests.conftest import small_inventory

    inv = small_inventory(prefix, [(20, 8)])
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    sc = {"name": "watch", "inventory": str(inv_path), "congestion_controls": ["cubic"], "receiver_counts": [1],
          "modes": ["wifi"], "samples_per_case": samples, "file_size": "1M", "settle_s": 0, "retries": 0,
          # A receiver broken on purpose reads no idle power: its idle wait ends at this deadline.
          "idle_timeout_s": 4}
    sc_path = tmp_path / "sc.yaml"
    sc_path.write_text(yaml.safe_dump(sc))
    return sc_path


def _mplab_proc(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mplab", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MPLAB_LOG": "ERROR"})


def _wait(cond, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        if proc is not None and proc.poll() is not None and not cond():
            pytest.fail(f"{what}: the run exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)
    pytest.fail(f"{what}: not within {timeout} s")


def _count(samples: Path) -> int:
    try:
        return len(samples.read_text().splitlines())
    except OSError:
        return 0


def _failed_record(samples: Path) -> dict | None:
    try:
        lines = samples.read_text().splitlines()
    except OSError:
        return None
    return next((r for r in map(json.loads, lines) if r["status"] == "failed"), None)


@pytest.mark.root
@pytest.mark.skipif(not watchrig.CHROMIUM.exists(), reason=f"{watchrig.CHROMIUM} missing (apt-get install chromium)")
def test_the_page_follows_a_running_campaign_and_shows_a_failure_with_its_reason(tmp_path, prefix):
    """Watcher before the first record; n/N advances; an injected failure shows with its reason in 2 s; the
    finished campaign's page (a watcher started after the last record) shows the same; no network used."""
    from harness.hosts.local import LocalHost
    from harness.upkeep.clean import clean_prefix, list_namespaces

    sc_path = _campaign_files(tmp_path, prefix, samples=N)
    runs, root = tmp_path / "runs", LocalHost("root")
    run_dir = runs / "w"
    watchers: list[watchrig.Watcher] = []
    procs: list[subprocess.Popen] = []
    try:
        # A first session stopped during set-up: the campaign exists with no record (a kill and a resume).
        first = _mplab_proc("run", str(sc_path), "--runs-dir", str(runs), "--id", "w")
        procs.append(first)
        _wait(lambda: list_namespaces(root, prefix, nested=False), 120, "set-up began", first)
        first.send_signal(signal.SIGTERM)
        assert first.wait(120) == 143
        assert not (run_dir / "samples.jsonl").exists() or not (run_dir / "samples.jsonl").read_text()
        early = watchrig.start_watcher(run_dir)
        watchers.append(early)
        with watchrig.chromium_page(early.url) as (page, problems):
            page.wait_for_function(f"document.getElementById('n').textContent === '0/{N}'", timeout=10_000)
            page.evaluate("""() => { window.seen = []; window.running = [];
                new MutationObserver(() => window.seen.push(document.getElementById('n').textContent))
                    .observe(document.getElementById('n'), {childList: true, characterData: true, subtree: true});
                const head = document.querySelector('#sample h2');
                new MutationObserver(() => head.textContent.startsWith('Running sample')
                                           && window.running.push(document.getElementById('power').textContent))
                    .observe(head, {childList: true, characterData: true, subtree: true}); }""")
            run = _mplab_proc("run", "--resume", str(run_dir))
            procs.append(run)
            page.wait_for_function("document.getElementById('status').textContent.startsWith('running')",
                                   timeout=120_000)
            page.wait_for_function(f"document.getElementById('n').textContent === '1/{N}'", timeout=120_000)
            # Break the receiver's LTE interface once two samples are recorded: a later sample's health check
            # fails it, with the reason (the page is not waited for: the samples are quicker than a browser).
            _wait(lambda: _count(run_dir / "samples.jsonl") >= 2, 120, "two records", run)
            root.run(["ip", "netns", "exec", f"{prefix}n1", "ip", "link", "del", "lte0"], check=False)
            failed = _wait(lambda: _failed_record(run_dir / "samples.jsonl"), 120, "a failed record", run)
            written = time.monotonic()
            assert "lte0" in failed["error"], failed["error"]  # the health check or the counters name it
            page.wait_for_function(
                "(reason) => [...document.querySelectorAll('#events li.failed .reason')]"
                ".some((e) => e.textContent === reason)", arg=failed["error"], timeout=2_000)
            shown_s = time.monotonic() - written
            page.wait_for_function(f"document.getElementById('n').textContent === '{N}/{N}'", timeout=120_000)
            assert run.wait(120) == 3, run.stderr.read()[-2000:]  # samples failed: exit 3
            # Its output went to a pipe, not a terminal (no progress bar): each sample's line carries n/N and ETA.
            progress = re.findall(r"\[(\d+)/(\d+) \((\d+) ok, (\d+) failed, \d+ flagged\)(.*)\]", run.stdout.read())
            assert [(int(n), int(total)) for n, total, *_ in progress] == [(k, N) for k in range(1, N + 1)], progress
            assert all("samples/h, ETA" in rest for *_, rest in progress[1:-1]), progress
            page.wait_for_function("document.getElementById('status').textContent.includes('finished') || "
                                   "document.getElementById('status').textContent.includes('interrupted')",
                                   timeout=10_000)
            recs = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
            n_ok = sum(1 for r in recs if r["sample_status"] == "ok")
            assert page.inner_text("#ok") == f"{n_ok} ok" and page.inner_text("#failed") == f"{N - n_ok} failed"
            assert 2 <= n_ok < N
            # The running sample's panel showed up while samples ran, with the live power chart (its title).
            assert any("Meter power (W), emulated: running" in t for t in page.evaluate("window.running"))
            seen = [int(x.split("/")[0]) for x in dict.fromkeys(page.evaluate("window.seen"))]
            assert seen == sorted(seen) and len(seen) >= 3 and seen[-1] == N, seen  # it advanced with the store
            sessions = page.inner_text("#sessions")
            assert "interrupted" in sessions and "resume" in sessions
            assert "emulated" in page.inner_text("#energy")
            assert problems.all == [], problems.all
            assert problems.requests > 0
        # A watcher started after the last record shows the finished campaign.
        late = watchrig.start_watcher(run_dir)
        watchers.append(late)
        with watchrig.chromium_page(late.url) as (page, problems):
            page.wait_for_function(f"document.getElementById('n').textContent === '{N}/{N}'", timeout=10_000)
            page.wait_for_selector("#events li.failed", timeout=10_000)
            assert failed["error"] in page.inner_text("#events")
            assert "Last sample" in page.inner_text("#sample h2")
            assert "emulated" in page.inner_text("#case-energy")  # the energy chart says where energy came from
            assert problems.all == [], problems.all
        for w, sig in zip(watchers, (signal.SIGTERM, signal.SIGINT)):
            code, out, err = w.stop(sig)
            assert code == 0 and f"stopped by {signal.Signals(sig).name}" in out and "Traceback" not in err, err
        print(f"failure shown {shown_s:.2f} s after its record was seen in samples.jsonl")
    finally:
        for w in watchers:
            w.stop(signal.SIGKILL, timeout=10)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        clean_prefix(prefix, nested=False)


def test_listening_beyond_loopback_warns_and_a_port_in_use_is_exit_2(tmp_path, capsys):
    import socket

    from harness.campaign.store import Campaign

    c = Campaign.create(tmp_path, "p", {"plan": ["a-s001"], "testbed": {"kind": "emulated"}})
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    try:
        assert mplab_run(["watch", str(c.path), "--listen", "0.0.0.0", "--port", str(port)]) == 2
    finally:
        busy.close()
    err = capsys.readouterr().err
    assert "has no authentication" in err and f"cannot listen on 0.0.0.0 port {port}" in err


def test_the_view_reads_appends_incrementally_and_shows_decisions_and_failures(tmp_path):
    from harness.campaign.store import Campaign
    from harness.watch.state import CampaignView

    plan = ["cubic-n2-policy-ref-is-s001", "cubic-n2-policy-ref-is-s002"]
    c = Campaign.create(tmp_path, "v", {"plan": plan, "testbed": {"kind": "lab", "energy_source": "measured"}})
    view = CampaignView(c.path, c.manifest)
    assert view.poll() and view.snapshot()["progress"]["recorded"] == 0
    assert view.live()["running"] is False  # nobody holds the lock
    pol = {"policy": "ref-is", "assignment": "lte", "predicted_energy_j": {"wifi": 3.0, "lte": 2.0},
           "caps_mbit": None, "steering": "nftables"}
    c.append([{**_rec(plan[0], "n1", n=2), **pol}, {**_rec(plan[0], "n2", n=2), **pol, "assignment": "wifi"}])
    assert view.poll()
    snap = view.snapshot()
    assert snap["energy"] == "measured" and snap["progress"]["recorded"] == 1
    assert [(d["receiver"], d["assignment"]) for d in snap["decisions"]] == [("n2", "wifi"), ("n1", "lte")]
    # A torn append (one receiver's record of two) is not a recorded sample until the rest lands.
    bad = {**_rec(plan[1], "n1", status="failed", n=2), "error": "timeout: no result after 60 s"}
    with open(c.samples_path, "a") as f:
        f.write(json.dumps(bad) + "\n")
    assert view.poll() and view.snapshot()["progress"]["recorded"] == 1
    with open(c.samples_path, "a") as f:
        f.write(json.dumps({**bad, "receiver": "n2", "error": None}) + "\n")
    assert view.poll()
    snap = view.snapshot()
    assert snap["progress"]["failed"] == 1
    assert snap["events"][1]["text"] == "timeout: no result after 60 s"  # newest first: n2's, then n1's reason
    assert not view.poll()  # nothing new


def test_two_testbeds_running_at_once_are_two_named_series_each_from_its_own_trace(tmp_path, monkeypatch):
    """`mplab run --testbeds 2`: both copies name their receivers n1..n3 and write their own meter trace. The live
    view shows each copy's running sample, every receiver named with its copy and powered from that copy's trace
    (one "n3" fed by both meters drew two series under one name)."""
    from harness.campaign.store import Campaign
    from harness.watch.state import CampaignView

    plan = ["cubic-n3-both-s001", "cubic-n3-both-s002"]
    c = Campaign.create(tmp_path, "two", {"plan": plan, "testbed": {"kind": "emulated"}})
    c.log_session({"event": "start", "pending": 2, "pid": os.getpid(), "testbeds": ["tb-a", "tb-b"]})
    t0 = time.time()
    (c.path / "meters").mkdir(exist_ok=True)
    for tb, sid, watts in (("tb-a", plan[0], 2.0), ("tb-b", plan[1], 3.0)):
        adir = c.partial_dir(sid) / "attempt-1"
        adir.mkdir()
        (adir / "testbed.txt").write_text(tb + "\n")
        rows = "".join(f"{rx},x,{t0 + i * 0.1},5,0.4,0,{watts + k / 10}\n" for i in range(5)
                       for k, rx in enumerate(("n1", "n2", "n3")))
        (c.path / "meters" / f"trace-20260101T000000-{tb}.csv").write_text("receiver,a,t,v,i,x,watts\n" + rows)
    monkeypatch.setattr("harness.watch.state.lock_holder_pid", lambda path: os.getpid())
    live = CampaignView(c.path, c.manifest).live()
    assert live["running"]
    assert live["receivers"] == ["tb-a n1", "tb-a n2", "tb-a n3", "tb-b n1", "tb-b n2", "tb-b n3"]
    assert {w for _, w in live["power"]["tb-a n3"]} == {2.2} and {w for _, w in live["power"]["tb-b n3"]} == {3.2}
    assert live["sample_id"] == f"{plan[0]} on tb-a, {plan[1]} on tb-b"
