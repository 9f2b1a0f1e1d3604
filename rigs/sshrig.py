"""A real OpenSSH server inside each of our network namespaces, for tests and benches.

``SshdRig`` gives namespaces of an emulated testbed a management link from the root
namespace (a veth whose root end carries our prefix) and starts ``sshd -D`` on it,
with host and user keys generated in a temporary directory. ``SSHHost``s built by
``ssh_host()`` then reach the namespaces exactly as the orchestrator reaches lab
boards: TCP, key auth, verified host keys. Teardown stops every sshd by pid and
deletes the veths (deleting the namespace would also remove them).

Management addresses come from 100.64.0.0/10 (shared address space, never routed
here), one /30 per namespace, in a /24 picked from the prefix so that two rigs on one
machine do not collide.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.errors import PreflightError
from harness.upkeep.clean import SSH_RIG_DIR
from harness.hosts.local import BackgroundProcess, Host, LocalHost, NamespaceHost
from harness.hosts.ready import wait_until

log = logging.getLogger("mplab.sshrig")

SSHD_CONFIG = """\
ListenAddress {address}:22
HostKey {host_key}
AuthorizedKeysFile {authorized_keys}
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
UseDNS no
Subsystem sftp internal-sftp
{extra}"""

#: This machine's root ~/.bashrc may be heavy (here: pyenv init, ~110 ms), and bash sources it for
#: every command sshd runs. Lab boards' shells start in a few ms; SHLVL=1 makes bash consider itself
#: nested and skip ~/.bashrc, so the rig measures mplab rather than this machine's dot files.
#: ``SshdRig(prefix, skip_rc=False)`` keeps the rc files (bench/skew.py --login-rc). One ``SetEnv`` line
#: carries every variable: sshd takes the first ``SetEnv`` of a config and ignores later ones.
SKIP_RC = {"SHLVL": "1"}


def set_env(env: dict[str, str]) -> str:
    """The sshd_config line giving every session ``env`` (empty for none)."""
    return f"SetEnv {' '.join(f'{k}={v}' for k, v in env.items())}\n" if env else ""


@dataclass
class RigEntry:
    netns: str
    address: str
    veth: str
    host_key: Path
    process: BackgroundProcess


def _subnet(prefix: str) -> tuple[int, int]:
    h = hashlib.sha256(prefix.encode()).digest()
    return 64 + h[0] % 64, h[1]


class SshdRig:
    """sshd in namespaces, a user key, and a known_hosts file listing every server."""

    def __init__(self, prefix: str, root: Host | None = None, skip_rc: bool = True) -> None:
        if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
            raise PreflightError("sshd not found: apt install openssh-server")
        self.prefix = prefix
        self.root = root or LocalHost("root")
        self.dir = Path(tempfile.mkdtemp(prefix=SSH_RIG_DIR.format(prefix=prefix)))  # found by clean.remove_ssh_rig_dirs
        self.user_key = self.dir / "id_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.known_hosts.write_text("")
        self.authorized_keys = self.dir / "authorized_keys"
        self.root.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{prefix}user", "-f", str(self.user_key)])
        self.authorized_keys.write_text((self.dir / "id_ed25519.pub").read_text())
        self.entries: dict[str, RigEntry] = {}
        self.skip_rc = skip_rc
        self._net = _subnet(prefix)
        # sshd's privilege-separation directory; a standard path, created only if missing.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    def add(self, name: str, netns: str, env: dict[str, str] | None = None) -> RigEntry:
        """Give ``netns`` a management veth and an sshd on it; returns where it listens. ``env``: variables
        every session there gets (sshd ``SetEnv``), e.g. ``OVS_RUNDIR`` of an OVS run by hand."""
        i = len(self.entries) + 1
        a, b = self._net
        root_addr, ns_addr = f"100.{a}.{b}.{4 * i + 1}", f"100.{a}.{b}.{4 * i + 2}"
        veth = f"{self.prefix[:11]}m{i}"[:15]
        r = self.root
        r.run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "mgmt0", "netns", netns])
        r.run(["ip", "addr", "add", f"{root_addr}/30", "dev", veth])
        r.run(["ip", "link", "set", veth, "up"])
        nsh = NamespaceHost(name, netns)
        nsh.run(["ip", "addr", "add", f"{ns_addr}/30", "dev", "mgmt0"])
        nsh.run(["ip", "link", "set", "mgmt0", "up"])
        nsh.run(["ip", "link", "set", "lo", "up"])
        host_key = self.dir / f"host_{name}"
        r.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"{self.prefix}{name}", "-f", str(host_key)])
        cfg = self.dir / f"sshd_{name}.conf"
        cfg.write_text(SSHD_CONFIG.format(address=ns_addr, host_key=host_key, authorized_keys=self.authorized_keys,
                                          extra=set_env({**(SKIP_RC if self.skip_rc else {}), **(env or {})})))
        proc = nsh.start(["/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)], label=f"sshd:{name}")
        entry = RigEntry(netns, ns_addr, veth, host_key, proc)
        self.entries[name] = entry
        pub = (host_key.with_suffix(".pub")).read_text().split()
        with open(self.known_hosts, "a") as f:
            f.write(f"{ns_addr} {pub[0]} {pub[1]}\n")
        self._wait_listening(name, entry)
        return entry

    def stop(self, name: str) -> None:
        """Stop ``name``'s sshd (by its pid), as a board whose sshd died; its veth stays."""
        self.entries[name].process.stop(grace_s=1.0)

    def restart(self, name: str, env: dict[str, str] | None = None) -> RigEntry:
        """Start ``name``'s sshd again (same address and host key), its sessions given ``env`` (e.g. a ``PATH``
        without a program, as a board missing a package)."""
        e = self.entries[name]
        e.process.stop(grace_s=1.0)
        cfg = self.dir / f"sshd_{name}.conf"
        cfg.write_text(SSHD_CONFIG.format(address=e.address, host_key=e.host_key, authorized_keys=self.authorized_keys,
                                          extra=set_env({**(SKIP_RC if self.skip_rc else {}), **(env or {})})))
        e.process = NamespaceHost(name, e.netns).start(["/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                                       label=f"sshd:{name}")
        self._wait_listening(name, e)
        return e

    def _wait_listening(self, name: str, entry: RigEntry, timeout_s: float = 10.0) -> None:
        def answering() -> bool:
            try:
                with socket.create_connection((entry.address, 22), timeout=0.5) as s:
                    return s.recv(4).startswith(b"SSH-")
            except OSError:
                return False

        wait_until(answering, timeout_s, f"sshd for {name} in {entry.netns} ({entry.address}:22)", proc=entry.process)

    def add_testbed(self, testbed) -> None:
        """sshd in the sender's and every receiver's namespace of an emulated testbed (its names as rig names)."""
        self.add("snd", testbed.ns["snd"])
        for name in testbed.nodes:
            self.add(name, testbed.ns[name])

    def ssh_host(self, name: str, **kw):
        """An ``SSHHost`` for the namespace registered as ``name``."""
        from harness.hosts.ssh import SSHHost

        e = self.entries[name]
        return SSHHost(name, e.address, user="root", key_file=self.user_key, known_hosts=self.known_hosts, **kw)

    def close(self) -> None:
        """Stop every sshd (by pid) and delete our veths; idempotent."""
        for e in self.entries.values():
            try:
                e.process.stop(grace_s=1.0)
            except Exception as exc:  # noqa: BLE001 - teardown goes on
                log.warning("stopping sshd in %s: %s", e.netns, exc)
            self.root.run(["ip", "link", "del", e.veth], check=False)
        self.entries.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SshdRig:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def sshd_testbed(inv) -> Iterator[tuple]:
    """(testbed, rig): the emulated testbed of ``inv`` set up (Cubic) with sshd in the sender's and every
    receiver's namespace; the rig, then the testbed, removed afterwards even when the block raises."""
    from harness.cc import resolve
    from harness.testbeds.emulated import EmulatedTestbed

    tb = EmulatedTestbed(inv)
    rig = None
    try:
        tb.setup([resolve("cubic")])
        rig = SshdRig(inv.emulation.namespace_prefix)
        rig.add_testbed(tb)
        yield tb, rig
    finally:
        if rig is not None:
            rig.close()
        tb.teardown()


def lab_inventory(testbed, rig: SshdRig, *, name: str = "rig", ser2net: dict[str, int] | None = None,
                  iperf3_base_port: int = 5300, connect_timeout_s: float = 3.0, command_timeout_s: float = 10.0) -> dict:
    """A *lab* inventory (as a dict) for an emulated testbed whose namespaces run the rig's sshd.

    The sender and receivers are reached over SSH at their management addresses; meters are the
    emulated devices' ptys read as real UM25Cs, or, for receivers named in ``ser2net``
    (name -> TCP port), served by ser2net on the receiver as ``rfc2217://``.
    """
    ser2net = ser2net or {}
    inv = testbed.inventory
    receivers = []
    for rx in inv.receivers:
        node = testbed.nodes[rx.name]
        pty = str(testbed.state_dir / f"meter-{rx.name}")
        meter = ({"kind": "um25c", "ser2net": {"device": pty, "tcp_port": ser2net[rx.name]}} if rx.name in ser2net
                 else {"kind": "um25c", "port": pty})
        receivers.append({
            "name": rx.name, "ssh": {"address": rig.entries[rx.name].address}, "meter": meter,
            "interfaces": {r: {"name": i.name, "address": i.address} for r, i in node.interfaces.items()}})
    return {
        "schema_version": 1, "kind": "lab", "name": name,
        "sender": {"name": inv.sender.name, "address": str(inv.sender.address),
                   "ssh": {"address": rig.entries[inv.sender.name].address}},
        "receivers": receivers,
        "lab": {"ssh_defaults": {"user": "root", "key_file": str(rig.user_key), "known_hosts": str(rig.known_hosts),
                                 "connect_timeout_s": connect_timeout_s},
                "command_timeout_s": command_timeout_s, "iperf3_base_port": iperf3_base_port},
    }



def add_lab_switch(data: dict, rig: SshdRig, splice, name: str = "sw",
                   capacity_mbit: dict[str, float] | None = None) -> dict:
    """Make the OVS ``splice`` (``controller.steering.ovs.SpliceRig``, listening on every address) the lab
    switch of the lab inventory ``data``: sshd in its namespace (sessions find OVS's database through
    ``OVS_RUNDIR``), a ``lab.infra`` entry with role switch, and ``lab.switch`` at its management address;
    ``capacity_mbit``: each network's nominal capacity (MP-SDN's congestion signal on a lab)."""
    entry = rig.add(name, splice.netns, env={"OVS_RUNDIR": str(splice.switch.state_dir)})
    data["lab"].setdefault("infra", []).append({"name": name, "role": "switch", "ssh": {"address": entry.address}})
    data["lab"]["switch"] = {"listen": f"{entry.address}:{splice.listen_port}", "bridge": splice.bridge,
                             "host": name, "networks": {n: {"up": u, "down": d, **({"capacity_mbit": capacity_mbit[n]}
                                                                               if capacity_mbit else {})}
                                                      for n, (u, d) in splice.ports.items()}}
    return data
