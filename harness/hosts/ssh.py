"""SSH hosts: a lab machine reached over SSH, with the same interface as a namespace.

``SSHHost`` implements ``harness.hosts.local.Host`` on fabric (connection set-up and
configuration) and paramiko (one exec channel per command, SFTP for files). What it
guarantees:

* **Key-based auth only** (no agent, no ``~/.ssh`` keys picked up by accident, no
  passwords). **Host keys are verified** against the given ``known_hosts`` file; an
  unknown host is refused unless its policy is ``accept-new`` (then the key is
  appended to that file), and a *changed* key is always refused.
* **One connection per host, reused** by every command (each command is a new channel
  on the same transport); it is re-opened if it dropped.
* **Deadlines everywhere**: on connect, on opening a channel, and on every command.
* **Background processes really stop.** Every remote command runs as
  ``setsid -w sh -c 'echo "mplab-pgid:$$" >&2; exec "$@"' ...``: a new session whose
  process group id the remote side reports on stderr (after whatever the login
  shell's rc files print). ``stop()`` signals that whole group
  (SIGINT, then SIGTERM, then SIGKILL) over a second channel and finally checks that
  nothing of the group is left. Closing an SSH channel alone would leave the
  process running on the host.

The one shell string sent over the wire is ``shlex.join`` of that wrapper plus the
caller's argument list (see ``remote_command``), easy to check in a test.
"""
from __future__ import annotations

import io
import logging
import os
import shlex
import socket
import stat
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import paramiko
from fabric import Config, Connection

from harness.errors import CommandError, CommandTimeout, ConfigError, HostUnreachable, MplabError
from harness.hosts.local import GATE_NAME, BackgroundProcess, CommandResult, Host, ProcessResult

log = logging.getLogger("mplab.ssh")

#: Reports the new session's process-group id on stderr's first line, then becomes the command.
_LAUNCH = 'echo "mplab-pgid:$$" >&2; exec "$@"'
_LAUNCH_NAME = "mplab-ssh"

#: Host-key policies: "strict" refuses hosts missing from known_hosts, "accept-new" adds them.
HOST_KEY_POLICIES = ("strict", "accept-new")

#: Where paramiko's own log lines go (``library_log_file``): its transport thread logs every failed handshake
#: with a full traceback at ERROR, while mplab reports the same failure as one HostUnreachable line.
LOG_FILE_ENV = "MPLAB_LOG_FILE"


def library_log_file() -> Path:
    """The file paramiko's log goes to: ``$MPLAB_LOG_FILE``, else ``$XDG_STATE_HOME/mplab/ssh.log``
    (``~/.local/state/mplab/ssh.log``)."""
    if os.environ.get(LOG_FILE_ENV):
        return Path(os.environ[LOG_FILE_ENV]).expanduser()
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "mplab" / "ssh.log"


class _LibraryLog(logging.FileHandler):
    """The handler ``route_library_logs`` installs (its type marks it as installed)."""


def route_library_logs() -> Path | None:
    """Send paramiko's log to ``library_log_file()`` instead of the screen; idempotent. Returns the file
    (None when it cannot be written: then paramiko's lines are dropped, never shown)."""
    lib = logging.getLogger("paramiko")
    # NB: checked on the logger, not a module flag: the handler is the state, and it is there only once.
    for h in lib.handlers:
        if isinstance(h, _LibraryLog):
            return Path(h.baseFilename)
    lib.propagate = False
    path = library_log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = _LibraryLog(path, delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    except OSError:
        lib.addHandler(logging.NullHandler())
        return None
    lib.addHandler(handler)
    return path


#: Gates (see ``harness.hosts.local.GATE_SCRIPT``) that report the process-group id themselves, right
#: before they block on stdin: the id doubles as "ready to be released", so nothing that runs
#: before (sshd's fork, the login shell's rc files) can fall between release and start.
#: The bash variant stamps the release with ``$EPOCHREALTIME``, a builtin: forking ``date`` costs a
#: few ms per receiver on a small board, all of it skew. ``--norc``: a bash started under sshd
#: would otherwise source ~/.bashrc. Hosts without bash 5 get the POSIX variant.
BASH_GATE_SCRIPT = ('echo "mplab-pgid:$$" >&2; IFS= read -r _ || exit 97; '
                    'printf "%s\\n" "${EPOCHREALTIME/,/.}" >&2; exec "$@"')
SH_GATE_SCRIPT = 'echo "mplab-pgid:$$" >&2; IFS= read -r _ || exit 97; date +%s.%N >&2; exec "$@"'


def remote_command(argv: Sequence[str], gated: bool = False, bash_gate: bool = False) -> str:
    """The exact command line sent to the remote host for ``argv``."""
    if gated and bash_gate:
        inner = ["bash", "--norc", "-c", BASH_GATE_SCRIPT, GATE_NAME, *argv]
    elif gated:
        inner = ["sh", "-c", SH_GATE_SCRIPT, GATE_NAME, *argv]
    else:
        inner = ["sh", "-c", _LAUNCH, _LAUNCH_NAME, *argv]
    return shlex.join(["setsid", "-w", *inner])


class _SaveNewPolicy(paramiko.MissingHostKeyPolicy):
    """``accept-new``: trust a host seen for the first time and record its key in known_hosts."""

    def __init__(self, known_hosts: Path) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key) -> None:  # paramiko's signature
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with open(self.known_hosts, "a") as f:
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        log.warning("%s: host key %s %s added to %s (accept-new)", hostname, key.get_name(),
                    key.fingerprint if hasattr(key, "fingerprint") else "", self.known_hosts)


