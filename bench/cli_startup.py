"""What an `mplab` command costs before it does anything: wall and CPU time of cheap commands, per checkout.

    uv run python bench/cli_startup.py [--runs N] [--out bench/results/cli_startup.md]
    uv run python bench/cli_startup.py --repo /tmp/cli-before --repo . [--label before --label after]

Each command of ``COMMANDS`` runs as ``python -m mplab ...`` in a fresh process, N times (default 5), with the
checkout as its working directory and first on ``PYTHONPATH`` (so ``--repo`` compares two checkouts, e.g. a
``git worktree add /tmp/cli-before HEAD``, through one virtual environment: this script's Python). Wall time is
spawn to exit; CPU is the child's user + system time (``RUSAGE_CHILDREN`` before and after it is reaped). The
table gives the median of each. The commands do little beyond starting (help, the version, a status of a small
synthetic campaign, a dry run, a bad scenario refused with exit 2), so their time is mostly importing: what
the test suite pays each of the hundreds of times it spawns the command line.

One unmeasured run of each command per checkout comes first (it writes the ``.pyc`` files and warms the page
cache), and the checkouts take turns run by run, so that a change in the machine's load falls on all of them.
Each command's exit code is checked, and its output compared between checkouts (a note when they differ).
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from rigs.synthetic import write_synthetic_campaign

REPO = Path(__file__).resolve().parent.parent

#: (label, arguments after `mplab`, expected exit code). ``{campaign}`` and ``{bad}`` are filled in by ``main``.
COMMANDS: list[tuple[str, list[str], int]] = [
    ("mplab --help", ["--help"], 0),
    ("mplab --version", ["--version"], 0),
    ("mplab status RUN", ["status", "{campaign}"], 0),
    ("mplab run scenarios/quick.yaml --dry-run", ["run", "scenarios/quick.yaml", "--dry-run"], 0),
    ("mplab dataset build -h", ["dataset", "build", "-h"], 0),
    ("mplab controller policies", ["controller", "policies"], 0),
    ("mplab run BAD.yaml --dry-run (misspelled key: exit 2)", ["run", "{bad}", "--dry-run"], 2),
]


@dataclass
class Checkout:
    """One tree of mplab to start the command line from, and what its runs measured."""

    path: Path
    label: str
    wall_s: dict[str, list[float]] = field(default_factory=dict)
    cpu_s: dict[str, list[float]] = field(default_factory=dict)
    output: dict[str, str] = field(default_factory=dict)


def describe(path: Path) -> str:
    """``<dir> @ <short commit>`` (``+ uncommitted changes`` when the tree differs from it)."""
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=path,
                           capture_output=True, text=True)
    commit = rev.stdout.strip() or "?"
    return f"{path} @ {commit}" + (" + uncommitted changes" if dirty.stdout.strip() else "")


def child_env(path: Path) -> dict[str, str]:
    """The environment of a measured run: the checkout first on the path, bytecode written, a fixed width."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["COLUMNS"] = "100"  # rich sizes help to the terminal: the same width for every checkout
    return env


def check_imports_from(path: Path, python: str) -> None:
    """Refuse to measure a checkout whose runs would import another tree's mplab (an editable install's)."""
    code = "import mplab, harness; print(mplab.__file__); print(harness.__file__)"
    out = subprocess.run([python, "-c", code], cwd=path, env=child_env(path), capture_output=True, text=True)
    files = out.stdout.split()
    if out.returncode != 0 or not files or not all(Path(f).resolve().is_relative_to(path) for f in files):
        sys.exit(f"cli_startup: from {path}, Python imports mplab from {files or out.stderr[-500:]}, not {path}")


def run_once(python: str, path: Path, args: list[str]) -> tuple[float, float, int, str]:
    """One run: (wall s, CPU s, exit code, stdout + stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([python, "-m", "mplab", *args], cwd=path, env=child_env(path), capture_output=True,
                       text=True, timeout=120)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.returncode, p.stdout + p.stderr


def measure(checkouts: list[Checkout], commands: list[tuple[str, list[str], int]], runs: int, python: str) -> None:
    """Fill each checkout's times: a warm-up each, then ``runs`` rounds in which the checkouts take turns."""
    for label, args, want in commands:
        for co in checkouts:
            _, _, rc, out = run_once(python, co.path, args)
            if rc != want:
                sys.exit(f"cli_startup: {label} in {co.path}: exit {rc}, expected {want}:\n{out[-2000:]}")
            co.output[label] = out
        for _ in range(runs):
            for co in checkouts:
                wall, cpu, rc, _ = run_once(python, co.path, args)
                if rc != want:
                    sys.exit(f"cli_startup: {label} in {co.path}: exit {rc} on a later run, expected {want}")
                co.wall_s.setdefault(label, []).append(wall)
                co.cpu_s.setdefault(label, []).append(cpu)
        print(f"  {label}: " + ", ".join(f"{co.label} {statistics.median(co.cpu_s[label]) * 1e3:.0f} ms CPU"
                                         for co in checkouts), file=sys.stderr, flush=True)


