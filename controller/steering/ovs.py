"""A real Open vSwitch run by hand in a namespace, and its splice into the emulated testbed.

No systemd and no openvswitch kernel module here: ``ovsdb-server`` and ``ovs-vswitchd`` run as
our own child processes inside the switch's namespace, with their own run/db/log directory
(``OVS_RUNDIR`` etc., so nothing lands in /var/run/openvswitch) and pidfiles, and are stopped by
the process we started. The bridge uses the userspace datapath (``datapath_type=netdev``);
``fail_mode=secure`` (no controller, no forwarding beyond the flows installed) and OVS listens
for its controller (``ptcp:``) so that a restarted controller reconnects at once instead of after
OVS's 4-9 s back-off. Every veth into an OVS port has transmit checksum offload off: the netdev
datapath does not fill in the checksums a veth leaves to "hardware", and TCP would fail.

``splice_switch`` puts such a switch on the emulated testbed's sender links: the ``snd``-``ap`` and
``snd``-``enb`` veths each get the bridge in the middle (L2: addresses, routes and the sender's
shaping are unchanged), so the OpenFlow entries decide what reaches each access network.
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import PreflightError
from harness.hosts.local import BackgroundProcess, Host, NamespaceHost
from harness.hosts.netcmd import addr_add_argv, link_up_argv, netns_add_argv, route_add_argv, veth_argv
from harness.hosts.ready import wait_until

if TYPE_CHECKING:
    from harness.testbeds.emulated import EmulatedTestbed

log = logging.getLogger("mplab.controller.ovs")

#: Debian's alternatives link (to /usr/lib/openvswitch-switch/ovs-vswitchd, or the DPDK build).
VSWITCHD = "ovs-vswitchd"
SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
#: How often flow statistics are refreshed (ms): the lag of OpenFlow byte counters.
REVALIDATE_MS = 100
#: Deadline for the daemons' sockets and the bridge's ports.
READY_S = 15.0


def tx_csum_off_argv(dev: str) -> list[str]:
    return ["ethtool", "-K", dev, "tx", "off"]


@dataclass
class OvsSwitch:
    """ovsdb-server + ovs-vswitchd in ``host``'s namespace, state under ``state_dir``."""

    host: Host
    state_dir: Path
    _procs: dict[str, BackgroundProcess] = field(default_factory=dict)

    @property
    def db_sock(self) -> str:
        return f"unix:{self.state_dir}/db.sock"

    def _env(self) -> list[str]:
        d = str(self.state_dir)
        return ["env", f"OVS_RUNDIR={d}", f"OVS_DBDIR={d}", f"OVS_LOGDIR={d}", f"OVS_SYSCONFDIR={d}"]

    def vsctl(self, *args: str, timeout: float = 15.0) -> str:
        return self.host.run([*self._env(), "ovs-vsctl", f"--db={self.db_sock}", "--timeout=10", *args],
                             timeout=timeout).stdout

    @staticmethod
    def check(host: Host) -> None:
        missing = [p for p in ("ovsdb-tool", "ovsdb-server", "ovs-vsctl", VSWITCHD) if host.which(p) is None]
        if missing:
            raise PreflightError(f"Open vSwitch is not installed (missing {missing}): "
                                 "apt install openvswitch-switch (make setup does)")

    def start(self) -> None:
        self.check(self.host)
        d = self.state_dir
        d.mkdir(parents=True, exist_ok=True)
        self.host.run(["ovsdb-tool", "create", f"{d}/conf.db", SCHEMA])
        try:
            self._procs["ovsdb-server"] = self.host.start(
                [*self._env(), "ovsdb-server", f"{d}/conf.db", f"--remote=p{self.db_sock}",
                 f"--pidfile={d}/ovsdb-server.pid", f"--unixctl={d}/ovsdb-server.ctl",
                 f"--log-file={d}/ovsdb-server.log"], label="ovsdb-server")
            self._wait_file(d / "db.sock", "ovsdb-server")
            self.vsctl("--no-wait", "init")
            # Flow statistics reach OpenFlow when the revalidators run (default every 500 ms); the
            # controller measures with them and reads them just before deleting a flow.
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".", f"other_config:max-revalidator={REVALIDATE_MS}")
            self._procs["ovs-vswitchd"] = self.host.start(
                [*self._env(), VSWITCHD, self.db_sock, f"--pidfile={d}/ovs-vswitchd.pid",
                 f"--unixctl={d}/ovs-vswitchd.ctl", f"--log-file={d}/ovs-vswitchd.log"], label="ovs-vswitchd")
            self._wait_file(d / "ovs-vswitchd.ctl", "ovs-vswitchd")
        except BaseException:
            self.stop()
            raise

    def _wait_file(self, path: Path, who: str) -> None:
        wait_until(path.exists, READY_S, f"{who} ({path})", proc=self._procs[who])

    def add_bridge(self, bridge: str, ports: dict[str, int], listen_port: int,
                   listen_address: str | None = "127.0.0.1") -> None:
        """A netdev bridge with ``ports`` (device -> OpenFlow port number), fail-secure, OpenFlow 1.3,
        listening for its controller on ``listen_address``:``listen_port`` (None: every address, as a lab
        switch's ``set-controller BR ptcp:PORT``)."""
        args = ["--", "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
                "protocols=OpenFlow13", "fail_mode=secure", "other-config:disable-in-band=true"]
        for dev, ofport in ports.items():
            args += ["--", "add-port", bridge, dev, "--", "set", "interface", dev, f"ofport_request={ofport}"]
        self.vsctl(*args)
        self.vsctl("set-controller", bridge, f"ptcp:{listen_port}" + (f":{listen_address}" if listen_address else ""))
        seen: dict[str, str] = {}

        def numbered() -> bool:
            got = self.vsctl("--format=csv", "--no-headings", "--columns=name,ofport", "list", "interface")
            seen.clear()
            seen.update({ln.split(",")[0].strip('"'): ln.split(",")[1] for ln in got.splitlines() if "," in ln})
            return all(seen.get(dev) == str(n) for dev, n in ports.items())

        wait_until(numbered, READY_S, f"OVS ports of {bridge}", poll_s=0.05, detail=lambda: f"want {ports}, have {seen}")

    def stop(self) -> None:
        """Stop the daemons we started (vswitchd first), by their process; idempotent."""
        for name in ("ovs-vswitchd", "ovsdb-server"):
            proc = self._procs.pop(name, None)
            if proc is not None:
                try:
                    proc.stop(grace_s=2.0)
                except Exception as exc:  # noqa: BLE001 - teardown is best effort, it must go on
                    log.warning("stopping %s: %s", name, exc)