class _RemoteProcess(BackgroundProcess):
    """A command on an SSH host, in its own remote session; output drained by two reader threads."""

    def __init__(self, host: SSHHost, argv: Sequence[str], label: str, gated: bool,
                 input: str | None, open_timeout_s: float, keep_stdin: bool = False,
                 start_timeout_s: float = 30.0) -> None:
        super().__init__(host.name, argv, label)
        self._host = host
        self._gated = gated
        self._out = bytearray()
        self._err = bytearray()
        self._pgid_event = threading.Event()
        self.pgid: int | None = None
        self._result: ProcessResult | None = None
        self._stopped = False
        self._released = False
        self._eof_pending = False
        self._lock = threading.Lock()
        command = remote_command(argv, gated, gated and host.has_bash5())
        self._chan = host._open_channel(open_timeout_s)
        try:
            self._chan.exec_command(command)
        except (paramiko.SSHException, OSError) as exc:
            self._chan.close()
            raise HostUnreachable(f"[{host.name}] cannot start {shlex.join(argv)}: {exc}") from None
        self._readers = [threading.Thread(target=self._pump, args=(self._chan.recv, self._out, False), daemon=True),
                         threading.Thread(target=self._pump, args=(self._chan.recv_stderr, self._err, True),
                                          daemon=True)]
        for t in self._readers:
            t.start()
        if input is not None:
            self._chan.sendall(input.encode())
        if not gated and not keep_stdin:
            self._chan.shutdown_write()  # EOF on stdin, as with stdin=DEVNULL locally
        # A gated process reports its id once blocked on its release: ``wait_ready`` waits for it, so
        # the runner starts every receiver's client first and waits for them together.
        if not gated:
            try:
                self._wait_pgid(start_timeout_s)
            except MplabError:
                self._chan.close()
                raise

    def _wait_pgid(self, timeout_s: float) -> None:
        """Wait for the process-group id (without it the process could not be stopped)."""
        if self.pgid is not None:
            return
        # The deadline is generous: sshd forks and the login shell reads its rc files first.
        if not self._pgid_event.wait(timeout_s):
            raise CommandTimeout(self.host, self.argv, None,
                                 note=f"no process id within {timeout_s:.1f} s (is util-linux `setsid` installed "
                                      "on the host? is it overloaded?)")
        if self.pgid is None:
            self._finish_readers(1.0)
            err = self._err.decode(errors="replace")
            raise CommandError(self.host, self.argv, self._chan.recv_exit_status()
                               if self._chan.exit_status_ready() else None, err, note="remote launcher failed")

    def wait_ready(self, timeout: float) -> None:
        if not self._gated:
            raise RuntimeError(f"{self.label}: not a gated process")
        self._wait_pgid(timeout)

    def _pump(self, recv, buf: bytearray, is_stderr: bool) -> None:
        while True:
            try:
                data = recv(65536)
            except (OSError, EOFError, paramiko.SSHException):
                data = b""
            if not data:
                break
            with self._lock:
                buf += data
                if is_stderr and self.pgid is None:
                    # Lines before the marker come from the login shell's rc files, not from us.
                    head, marker, rest = bytes(buf).partition(b"mplab-pgid:")
                    if marker and b"\n" in rest:
                        pid, _, rest = rest.partition(b"\n")
                        if head.strip():
                            log.debug("[%s] login shell said: %s", self.host, head.decode(errors="replace").strip())
                        self.pgid = int(pid)
                        buf[:] = rest
                        self._pgid_event.set()
        if is_stderr:
            self._pgid_event.set()

    def _finish_readers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._readers:
            t.join(max(0.0, deadline - time.monotonic()))

    def poll(self) -> int | None:
        if self._eof_pending:
            self._eof_pending = False
            try:
                self._chan.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException):
                pass
        if self._result is not None:
            return self._result.returncode
        if self._chan.exit_status_ready():
            return self._chan.recv_exit_status()
        return None

    def send(self, data: bytes) -> None:
        """Write to the process's stdin."""
        self._chan.sendall(data)

    def stdout_so_far(self) -> bytes:
        """What the process has written to stdout until now."""
        with self._lock:
            return bytes(self._out)

    def release(self) -> float:
        if not self._gated:
            raise RuntimeError(f"{self.label}: not a gated process")
        self._wait_pgid(30.0)
        self._chan.sendall(b"\n")
        self._released = True
        # EOF on stdin is sent on the next poll: one packet per release keeps the release loop short.
        self._eof_pending = True
        return time.time()

    def _finish(self, returncode: int | None, note: str = "") -> ProcessResult:
        if self._result is not None:
            return self._result
        exited_at = time.time()
        self._finish_readers(2.0)
        self._chan.close()
        with self._lock:
            stdout = self._out.decode(errors="replace")
            stderr = self._err.decode(errors="replace")
        released_at = None
        if self._gated:
            first, _, rest = stderr.partition("\n")
            try:
                # Map the host's clock to the orchestrator's, so releases compare across hosts.
                released_at = float(first) - (self._host.orchestrator_offset_s or 0.0)
                stderr = rest
            except ValueError:
                released_at = None
        # setsid -w reports a child killed by a signal on stderr; that is our stop, not the program's output.
        stderr = "".join(ln for ln in stderr.splitlines(keepends=True)
                         if not (self._stopped and ln.startswith("setsid: child ")))
        if note:
            stderr += f"\n[mplab] {note}\n"
        self._result = ProcessResult(returncode, stdout, stderr, released_at, exited_at, self._stopped)
        return self._result

    def wait(self, timeout: float) -> ProcessResult:
        if self._result is not None:
            return self._result
        if not self._chan.status_event.wait(timeout):
            raise CommandTimeout(self.host, self.argv, None, note=f"still running after {timeout:.1f} s")
        return self._finish(self._chan.recv_exit_status())

    def stop(self, grace_s: float = 2.0) -> ProcessResult:
        """Signal the remote process group up to SIGKILL; never raises (a dead host gets a note)."""
        if self._result is not None:
            return self._result
        note = ""
        if not self._chan.exit_status_ready():
            self._stopped = True
            try:
                self._chan.shutdown_write()  # an unreleased gate (or a stdin loop) exits on EOF
            except (OSError, EOFError, paramiko.SSHException):
                pass
            if self.pgid is None:
                self._pgid_event.wait(grace_s)  # a gated start still on its way: its id is needed to stop it
            if self._gated and not self._released and self._chan.status_event.wait(grace_s):
                # The gate read EOF and exited (97) by itself: a signal sent meanwhile raced that exit
                # (a loaded host answered with the shell's own status instead of the gate's).
                return self._finish(self._chan.recv_exit_status())
            try:
                note = self._host._kill_group(self.pgid, self._chan.status_event, grace_s)
            except Exception as exc:  # noqa: BLE001 - stop must always return; the reason goes to stderr
                note = f"could not stop process group {self.pgid} on {self.host}: {exc}"
                log.warning(note)
        rc = self._chan.recv_exit_status() if self._chan.exit_status_ready() else None
        return self._finish(rc, note)


