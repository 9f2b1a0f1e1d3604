"""Build the SCTP-over-UDP ``LD_PRELOAD`` shim (``sctp_over_udp.c``) for srsenb and srsepc.

Test and bench rigs only: this machine's kernel has no SCTP, which S1 needs. A lab's kernel
has it and never uses the shim. The library never imports this module.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from harness.errors import PreflightError
from harness.hosts.local import LocalHost

SOURCE = Path(__file__).with_name("sctp_over_udp.c")


def kernel_has_sctp(host: LocalHost | None = None) -> bool:
    """True when an SCTP socket can be created here (then the shim is not needed)."""
    import socket
    try:
        socket.socket(socket.AF_INET, socket.SOCK_SEQPACKET, 132).close()
        return True
    except OSError:
        return False


def build_shim(dest_dir: Path) -> Path:
    """Compile the shim into ``dest_dir`` (once per source version); ``PreflightError`` without a C compiler."""
    # clang: already installed for the BPF congestion controls (make setup)
    cc = shutil.which("clang")
    if cc is None:
        raise PreflightError("the SCTP-over-UDP shim needs clang (make setup installs it)")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = dest_dir / f"sctp_over_udp-{digest}.so"
    if not out.exists():
        dest_dir.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp.so")
        LocalHost("here").run(["clang", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(tmp), str(SOURCE), "-ldl"],
                              timeout=120)
        tmp.rename(out)
    return out
