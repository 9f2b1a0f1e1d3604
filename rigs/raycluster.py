"""A Ray cluster on this machine for tests: a head and workers, each `ray start --block` in its own session.

Every node gets its own ports (GCS, node manager, object manager, dashboard agent, metrics,
runtime-env agent, a worker-port range) and its own ``--object-store-memory``
(each node would reserve as if it had the machine), all on 127.0.0.1; no dashboard.
``stop`` kills the node's whole process tree and session by pid, SIGTERM then SIGKILL
(``gcs_server`` and the monitor ignore SIGTERM): never ``ray stop``, which kills every Ray
process on the machine by name. Ray still listens on every interface: tests only.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.hosts.ready import wait_until

RAY = Path(sys.executable).parent / "ray"


#: Every port (and worker-port range) this process handed to a Ray node: Ray refuses a node whose
#: components share a port, and a port inside another node's worker range fails later, when a worker binds it.
_HANDED: set[int] = set()
WORKER_PORTS = 41


def free_port() -> int:
    """A port nothing listens on now and that was not handed to a node of this process before."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED:
            _HANDED.add(port)
            return port


def worker_port_range() -> tuple[int, int]:
    """A worker-port range none of whose ports was handed out before (all of them reserved from now on)."""
    while True:
        probe = free_port()
        base = probe // 100 * 100
        ports = set(range(base, base + WORKER_PORTS))
        if not (ports - {probe}) & _HANDED:
            _HANDED.update(ports)
            return base, base + WORKER_PORTS - 1


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[3])


def tree(root: int) -> set[int]:
    """``root``, its descendants, and every process of the session it leads."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                procs[int(d)] = st
    out = {root} if root in procs else set()
    out |= {p for p, (_, sid) in procs.items() if sid == root}
    grew = True
    while grew:
        kids = {p for p, (ppid, _) in procs.items() if ppid in out} - out
        grew = bool(kids)
        out |= kids
    return out


@dataclass
class RayNode:
    """One `ray start --block` process (head or worker) and what it started."""

    name: str
    argv: list[str]
    log: Path
    node_manager_port: int
    proc: subprocess.Popen | None = None
    _seen: set[int] = field(default_factory=set)

    def start(self) -> None:
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True)

    def pids(self) -> set[int]:
        if self.proc is None:
            return set()
        self._seen |= tree(self.proc.pid)
        return {p for p in self._seen if _stat(p) is not None}

    def stop(self, grace_s: float = 5.0, kill: bool = False) -> None:
        """Stop every process of this node by pid (SIGKILL at once with ``kill``, as a crash); idempotent."""
        if self.proc is None:
            return
        for sig, wait_s in ([(signal.SIGKILL, 10.0)] if kill else [(signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)]):
            alive = self.pids()
            for pid in alive:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + wait_s
            while self.pids() and time.monotonic() < deadline:
                if self.proc.poll() is None:
                    pass
                time.sleep(0.1)
            if not self.pids():
                break
        self.proc.poll()


def node_argv(*, head: bool, address: str | None, port: int | None, resources: dict, temp_dir: Path,
              object_store_bytes: int, node_manager_port: int) -> list[str]:
    argv = [str(RAY), "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
            f"--resources={json.dumps(resources)}", f"--object-store-memory={object_store_bytes}",
            f"--node-manager-port={node_manager_port}", f"--object-manager-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}",
            "--disable-usage-stats"]
    low, high = worker_port_range()
    argv += [f"--min-worker-port={low}", f"--max-worker-port={high}"]
    if head:
        argv += [f"--port={port}", "--head", "--include-dashboard=false", f"--temp-dir={temp_dir}"]
    else:
        argv += [f"--address={address}"]
    return argv


def start_node(name: str, workdir: Path, *, head: bool, address: str | None = None, port: int | None = None,
               resources: dict | None = None, object_store_bytes: int = 80 * 2**20) -> RayNode:
    nm = free_port()
    argv = node_argv(head=head, address=address, port=port, resources=resources or {}, temp_dir=workdir,
                     object_store_bytes=object_store_bytes, node_manager_port=nm)
    node = RayNode(name, argv, workdir / f"{name}.log", nm)
    node.start()
    return node


def wait_port(port: int, proc: subprocess.Popen, log: Path, deadline_s: float) -> None:
    """Wait until the ray head listens on ``port``; ``NotReady`` with the end of its log if not."""
    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_until(listening, deadline_s, f"ray head listening on {port}", proc=proc, poll_s=0.2,
               detail=lambda: log.read_text()[-2000:])
