"""The emulated testbed on the real kernel: topology, shaping, MPTCP subflows, modes, teardown, resume.

These build real namespaces, so they need root (CI runs as root). Each test uses its own
namespace prefix and removes everything it made, even when it fails.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.campaign.campaign import start_campaign
from harness.cc import resolve
from harness.machine import STATE_ROOT
from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.testbeds.emulated import EmulatedTestbed
from harness.hosts.local import LocalHost
from harness.config.scenario import Scenario
from harness.campaign.store import Campaign
from tests.conftest import allowed_ccs_apart_from_other_testbeds, small_inventory

pytestmark = pytest.mark.root
ALLOWED = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"


def _allowed() -> str:
    return Path(ALLOWED).read_text().strip()


@pytest.fixture
def cleanup(prefix):
    yield prefix
    clean_prefix(prefix)


@pytest.mark.machine  # compares the machine-wide allowed list before and after: run alone (see `make test`)
def test_topology_shaping_mptcp_and_cc_on_every_subflow(cleanup):
    prefix = cleanup
    allowed_before = allowed_ccs_apart_from_other_testbeds()
    inv = small_inventory(prefix, [(20, 8), (6, 12)])
    tb = EmulatedTestbed(inv)
    reno = resolve("reno")
    tb.preflight([reno])
    tb.setup([reno])
    try:
        assert set(list_namespaces(LocalHost(), prefix)) == {f"{prefix}{n}" for n in ("snd", "ap", "enb", "n1", "n2")}
        # Queues where the radios have them: per receiver on the AP's and the eNB's downlink, none on the sender.
        for host, rates in ((tb.ap, ("20Mbit", "6Mbit")), (tb.enb, ("8Mbit", "12Mbit"))):
            for i, rate in enumerate(rates, start=1):
                qd = json.loads(host.run(["tc", "-j", "qdisc", "show", "dev", f"rx{i}"]).stdout)
                assert sorted(q["kind"] for q in qd) == ["bfifo", "htb"]
                assert f"rate {rate}" in host.run(["tc", "class", "show", "dev", f"rx{i}"]).stdout
        snd_qd = json.loads(tb.sender.run(["tc", "-j", "qdisc", "show", "dev", "to-ap"]).stdout)
        assert not {q["kind"] for q in snd_qd} & {"htb", "bfifo"}
        n1 = tb.nodes["n1"]
        eps = n1.host.run(["ip", "mptcp", "endpoint", "show"]).stdout
        assert "10.20.1.2" in eps and "subflow" in eps and "lte0" in eps
        # An MPTCP transfer: both subflows up, each running the congestion control we chose.
        tb.apply_cc(reno, ["n1"])
        # A timed transfer (not a byte count): however slow this machine is, the subflows are up for
        # seconds while ss looks at them.
        # 6 s: a clean-clone CI once saw the 3 s transfer's data connection already gone by its third look.
        tb.ensure_servers(["n1"])
        argv = n1.iperf3.client_argv(tb.server_address, n1.port, None, bind="10.10.1.2", mptcp=True,
                                     cc="reno", duration_s=6)
        t0 = time.monotonic()
        proc = n1.host.start(argv)
        seen: dict[str, str] = {}
        looks, out, at = 0, "", []
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline and len(seen) < 2:
            out = tb.sender.run(["ss", "-tinH", "state", "established"]).stdout
            looks += 1
            at.append(round(time.monotonic() - t0, 2))
            peer = None
            for line in out.splitlines():
                if line and not line[0].isspace():
                    peer = line.split()[3] if len(line.split()) >= 4 else None
                elif peer and "bytes_sent:" in line:
                    sent = int(line.split("bytes_sent:")[1].split()[0])
                    if sent > 100_000:  # the data connection's subflows, not the control connection
                        seen[peer.rsplit(":", 1)[0].strip("[]").removeprefix("::ffff:")] = line.split()[0]
            time.sleep(0.1)
        res = proc.wait(30)
        assert res.returncode == 0, res.stderr
        assert set(seen) == {"10.10.1.2", "10.20.1.2"}, \
            f"expected a WiFi and an LTE subflow, saw {seen} in {looks} looks (at {at} s; the client ended after " \
            f"{round(time.monotonic() - t0, 2)} s at the latest); the last ss said:\n{out}"
        assert set(seen.values()) == {"reno"}, f"every subflow must run reno, saw {seen}"
        assert "reno" in _allowed().split()
    finally:
        tb.teardown()
    assert list_namespaces(LocalHost(), prefix) == []
    assert not (STATE_ROOT / prefix.rstrip("-")).exists()
    assert allowed_ccs_apart_from_other_testbeds() == allowed_before, "the allowed list must be restored"
    tb.teardown()  # idempotent


@pytest.mark.machine  # holds link rates to 10 %: run alone (see `make test`)
def test_two_receiver_sweep_modes_rates_and_teardown(cleanup, tmp_path):
    prefix = cleanup
    # n1 is better on WiFi, n2 on LTE. The AP shares by DCF (default): while both pull over WiFi each
    # gets 1/(1/20 + 1/6) = 4.6 Mbit/s (the performance anomaly); the cell (36) is not binding for 8 + 12.
    inv = small_inventory(prefix, [(20, 8), (6, 12)])
    sc = Scenario(name="t2", congestion_controls=["cubic"], receiver_counts=[2], modes=["wifi", "lte", "both"],
                  samples_per_case=1, file_size="3M", settle_s=0, seed=1, retries=1)
    campaign = start_campaign(sc, inv, tmp_path / "runs", campaign_id="t2")
    recs = {(r["mode"], r["receiver"]): r for r in campaign.records()}
    assert len(recs) == 6
    for r in recs.values():
        assert r["status"] == "ok" and r["sample_status"] == "ok", r
        assert r["bytes"] == 3 * 2**20
        assert r["energy_j"] and r["energy_j"] > 0 and r["meter_readings"] >= 5
        assert r["energy_source"] == "emulated" and r["meter_kind"] == "emulated-um25c"
        assert r["testbed_kind"] == "emulated" and r["cc_impl"] == "kernel:cubic" and r["sender_cc"] == "cubic"
        assert not [f for f in r["flags"] if f.startswith(("path-", "mptcp-", "cc-"))], r["flags"]
    # Each mode carries traffic only where it should.
    for rx in ("n1", "n2"):
        assert recs[("wifi", rx)]["iface_bytes"]["wifi"] > 3 * 2**20 and recs[("wifi", rx)]["iface_bytes"]["lte"] < 65536
        assert recs[("lte", rx)]["iface_bytes"]["lte"] > 3 * 2**20 and recs[("lte", rx)]["iface_bytes"]["wifi"] < 65536
        both = recs[("both", rx)]["iface_bytes"]
        assert both["wifi"] > 2**18 and both["lte"] > 2**18, both
    # Single-path link rates within 10% of what the sharing model gives (HTB shapes link bytes: payload 0.956).
    configured = {("wifi", "n1"): 4.615, ("wifi", "n2"): 4.615, ("lte", "n1"): 8, ("lte", "n2"): 12}
    for key, rate in configured.items():
        got = recs[key]["throughput_mbit"] / (1448 / 1514)
        assert abs(got - rate) <= 0.10 * rate, f"{key}: {got:.2f} Mbit/s vs configured {rate}"
    # The receiver with more capacity on LTE finishes sooner; on the DCF AP the fast one is held to the slow one's pace.
    assert recs[("lte", "n2")]["duration_s"] < recs[("lte", "n1")]["duration_s"]
    assert recs[("wifi", "n1")]["duration_s"] > 0.9 * recs[("wifi", "n2")]["duration_s"]
    # MPTCP aggregates both paths: faster than the better single path.
    for rx in ("n1", "n2"):
        best = max(recs[("wifi", rx)]["throughput_mbit"], recs[("lte", rx)]["throughput_mbit"])
        assert recs[("both", rx)]["throughput_mbit"] > best
    # Raw output kept beside the records.
    # The attempt the record kept (a retry is legitimate: an earlier attempt's files stay beside it).
    raw = campaign.path / "raw" / "cubic-n2-both-s001" / f"attempt-{recs[('both', 'n1')]['attempts']}"
    assert json.loads((raw / "iperf3-n1.json").read_text())["end"]["sum_received"]["bytes"] == 3 * 2**20
    assert (raw / "meter-n2.csv").read_text().startswith("wall_s,")
    mf = campaign.manifest
    assert mf["kernel"] == os.uname().release and mf["testbed"]["kind"] == "emulated"
    assert mf["inventory_digest"].startswith("sha256:") and mf["testbed"]["iperf3"]["version"]
    # Teardown left nothing.
    assert list_namespaces(LocalHost(), prefix) == []


def _mplab(*args: str) -> list[str]:
    return [sys.executable, "-m", "mplab", *args]


def test_kill_mid_sweep_and_resume(cleanup, tmp_path):
    prefix = cleanup
    inv = small_inventory(prefix, [(20, 10), (10, 20)])
    inv_path = tmp_path / "inv.yaml"
    inv_path.write_text(yaml.safe_dump(inv.model_dump(mode="json")))
    sc = {"schema_version": 1, "name": "kill", "congestion_controls": ["cubic", "reno"], "receiver_counts": [1, 2],
          "modes": ["wifi", "lte", "both"], "samples_per_case": 1, "file_size": "1M", "settle_s": 0, "seed": 3}
    sc_path = tmp_path / "sc.yaml"
    sc_path.write_text(yaml.safe_dump(sc))
    runs = tmp_path / "runs"
    env = {**os.environ, "MPLAB_LOG": "ERROR"}
    proc = subprocess.Popen(_mplab("run", str(sc_path), "--inventory", str(inv_path), "--runs-dir", str(runs),
                                   "--id", "k"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    samples = runs / "k" / "samples.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if samples.exists() and len({json.loads(x)["sample_id"] for x in samples.read_text().splitlines()}) >= 3:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"sweep ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    os.kill(proc.pid, signal.SIGKILL)  # a crash: no teardown, namespaces and processes left behind
    proc.wait()
    before = Campaign.open(runs / "k").records()
    assert list_namespaces(LocalHost(), prefix), "a killed sweep leaves its namespaces (resume must clear them)"
    res = subprocess.run(_mplab("run", "--resume", str(runs / "k")), capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    c = Campaign.open(runs / "k")
    recs = c.records()
    keys = [(r["sample_id"], r["receiver"]) for r in recs]
    assert len(keys) == len(set(keys)), "no duplicate records"
    assert {r["sample_id"] for r in recs} == set(c.manifest["plan"]), "no lost sample"
    for sid in c.manifest["plan"]:
        n = int(sid.split("-n")[1].split("-")[0])
        assert sum(1 for r in recs if r["sample_id"] == sid) == n
    assert recs[:len(before)] == before, "records written before the crash are untouched"
    assert all(r["status"] == "ok" for r in recs)
    events = [json.loads(x)["event"] for x in (c.path / "sessions.jsonl").read_text().splitlines()]
    assert events[0] == "start" and events[-2:] == ["resume", "finished"]
    assert list_namespaces(LocalHost(), prefix) == []
    status = subprocess.run(_mplab("status", str(c.path)), capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0 and f"{len(c.manifest['plan'])}/{len(c.manifest['plan'])} samples" in status.stdout


def test_a_flagged_sample_is_made_up_by_one_that_runs_on_resume(cleanup, tmp_path, monkeypatch):
    """`mplab run --resume --make-up` on the emulated testbed. The test flags the first transfer's record itself
    (`path-leak`: the emulated paths do not leak), which leaves its case one usable sample short; the make-up adds
    the case's third sample, which runs on the testbed and is recorded as the campaign's own."""
    import harness.campaign.runner as runner_module
    from harness.campaign.entry import RunOptions, run_campaign

    prefix = cleanup
    inv_path, sc_path, runs = tmp_path / "inv.yaml", tmp_path / "sc.yaml", tmp_path / "runs"
    inv_path.write_text(yaml.safe_dump(small_inventory(prefix, [(20, 10)]).model_dump(mode="json")))
    sc_path.write_text(yaml.safe_dump({"schema_version": 1, "name": "makeup", "congestion_controls": ["cubic"],
                                       "receiver_counts": [1], "modes": ["wifi"], "samples_per_case": 2,
                                       "file_size": "1M", "settle_s": 0, "seed": 3}))
    real, calls = runner_module.check_paths, []

    def flag_the_first(mode: str, moved: dict, file_bytes: int) -> list[str]:
        calls.append(mode)
        return real(mode, moved, file_bytes) + (["path-leak: flagged by the test"] if len(calls) == 1 else [])
    monkeypatch.setattr(runner_module, "check_paths", flag_the_first)
    first = run_campaign(RunOptions(scenario=sc_path, inventory=inv_path, runs_dir=runs, campaign_id="m")).campaign
    monkeypatch.undo()
    before = first.records()
    assert len(calls) == 2 and len([r for r in before if r["flags"]]) == 1
    env = {**os.environ, "MPLAB_LOG": "ERROR"}
    res = subprocess.run(_mplab("run", "--resume", str(first.path), "--make-up"), capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "make-up: 1 sample(s) added to 1 short case(s): cubic-n1-wifi 1" in " ".join(res.stdout.split())
    c = Campaign.open(first.path)
    assert c.plan == c.manifest["plan"] + ["cubic-n1-wifi-s003"] and c.damaged() == []
    (new,) = [r for r in c.records() if r["sample_id"] == "cubic-n1-wifi-s003"]
    assert (new["status"], new["flags"], new["sample_index"], new["bytes"]) == ("ok", [], 3, new["file_bytes"])
    assert new["energy_j"] > 0 and (c.path / "raw" / "cubic-n1-wifi-s003" / "attempt-1").is_dir()
    assert c.records()[:2] == before, "the flagged record and the other stay as they were"
    assert list_namespaces(LocalHost(), prefix) == []
    again = subprocess.run(_mplab("run", "--resume", str(c.path), "--make-up", "--dry-run"), capture_output=True,
                           text=True, env=env, timeout=120)
    assert again.returncode == 0 and "nothing would be added" in again.stdout and "would run 0 of its 3" in again.stdout


def test_clean_removes_leftovers_and_is_idempotent(cleanup):
    prefix = cleanup
    root = LocalHost()
    ns = f"{prefix}snd"
    root.run(["ip", "netns", "add", ns])
    sleeper = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "300"])
    state = STATE_ROOT / prefix.rstrip("-")
    state.mkdir(parents=True, exist_ok=True)
    (state / "state.json").write_text(json.dumps({"needs": []}))
    env = {**os.environ, "MPLAB_LOG": "ERROR"}
    first = subprocess.run(_mplab("clean", "--prefix", prefix), capture_output=True, text=True, env=env, timeout=60)
    assert first.returncode == 0 and ns in first.stdout
    assert sleeper.wait(timeout=10) is not None  # the process inside our namespace was stopped
    assert list_namespaces(root, prefix) == [] and not state.exists()
    second = subprocess.run(_mplab("clean", "--prefix", prefix), capture_output=True, text=True, env=env, timeout=60)
    assert second.returncode == 0 and "nothing" in second.stdout
    bad = subprocess.run(_mplab("clean", "--prefix", "other-"), capture_output=True, text=True, env=env, timeout=60)
    assert bad.returncode == 2


def test_a_testbed_never_touches_another_whose_prefix_extends_its_own(cleanup):
    prefix = cleanup
    root = LocalHost()
    other = f"{prefix}x-snd"  # a testbed with prefix "<prefix>x-", e.g. "mplab-" vs "mplab-t1a2b3-"
    root.run(["ip", "netns", "add", other])
    try:
        inv = small_inventory(prefix, [(10, 10)])
        tb = EmulatedTestbed(inv)
        tb.setup([resolve("cubic")])
        tb.teardown()
        assert other in list_namespaces(root, prefix), "setup/teardown removed another testbed's namespace"
        assert list_namespaces(root, prefix, nested=False) == []
    finally:
        clean_prefix(prefix)  # nested: what `mplab clean` does
    assert list_namespaces(root, prefix) == []


@pytest.mark.machine  # compares the machine-wide allowed list before and after: run alone (see `make test`)
def test_allowed_list_is_restored_when_overlapping_testbeds_end_in_either_order(cleanup):
    # A adds a name, B finds it already allowed; A ends first. The name must stay while B runs and go
    # when B ends (B never added it itself: a per-testbed record leaked it).
    prefix = cleanup
    # A kernel CC that is available but not allowed, else one of mplab's BPF struct_ops CCs (`make bpf`):
    # the testbed registers those itself, so on a machine whose allowed list already holds every
    # built-in one (reno bbr cubic here) there is still a name to add and remove.
    available = Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split()
    allowed = _allowed().split()
    ccs = [resolve(n) for n in ("cubic", "reno") if n in available and n not in allowed]
    ccs += [cc for cc in map(resolve, ("lia", "olia", "balia", "wvegas"))
            if cc.sock_name not in available and cc.sock_name not in allowed]
    assert ccs, f"no congestion control left to add and remove (allowed: {_allowed()})"
    cc = ccs[0]
    cc.check(LocalHost())  # a BPF one needs `make bpf`: fail with its reason rather than skip
    name = cc.sock_name
    before = allowed_ccs_apart_from_other_testbeds()
    a = EmulatedTestbed(small_inventory(f"{prefix}a-", [(10, 10)]))
    b_inv = small_inventory(prefix.replace("-t", "-u", 1), [(10, 10)])
    b = EmulatedTestbed(b_inv)
    try:
        a.setup([cc])
        assert name in _allowed().split(), "A added it"
        b.setup([cc])
        a.teardown()
        assert name in _allowed().split(), "B still needs it"
        b.teardown()
        after = allowed_ccs_apart_from_other_testbeds()
        assert after == before, f"allowed list not restored: {after!r} vs {before!r}"
        if name not in available:  # a struct_ops CC the testbeds registered: gone with the last of them
            assert name not in Path("/proc/sys/net/ipv4/tcp_available_congestion_control").read_text().split(), \
                "the struct_ops CC is still registered"
    finally:
        a.teardown()
        b.teardown()
        clean_prefix(b_inv.emulation.namespace_prefix)


def _procs_with(needle: bytes) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def test_the_radio_loop_and_its_tc_processes_run_under_sched_fifo(cleanup):
    """At S > 1 a late re-share is S x as late in testbed time: the loop runs real-time, as the delay line does,
    and the tc processes that write its classes inherit the policy. A loop left at normal priority fails here."""
    from harness.emulation.radiolink import RT_PRIORITY
    prefix = cleanup
    tb = EmulatedTestbed(small_inventory(prefix, [(10, 10), (10, 10)]))
    try:
        tb.setup([resolve("cubic")])
        loops = [p for p in _procs_with(b"harness.emulation.radiolink") if f"{prefix}ap".encode()
                 in Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(loops) == 1, loops
        tcs = [int(p) for p in Path(f"/proc/{loops[0]}/task/{loops[0]}/children").read_text().split()]
        assert len(tcs) == 2, tcs  # one `tc -batch` per access network
        for pid in (loops[0], *tcs):
            assert os.sched_getscheduler(pid) == os.SCHED_FIFO, pid
            assert os.sched_getparam(pid).sched_priority == RT_PRIORITY
    finally:
        tb.teardown()
