"""A lab in a box: a technician's day on boards that are network namespaces running a real OpenSSH server.

The emulated testbed provides the links (a sender, an AP and an eNB namespace, shaped radios) and the
emulated UM25Cs; every receiver is then *unprepared* the way a freshly installed board is: MPTCP off, no
limits, no endpoint, no policy routes or rules, the modem's interface down; known_hosts is empty. Each
step is the command a technician types (``python -m mplab``), against a lab inventory that reaches the
boards over SSH, one meter through ser2net on its board:

``lab keys`` (pins every host key) -> ``preflight`` (FAIL rows) -> ``lab prepare --dry-run`` (changes
nothing) -> ``lab prepare`` with a table on one board that mplab did not write (refused there, done
elsewhere) -> ``lab prepare`` again (that board done, the others unchanged) -> ``preflight`` (all green) ->
``run`` (a short sweep over SSH, to completion) -> one board broken three ways at once (a stopped sshd, a
PATH without iperf3, a wrong route) -> ``preflight`` naming each.

Three receivers, not the lab's nine: the machine running the suite has two cores, and nine namespaces
with their sshd and shaped radios add nothing the three do not show (each step runs on every board).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.hosts.local import NamespaceHost
from rigs.sshrig import lab_inventory, sshd_testbed
from conftest import small_inventory

REPO = Path(__file__).resolve().parents[1]


def _mplab(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "1000", "MPLAB_LOG_FILE": str(cwd / "ssh.log")}
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300, env=env)


def _rows(out: str) -> dict[tuple[str, str], str]:
    """(host, check/step) -> result column of a table printed by preflight or lab prepare/keys."""
    rows = {}
    for ln in out.splitlines():
        cells = [c.strip() for c in ln.split("│")]
        if len(cells) >= 5 and cells[1] and cells[1] != "host":
            rows[(cells[1], cells[2])] = cells[3] + " " + " ".join(cells[4:])
    return rows


def _unprepare(h: NamespaceHost, lte_dev: str) -> None:
    """What a board has before `lab prepare`: what the emulated set-up did for MPTCP and routing, undone."""
    for argv in (["ip", "mptcp", "endpoint", "flush"], ["ip", "mptcp", "limits", "set", "subflows", "0",
                                                         "add_addr_accepted", "0"],
                 ["ip", "rule", "del", "priority", "1000"], ["ip", "rule", "del", "priority", "1001"],
                 ["ip", "route", "flush", "table", "101"], ["ip", "route", "flush", "table", "102"],
                 ["ip", "link", "set", "dev", lte_dev, "down"], ["sysctl", "-q", "-w", "net.mptcp.enabled=0"]):
        h.run(argv)


def _path_without(program: str, where: Path) -> str:
    """A PATH directory with every program of the system's PATH linked in, except ``program``."""
    where.mkdir()
    for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"):
        if not Path(d).is_dir():
            continue
        for f in Path(d).iterdir():
            if f.name != program and not (where / f.name).exists():
                (where / f.name).symlink_to(f)
    return str(where)


