"""Bench: what the LTE deploy costs through SSH compared with a namespace, and what batching saves.

Run as root:  uv run python bench/lte_deploy.py
Prints ratios measured in one run (absolute times depend on the machine). Uses the same
namespaces, real sshd and stand-in daemons as tests/test_lte_deploy.py.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the stand-in daemons (tests/standins)

import standins
from harness.upkeep.clean import clean_prefix
from harness.hosts.local import LocalHost, NamespaceHost
from harness.hosts.netcmd import veth_argv
from harness.deploy.services import Systemd
from rigs.sshrig import SshdRig
from harness.deploy.files import push_file, push_files
from lte.deploy import LteHosts, lte_down, lte_up
from lte.render import render_all
from lte.version import parse_version
from rigs.ltelab import DAEMON_KIND, deploy_inventory

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    prefix = f"mplab-b6{uuid.uuid4().hex[:4]}-"
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    root = LocalHost("root")
    rig = None
    sdir = tmp / "standins"
    try:
        for ns in ("enb", "epc"):
            root.run(["ip", "netns", "add", prefix + ns])
        root.run(veth_argv("s1", prefix + "epc", "s1", prefix + "enb"))
        for ns, addr in (("epc", "192.168.30.1/24"), ("enb", "192.168.30.2/24")):
            h = NamespaceHost(ns, prefix + ns)
            for argv in (["ip", "addr", "add", addr, "dev", "s1"], ["ip", "link", "set", "s1", "up"],
                         ["ip", "link", "set", "lo", "up"]):
                h.run(argv)
        inv = deploy_inventory(tmp)
        units = {u: standins.daemon_argv(k, f"{inv.lte.epc.config_dir}/{k}.yaml") for u, k in DAEMON_KIND.items()}
        units["srsenb"] = standins.daemon_argv("srsenb", f"{inv.lte.enb.config_dir}/enb.conf")
        tools = standins.install(sdir, units)
        rig = SshdRig(prefix)
        rig.add("enb", prefix + "enb")
        rig.add("epc", prefix + "epc")

        def hosts(kind):
            enb, epc = ((NamespaceHost("enb", prefix + "enb"), NamespaceHost("epc", prefix + "epc")) if kind == "netns"
                        else (rig.ssh_host("enb"), rig.ssh_host("epc")))
            svc = {r: Systemd(h, str(tools["systemctl"]), str(tools["journalctl"])) for r, h in (("enb", enb), ("epc", epc))}
            return LteHosts(enb=enb, epc=epc, services=svc)

        t = time.perf_counter()
        for _ in range(20):
            render_all(inv, parse_version("2.7.2"))
        render_ms = (time.perf_counter() - t) / 20 * 1000

        walls = {}
        for kind in ("netns", "ssh"):
            h = hosts(kind)
            t = time.perf_counter()
            lte_up(inv, h, None, None, settle_s=0.2)
            walls[kind] = time.perf_counter() - t
            lte_down(inv, h)
        h = hosts("ssh")
        files = [f for f in render_all(inv, parse_version("2.7.2")) if f.machine == "epc"]
        h.epc.run(["true"])                      # connect first: set-up cost is not what is compared
        batched = per_file = 0.0
        for _ in range(5):                       # alternate, so drift hits both alike
            t = time.perf_counter()
            push_files(h.epc, files, "B")
            batched += time.perf_counter() - t
            t = time.perf_counter()
            for f in files:
                push_file(h.epc, f, "B")
            per_file += time.perf_counter() - t
        batched, per_file = batched / 5, per_file / 5
        h.epc.close()
        h.enb.close()
        print(f"render all 11 files: {render_ms:.1f} ms")
        print(f"lte_up (8 daemons, stand-ins) ssh/netns wall-time ratio: {walls['ssh'] / walls['netns']:.2f} "
              f"(netns {walls['netns']:.1f} s, ssh {walls['ssh']:.1f} s)")
        print(f"unchanged re-push of 7 EPC files over SSH, per-file/batched ratio: {per_file / batched:.1f} "
              f"(batched {batched * 1000:.0f} ms, per-file {per_file * 1000:.0f} ms)")
    finally:
        standins.stop_all(sdir)
        if rig is not None:
            rig.close()
        clean_prefix(prefix)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    # No options, but `--help` must describe the bench rather than run it (it needs root and takes a minute).
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    main()