@dataclass
class SpliceRig:
    """An OVS bridge on the emulated sender's links to the AP and the eNB (what OpenFlow steering drives)."""

    switch: OvsSwitch
    netns: str
    bridge: str
    #: network -> (port towards the sender, port towards the gateway).
    ports: dict[str, tuple[int, int]]
    listen_port: int
    root: Host

    def stop(self) -> None:
        """Daemons, then the namespace (the testbed's teardown removes the rest); idempotent."""
        self.switch.stop()
        self.root.run(["ip", "netns", "del", self.netns], check=False)
        shutil.rmtree(self.switch.state_dir, ignore_errors=True)


def splice_switch(tb: EmulatedTestbed, listen_port: int = 6653, listen_address: str | None = "127.0.0.1") -> SpliceRig:
    """Put a real OVS bridge between the sender and the AP / eNB of a running EmulatedTestbed.

    The gateway end of each sender link moves into a switch namespace ``<prefix>sw`` and becomes
    a bridge port; a new veth gives the gateway back its address. Nothing forwards until a
    controller installs flows (fail-secure). OVS listens for its controller on ``listen_address``
    in that namespace (None: on every address, for a controller outside it, as on a lab).
    """
    root = tb.root
    ns = f"{tb.prefix}sw"
    root.run(netns_add_argv(ns))
    sw = NamespaceHost("sw", ns)
    rig = SpliceRig(OvsSwitch(sw, tb.state_dir / "ovs"), ns, "br-steer",
                    {"wifi": (1, 2), "lte": (3, 4)}, listen_port, root)
    try:
        sw.run(link_up_argv("lo"))
        ports: dict[str, int] = {}
        for radio, sub in (("wifi", "10.0.1"), ("lte", "10.0.2")):
            gw = tb.gateway(radio)
            up, down = rig.ports[radio]
            # The gateway's end of the sender link moves into the switch (its address goes with it).
            gw.run(["ip", "link", "set", "dev", "to-snd", "netns", ns])
            sw.run(["ip", "addr", "flush", "dev", "to-snd"])
            sw.run(["ip", "link", "set", "dev", "to-snd", "name", f"s-{radio}-up"])
            root.run(veth_argv(f"s-{radio}-dn", ns, "to-snd", gw.netns))
            gw.run(addr_add_argv("to-snd", f"{sub}.2/24"))
            for h, dev in ((sw, f"s-{radio}-up"), (sw, f"s-{radio}-dn"), (gw, "to-snd")):
                h.run(tx_csum_off_argv(dev))
                h.run(link_up_argv(dev))
            gw.run(route_add_argv(f"{tb.server_address}/32", via=f"{sub}.1"))
            ports[f"s-{radio}-up"], ports[f"s-{radio}-dn"] = up, down
        for radio in ("wifi", "lte"):
            tb.sender.run(tx_csum_off_argv(tb.sender_device(radio)))
        rig.switch.start()
        rig.switch.add_bridge(rig.bridge, ports, listen_port, listen_address)
    except BaseException:
        rig.stop()
        raise
    return rig
