"""`mplab watch RUN_DIR`: serve a campaign's live page on loopback (mounted by ``mplab.cli``)."""
from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import Annotated

import typer

from harness.errors import ConfigError

LOOPBACK = "127.0.0.1"


def open_view(run_dir: Path):
    """The campaign at ``run_dir`` as a ``CampaignView``; ``ConfigError`` (exit 2) naming what is wrong."""
    from harness.watch.state import CampaignView

    mf = run_dir / "manifest.json"
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such campaign directory (give runs/<campaign>)")
    try:
        manifest = json.loads(mf.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{run_dir}: not a campaign directory (no manifest.json)") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{mf}: cannot be read as a campaign manifest ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("plan"), list):
        raise ConfigError(f"{mf}: not a campaign manifest (no plan)")
    return CampaignView(run_dir, manifest)


def start_watch(run_dir: Path, port: int, listen: str, announce=print) -> None:
    """Serve ``run_dir``'s page on ``listen:port`` until SIGINT/SIGTERM."""
    from harness.watch.server import bind_socket, serve

    view = open_view(run_dir)
    if listen not in (LOOPBACK, "::1", "localhost"):
        print(f"warning: listening on {listen}: the page has no authentication; anyone who can reach this address "
              "sees the campaign", file=sys.stderr)
    sock = bind_socket(listen, port)
    host, bound = sock.getsockname()[:2]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound}/"

    def ready() -> None:
        announce(f"watching campaign {view.manifest.get('campaign')} at {url} (read-only; Ctrl-C stops)")
        sys.stdout.flush()

    stopped_by = serve(view, sock, on_ready=ready)
    if stopped_by is not None:
        announce(f"mplab watch stopped by {signal.Signals(stopped_by).name} (the campaign was only read)")


def watch(run_dir: Annotated[Path, typer.Argument(help="campaign directory (runs/<id>)")],
          port: Annotated[int, typer.Option(help="TCP port (0: any free one)")] = 8765,
          listen: Annotated[str, typer.Option(help="address to listen on; anything but loopback is reachable by "
                                                   "others and the page has no authentication")] = LOOPBACK) -> None:
    """Serve a live page of a campaign (running, finished, emulated or lab) on 127.0.0.1; it only reads the store."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"{port} is not a TCP port (0..65535)", field="--port")
    start_watch(run_dir, port, listen)


def register(app: typer.Typer) -> None:
    """Mount `mplab watch` on the top-level app."""
    app.command()(watch)
