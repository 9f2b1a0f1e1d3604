"""Stand-ins for programs that cannot run on the CI machine.

This machine has no systemd as PID 1, no Open5GS and no srsRAN, so deploy tests use:

* ``systemctl`` / ``journalctl``: start, stop and report on "units" by pid files, and
  record every call, so the restart *order* can be checked;
* ``daemon.py``: stands in for ``open5gs-*d`` and ``srsenb``. It parses the rendered
  configuration as the real daemon would need it (refusing a missing key), logs where the
  real daemon logs, and does the one network act the checks look for: the MME listens on
  its S1AP address (TCP instead of SCTP) and logs Open5GS's "eNB-S1 accepted[...]" line;
  the eNodeB connects to ``mme_addr`` from ``s1c_bind_addr``.

Everything else in those tests is real: namespaces, veths, the kernel's TUN device,
sshd, files written through Hosts.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def install(dest: Path, units: dict[str, list[str]]) -> dict[str, Path]:
    """Write stand-in ``systemctl``/``journalctl`` into ``dest`` for ``units`` (unit -> argv)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "state").mkdir(exist_ok=True)
    (dest / "units.json").write_text(json.dumps(units, indent=1))
    out = {}
    for name in ("systemctl", "journalctl"):
        p = dest / name
        p.write_text(f"#!{sys.executable}\n" + (HERE / f"{name}.py").read_text())
        p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        out[name] = p
    return out


def daemon_argv(kind: str, config: str) -> list[str]:
    """argv of the stand-in daemon ``kind`` reading ``config``."""
    return [sys.executable, str(HERE / "daemon.py"), kind, config]


def calls(dest: Path) -> list[str]:
    """Every ``systemctl`` call so far, as "verb unit" lines."""
    p = dest / "state" / "calls.log"
    return p.read_text().splitlines() if p.exists() else []


def stop_all(dest: Path) -> None:
    """Kill every stand-in daemon still running (test teardown)."""
    for pidfile in (dest / "state").glob("*.pid"):
        try:
            os.kill(int(pidfile.read_text()), 9)
        except (ProcessLookupError, ValueError):
            pass