class SSHHost(Host):
    """A machine reached over SSH (fabric/paramiko), with the namespace host's interface.

    Args:
        name: the host's name in the inventory (used in logs and errors).
        address: DNS name or IP address to connect to.
        user: login user (root, or a user allowed to run the lab commands).
        key_file: private key for authentication (the only method used).
        known_hosts: file the host key is verified against.
        host_key_policy: "strict" (refuse unknown hosts) or "accept-new" (add them to ``known_hosts``).
        port: SSH port.
        connect_timeout_s: deadline for TCP connect, banner and authentication.
        channels_per_connection: channels multiplexed on one connection before another is opened
            (keep it below the host sshd's MaxSessions, default 10).

    Example:
        >>> h = SSHHost("rx1", "192.0.2.11", user="root", key_file="~/.ssh/mplab",   # doctest: +SKIP
        ...             known_hosts="inventory/known_hosts")
        >>> h.run(["uname", "-r"]).stdout                                        # doctest: +SKIP
    """

    kind = "ssh"

    def __init__(self, name: str, address: str, *, user: str, key_file: str | Path, known_hosts: str | Path,
                 host_key_policy: str = "strict", port: int = 22, connect_timeout_s: float = 10.0,
                 channels_per_connection: int = 8) -> None:
        super().__init__(name)
        # A failed handshake is ours to report (HostUnreachable, one line); paramiko's traceback of it goes to a file.
        route_library_logs()
        if host_key_policy not in HOST_KEY_POLICIES:
            raise ConfigError(f"host {name}: host_key_policy {host_key_policy!r} is not one of {HOST_KEY_POLICIES}")
        self.address = address
        self.port = port
        self.user = user
        self.key_file = Path(key_file).expanduser()
        self.known_hosts = Path(known_hosts).expanduser()
        self.host_key_policy = host_key_policy
        self.connect_timeout_s = connect_timeout_s
        self.channels_per_connection = channels_per_connection
        self._conns: list[Connection] = []
        self._sftp: paramiko.SFTPClient | None = None
        #: This host's clock minus the orchestrator's, once measured (``LabTestbed.setup`` sets it);
        #: gated releases are reported in the orchestrator's clock with it.
        self.orchestrator_offset_s: float | None = None
        self.last_offset_rtt_s: float | None = None
        self._bash5: bool | None = None
        self._conn_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SSHHost({self.name!r}, {self.user}@{self.address}:{self.port})"

    # ------------------------------------------------------------ connection

    def _new_connection(self) -> Connection:
        if not self.key_file.exists():
            raise ConfigError(f"host {self.name}: SSH key {self.key_file} does not exist")
        if not self.known_hosts.exists() and self.host_key_policy == "strict":
            raise HostUnreachable(
                f"[{self.name}] known_hosts file {self.known_hosts} does not exist and the host key policy is "
                f"strict: add the host's key (ssh-keyscan -p {self.port} {self.address} >> {self.known_hosts}, "
                "after checking its fingerprint) or set host_key_policy: accept-new for this host")
        # No ~/.ssh/config, no agent, no default keys: only what the inventory says.
        config = Config(overrides={"load_ssh_configs": False})
        conn = Connection(self.address, user=self.user, port=self.port, config=config,
                          connect_timeout=max(1, round(self.connect_timeout_s)),
                          connect_kwargs={"key_filename": [str(self.key_file)], "allow_agent": False,
                                          "look_for_keys": False, "banner_timeout": self.connect_timeout_s,
                                          "auth_timeout": self.connect_timeout_s})
        client = conn.client
        # NB: fabric installs AutoAddPolicy by default; we never want silent trust.
        if self.known_hosts.exists():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(
            _SaveNewPolicy(self.known_hosts) if self.host_key_policy == "accept-new" else paramiko.RejectPolicy())
        return conn

    def connect(self) -> paramiko.Transport:
        """A live transport with room for one more channel, opening a connection if needed.

        sshd allows ``MaxSessions`` (default 10) channels per connection, and a sender runs
        one iperf3 server per receiver; so once a connection carries ``channels_per_connection``
        channels, another connection is opened (and reused from then on).
        ``HostUnreachable`` with the reason if connecting fails.
        """
        with self._conn_lock:
            live = []
            for conn in self._conns:
                if conn.transport is not None and conn.transport.is_active():
                    live.append(conn)
                else:
                    self._close_conn(conn)
            self._conns = live
            for conn in live:
                # NB: paramiko keeps open channels in Transport._channels (a ChannelMap with __len__).
                if len(conn.transport._channels) < self.channels_per_connection:
                    return conn.transport
            conn = self._open_connection()
            self._conns.append(conn)
            return conn.transport

    def _open_connection(self) -> Connection:
        conn = self._new_connection()
        where = f"{self.user}@{self.address}:{self.port}"
        try:
            conn.open()
        except paramiko.BadHostKeyException as exc:
            raise HostUnreachable(
                f"[{self.name}] HOST KEY MISMATCH for {where}: it offered {exc.key.get_name()} "
                f"{exc.key.get_fingerprint().hex()}, {self.known_hosts} expects "
                f"{exc.expected_key.get_fingerprint().hex()}. Refusing to connect: the machine was reinstalled "
                f"or something is in the middle. If the change is expected, remove the old line "
                f"(ssh-keygen -R {self.address} -f {self.known_hosts}) and add the new key") from None
        except paramiko.SSHException as exc:
            if "not found in known_hosts" in str(exc):
                raise HostUnreachable(
                    f"[{self.name}] {where} is not in {self.known_hosts} (host_key_policy strict): add its key "
                    f"(ssh-keyscan -p {self.port} {self.address} >> {self.known_hosts}, after checking the "
                    "fingerprint) or set host_key_policy: accept-new for this host") from None
            hint = (" (something answers there, but not an SSH server: check the address and ssh.port)"
                    if "banner" in str(exc) else "")
            raise HostUnreachable(f"[{self.name}] SSH to {where} failed: {exc}{hint}") from None
        except (OSError, EOFError) as exc:
            reason = "timed out" if isinstance(exc, (socket.timeout, TimeoutError)) else str(exc)
            raise HostUnreachable(f"[{self.name}] cannot connect to {where} within "
                                  f"{self.connect_timeout_s:.0f} s: {reason}") from None
        assert conn.transport is not None
        conn.transport.set_keepalive(5)
        # Many small request/reply exchanges (channel open, exec, pid, exit): without TCP_NODELAY,
        # Nagle meets the peer's delayed ACK and each channel open costs ~40 ms.
        sock = conn.transport.sock
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    def _open_channel(self, timeout_s: float) -> paramiko.Channel:
        transport = self.connect()
        try:
            return transport.open_session(timeout=timeout_s)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            # A dead transport is dropped so that the next command reconnects.
            transport.close()
            raise HostUnreachable(f"[{self.name}] cannot open an SSH channel to {self.address} "
                                  f"within {timeout_s:.1f} s: {exc or 'timed out'}") from None

    @staticmethod
    def _close_conn(conn: Connection) -> None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing a dead connection is best effort
            pass

    def _drop(self) -> None:
        if self._sftp is not None:
            try:
                self._sftp.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is best effort
                pass
            self._sftp = None
        for conn in self._conns:
            self._close_conn(conn)
        self._conns = []

    def close(self) -> None:
        with self._conn_lock:
            self._drop()

    def has_bash5(self) -> bool:
        """Whether the host's bash has ``$EPOCHREALTIME`` (probed once, for the gate)."""
        if self._bash5 is None:
            res = self.run(["bash", "-c", 'test -n "$EPOCHREALTIME"'], check=False, timeout=10.0)
            self._bash5 = res.returncode == 0
        return self._bash5

    # ------------------------------------------------------------ commands

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, check: bool = True,
            input: str | None = None) -> CommandResult:
        log.debug("[%s] $ %s", self.name, shlex.join(argv))
        t0 = time.monotonic()
        proc = _RemoteProcess(self, argv, f"{self.name}:{argv[0]}", False, input, min(timeout, self.connect_timeout_s),
                              start_timeout_s=timeout)
        try:
            res = proc.wait(max(0.0, timeout - (time.monotonic() - t0)))
        except CommandTimeout:
            stopped = proc.stop(grace_s=1.0)
            raise CommandTimeout(self.name, argv, None, stopped.stderr,
                                 note=f"killed after {timeout:.1f} s") from None
        out = CommandResult(self.name, tuple(argv), res.returncode if res.returncode is not None else -1,
                            res.stdout, res.stderr, time.monotonic() - t0)
        if check:
            out.check()
        return out

    def start(self, argv: Sequence[str], *, gated: bool = False, label: str | None = None,
              keep_stdin: bool = False) -> _RemoteProcess:
        """Start ``argv`` in its own remote session (see the module docstring).

        ``keep_stdin=True`` leaves stdin open for ``send()`` (a gated process always keeps it until released).
        """
        log.debug("[%s] $ %s &%s", self.name, shlex.join(argv), " (gated)" if gated else "")
        return _RemoteProcess(self, argv, label or f"{self.name}:{argv[0]}", gated, None, self.connect_timeout_s,
                              keep_stdin)

    def _kill_group(self, pgid: int | None, exited: threading.Event, grace_s: float) -> str:
        """SIGINT, SIGTERM, SIGKILL to ``-pgid`` until the leader exits, then SIGKILL any straggler."""
        if pgid is None:
            return "process group unknown: nothing signalled"
        for sig in ("INT", "TERM", "KILL"):
            res = self.run(["kill", f"-{sig}", "--", f"-{pgid}"], check=False, timeout=5.0)
            if res.returncode != 0:  # no such group: already gone
                break
            if exited.wait(grace_s):
                break
        # Members that outlived the leader (children that ignored the signal) are ours too.
        if self.run(["kill", "-0", "--", f"-{pgid}"], check=False, timeout=5.0).returncode == 0:
            self.run(["kill", "-KILL", "--", f"-{pgid}"], check=False, timeout=5.0)
        exited.wait(grace_s)
        return ""

    # ------------------------------------------------------------ files

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._conn_lock:
            if self._sftp is not None and not self._sftp.get_channel().closed:
                return self._sftp
        transport = self.connect()
        with self._conn_lock:
            if self._sftp is None or self._sftp.get_channel().closed:
                self._sftp = paramiko.SFTPClient.from_transport(transport)
                self._sftp.get_channel().settimeout(30.0)
            return self._sftp

    def read_file(self, path: str) -> bytes:
        if path.startswith(("/sys/", "/proc/")):
            # SFTP reports pseudo-files as empty (size 0); cat reads them properly.
            return self.run(["cat", path]).stdout.encode()
        try:
            buf = io.BytesIO()
            self._sftp_client().getfo(path, buf)
            return buf.getvalue()
        except (OSError, paramiko.SSHException) as exc:
            raise CommandError(self.name, ["sftp-get", path], 1, str(exc), note="cannot read file") from None

    def write_file(self, path: str, data: bytes, mode: int = 0o644) -> None:
        sftp = self._sftp_client()
        tmp = f"{os.path.dirname(path) or '.'}/.{os.path.basename(path)}.mplab-{os.getpid()}-{threading.get_ident()}"
        try:
            with sftp.open(tmp, "wb") as f:
                f.write(data)
            sftp.chmod(tmp, stat.S_IMODE(mode))
            sftp.posix_rename(tmp, path)
        except (OSError, paramiko.SSHException) as exc:
            try:
                sftp.remove(tmp)
            except (OSError, paramiko.SSHException):
                pass
            raise CommandError(self.name, ["sftp-put", path], 1, str(exc), note="cannot write file") from None

    # ------------------------------------------------------------ clock

    def clock_offset_s(self, tries: int = 7) -> float:
        """Remote wall clock minus ours, in seconds.

        A remote ``date +%s.%N`` loop is started once and pinged over its stdin, so
        channel and process start-up stay out of the round trip; each ping is bracketed
        by local timestamps and the ping with the shortest round trip is used (its error
        is at most half that round trip, kept in ``last_offset_rtt_s``).
        """
        proc = self.start(["sh", "-c", 'while IFS= read -r _; do date +%s.%N; done'], gated=False,
                          label=f"{self.name}:clock", keep_stdin=True)
        best: tuple[float, float] | None = None
        try:
            for _ in range(tries):
                seen = len(proc.stdout_so_far().splitlines())
                t0 = time.time()
                proc.send(b"\n")
                deadline = time.monotonic() + 10.0
                while True:
                    lines = proc.stdout_so_far().splitlines()
                    if len(lines) > seen and proc.stdout_so_far().endswith(b"\n"):
                        t1 = time.time()
                        break
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise CommandTimeout(self.name, proc.argv, None, note="no answer to a clock ping within 10 s")
                    time.sleep(0.0002)
                try:
                    remote = float(lines[seen])
                except ValueError:
                    raise CommandError(self.name, ["date", "+%s.%N"], 0,
                                       note=f"unexpected output {lines[seen][:40]!r}") from None
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, remote - (t0 + t1) / 2)
        finally:
            proc.stop(grace_s=1.0)
        assert best is not None
        self.last_offset_rtt_s = best[0]
        return best[1]
