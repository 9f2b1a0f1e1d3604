"""SSH keys of the lab: mplab's own login key, and every machine's host key pinned in known_hosts.

`mplab lab keys` (``setup_keys``): makes the key ``lab.ssh_defaults.key_file`` names if it does not exist
(ed25519, no passphrase: mplab logs in unattended), reads each machine's host key and pins it in the
known_hosts file the inventory names (printing its SHA256 fingerprint, to compare with
``ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`` on the machine's console), then logs in with the
key. A key that differs from the pinned one is refused, never replaced. Installing the public key on a
machine that does not accept it yet needs that machine's password once: with ``copy`` OpenSSH's
``ssh-copy-id`` asks for it (mplab itself never handles passwords); without, the row says the command.
"""
from __future__ import annotations

import base64
import hashlib
import shlex
import socket
import subprocess
from pathlib import Path

from harness.config.inventory import Inventory, Lab
from harness.deploy.prepare import Step
from harness.errors import MplabError


def fingerprint(key) -> str:  # a paramiko PKey
    """OpenSSH's ``SHA256:...`` fingerprint of a public key."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")


def ensure_key(key_file: Path) -> bool:
    """Make an ed25519 key pair at ``key_file`` if there is none; whether one was made."""
    if key_file.exists():
        if not key_file.with_suffix(key_file.suffix + ".pub").exists():
            raise MplabError(f"{key_file} has no {key_file.name}.pub beside it: make it with "
                             f"ssh-keygen -y -f {key_file} > {key_file}.pub")
        return False
    key_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mplab", "-f", str(key_file)],
                   check=True, capture_output=True, timeout=30)
    return True


def scan_host_key(address: str, port: int, timeout_s: float):  # a paramiko PKey
    """The host key ``address:port`` offers (one SSH handshake, no login)."""
    import paramiko

    sock = socket.create_connection((address, port), timeout=timeout_s)
    t = paramiko.Transport(sock)
    try:
        t.banner_timeout = timeout_s
        t.start_client(timeout=timeout_s)
        return t.get_remote_server_key()
    finally:
        t.close()


def known_hosts_name(address: str, port: int) -> str:
    """How known_hosts names a host: ``address``, or ``[address]:port`` off port 22."""
    return address if port == 22 else f"[{address}]:{port}"


def pin_key(known_hosts: Path, name: str, key) -> str:
    """Pin ``key`` for ``name`` in ``known_hosts``: "pinned" (already there), "added", or "mismatch" (another key
    of that type is pinned: left as it is)."""
    import paramiko

    hk = paramiko.HostKeys()
    if known_hosts.exists():
        hk.load(str(known_hosts))
    have = hk.lookup(name) or {}
    old = have.get(key.get_name())
    if old is not None:
        return "pinned" if old == key else "mismatch"
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    with open(known_hosts, "a") as f:
        f.write(f"{name} {key.get_name()} {key.get_base64()}\n")
    return "added"


def setup_keys(inv: Inventory, copy: bool = False) -> list[Step]:
    """The key made if missing, every SSH machine's host key pinned, and a login tried with the key (see the
    module docstring); one or more ``Step`` rows per machine (state ok, changed, refused or failed)."""
    from harness.deploy.machines import ssh_host

    lab = inv.lab or Lab()
    out: list[Step] = []
    targets = [(inv.sender.name, inv.sender.ssh), *((r.name, r.ssh) for r in inv.receivers),
               *((h.name, h.ssh) for h in lab.infra)]
    made: set[Path] = set()
    for name, target in targets:
        if target is None:
            continue
        kw = lab.ssh_settings(target)
        key_file, known = Path(kw["key_file"]).expanduser(), Path(kw["known_hosts"]).expanduser()
        if key_file not in made:
            made.add(key_file)
            try:
                new = ensure_key(key_file)
            except (MplabError, OSError, subprocess.SubprocessError) as exc:
                out.append(Step("orchestrator", f"key {key_file}", "failed", str(exc)[-300:],
                                fix="make it by hand: ssh-keygen -t ed25519 -f " + str(key_file)))
                return out
            out.append(Step("orchestrator", f"key {key_file}", "changed" if new else "ok",
                            "made (ed25519, no passphrase)" if new else "present"))
        addr, port, user = kw["address"], kw["port"], kw["user"]
        try:
            key = scan_host_key(addr, port, kw["connect_timeout_s"])
        except Exception as exc:  # noqa: BLE001 - any failed handshake is this machine's failed row
            out.append(Step(name, "host key", "failed", f"{addr}:{port}: {exc or type(exc).__name__}",
                            fix="check that the machine is up, runs sshd, and its ssh section (address, port)"))
            continue
        state = pin_key(known, known_hosts_name(addr, port), key)
        if state == "mismatch":
            out.append(Step(name, "host key", "refused", f"{addr}:{port} offers {key.get_name()} {fingerprint(key)}, "
                                                         f"{known} pins another: refusing (reinstalled, or something "
                                                         "in the middle)",
                            fix=f"if the change is expected: ssh-keygen -R {known_hosts_name(addr, port)} -f {known}, "
                                "then run `mplab lab keys` again"))
            continue
        out.append(Step(name, "host key", "changed" if state == "added" else "ok",
                        f"{key.get_name()} {fingerprint(key)} {'pinned now' if state == 'added' else 'pinned'} "
                        f"in {known}"))
        out.append(_login(ssh_host(inv, name, target), key_file, user, addr, port, copy))
    return out


def _login(host, key_file: Path, user: str, addr: str, port: int, copy: bool) -> Step:
    """Log in with the key; with ``copy``, ssh-copy-id first when the key is refused."""
    copy_argv = ["ssh-copy-id", "-i", f"{key_file}.pub", "-p", str(port), "-o", f"UserKnownHostsFile={host.known_hosts}",
                 f"{user}@{addr}"]
    try:
        host.run(["true"], timeout=30.0)
        return Step(host.name, "key login", "ok", f"{user}@{addr} with {key_file.name}")
    except MplabError as exc:
        if not copy:
            return Step(host.name, "key login", "failed", str(exc)[-300:],
                        fix=f"install the key once (asks for {user}'s password): {shlex.join(copy_argv)}")
    finally:
        host.close()
    res = subprocess.run(copy_argv, check=False, timeout=300)  # interactive: OpenSSH asks for the password on the terminal
    try:
        host.run(["true"], timeout=30.0)
        return Step(host.name, "key login", "changed", f"key installed for {user}@{addr}")
    except MplabError as exc:
        return Step(host.name, "key login", "failed", f"ssh-copy-id exited {res.returncode}; {exc}"[-300:],
                    fix=f"install it by hand: {shlex.join(copy_argv)}")
    finally:
        host.close()
