"""How the config-check commands print their daemons' verdicts (`mplab lte check-configs`, `mplab wifi check-configs`)."""
from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from harness.deploy.trial import Verdict
from harness.errors import MplabError, PreflightError

console = Console()


def checked_something(verdicts: Sequence[Verdict], programs: str, where: str) -> None:
    """``PreflightError`` (exit 1) when every daemon was absent: a check that checked nothing did not pass."""
    if all(v.ok is None for v in verdicts):
        raise PreflightError(f"nothing checked: no {programs} program found {where}")


def print_verdicts(verdicts: Sequence[Verdict]) -> None:
    """One line per daemon; ``MplabError`` (exit 1) naming every refusal."""
    colour = {"ok": "green", "FAIL": "red", "absent": "yellow"}
    for v in verdicts:
        console.print(f"[{colour[v.word]}]{v.word:6}[/] ", end="")
        console.print(f"{v.name:16} {v.detail}", markup=False, highlight=False, soft_wrap=True)
    bad = [v for v in verdicts if v.ok is False]
    if bad:
        raise MplabError(f"{len(bad)} daemon(s) refused mplab's configuration: "
                         + "; ".join(f"{v.name}: {v.detail}" for v in bad))
