"""The real hostapd and wpa_supplicant read the files ``wifi.render`` writes.

Both parse their whole configuration before they touch a radio, so each is started on a
rendered file in a scratch network namespace (no wireless device there) and passes when
it gets as far as its nl80211 driver: whatever it says from there on is about the
missing radio, not the file. A configuration error ("Line 12: unknown configuration
item ...") fails the trial and is its detail. Debian 12 packages: hostapd 2.10 and
wpasupplicant 2.10 (``make setup`` installs both).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harness.deploy.trial import Trial, Verdict, find_program, run_trial, scratch_netns
from harness.deploy.files import ConfigFile

#: Lines that show the program has parsed its file and gone on to its driver (hostapd and
#: wpa_supplicant 2.10, src/drivers/driver_nl80211.c: without cfg80211 "'nl80211' generic
#: netlink not found"; with it but no such interface "Could not read interface wlan0 flags").
DRIVER_REACHED = (r"^nl80211: ", r"Failed to initialize driver", r"driver initialization failed",
                  r"Could not read interface \S+ flags", r"Failed to initialize driver interface")

#: hostapd/config_file.c and wpa_supplicant/config_file.c error lines.
HOSTAPD_ERRORS = (r"^Line \d+: ", r"errors? found in configuration file", r"Could not open configuration file",
                  r"Failed to set up interface with")
SUPPLICANT_ERRORS = (r"^Line:? \d+", r"Failed to read or parse configuration", r"Failed to open config file")


def trials(files: Sequence[ConfigFile[str]], where: Path, bin_dirs: Sequence[str] = ()) -> tuple[list[Trial], list[Verdict]]:
    """A trial per file written under ``where`` (mode kept), and verdicts for programs that are absent."""
    out, absent = [], []
    programs = {"hostapd": find_program("hostapd", bin_dirs),
                "wpa_supplicant": find_program("wpa_supplicant", bin_dirs)}
    for f in files:
        path = where / f.machine / f.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.text)
        os.chmod(path, f.mode)
        supplicant = f.unit.startswith("wpa_supplicant")
        prog = "wpa_supplicant" if supplicant else "hostapd"
        name = f"{prog} {f.machine}"
        if programs[prog] is None:
            absent.append(Verdict(name, None, f"{prog} is not installed (Debian: apt-get install "
                                              f"{'wpasupplicant' if supplicant else 'hostapd'})"))
            continue
        if supplicant:
            ifname = f.unit.split("@", 1)[1]
            argv = (programs[prog], "-i", ifname, "-D", "nl80211", "-c", str(path))
            out.append(Trial(name, argv, DRIVER_REACHED, SUPPLICANT_ERRORS))
        else:
            out.append(Trial(name, (programs[prog], str(path)), DRIVER_REACHED, HOSTAPD_ERRORS))
    return out, absent


def check_files(files: Sequence[ConfigFile[str]], where: Path, netns: str, bin_dirs: Sequence[str] = ()) -> list[Verdict]:
    """Each file through its real daemon in the scratch namespace ``netns``; one verdict per file."""
    todo, verdicts = trials(files, where, bin_dirs)
    if todo:
        with scratch_netns(netns) as ns:
            verdicts = [run_trial(ns, t) for t in todo] + verdicts
    return verdicts
