"""The one typer app. Only this module knows every package; errors become exit codes here."""
from __future__ import annotations

import logging
import os
import sys

import typer
from rich.logging import RichHandler

from analysis import cli as analysis_cli
from harness.campaign import cli as campaign_cli
from harness.cc import cli as cc_cli
from harness.dataset import cli as dataset_cli
from harness.errors import MplabError
from harness.meters import cli as meters_cli
from harness.testbeds import cli as testbeds_cli
from lte import cli as lte_cli
from wifi import cli as wifi_cli
from training import cli as training_cli

app = typer.Typer(name="mplab", no_args_is_help=True, add_completion=False,
                  help="Measure the energy cost of MPTCP on dual-homed testbeds, emulated or real.")
campaign_cli.register(app)
meters_cli.register(app)
testbeds_cli.register(app)
lte_cli.register(app)
wifi_cli.register(app)
cc_cli.register(app)
dataset_cli.register(app)
training_cli.register(app)
analysis_cli.register(app)


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="log every command run")) -> None:
    level = logging.DEBUG if verbose else getattr(logging, os.environ.get("MPLAB_LOG", "WARNING").upper(), 30)
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(show_path=False)])


def main() -> None:
    """Entry point: run the app; an ``MplabError`` prints its message and exits with its code."""
    try:
        rc = app(standalone_mode=False)
    except MplabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("interrupted: completed samples are kept; resume with `mplab run --resume runs/<campaign>`",
              file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # click's own usage errors in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise
    sys.exit(rc if isinstance(rc, int) else 0)
