"""Which configuration layout to write, from the installed (or declared) versions.

srsRAN 4G: one layout for 22.04 to 23.11 (``SRSRAN_RELEASES``). Its rb.conf carries the 5G
sections that ``parse_rb()`` requires since 22.04 (five_qi_config) and 22.04.1 (srb1/srb2_5g_config;
an older srsenb ignores them), and every enb.conf/ue.conf key is an option of each release's
``srsenb/src/main.cc``/``srsue/src/main.cc``. Earlier and later releases are refused.

Open5GS:
Open5GS changed its YAML layout between v2.6.6 and v2.7.0 (server/client blocks,
gummei/tai as lists, peers moved under the daemon; commit e92293e0a, 2023-11), and again
in small ways in v2.7.1 (``session: subnet + gateway``, ``logger: file: path:``). mplab
writes the 2.6 layout for 2.6.x and the 2.7 layout for 2.7.x and 2.8.x; other versions
are refused rather than guessed (the two layouts side by side: docs/lte.md). v2.7.0 onwards
needs a ``global:`` section in every daemon's file (without it the pools are sized for 0 UEs and
the daemon aborts: ``epoll_create() failed (22:Invalid argument)``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from harness.errors import ConfigError, MplabError, PreflightError
from harness.hosts.local import Host

Schema = Literal["2.6", "2.7"]

_VERSION_RE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, order=True)
class Open5gsVersion:
    """An Open5GS release number and the configuration schema it reads."""

    major: int
    minor: int
    patch: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"

    @property
    def schema(self) -> Schema:
        """The configuration layout generation ("2.6" or "2.7"); ``ConfigError`` for unknown versions."""
        if (self.major, self.minor) == (2, 6):
            return "2.6"
        if (self.major, self.minor) in ((2, 7), (2, 8)):
            return "2.7"
        raise ConfigError(f"Open5GS {self} is not a version mplab knows (2.6.x, 2.7.x, 2.8.x); "
                          "pin lte.epc.version to the closest one only after checking its sample configs")

    @property
    def session_gateway_split(self) -> bool:
        """v2.7.1+: ``session: - subnet: 10.45.0.0/16`` plus ``gateway: 10.45.0.1``."""
        return (self.major, self.minor, self.patch) >= (2, 7, 1)

    @property
    def logger_file_path(self) -> bool:
        """v2.7.1+: ``logger: file: path: <file>`` instead of ``logger: file: <file>``."""
        return (self.major, self.minor, self.patch) >= (2, 7, 1)


def parse_version(text: str, source: str = "version") -> Open5gsVersion:
    """The first x.y.z in ``text`` (``open5gs-mmed -v`` output, a dpkg version, or "2.7.2")."""
    m = _VERSION_RE.search(text)
    if not m:
        raise ConfigError(f"no Open5GS version (x.y.z) in {text.strip()[:200]!r}", source=source)
    return Open5gsVersion(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def version_argvs() -> list[list[str]]:
    """Commands that reveal the installed Open5GS version, tried in order."""
    return [["open5gs-mmed", "-v"], ["dpkg-query", "-W", "-f=${Version}", "open5gs-mme"]]


def detect_version(host: Host) -> Open5gsVersion:
    """Ask ``host`` which Open5GS it has (``PreflightError`` when none answers)."""
    tried = []
    for argv in version_argvs():
        res = host.run(argv, check=False, timeout=15)
        out = (res.stdout + "\n" + res.stderr).strip()
        tried.append(f"$ {' '.join(argv)} -> exit {res.returncode}: {out[:120]!r}")
        if res.returncode == 0 and _VERSION_RE.search(out):
            return parse_version(out, source=f"{host.name}: {' '.join(argv)}")
    raise PreflightError(f"[{host.name}] cannot tell which Open5GS is installed ({'; '.join(tried)}); "
                         "install open5gs or pin lte.epc.version in the inventory")


#: srsRAN 4G releases (year, month) whose parsers and example configs the srsran templates were checked
#: against (release_22_04 .. release_23_11; 22.04.1 and 23.04.1 report 22.04.0/23.04.0... as their x.y).
SRSRAN_RELEASES = ((22, 4), (22, 10), (23, 4), (23, 11))


@dataclass(frozen=True, order=True)
class SrsranVersion:
    """A srsRAN 4G release number (``srsenb --version`` prints "Version 23.4.0" for 23.04)."""

    major: int
    minor: int
    patch: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.patch}"

    @property
    def templates(self) -> str:
        """The template directory for this release; ``ConfigError`` for releases mplab has not checked."""
        if (self.major, self.minor) in SRSRAN_RELEASES:
            return "srsran"
        known = ", ".join(f"{a}.{b:02d}" for a, b in SRSRAN_RELEASES)
        raise ConfigError(f"srsRAN 4G {self} is not a release mplab knows ({known}); its srsenb may read "
                          "rb.conf/enb.conf differently: install one of these, or check its example configs and "
                          "add it to lte.version.SRSRAN_RELEASES")


def parse_srsran_version(text: str, source: str = "version") -> SrsranVersion:
    """The first x.y[.z] in ``text`` ("Version 23.04.0", "23.11", "release_23_04")."""
    m = re.search(r"(\d+)[._](\d+)(?:[._](\d+))?", text)
    if not m:
        raise ConfigError(f"no srsRAN version (yy.mm[.p]) in {text.strip()[:200]!r}", source=source)
    return SrsranVersion(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


#: The newest release of each Open5GS series whose configuration mplab's templates were checked against:
#: a pin of "2.6" means this one (the 2.6 template set at its newest patch level).
OPEN5GS_NEWEST = {(2, 6): Open5gsVersion(2, 6, 6), (2, 7): Open5gsVersion(2, 7, 2), (2, 8): Open5gsVersion(2, 8, 0)}


def parse_pin(text: str, source: str = "lte.epc.version") -> tuple[Open5gsVersion, bool]:
    """An Open5GS pin: "2.7.2" exactly, or "2.6" for the newest 2.6.x mplab knows. Returns (version, series-only)."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not m:
        raise ConfigError(f"Open5GS version {text!r} is not x.y or x.y.z (e.g. 2.6 or 2.7.2)", source=source)
    major, minor = int(m.group(1)), int(m.group(2))
    if m.group(3) is not None:
        return Open5gsVersion(major, minor, int(m.group(3))), False
    if (major, minor) not in OPEN5GS_NEWEST:
        known = ", ".join(f"{a}.{b}" for a, b in OPEN5GS_NEWEST)
        raise ConfigError(f"Open5GS {major}.{minor} is not a series mplab has templates for ({known})", source=source)
    return OPEN5GS_NEWEST[(major, minor)], True


