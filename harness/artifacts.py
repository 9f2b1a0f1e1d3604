"""Artifact folders (``datasets/<name>``, ``models/<name>``): checksum manifests, and the previous
version set aside when a folder is rebuilt.

A ``SHA256SUMS`` file lists every file of the folder.

The manifest is in the format of coreutils' ``sha256sum`` (``<hex>  <relative path>``), so
``sha256sum -c SHA256SUMS`` checks a folder without mplab. ``write_sums`` writes it last, over
everything else in the folder; ``verify_sums`` refuses a folder whose files differ from it, miss
from it or were added to it. The sha256 of the manifest itself (``manifest_digest``) names the
whole folder: registries record it beside the upload, so an artifact and its manifest tampered
with together are still refused on pull. Standard library only (controllers import it).
"""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from harness.errors import MplabError

SUMS_NAME = "SHA256SUMS"
_CHUNK = 1 << 20


class ChecksumMismatch(MplabError):
    """A file does not match its manifest, or the manifest does not match its recorded digest."""


def file_sha256(path: Path) -> str:
    """Hex sha256 of one file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def payload_files(folder: Path) -> list[str]:
    """Relative paths of the files a manifest covers: every regular file but the manifest and dot-files."""
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and rel.as_posix() != SUMS_NAME and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return out


def render_sums(folder: Path) -> bytes:
    """The manifest of ``folder`` as bytes (sorted by path)."""
    return "".join(f"{file_sha256(folder / rel)}  {rel}\n" for rel in payload_files(folder)).encode()


def manifest_digest(data: bytes) -> str:
    """``sha256:<hex>`` of a manifest's bytes: the identity of the whole folder."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_sums(folder: Path) -> str:
    """Write ``folder/SHA256SUMS`` over every other file; returns the manifest digest."""
    from harness.files import atomic_write

    data = render_sums(folder)
    atomic_write(folder / SUMS_NAME, data)
    return manifest_digest(data)


def parse_sums(data: bytes, source: str) -> dict[str, str]:
    """``{relative path: hex}`` from a manifest; refuses malformed lines and paths leaving the folder."""
    out: dict[str, str] = {}
    for n, line in enumerate(data.decode().splitlines(), start=1):
        hexd, sep, rel = line.partition("  ")
        if not sep or len(hexd) != 64 or any(c not in "0123456789abcdef" for c in hexd):
            raise ChecksumMismatch(f"{source}:{n}: not a sha256sum line: {line[:80]!r}")
        if rel.startswith("/") or ".." in Path(rel).parts:
            raise ChecksumMismatch(f"{source}:{n}: path {rel!r} leaves the folder")
        out[rel] = hexd
    return out


def verify_sums(folder: Path, expected_digest: str | None = None) -> str:
    """Check ``folder`` against its ``SHA256SUMS`` (and the manifest against ``expected_digest``).

    Args:
        folder: a directory holding ``SHA256SUMS``.
        expected_digest: the manifest digest recorded elsewhere (a registry tag); None skips that check.

    Returns:
        The manifest digest.

    Raises:
        ChecksumMismatch: naming the first file that differs, is missing, or is not listed.
    """
    sums_path = folder / SUMS_NAME
    if not sums_path.is_file():
        raise ChecksumMismatch(f"{folder} has no {SUMS_NAME}: cannot check its files")
    data = sums_path.read_bytes()
    digest = manifest_digest(data)
    if expected_digest is not None and digest != expected_digest:
        raise ChecksumMismatch(f"{sums_path}: the manifest is {digest}, the registry recorded {expected_digest}; "
                               "the copy was modified after it was published: do not use it")
    listed = parse_sums(data, str(sums_path))
    present = set(payload_files(folder))
    for rel, want in listed.items():
        if rel not in present:
            raise ChecksumMismatch(f"{folder / rel}: listed in {SUMS_NAME} but missing")
        got = file_sha256(folder / rel)
        if got != want:
            raise ChecksumMismatch(f"{folder / rel}: its sha256 digest {got[:16]}... differs from the one in "
                                   f"{SUMS_NAME} ({want[:16]}...); the file was modified: do not use it")
    extra = sorted(present - set(listed))
    if extra:
        raise ChecksumMismatch(f"{folder}: file(s) {extra} are not in {SUMS_NAME}")
    return digest


def set_aside(folder: Path, stamp: str | None = None) -> Path:
    """Rename ``folder`` to ``<folder>.<stamp>`` (UTC time stamp by default) so a rebuild keeps it; returns the new path.

    Never overwrites: a name already taken gets a numeric suffix.
    """
    import time

    stamp = stamp or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = folder.with_name(f"{folder.name}.{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = folder.with_name(f"{folder.name}.{stamp}-{n}")
    folder.rename(target)
    return target


class FolderPolicy:
    """What a build does when its output folder already holds a dataset or model."""

    REFUSE = "refuse"  # the default: say so, and how to proceed
    KEEP_PREVIOUS = "keep-previous"  # rename the old folder to <name>.<UTC stamp>
    OVERWRITE = "overwrite"  # --force: remove the old folder once the new one is complete

    @staticmethod
    def from_flags(force: bool, keep_previous: bool) -> str:
        """The policy the command-line flags ``--force`` and ``--keep-previous`` ask for."""
        from harness.errors import ConfigError

        if force and keep_previous:
            raise ConfigError("--force replaces the old folder, --keep-previous keeps it: choose one", field="--force")
        return FolderPolicy.OVERWRITE if force else FolderPolicy.KEEP_PREVIOUS if keep_previous else FolderPolicy.REFUSE


def check_output(out: Path, marker: str, policy: str, what: str) -> None:
    """Refuse before any work when ``out/marker`` exists and the policy is REFUSE."""
    from harness.errors import ConfigError

    if policy not in (FolderPolicy.REFUSE, FolderPolicy.KEEP_PREVIOUS, FolderPolicy.OVERWRITE):
        raise ConfigError(f"unknown folder policy {policy!r}")
    if (out / marker).exists() and policy == FolderPolicy.REFUSE:
        raise ConfigError(f"{out} already holds a {what}; choose another name, pass --keep-previous "
                          f"(the old one is renamed {out.name}.<UTC time>) or --force (it is replaced)")


@contextlib.contextmanager
def staged_folder(out: Path, policy: str) -> Iterator[tuple[Path, list[Path]]]:
    """A temporary folder beside ``out`` to build into; on success it becomes ``out``.

    Yields ``(staging folder, previous)``; after the block, ``previous`` holds where the old
    folder went (KEEP_PREVIOUS) or stays empty. A failed build leaves ``out`` untouched.
    """
    import shutil
    import tempfile

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    previous: list[Path] = []
    try:
        yield tmp, previous
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        if policy == FolderPolicy.KEEP_PREVIOUS:
            previous.append(set_aside(out))
        else:
            shutil.rmtree(out)
    tmp.chmod(0o755)  # mkdtemp makes it 0700
    tmp.rename(out)

