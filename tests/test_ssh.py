"""SSHHost against a real OpenSSH server running inside a network namespace of ours."""
from __future__ import annotations

import os
import threading
import uuid

import pytest

from harness.errors import CommandError, CommandTimeout, ConfigError, HostUnreachable
from harness.hosts.local import GATE_ABORTED, LocalHost, NamespaceHost
from harness.hosts.ssh import SSHHost, remote_command
from rigs.sshrig import SshdRig


def test_remote_command_is_one_quoted_line():
    cmd = remote_command(["echo", "a b", "$HOME;rm"])
    assert cmd == "setsid -w sh -c 'echo \"mplab-pgid:$$\" >&2; exec \"$@\"' mplab-ssh echo 'a b' '$HOME;rm'"
    assert "read -r" in remote_command(["true"], gated=True)


def test_bad_policy_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="host_key_policy"):
        SSHHost("x", "192.0.2.1", user="root", key_file=tmp_path / "k", known_hosts=tmp_path / "kh",
                host_key_policy="yes")


@pytest.fixture
def rig(prefix):
    root = LocalHost()
    ns = f"{prefix}a"
    r = None
    try:
        root.run(["ip", "netns", "add", ns])
        r = SshdRig(prefix)
        r.add("a", ns)
        yield r
    finally:
        if r is not None:
            r.close()
        from harness.upkeep.clean import clean_prefix
        clean_prefix(prefix)


@pytest.fixture
def host(rig):
    h = rig.ssh_host("a")
    yield h
    h.close()


def _alive(rig, marker: str) -> list[str]:
    """Processes in the rig's namespace whose command line contains ``marker`` (checked from outside SSH)."""
    ns = rig.entries["a"].netns
    out = []
    for pid in LocalHost().run(["ip", "netns", "pids", ns]).stdout.split():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
        except FileNotFoundError:
            continue
        if marker in cmd:
            out.append(cmd)
    return out


@pytest.mark.root
def test_run_files_and_exit_codes(host, rig):
    res = host.run(["ip", "-br", "addr", "show", "mgmt0"])
    assert rig.entries["a"].address in res.stdout  # the command ran inside the namespace
    assert host.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False).returncode == 3
    with pytest.raises(CommandError, match="exited 3"):
        host.run(["sh", "-c", "exit 3"])
    assert host.run(["cat"], input="x y\n").stdout == "x y\n"
    assert host.run(["printf", "%s", "a'b \"c\" $d"]).stdout == "a'b \"c\" $d"
    assert host.which("sh") and host.which("no-such-program-mplab") is None
    path = f"/tmp/mplab-ssh-test-{uuid.uuid4().hex}"
    try:
        host.write_file(path, b"\x00\x01data", 0o600)
        assert host.read_file(path) == b"\x00\x01data"
        assert (os.stat(path).st_mode & 0o777) == 0o600
        assert host.exists(path)
    finally:
        os.unlink(path)
    assert host.read_text("/proc/sys/net/mptcp/enabled").strip() in ("0", "1")
    assert abs(host.clock_offset_s()) < 0.5  # same machine, same clock


@pytest.mark.root
def test_connection_is_reused(host):
    for _ in range(5):
        host.run(["true"])
    assert len(host._conns) == 1
    # More concurrent channels than one connection may carry: a second connection opens.
    procs = [host.start(["sleep", "30"]) for _ in range(host.channels_per_connection + 2)]
    try:
        assert len(host._conns) == 2
        assert all(p.poll() is None for p in procs)
    finally:
        for p in procs:
            p.stop(grace_s=1.0)


@pytest.mark.root
def test_stop_kills_the_whole_remote_group(host, rig):
    marker = f"mplab-marker-{uuid.uuid4().hex[:8]}"
    # A child that ignores SIGINT and SIGTERM, under a shell: only the group SIGKILL gets it.
    inner = "trap '' INT TERM; sleep 300; :"
    p = host.start(["sh", "-c", f"trap '' INT TERM; sh -c \"{inner}\" \"$0\" & wait", marker])
    assert p.pgid is not None
    for _ in range(100):
        if _alive(rig, marker):
            break
        threading.Event().wait(0.02)
    assert _alive(rig, marker)
    res = p.stop(grace_s=0.5)
    assert res.stopped
    assert _alive(rig, marker) == []
    assert p.stop() is res  # idempotent


@pytest.mark.root
def test_timeout_kills_the_command(host, rig):
    marker = f"mplab-marker-{uuid.uuid4().hex[:8]}"
    with pytest.raises(CommandTimeout, match="killed after"):
        host.run(["sh", "-c", "sleep 300; :", marker], timeout=1.0)
    assert _alive(rig, marker) == []


@pytest.mark.root
@pytest.mark.parametrize("bash5", [True, False], ids=["bash-gate", "posix-gate"])
def test_gated_start(host, bash5):
    host._bash5 = bash5  # the POSIX gate serves hosts without bash 5
    p = host.start(["echo", "go"], gated=True)
    assert p.poll() is None  # held at the gate
    t = p.release()
    res = p.wait(10)
    assert res.stdout == "go\n" and res.returncode == 0
    assert res.released_at is not None and abs(res.released_at - t) < 5
    q = host.start(["echo", "never"], gated=True)
    res = q.stop()
    assert res.stdout == "" and res.returncode == GATE_ABORTED


@pytest.mark.root
def test_host_key_mismatch_is_refused(rig, tmp_path):
    e = rig.entries["a"]
    other = tmp_path / "other"
    LocalHost().run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)])
    kh = tmp_path / "known_hosts"
    kind, b64 = (tmp_path / "other.pub").read_text().split()[:2]
    kh.write_text(f"{e.address} {kind} {b64}\n")
    for policy in ("strict", "accept-new"):  # a changed key is refused under either policy
        h = SSHHost("a", e.address, user="root", key_file=rig.user_key, known_hosts=kh, host_key_policy=policy)
        with pytest.raises(HostUnreachable, match="HOST KEY MISMATCH"):
            h.run(["true"])


@pytest.mark.root
def test_unknown_host_needs_accept_new(rig, tmp_path):
    e = rig.entries["a"]
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    strict = SSHHost("a", e.address, user="root", key_file=rig.user_key, known_hosts=kh)
    with pytest.raises(HostUnreachable, match="not in .*known_hosts"):
        strict.run(["true"])
    new = SSHHost("a", e.address, user="root", key_file=rig.user_key, known_hosts=kh, host_key_policy="accept-new")
    new.run(["true"])
    new.close()
    assert e.address in kh.read_text()
    strict.run(["true"])  # now known
    strict.close()


@pytest.mark.root
def test_host_that_stops_answering(rig, host):
    host.run(["true"])
    ns = NamespaceHost("a", rig.entries["a"].netns)
    # Drop the management link under the live connection: packets vanish, nothing is refused.
    ns.run(["ip", "link", "set", "mgmt0", "down"])
    with pytest.raises((HostUnreachable, CommandTimeout)):
        host.run(["true"], timeout=2.0)
    ns.run(["ip", "link", "set", "mgmt0", "up"])


def test_bash_gate_stamps_with_a_builtin():
    cmd = remote_command(["iperf3", "-c", "x"], gated=True, bash_gate=True)
    assert "EPOCHREALTIME" in cmd and "date" not in cmd and cmd.endswith("mplab-gate iperf3 -c x")