def decide_open5gs(pinned: str | None, installed: Open5gsVersion | None,
                   where: str = "the EPC host (open5gs-mmed -v)") -> Open5gsVersion:
    """The one Open5GS version `lte render`, `lte up` and `check-configs` write for.

    The installed version wins when known; a pin that disagrees with it is refused naming both (a 2.6 file
    on a 2.7.2 host makes every daemon abort). Without an installed version the pin decides; without either,
    ``ConfigError``.
    """
    if pinned is None:
        if installed is None:
            raise ConfigError("no Open5GS version: pin lte.epc.version (e.g. 2.7.2 or 2.6), or give --version / let "
                              "mplab read it from the EPC host (`open5gs-mmed -v`)", source="lte.epc.version")
        return installed
    want, series = parse_pin(pinned)
    if installed is None:
        return want
    same = (installed.major, installed.minor) == (want.major, want.minor) if series else installed == want
    if not same:
        raise ConfigError(f"Open5GS {pinned} is pinned but {where} has {installed}: pin {installed} (or "
                          f"{installed.major}.{installed.minor}), or install {pinned} there", source="lte.epc.version")
    return installed


def srsran_version_argv() -> list[str]:
    """srsenb prints its release ("Version 23.04.0") and exits."""
    return ["srsenb", "--version"]


def detect_srsran(host: Host, program: str = "srsenb") -> SrsranVersion | None:
    """``srsenb --version`` on ``host`` (None when srsenb is not there or does not say)."""
    try:
        res = host.run([program, "--version"], check=False, timeout=15)
    except (OSError, MplabError):                    # absent: "unknown", reported by the caller
        return None
    m = re.search(r"Version (\d+)\.(\d+)\.(\d+)", res.stdout + res.stderr)
    return SrsranVersion(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def decide_srsran(pinned: str | None, installed: SrsranVersion | None,
                  where: str = "the eNB host") -> SrsranVersion | None:
    """The srsRAN 4G release: a pin that disagrees (year.month) with what ``where`` runs is refused naming both."""
    want = None if pinned is None else parse_srsran_version(pinned, source="lte.enb.version")
    if want is not None and installed is not None and (want.major, want.minor) != (installed.major, installed.minor):
        raise ConfigError(f"srsRAN 4G {pinned} is pinned but {where} runs {installed} (srsenb --version): "
                          f"pin {installed.major}.{installed.minor:02d}, or install {pinned} there",
                          source="lte.enb.version")
    v = installed or want
    if v is not None:
        v.templates                                                  # an unknown release is refused here  # noqa: B018 - read for its effect: an unknown release raises here
    return v
