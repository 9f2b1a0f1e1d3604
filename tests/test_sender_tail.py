"""The emulated sender's idle tail (harness.emulation.sendertail), on real processes.

A "server" writes the file into a pipe of 1 MiB, then does what iperf3's server does after its last write in
reverse mode with -n: select on a writable descriptor with nothing to write, at once, again, until its client
says it has read everything. A "client" reads fast until 1 MiB is left, then slowly (or not at all for a while).
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import small_inventory

from harness.campaign.campaign import start_campaign
from harness.config.inventory import Inventory
from harness.config.load import parse_model
from harness.config.scenario import Scenario
from harness.emulation import sendertail
from harness.emulation.sendertail import SenderTail
from harness.upkeep.clean import clean_prefix

MIB = 1 << 20
NBYTES = 4 * MIB

SERVER = r"""
import fcntl, os, select, sys
n, spin_from = int(sys.argv[1]), int(sys.argv[2])
w = int(sys.argv[3]); done = int(sys.argv[4])
fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)
null = os.open("/dev/null", os.O_WRONLY)
block = b"x" * 65536
sent = 0
while sent < n:
    if sent >= spin_from:  # spin before the end: must never be stopped
        t = os.times().elapsed
        while os.times().elapsed - t < 0.3:
            select.select([], [null], [], 1.0)
        spin_from = n
    sent += os.write(w, block[:min(len(block), n - sent)])
while not select.select([done], [null], [], 1.0)[0]:
    pass
"""

CLIENT = r"""
import os, sys, time
n, r, done, pause = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
got = 0
paused = False
while got < n:
    if n - got <= (1 << 20):
        if not paused and pause:
            time.sleep(pause)
            paused = True
        time.sleep(0.01)
    got += len(os.read(r, 32768))
os.write(done, b"!")
"""


def _pair(spin_from: int = NBYTES, pause: float = 0.0) -> tuple[subprocess.Popen, subprocess.Popen]:
    import os
    r, w = os.pipe()
    done_r, done_w = os.pipe()
    server = subprocess.Popen([sys.executable, "-S", "-c", SERVER, str(NBYTES), str(spin_from), str(w),
                               str(done_r)], pass_fds=(w, done_r))
    client = subprocess.Popen([sys.executable, "-S", "-c", CLIENT, str(NBYTES), str(r), str(done_w), str(pause)],
                              pass_fds=(r, done_w))
    for fd in (r, w, done_r, done_w):
        os.close(fd)
    return server, client


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def _stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped, within 100 ms: SIGSTOP lands when the kernel next runs the target."""
    settle = time.monotonic() + 0.1
    while _state(pid) != "T" and time.monotonic() < settle:
        time.sleep(0.001)
    return _state(pid) == "T"


def _drive(tail: SenderTail, server: subprocess.Popen, client: subprocess.Popen) -> dict:
    """Look like the runner's wait loop until both have exited; what was seen of the server on the way."""
    seen = {"stopped_wchar": [], "longest_idle_client_s": 0.0}
    deadline = time.monotonic() + 30
    try:
        while server.poll() is None or client.poll() is None:
            assert time.monotonic() < deadline, "the pair did not finish"
            tail.look()
            p = tail.pairs["rx"]
            if server.poll() is None and _state(server.pid) == "T":
                seen["stopped_wchar"].append(sendertail.io_field(server.pid, "wchar"))
                if client.poll() is None:
                    idle = time.monotonic() - p.read_grew_at
                    seen["longest_idle_client_s"] = max(seen["longest_idle_client_s"], idle)
            assert p.state != "paused" or _stopped(server.pid)
            time.sleep(0.005)
    finally:
        tail.release()
        for proc in (server, client):
            if proc.poll() is None:
                proc.kill()
    return seen


