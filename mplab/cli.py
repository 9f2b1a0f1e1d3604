"""The one typer app. Only this module knows every package; errors become exit codes here.

Exit codes (docs/exit-codes.md): 0 done; 1 a failure (preflight, a command, a
meter); 2 bad input (a usage error, a bad file or value); 3 the run ended but samples failed; 4 the
campaign store cannot be used (unwritable, corrupt, newer schema); 5 busy (the campaign or the
testbed's namespace prefix is held by another live process); 6 the disk is full; 130 interrupted by Ctrl-C (SIGINT);
143 stopped by SIGTERM.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import typer

from harness.errors import EXIT_DISK_FULL, EXIT_INTERRUPTED, EXIT_USAGE, Interrupted, MplabError, is_disk_full
from mplab.commands import campaign as campaign_cli
from mplab.commands import cc as cc_cli
from mplab.commands import controller as controller_cli
from mplab.commands import dataset as dataset_cli
from mplab.commands import lab as lab_cli
from mplab.commands import lte as lte_cli
from mplab.commands import meters as meters_cli
from mplab.commands import report as analysis_cli
from mplab.commands import testbed as testbeds_cli
from mplab.commands import training as training_cli
from mplab.commands import watch as watch_cli
from mplab.commands import wifi as wifi_cli
from mplab.commands import workspace as workspace_cli

app = typer.Typer(name="mplab", no_args_is_help=True, add_completion=False,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Measure the energy cost of MPTCP on dual-homed testbeds, emulated or real.")
campaign_cli.register(app)
meters_cli.register(app)
testbeds_cli.register(app)
lte_cli.register(app)
wifi_cli.register(app)
cc_cli.register(app)
dataset_cli.register(app)
training_cli.register(app)
controller_cli.register(app)
analysis_cli.register(app)
watch_cli.register(app)
lab_cli.register(app)
workspace_cli.register(app)


def _access_kinds() -> Any:
    from lte.realcell import ACCESS_KINDS

    return ACCESS_KINDS


def _control_factory() -> Any:
    from controller.setup2 import control_factory

    return control_factory


def _lte_preflight() -> Any:
    from lte.hostcheck import version_checks

    return version_checks


class Wiring(Mapping[str, Any]):
    """``ctx.obj``: what joins the packages, each imported only when a command first looks it up.

    ``access_kinds``: an emulated inventory's real_cell receivers get lte's driver
    (``lte.realcell.ACCESS_KINDS``); ``control_factory``: the harness reaches the controller only
    through it (``controller.setup2.control_factory``, harness.campaign.control); ``lte_preflight``:
    the LTE cell's version checks for `mplab preflight` (``lte.hostcheck.version_checks``). Each is
    imported when it is looked up, so that `mplab --help` or `mplab status` never loads the
    controller, lte's drivers or what they import (numpy, jinja2, ...).
    """

    _LOADERS: dict[str, Callable[[], Any]] = {"access_kinds": _access_kinds, "control_factory": _control_factory,
                                              "lte_preflight": _lte_preflight}

    def __getitem__(self, key: str) -> Any:
        return self._LOADERS[key]()

    def __iter__(self) -> Iterator[str]:
        return iter(self._LOADERS)

    def __len__(self) -> int:
        return len(self._LOADERS)


def _version(value: bool) -> None:
    if value:
        from harness.build import describe

        print(describe())
        raise typer.Exit()


@app.callback()
def _main(ctx: typer.Context,
          verbose: bool = typer.Option(False, "--verbose", "-v", help="log every command run"),
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="print mplab's version and exit")) -> None:
    from rich.logging import RichHandler  # with rich's traceback and pretty-printer: when a command runs, not for -h

    # The one place that knows every side (Wiring): lte's real-cell drivers, the controller's factory, the
    # LTE preflight; the commands that need them look them up.
    ctx.obj = Wiring()
    level = logging.DEBUG if verbose else getattr(logging, os.environ.get("MPLAB_LOG", "WARNING").upper(), 30)
    logging.basicConfig(level=level, format="%(message)s", handlers=[RichHandler(show_path=False)])


def _click_kinds() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """(usage errors, aborts) of every click this typer may raise: its bundled copy and click itself.

    typer >= 0.20 bundles its own click (``typer._click``) whose exceptions are not subclasses of
    click's, so catching ``click.ClickException`` alone lets a usage error end in a traceback.
    """
    usage: list[type] = []
    aborts: list[type] = []
    try:
        from typer._click import exceptions as bundled

        usage.append(bundled.ClickException)
    except ImportError:
        pass
    try:
        from typer import exceptions as typer_exc

        aborts.append(typer_exc.Abort)
    except (ImportError, AttributeError):
        pass
    try:
        import click

        usage.append(click.exceptions.ClickException)
        aborts.append(click.exceptions.Abort)
    except ImportError:
        pass
    return tuple(usage), tuple(aborts)


def run(argv: list[str] | None = None) -> int:
    """Run the app on ``argv`` (default: the process's); return the exit code."""
    try:
        rc = app(args=argv, prog_name="mplab", standalone_mode=False)
    except (MplabError, Interrupted) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted by Ctrl-C (SIGINT); a campaign keeps its completed samples: resume with "
              "`mplab run --resume runs/<campaign>`", file=sys.stderr)
        return EXIT_INTERRUPTED
    # An except clause's types are evaluated only when an exception gets that far: click itself is imported
    # (by _click_kinds) on that path only.
    except _click_kinds()[0] as exc:  # an unknown option or command, a missing or bad argument
        # click's exceptions (a foreign type): its usage errors carry the command's context only when click
        # got as far as a command; it shows the usage only then.
        if getattr(exc, "ctx", None) is None:
            print("Usage: mplab [OPTIONS] COMMAND [ARGS]...\nTry 'mplab -h' (or 'mplab COMMAND -h') for help.",
                  file=sys.stderr)
        exc.show()
        return EXIT_USAGE
    except _click_kinds()[1]:
        print("aborted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        # Whatever wrote it (a dataset, a model, a report): one line, not a traceback.
        print(f"error: {exc.filename or 'a file'}: the disk is full (no space left on device); free space and run "
              "again (a campaign: `mplab run --resume runs/<campaign>`)", file=sys.stderr)
        return EXIT_DISK_FULL
    return rc if isinstance(rc, int) else 0


def main() -> None:
    """Entry point: exit with ``run``'s code."""
    sys.exit(run())
