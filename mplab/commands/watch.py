"""`mplab watch RUN_DIR`: serve a campaign's live page on loopback (mounted by ``mplab.cli``)."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from harness.errors import ConfigError
from harness.watch import LOOPBACK


def watch(run_dir: Annotated[Path, typer.Argument(help="campaign directory (runs/<id>)")],
          port: Annotated[int, typer.Option(help="TCP port (0: any free one)")] = 8765,
          listen: Annotated[str, typer.Option(help="address to listen on; anything but loopback is reachable by "
                                                   "others and the page has no authentication")] = LOOPBACK) -> None:
    """Serve a live page of a campaign (running, finished, emulated or lab) on 127.0.0.1; it only reads the store."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{port} is not a TCP port (0..65535)", field="--port")
    from harness.watch.server import start_watch  # starlette and uvicorn: only when serving

    start_watch(run_dir, port, listen)


def register(app: typer.Typer) -> None:
    """Mount `mplab watch` on the top-level app."""
    app.command()(watch)