def test_a_server_spinning_after_its_last_write_is_stopped_while_its_client_reads():
    server, client = _pair()
    tail = SenderTail({"rx": (server.pid, client.pid)}, NBYTES)
    seen = _drive(tail, server, client)
    p = tail.pairs["rx"]
    assert seen["stopped_wchar"], "the spinning server was never stopped"
    assert min(seen["stopped_wchar"]) >= NBYTES, "stopped before it had written the file"
    # The client read its last MiB at 32 KiB per 10 ms (about 0.3 s): the server was stopped for most of it, and
    # continued once its client went quiet (it then saw the client's word and exited: a stopped one cannot).
    assert p.paused_s > 0.1 and p.state == "done"
    assert server.returncode == 0 and client.returncode == 0


def test_a_server_that_spins_before_its_last_write_is_left_alone():
    server, client = _pair(spin_from=NBYTES // 2)
    tail = SenderTail({"rx": (server.pid, client.pid)}, NBYTES)
    seen = _drive(tail, server, client)
    assert all(w >= NBYTES for w in seen["stopped_wchar"])
    assert server.returncode == 0 and client.returncode == 0


def test_a_quiet_client_gets_its_server_back_and_a_server_spinning_again_is_stopped_again():
    server, client = _pair(pause=0.5)
    tail = SenderTail({"rx": (server.pid, client.pid)}, NBYTES)
    seen = _drive(tail, server, client)
    p = tail.pairs["rx"]
    # Over the client's 0.5 s without a read the server was continued within IDLE_S (plus a look or two), spun,
    # and was stopped again: several pauses, none held long against a quiet client.
    assert p.pauses >= 3 and p.state == "done", p
    assert seen["longest_idle_client_s"] < 0.25  # well inside the client's 0.5 s: it got its server back in it
    assert server.returncode == 0 and client.returncode == 0


def test_release_continues_a_stopped_server_and_a_gone_process_ends_the_watch():
    server, client = _pair(pause=10.0)
    tail = SenderTail({"rx": (server.pid, client.pid)}, NBYTES)
    try:
        deadline = time.monotonic() + 15
        while tail.pairs["rx"].state != "paused":
            assert time.monotonic() < deadline, "never stopped"
            tail.look()
            time.sleep(0.005)
        assert _stopped(server.pid)
        tail.release()
        time.sleep(0.05)
        assert _state(server.pid) != "T" and tail.pairs["rx"].state == "done"
    finally:
        server.kill()
        client.kill()
        server.wait()
        client.wait()
    gone = SenderTail({"rx": (server.pid, client.pid)}, NBYTES)
    gone.look()  # both processes are gone: no error, nothing paused
    assert gone.pairs["rx"].state == "done" and gone.paused_s("rx") == 0


@pytest.mark.parametrize("value, on", [(None, True), ("off", False), ("0", False), ("on", True)])
def test_the_pause_can_be_turned_off_for_the_bench(value, on):
    assert sendertail.sender_pause({} if value is None else {sendertail.SENDER_PAUSE_ENV: value}) is on


@pytest.mark.root
@pytest.mark.machine  # real time: run alone (see `make test`)
def test_the_emulated_testbeds_iperf3_server_is_paused_after_its_last_write(tmp_path, prefix):
    # One receiver, LTE at 4 Mbit/s behind 400 ms of buffer: Cubic fills the queue, the sender's socket grows to
    # hold twice its window, and once the server has written the last byte and the socket has room again, the
    # kernel still needs a good part of a second to deliver the rest: iperf3 spins over it.
    doc = small_inventory(prefix, [(20, 4)]).model_dump(mode="json")
    doc["receivers"][0]["interfaces"]["lte"]["channel"]["buffer_ms"] = 400
    inv = Inventory.model_validate(doc)
    sc = parse_model(Scenario, {"name": "tail", "congestion_controls": ["cubic"], "receiver_counts": [1],
                                "modes": ["lte"], "samples_per_case": 1, "file_size": "2M", "retries": 0}, "test")
    try:
        c = start_campaign(sc, inv, tmp_path / "runs", campaign_id="tail")
    finally:
        clean_prefix(prefix, nested=False)
    (r,) = c.records()
    assert r["status"] == "ok", r["error"]
    assert 3.6 < r["throughput_mbit"] < 4.1, r["throughput_mbit"]  # the pause took nothing from the link
    assert r["sender_paused_s"] is not None and 0.1 < r["sender_paused_s"] < r["duration_s"], r
