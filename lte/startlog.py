"""Only this start's output: where each daemon's log stood before a start, and what came after.

Open5GS appends to its log files across starts, so a line from last week ("eNB-S1 accepted") would
pass a check of today's dead cell. srsenb, srsue and srsepc truncate theirs at start (srslog opens the
file "wb"). ``mark`` records a log's size before ``lte up`` restarts anything; ``since`` returns what
was written after it. Without a mark (``mplab lte check`` on its own) ``last_start`` cuts an Open5GS
log at its last start banner (``Configuration: '<file>'``, lib/app/ogs-init.c), and ``starts`` counts
the banners in a segment: more than one after a mark means the daemon restarted during the start.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from harness.errors import MplabError
from harness.hosts.local import Host

#: Open5GS's start banner in each daemon's log file (ogs_app_initialize, 2.6 and 2.7).
OPEN5GS_START_RE = re.compile(r"\] INFO: Configuration: '")


@dataclass(frozen=True)
class LogMark:
    """A log file on a host and its size (bytes) when the mark was taken."""

    host: str
    path: str
    offset: int


def mark(host: Host, path: str) -> LogMark:
    """The current end of ``path`` on ``host`` (0 when it does not exist yet)."""
    res = host.run(["stat", "-c", "%s", path], check=False, timeout=10)
    size = int(res.stdout.strip()) if res.returncode == 0 and res.stdout.strip().isdigit() else 0
    return LogMark(host.name, path, size)


def since(host: Host, m: LogMark) -> str:
    """What ``m.path`` gained after the mark (all of it when it shrank: rotated or truncated)."""
    try:
        data = host.read_file(m.path)
    except (OSError, MplabError):
        return ""
    return (data[m.offset:] if len(data) >= m.offset else data).decode(errors="replace")


def last_start(text: str) -> str:
    """An Open5GS log from its last start banner on (the whole text when it has none)."""
    hits = list(OPEN5GS_START_RE.finditer(text))
    if not hits:
        return text
    begin = text.rfind("\n", 0, hits[-1].start()) + 1
    return text[begin:]


def starts(text: str) -> int:
    """How many times an Open5GS daemon started in ``text``."""
    return len(OPEN5GS_START_RE.findall(text))