def table(checkouts: list[Checkout], commands: list[tuple[str, list[str], int]]) -> str:
    """The markdown table: per command, each checkout's median wall and CPU (ms), and CPU against the first."""
    head = ["command", "exit"]
    for co in checkouts:
        head += [f"{co.label} wall ms", f"{co.label} CPU ms"]
    if len(checkouts) > 1:
        head += [f"CPU {co.label} / {checkouts[0].label}" for co in checkouts[1:]]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    total = {co.label: [0.0, 0.0] for co in checkouts}
    for label, _, want in commands:
        cells = [f"`{label}`", str(want)]
        for co in checkouts:
            wall, cpu = statistics.median(co.wall_s[label]), statistics.median(co.cpu_s[label])
            total[co.label][0] += wall
            total[co.label][1] += cpu
            cells += [f"{wall * 1e3:.0f}", f"{cpu * 1e3:.0f}"]
        base = statistics.median(checkouts[0].cpu_s[label])
        cells += [f"{statistics.median(co.cpu_s[label]) / base:.2f}" for co in checkouts[1:]]
        rows.append("| " + " | ".join(cells) + " |")
    cells = ["all of the above (sum of medians)", ""]
    for co in checkouts:
        cells += [f"{total[co.label][0] * 1e3:.0f}", f"{total[co.label][1] * 1e3:.0f}"]
    base = total[checkouts[0].label][1]
    cells += [f"{total[co.label][1] / base:.2f}" for co in checkouts[1:]]
    rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def differences(checkouts: list[Checkout], commands: list[tuple[str, list[str], int]]) -> list[str]:
    """Commands whose output differs between the first checkout and another one."""
    return [f"`{label}`: {co.label}'s output differs from {checkouts[0].label}'s"
            for label, _, _ in commands for co in checkouts[1:] if co.output[label] != checkouts[0].output[label]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, action="append",
                    help="a checkout to measure (repeatable; the first is the baseline; default: this one)")
    ap.add_argument("--label", action="append", help="a name per --repo, in order (default: its directory name)")
    ap.add_argument("--runs", type=int, default=5, help="measured runs per command and checkout (the median is shown)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter (its environment has mplab's packages)")
    ap.add_argument("--out", type=Path, help="also write the report (markdown) here")
    args = ap.parse_args()
    paths = [p.resolve() for p in (args.repo or [REPO])]
    labels = args.label or [p.name for p in paths]
    if len(labels) != len(paths) or len(set(labels)) != len(labels):
        ap.error("give one distinct --label per --repo")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    checkouts = [Checkout(p, lab) for p, lab in zip(paths, labels)]
    for co in checkouts:
        check_imports_from(co.path, args.python)

    with tempfile.TemporaryDirectory(prefix="mplab-cli-startup-") as tmp:
        campaign = write_synthetic_campaign(Path(tmp), "bench", ccs=("lia", "cubic"), counts=(1, 3), samples=5)
        bad = Path(tmp) / "bad.yaml"
        text = (REPO / "scenarios" / "quick.yaml").read_text()
        bad.write_text(text.replace("\nshuffle:", "\nshufle:"))  # one unknown key: refused in one line, exit 2
        commands = [(label, [a.format(campaign=campaign.path, bad=bad) for a in argv], want)
                    for label, argv, want in COMMANDS]
        measure(checkouts, commands, args.runs, args.python)

    lines = [f"# `mplab` start-up: wall and CPU per command (median of {args.runs} runs)", "",
             f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}: {os.cpu_count()} CPUs, load average "
             f"{os.getloadavg()[0]:.2f} at the end, Python {platform.python_version()} ({args.python}); "
             "`uv run python bench/cli_startup.py " + " ".join(sys.argv[1:]) + "`", ""]
    lines += [f"- {co.label}: {describe(co.path)}" for co in checkouts]
    lines += ["", table(checkouts, commands), ""]
    notes = differences(checkouts, commands)
    lines += [f"- {n}" for n in notes] or (["Every command printed the same in each checkout."]
                                           if len(checkouts) > 1 else [])
    report = "\n".join(lines).rstrip() + "\n"
    print(report, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)


if __name__ == "__main__":
    main()
