"""`mplab preflight` on hosts it cannot use: the table always comes, one FAIL row per host, no library traceback."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def not_ssh():
    """A TCP port that answers like a web server, not an SSH server (paramiko: "Error reading SSH protocol banner")."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = srv.accept()
            except OSError:
                continue
            with c:
                c.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    srv.close()


def _lab_inventory(tmp_path: Path, port: int) -> Path:
    """The reference lab inventory with every machine at ``127.0.0.1:port`` (2 receivers)."""
    d = yaml.safe_load((REPO / "inventory" / "lab.yaml").read_text())
    key = tmp_path / "key"
    key.write_text("not used: the handshake fails first\n")
    (tmp_path / "known_hosts").write_text("")
    d["lab"].update(secrets_file=None, groups={})
    d["lab"]["ssh_defaults"].update(key_file=str(key), known_hosts=str(tmp_path / "known_hosts"), connect_timeout_s=2)
    d["receivers"] = d["receivers"][:2]
    for h in [d["sender"], *d["receivers"], *[i for i in d["lab"]["infra"] if "ssh" in i]]:
        h["ssh"] = {"address": "127.0.0.1", "port": port}
    d["lab"]["switch"]["listen"] = f"127.0.0.1:{port}"
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_hosts_that_are_not_ssh_servers_are_fail_rows_in_the_table(tmp_path, not_ssh):
    inv = _lab_inventory(tmp_path, not_ssh)
    log = tmp_path / "ssh.log"
    env = {**os.environ, "MPLAB_LOG_FILE": str(log), "COLUMNS": "1000"}
    res = subprocess.run([sys.executable, "-m", "mplab", "preflight", "--inventory", str(inv)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=60, env=env)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "Traceback" not in out and "paramiko" not in out, out   # the library's traceback went to the log file
    assert "WARNING" not in out, out  # nothing above the table: an unreachable sender is its FAIL row
    assert "preflight: sensors2023-lab (lab)" in res.stdout, out    # the table came
    rows = [ln for ln in res.stdout.splitlines() if " reachable " in ln]
    hosts = ("snd", "rx1", "rx2", "enb", "epc", "ap-rx", "ap-snd", "sw1")
    for host in hosts:
        (row,) = [ln for ln in rows if ln.split("│")[1].strip() == host]
        assert "FAIL" in row and "not an SSH server" in row and "ssh section" in row, row
    # the count: each host's reachable row, and the LTE version rows of the eNodeB and the EPC
    assert f"error: 10 essential check(s) failed (on {', '.join(hosts)})" in res.stderr, res.stderr
    assert "Error reading SSH protocol banner" in log.read_text()
