"""Files mplab reads at run time, shipped inside its packages and found with ``importlib.resources``.

Nothing is read from a checkout or the working directory: an installed wheel carries the paper's
tables and citations (``harness/data/paper``), the speed-up validation table, the templates, the
watch page and the example workspace (``mplab/workspace``), and finds them wherever it is installed.
"""
from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def package_path(package: str, *parts: str) -> Path:
    """The file or folder ``parts`` inside installed package ``package``, as a path on disk.

    mplab installs as plain files (a wheel unpacked into site-packages, or an editable checkout),
    never as a zip, so every resource is a real path that ``open``, pandas and Jinja2 can read.
    """
    return Path(str(files(package).joinpath(*parts)))


def paper_file(name: str) -> Path:
    """One of the papers' data files: ``sensors-2023-7699.yaml``, ``citations.yaml``, ``related-schemes.yaml``."""
    return package_path("harness", "data", "paper", name)
