"""Tables the command line prints: one rich ``Table`` builder and the time stamps in them.

Every layer's CLI (harness, training, lte, wifi, controller) may import this; what goes into
the rows is each command's business.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence

from rich.table import Table


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], *, title: str | None = None,
          right: Collection[str] = ()) -> Table:
    """A table with ``columns`` (those named in ``right`` right-justified) and ``rows`` (cells already text)."""
    t = Table(title=title)
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left")
    for row in rows:
        t.add_row(*row)
    return t


def utc_minute(epoch_ms: float) -> str:
    """``YYYY-MM-DD HH:MM`` (UTC) of a time in milliseconds since the epoch (MLflow's timestamps)."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch_ms / 1000))
