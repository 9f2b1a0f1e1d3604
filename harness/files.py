"""Files written by mplab: atomically (a temporary file, fsync, then a rename), and lock files.

The campaign store, the dataset builder, the model export and the machine-wide record
(``harness.machine``) all write through ``atomic_write``, so a crash leaves either the old
file or the new one, never half of one. What goes into the files is their owners' business.

Lock files (the campaign lock, the namespace-prefix claims) are an ``flock`` held for as long as
the owner lives, with the owner's name written into the file: ``try_flock`` takes one,
``write_lock_text`` names the owner, ``held_lock_text`` reads who holds one without waiting.
The kernel drops the lock when its holder dies, so a crash never leaves a lock held.

Scratch directories (a background process's output, a Ray shard's campaign) are named with their
creator's pid (``owned_temp_dir``): one whose creator was killed outright is found by
``orphaned_temp_dirs`` and removed by `mplab clean`.
"""
from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from pathlib import Path


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, with fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def try_flock(path: Path, patience_s: float = 0.1) -> int | None:
    """Open (creating) ``path`` and take an exclusive ``flock``, waiting at most ``patience_s``.

    The short patience is for readers: ``held_lock_text`` peeks with a shared lock held for
    microseconds, and a claim taken in that instant must not be refused as busy.

    Returns:
        The open descriptor, which holds the lock until it is closed; None when another
        open file (another process, or another ``try_flock`` here) holds it.
    """
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    deadline = time.monotonic() + patience_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(0.01)
    except BaseException:
        os.close(fd)
        raise


def write_lock_text(fd: int, text: str) -> None:
    """Replace the content of the lock file held through ``fd`` (who holds it) with ``text``."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode(), 0)


def held_lock_text(path: Path) -> str | None:
    """The text of lock file ``path`` while someone holds its ``flock``; None when nobody does (or no file).

    Tries a shared lock without waiting and drops it at once, so it never holds anyone up. A
    held file whose text cannot be read gives ``""``.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return path.read_text()
            except OSError:
                return ""
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


#: ``<tmp>/mplab-<kind>-<pid of the creator>-XXXXXXXX``
_OWNED = re.compile(r"^mplab-([a-z]+)-(\d+)-")


def owned_temp_dir(kind: str) -> tempfile.TemporaryDirectory:
    """A scratch directory ``mplab-<kind>-<pid>-XXXXXXXX`` in the temp dir, removed when closed (or collected)."""
    return tempfile.TemporaryDirectory(prefix=f"mplab-{kind}-{os.getpid()}-")


def make_owned_temp_dir(kind: str) -> Path:
    """Like ``owned_temp_dir``, but left to the caller to remove (``shutil.rmtree``)."""
    return Path(tempfile.mkdtemp(prefix=f"mplab-{kind}-{os.getpid()}-"))


def orphaned_temp_dirs() -> list[Path]:
    """Scratch directories (``owned_temp_dir``) whose creating process no longer exists."""
    out = []
    for d in Path(tempfile.gettempdir()).glob("mplab-*-*-*"):
        m = _OWNED.match(d.name)
        if not (m and d.is_dir()):
            continue
        try:
            os.kill(int(m.group(2)), 0)
        except ProcessLookupError:
            out.append(d)
        except PermissionError:
            pass  # alive, someone else's
    return sorted(out)