@pytest.mark.root
def test_a_technicians_day_on_a_lab_in_a_box(prefix, tmp_path):
    inv = small_inventory(prefix, [(20, 10), (15, 10), (10, 10)])
    with sshd_testbed(inv) as (tb, rig):
        boards = {name: NamespaceHost(name, tb.ns[name]) for name in tb.nodes}
        for name, h in boards.items():
            _unprepare(h, tb.nodes[name].interfaces["lte"].name)
        rig.known_hosts.write_text("")  # nothing pinned yet
        data = lab_inventory(tb, rig, name="box", ser2net={"n2": 24000 + os.getpid() % 1000})
        for i, rx in enumerate(data["receivers"], start=1):  # the next hops the inventory gives prepare
            rx["interfaces"]["wifi"]["gateway"] = f"10.10.{i}.1"
            rx["interfaces"]["lte"]["gateway"] = f"10.20.{i}.1"
        (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data))

        keys = _mplab("lab", "keys", "lab.yaml", cwd=tmp_path)
        assert keys.returncode == 0, keys.stdout + keys.stderr
        assert len(rig.known_hosts.read_text().splitlines()) == 4
        assert all(_rows(keys.stdout)[(n, "host key")].startswith("changed") for n in ("snd", "n1", "n2", "n3"))

        before = _mplab("preflight", "--inventory", "lab.yaml", cwd=tmp_path)
        assert before.returncode == 1 and "Traceback" not in before.stderr, before.stdout + before.stderr
        rows = _rows(before.stdout)
        for n in ("n1", "n2", "n3"):
            assert rows[(n, "MPTCP enabled")].startswith("FAIL"), rows
            assert rows[(n, "route from lte")].startswith("FAIL"), rows
            assert rows[(n, "interface lte (lte0)")].startswith("FAIL"), rows

        dry = _mplab("lab", "prepare", "lab.yaml", "--dry-run", cwd=tmp_path)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        rows = _rows(dry.stdout)
        assert rows[("n1", "MPTCP endpoint 10.20.1.2")].startswith("WOULD CHANGE"), rows
        assert "ip mptcp endpoint add 10.20.1.2 dev lte0 subflow" in rows[("n1", "MPTCP endpoint 10.20.1.2")]
        assert boards["n1"].run(["ip", "mptcp", "endpoint", "show"]).stdout.strip() == ""  # nothing changed

        # A route in n3's LTE table that mplab did not write: left alone, the board reported, the others done.
        boards["n3"].run(["ip", "route", "add", "192.0.2.0/24", "via", "10.10.3.1", "dev", "wlan0", "table", "102"])
        tainted = _mplab("lab", "prepare", "lab.yaml", cwd=tmp_path)
        assert tainted.returncode == 1, tainted.stdout + tainted.stderr
        rows = _rows(tainted.stdout)
        assert rows[("n3", "route lte (table 102)")].startswith("REFUSED"), rows
        assert "mplab did not write" in rows[("n3", "route lte (table 102)")]
        assert "192.0.2.0/24" in boards["n3"].run(["ip", "route", "show", "table", "102"]).stdout
        assert rows[("n1", "route lte (table 102)")].startswith("changed"), rows
        assert "n3" in tainted.stderr and "Traceback" not in tainted.stderr

        boards["n3"].run(["ip", "route", "del", "192.0.2.0/24", "table", "102"])
        again = _mplab("lab", "prepare", "lab.yaml", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        changed = {k for k, v in _rows(again.stdout).items() if v.startswith("changed")}
        assert changed == {("n3", "route lte (table 102)")}, changed  # idempotent: the rest was done already
        assert "nothing to change" in _mplab("lab", "prepare", "lab.yaml", "--dry-run", cwd=tmp_path).stdout

        ready = _mplab("preflight", "--inventory", "lab.yaml", cwd=tmp_path)
        assert ready.returncode == 0, ready.stdout + ready.stderr
        assert "ready" in ready.stdout and "FAIL" not in ready.stdout

        (tmp_path / "box.yaml").write_text(yaml.safe_dump({
            "schema_version": 1, "name": "box", "inventory": "lab.yaml", "congestion_controls": ["cubic"],
            "receiver_counts": [3], "modes": ["both"], "samples_per_case": 1, "file_size": "1M",
            "transfer_timeout_s": 30, "retries": 1, "settle_s": 0, "seed": 1}))
        run = _mplab("run", "box.yaml", "--id", "box", "--runs-dir", "runs", cwd=tmp_path)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        records = [json.loads(ln) for ln in (tmp_path / "runs" / "box" / "samples.jsonl").read_text().splitlines()]
        assert len(records) == 3 and all(r["status"] == "ok" and r["testbed_kind"] == "lab" for r in records), records
        assert all(r["energy_j"] > 0 and r["iface_bytes"]["lte"] > 100_000 for r in records), records  # both paths

        # Break one thing on each board: n1's sshd stopped, n2 without iperf3 on its PATH, n3's LTE route wrong.
        rig.stop("n1")
        rig.restart("n2", env={"PATH": _path_without("iperf3", tmp_path / "bin")})
        boards["n3"].run(["ip", "route", "replace", "default", "via", "10.10.3.1", "dev", "wlan0", "table", "102",
                          "proto", "77"])
        broken = _mplab("preflight", "--inventory", "lab.yaml", cwd=tmp_path)
        assert broken.returncode == 1, broken.stdout + broken.stderr
        rows = _rows(broken.stdout)
        assert rows[("n1", "reachable")].startswith("FAIL") and "cannot connect" in rows[("n1", "reachable")], rows
        assert rows[("n2", "iperf3")].startswith("FAIL") and "iperf3 not found" in rows[("n2", "iperf3")], rows
        assert rows[("n3", "route from lte")].startswith("FAIL") and "via wlan0" in rows[("n3", "route from lte")]
        assert "(on n1, n2, n3)" in broken.stderr and "Traceback" not in broken.stdout + broken.stderr
        (tmp_path / "transcript.txt").write_text("\n\n".join(
            f"$ mplab {what}\n{res.stdout}{res.stderr}rc={res.returncode}" for what, res in (
                ("lab keys lab.yaml", keys), ("preflight --inventory lab.yaml", before),
                ("lab prepare lab.yaml --dry-run", dry), ("lab prepare lab.yaml", tainted),
                ("lab prepare lab.yaml", again), ("preflight --inventory lab.yaml", ready),
                ("run box.yaml", run), ("preflight --inventory lab.yaml", broken))))
        if os.environ.get("MPLAB_BOX_TRANSCRIPT"):
            Path(os.environ["MPLAB_BOX_TRANSCRIPT"]).write_text((tmp_path / "transcript.txt").read_text())
