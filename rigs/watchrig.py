"""A rig for `mplab watch` in tests and bench/watch.py: the real command in a process of its own, and the
page in Debian's Chromium driven by Playwright (no browser download), with every problem recorded.

Not used by mplab itself.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from rigs.browser import CHROMIUM, CHROMIUM_ARGS

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Watcher:
    """A running `mplab watch` process and its URL."""

    proc: subprocess.Popen
    url: str
    ready_at: float

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> tuple[int, str, str]:
        """Send ``sig`` to it (by its pid) and return (exit code, stdout, stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        return self.proc.returncode, out, err


def start_watcher(run_dir: Path, timeout: float = 120, env: dict | None = None) -> Watcher:
    """``python -m mplab watch RUN_DIR --port 0``; waits for the line that names its URL."""
    proc = subprocess.Popen([sys.executable, "-m", "mplab", "watch", str(run_dir), "--port", "0"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or os.environ.copy())
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mplab watch exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if "http://" in line:
                url = line[line.index("http://"):].split()[0]
                return Watcher(proc, url, time.time())
    proc.kill()
    proc.communicate()
    raise RuntimeError(f"mplab watch named no URL within {timeout:.0f} s (last line {line!r})")


@dataclass
class PageProblems:
    """What went wrong in the browser."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    off_machine_requests: list[str] = field(default_factory=list)
    requests: int = 0

    @property
    def all(self) -> list[str]:
        return self.console_errors + self.page_errors + self.failed_requests + self.off_machine_requests


def _loopback(url: str) -> bool:
    return urlparse(url).hostname in ("127.0.0.1", "localhost", "::1")


@contextlib.contextmanager
def chromium_page(url: str, width: int = 1280, height: int = 1000) -> Iterator[tuple[object, PageProblems]]:
    """Open ``url`` in headless Chromium; yields (page, problems). Any request off this machine is aborted and
    recorded (the page must work with no network: no CDN, no fonts from elsewhere)."""
    from playwright.sync_api import sync_playwright

    problems = PageProblems()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})

            def route(r):
                problems.requests += 1
                if _loopback(r.request.url) or r.request.url.startswith("data:"):
                    r.continue_()
                else:
                    problems.off_machine_requests.append(r.request.url)
                    r.abort()

            page.route("**/*", route)
            page.on("console", lambda m: problems.console_errors.append(f"{m.type}: {m.text}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.page_errors.append(str(e)))
            # The event stream is cut when the watcher stops or the page closes: that is no failure.
            page.on("requestfailed", lambda r: None if r.url.endswith("/events") else
                    problems.failed_requests.append(f"{r.url}: {r.failure}"))
            page.on("response", lambda r: problems.failed_requests.append(f"{r.url}: HTTP {r.status}")
                    if r.status >= 400 else None)
            page.goto(url, timeout=120_000)  # plotly.min.js is 4.8 MB: slow to parse on a busy machine
            yield page, problems
        finally:
            browser.close()


def shown_count(page) -> str:
    """The page's ``n/N``."""
    return page.inner_text("#n")
