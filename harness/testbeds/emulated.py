"""The emulated testbed: real kernel, real MPTCP, real iperf3, in network namespaces.

Topology (namespace names carry the inventory's prefix, ``mplab-`` by default)::

    snd --to-ap---- ap  --rx<i>-- wlan0 [n<i>]
        --to-enb--- enb --rx<i>-- lte0  [n<i>]

Each receiver's downlink is shaped where a radio's queue would be: on the AP's and the
eNB's device towards it (``rx<i>``), an HTB class (its rate) over a byte FIFO (its
buffer: WiFi shallow, LTE deep; this kernel has no netem). The radio loop
(``harness.emulation.radiolink``, a process in the sender namespace) re-shares each access
network among the receivers active on it as they start and finish, by the inventory's
sharing model (``harness.emulation.sharing``). Radio loss, when configured, is an
nftables rule per device in table ``mplab_radio`` of the AP or eNB; every shaped device has a
rule with named counters there (packets seen, packets dropped by the loss rule), which
``radio_loss_counters`` reads for loss estimates that a full queue does not disturb. Each
receiver routes by default over WiFi and by source address over LTE, so an MPTCP
connection starts on WiFi and its LTE endpoint adds the second subflow.

Addresses: sender service address (inventory) on ``lo``; snd-ap 10.0.1.0/24,
snd-enb 10.0.2.0/24; receiver *i* has 10.10.<i>.2 (WiFi) and 10.20.<i>.2 (LTE).

Everything created carries the prefix or lives inside a namespace that does, so
``harness.upkeep.clean.clean_prefix`` finds it after a crash; the one change outside
namespaces (names added to ``net.ipv4.tcp_allowed_congestion_control``) is recorded
machine-wide under /run/mplab (``harness.machine``) and undone once no live testbed (of
any prefix) needs those names.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from harness.cc import CongestionControl
from harness.cc.timers import TimerScaling
from harness.errors import CommandError, ConfigError, MplabError, NotReady, PreflightError, TrafficError
from harness.machine import allow_ccs, state_dir, write_state
from harness.hosts.local import BackgroundProcess, Host, LocalHost, NamespaceHost
from harness.config.inventory import Inventory
from harness.config.scenario import MODE_RADIOS
from harness.meters.base import Meter
from harness.meters.drivers import meter_from_inventory
from harness.meters.emulated import SAMPLE_PERIOD_S, device_argv
from harness.hosts.ready import time_left, wait_until
from harness.hosts.netcmd import (
    addr_add_argv, link_up_argv, mptcp_endpoint_argv, mptcp_flush_argv, mptcp_limits_argv, netns_add_argv,
    offloads_off_argv, radio_counters_argv, radio_loss_argvs, radio_qdisc_argvs, route_add_argv, rule_add_argv,
    sysctl_argv, veth_argv,
)
from harness.upkeep import claim as claims
from harness.emulation.access import AccessKinds, LteAccess, LteLink, lte_access_for
from harness.files import atomic_write
from harness.testbeds.base import (Health, LossCounters, Node, NodeInterface, Repair, TailSkip, Testbed,
                                   parse_loss_counters)
from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.upkeep.preflight import Check, failed_essentials, one_line
from harness.emulation import delayline
from harness.testbeds.health import receiver_routes, receiver_rules, repair_receiver
from harness.emulation.radiolink import LinkConfig, net_dev_column, radiolink_argv
from harness.emulation.sendertail import SenderTail, sender_pause
from harness.emulation.sharing import AccessNetwork
from harness.emulation.speedup import check_speedup, kernel_scaling, scale_inventory
from harness.traffic import Iperf3

log = logging.getLogger("mplab.emulation")

BASE_PORT = 5200
#: Policy-routing tables on each receiver.


def received_bytes(proc_net_dev: str, names: set[str]) -> int:
    """The received bytes of the devices ``names``, summed, from the text of a ``/proc/<pid>/net/dev``."""
    return sum(n for dev, n in net_dev_column(proc_net_dev, 0).items() if dev in names)


class EmulatedTestbed(Testbed):
    """Namespaces, veths, HTB, MPTCP endpoints, iperf3 servers and emulated meters, built from an inventory."""

    kind = "emulated"
    inventory_schema = "emulated"
    energy_source = "emulated"
    runs_here = True
    reads_queues = True
    splices_switch = True
    has_sessions = True

    def __init__(self, inventory: Inventory, root: Host | None = None, access_kinds: AccessKinds | None = None,
                 speedup: float = 1.0) -> None:
        if inventory.emulation is None:
            raise MplabError(f"inventory {inventory.name!r} has no emulation section: it is not an emulated testbed")
        check_speedup(inventory, speedup)
        # Built from the scaled inventory (harness.emulation.speedup): rates x S, times / S.
        super().__init__(scale_inventory(inventory, speedup))
        inventory = self.inventory
        self.speedup = speedup
        self.emu = inventory.emulation
        self.prefix = self.emu.namespace_prefix
        self.root = root or LocalHost("root")
        self.state_dir = state_dir(self.prefix)
        p = self.prefix
        self.ns = {"snd": f"{p}snd", "ap": f"{p}ap", "enb": f"{p}enb"}
        self.sender = NamespaceHost(inventory.sender.name, self.ns["snd"])
        self.ap = NamespaceHost("ap", self.ns["ap"])
        self.enb = NamespaceHost("enb", self.ns["enb"])
        self.server_address = str(inventory.sender.address)
        #: Receiver name -> its index *i* (from 1): its addresses are 10.10.<i>.2 and 10.20.<i>.2.
        self.index = {rx.name: i for i, rx in enumerate(inventory.receivers, start=1)}
        for i, rx in enumerate(inventory.receivers, start=1):
            self.ns[rx.name] = f"{p}{rx.name}"
            intfs = {
                "wifi": NodeInterface("wifi", rx.interfaces["wifi"].name, f"10.10.{i}.2"),
                "lte": NodeInterface("lte", rx.interfaces["lte"].name, f"10.20.{i}.2"),
            }
            self.nodes[rx.name] = Node(rx.name, NamespaceHost(rx.name, self.ns[rx.name]), intfs,
                                       rx.meter.kind, BASE_PORT + i)
        #: each receiver's LTE path: the emulated channel, or a real cell (``harness.emulation.access``)
        self.lte_access: dict[str, LteAccess] = {
            rx.name: lte_access_for(rx.interfaces["lte"].real_cell, inventory, access_kinds, self.root)
            for rx in inventory.receivers}
        self._devices: dict[str, BackgroundProcess] = {}
        self._radiolink: BackgroundProcess | None = None
        self._delaylines: dict[str, BackgroundProcess] = {}
        self._ccs: list[CongestionControl] = []
        #: At S > 1 the kernel's TCP timers / S on the testbed's sockets (``harness.cc.timers``), where it can.
        self.timers = TimerScaling(self.prefix, speedup) if speedup > 1 and kernel_scaling() else None
        self._timers_on = False
        self._up = False
        self._claim: claims.PrefixClaim | None = None

    @classmethod
    def build(cls, inventory: Inventory, access_kinds: AccessKinds | None = None,
              speedup: float = 1.0) -> EmulatedTestbed:
        return cls(inventory, access_kinds=access_kinds, speedup=speedup)

    # ------------------------------------------------------------ capabilities

    @property
    def name(self) -> str:
        """The namespace prefix: unique among the testbeds live on this machine."""
        return self.prefix

    @property
    def probe_host(self) -> Host:
        """The machine itself (the namespaces share its kernel)."""
        return self.root

    def energy_note(self) -> str:
        return "emulated: power model driven by real interface byte counters, read through the UM25C protocol"

    def lte_paths(self) -> dict[str, dict]:
        """Each receiver's LTE access: the emulated channel or a real cell (``harness.emulation.access``)."""
        return {name: access.describe() for name, access in self.lte_access.items()}

    def gateway(self, radio: str) -> Host:
        """The AP's namespace for ``wifi``, the eNB's for ``lte``."""
        return {"wifi": self.ap, "lte": self.enb}[radio]

    def downlink_device(self, receiver: str, radio: str) -> str:
        """``rx<i>`` in the AP's and in the eNB's namespace (*i*: the receiver's index)."""
        return f"rx{self.index[receiver]}"

    def sender_device(self, radio: str) -> str:
        return {"wifi": "to-ap", "lte": "to-enb"}[radio]

    @property
    def tcp_timers(self) -> str | None:
        """The scaled TCP timers the testbed's sockets run with (None: the kernel's own)."""
        return self.timers.describe() if self.timers is not None and self._timers_on else None

    def network_capacity_mbit(self) -> dict[str, float]:
        """The inventory's AP and cell capacities."""
        return {"wifi": float(self.emu.wifi_ap.capacity_mbit), "lte": float(self.emu.lte_cell.capacity_mbit)}

    def clean_stale(self, name: str) -> list[str]:
        """Remove what the copy with namespace prefix ``name`` left, unless a live testbed holds it."""
        if not name.startswith("mplab-") or claims.held_by_other(name) is not None:
            return []
        return clean_prefix(name, self.root, nested=False)

    # ------------------------------------------------------------ the prefix

    def claim(self, owner: str) -> None:
        """Claim the namespace prefix for ``owner`` (a campaign id); ``Busy`` naming the live holder."""
        if self._claim is None or not self._claim.held:
            self._claim = claims.PrefixClaim(self.prefix, owner)
            self._claim.acquire()

    def release_claim(self) -> None:
        if self._claim is not None:
            self._claim.release()

    # ------------------------------------------------------------ preflight

    @classmethod
    @contextlib.contextmanager
    def standalone_meters(cls, inventory: Inventory, receivers: Sequence[str],
                          note: Callable[[str], None] = log.info) -> Iterator[dict[str, Meter]]:
        """The meter devices inside the receivers' namespaces: this testbed's if it is up (its
        namespaces exist), else the testbed brought up for the block and torn down afterwards (root).
        Two readers on one meter steal each other's frames: not for a testbed a campaign is using."""
        with cls(inventory)._meters_for(receivers, note) as meters:
            yield meters

    @contextlib.contextmanager
    def _meters_for(self, receivers: Sequence[str], note: Callable[[str], None]) -> Iterator[dict[str, Meter]]:
        present = set(list_namespaces(self.root, self.prefix))
        bring_up = not set(self.ns.values()) <= present
        if not bring_up:
            note(f"emulated testbed {self.prefix}* is up: reading its meter devices")
        else:
            # Bring-up first removes everything under the prefix; with a short prefix ("mplab-") that would
            # include other testbeds on this machine (other prefixes that start with it). Refuse rather than
            # remove them.
            foreign = sorted(present - set(self.ns.values()))
            if foreign:
                raise ConfigError(f"namespace_prefix {self.prefix!r} also matches namespaces of another testbed "
                                  f"({', '.join(foreign[:4])}{', ...' if len(foreign) > 4 else ''}); bringing this "
                                  "one up would remove them. Give this inventory its own prefix "
                                  "(emulation.namespace_prefix)", field="emulation.namespace_prefix")
            bad = failed_essentials(self.preflight([]))
            if bad:
                raise PreflightError(f"cannot bring up the emulated testbed for its meters: {one_line(bad)}")
            note(f"bringing up emulated testbed {self.prefix}* for its meter devices (torn down afterwards)")
            self.setup([])
        try:
            all_meters = self.meters()
            yield {n: all_meters[n] for n in receivers}
        finally:
            if bring_up:
                self.teardown()

    def preflight(self, ccs: Sequence[CongestionControl]) -> list[Check]:
        checks: list[Check] = []
        root = self.root

        def add(name: str, ok: bool, detail: str, fix: str = "", essential: bool = True) -> None:
            checks.append(Check(root.name, name, ok, detail, fix, essential))

        add("root", os.geteuid() == 0, f"euid {os.geteuid()}", "run as root (namespaces need CAP_NET_ADMIN)")
        # nft: the loss rules and their counters (every shaped path has a counting rule).
        progs = [("ip", "iproute2"), ("tc", "iproute2"), ("ethtool", "ethtool"), ("sysctl", "procps"),
                 ("nft", "nftables")]
        for prog, pkg in progs:
            path = root.which(prog)
            add(f"program {prog}", path is not None, path or "not found", f"apt install {pkg}")
        mptcp = root.exists("/proc/sys/net/mptcp/enabled")
        add("kernel MPTCP", mptcp, "net.mptcp present" if mptcp else "no /proc/sys/net/mptcp",
            "use a kernel built with CONFIG_MPTCP=y (Linux >= 5.6; >= 5.19 recommended)")
        try:
            self.sender_iperf3 = Iperf3.check(root)
            add("iperf3", True, f"{self.sender_iperf3.version}, MPTCP via {self.sender_iperf3.mptcp_mode}")
        except PreflightError as exc:
            add("iperf3", False, str(exc), "apt install iperf3 mptcpize")
        for cc in ccs:
            try:
                cc.check(root)
                add(f"congestion control {cc.algorithm}", True, cc.implementation)
            except PreflightError as exc:
                add(f"congestion control {cc.algorithm}", False, str(exc), "see the message")
        for access in self.lte_access.values():
            checks += access.check(root)
        if self.timers is not None:
            # Not essential: without it the testbed runs as before, and every record says so (tcp_timers null).
            why = self.timers.check()
            add("TCP timers scaled", why is None, why or f"{self.timers.values.describe(None)} in {self.timers.cgroup}",
                "see the message; records then carry tcp_timers null", essential=False)
        return checks

    # ------------------------------------------------------------ setup

    def setup(self, ccs: Sequence[CongestionControl]) -> None:
        """Claim the prefix, clear stale state with it, then build the topology, servers and meter devices."""
        # Before anything is cleared: a live testbed on this prefix is refused, never torn down.
        self.claim(f"a testbed of pid {os.getpid()}")
        stale = clean_prefix(self.prefix, self.root, nested=False)
        if stale:
            log.info("removed stale testbed state: %s", ", ".join(stale))
        needs = [cc.sock_name for cc in ccs]
        self._write_state({"prefix": self.prefix, "needs": needs, "created": time.time()})
        self._up = True
        try:
            self._build_topology()
            # Register first: the kernel refuses to allow a name it does not have (BPF struct_ops).
            for cc in ccs:
                self._ccs.append(cc)
                cc.setup(self.root, owner=self.prefix)
            allow_ccs(self.root, needs)
            self._scale_timers()
            if self.sender_iperf3 is None:
                self.sender_iperf3 = Iperf3.check(self.root)
            for node in self.nodes.values():
                node.iperf3 = self.sender_iperf3
            self._start_devices()
            self._start_radiolink()
            self._start_delaylines()
            self.ensure_servers()
        except BaseException:
            self.teardown()
            raise

    def _scale_timers(self) -> None:
        """At S > 1: the testbed's cgroup with the timer program, joined by every process its hosts start."""
        if self.timers is None:
            return
        why = self.timers.check()
        if why:
            log.warning("TCP timers not scaled at S = %g: %s (records say tcp_timers null)", self.speedup, why)
            return
        self.timers.setup()
        self._timers_on = True
        for host in (self.sender, self.ap, self.enb, *(node.host for node in self.nodes.values())):
            host.cgroup = self.timers.cgroup

    def _write_state(self, state: dict) -> None:
        write_state(self.prefix, state)

    def _build_topology(self) -> None:
        ns = self.ns
        root = self.root
        for name in ns.values():
            root.run(netns_add_argv(name))
        hosts = {"snd": self.sender, "ap": self.ap, "enb": self.enb,
                 **{n: node.host for n, node in self.nodes.items()}}
        for h in hosts.values():
            h.run(link_up_argv("lo"))
        # Sender side links.
        to_ap, to_enb = self.sender_device("wifi"), self.sender_device("lte")
        root.run(veth_argv(to_ap, ns["snd"], "to-snd", ns["ap"]))
        root.run(veth_argv(to_enb, ns["snd"], "to-snd", ns["enb"]))
        snd, ap, enb = self.sender, self.ap, self.enb
        snd.run(addr_add_argv("lo", f"{self.server_address}/32"))
        snd.run(addr_add_argv(to_ap, "10.0.1.1/24"))
        snd.run(addr_add_argv(to_enb, "10.0.2.1/24"))
        ap.run(addr_add_argv("to-snd", "10.0.1.2/24"))
        enb.run(addr_add_argv("to-snd", "10.0.2.2/24"))
        for h, dev in ((snd, to_ap), (snd, to_enb), (ap, "to-snd"), (enb, "to-snd")):
            h.run(link_up_argv(dev))
        for h in (ap, enb):
            h.run(sysctl_argv("net.ipv4.ip_forward", 1))
            h.run(route_add_argv(f"{self.server_address}/32", via="10.0.1.1" if h is ap else "10.0.2.1"))
        snd.run(route_add_argv("10.10.0.0/16", via="10.0.1.2"))
        snd.run(route_add_argv("10.20.0.0/16", via="10.0.2.2"))
        for dev in (to_ap, to_enb):
            snd.run(offloads_off_argv(dev))
        snd.run(mptcp_limits_argv(8, 8))
        # Receivers.
        for i, (name, node) in enumerate(self.nodes.items(), start=1):
            wifi, lte = node.interfaces["wifi"], node.interfaces["lte"]
            dev = self.downlink_device(name, "wifi")
            root.run(veth_argv(dev, ns["ap"], wifi.name, ns[name]))
            ap.run(addr_add_argv(dev, f"10.10.{i}.1/24"))
            ap.run(link_up_argv(dev))
            h = node.host
            h.run(addr_add_argv(wifi.name, f"{wifi.address}/24"))
            h.run(link_up_argv(wifi.name))
            access = self.lte_access[name]
            access.up(LteLink(name, i, enb, ns["enb"], ns[name], h, lte.name, lte.address, f"10.20.{i}.1",
                              self.state_dir, self.downlink_device(name, "lte")))
            if access.shaped:  # a real cell's tun arrives with its address, up
                h.run(addr_add_argv(lte.name, f"{lte.address}/24"))
                h.run(link_up_argv(lte.name))
            for route in receiver_routes(i, wifi.name, lte.name):
                h.run(route_add_argv(route.dest, via=route.via, dev=route.dev, table=route.table))
            for rule in receiver_rules(wifi.address, lte.address):
                h.run(rule_add_argv(rule.source, rule.table, rule.priority))
            h.run(mptcp_flush_argv())
            h.run(mptcp_limits_argv(2, 2))
            h.run(mptcp_endpoint_argv(lte.address, lte.name, ("subflow",)))
        # Downlink shaping where the radios queue: per receiver, on the AP's and the eNB's device towards it.
        for rx in self.inventory.receivers:
            for host, radio in ((ap, "wifi"), (enb, "lte")):
                if not self.shaped(rx.name, radio):
                    continue
                ch = rx.interfaces[radio].channel
                dev = self.downlink_device(rx.name, radio)
                host.run(offloads_off_argv(dev))
                net = self.access_network(radio)
                for argv in radio_qdisc_argvs(dev, min(ch.rate_mbit, net.capacity(1)), ch.buffer_bytes):
                    host.run(argv)
        for host, radio in ((ap, "wifi"), (enb, "lte")):
            losses = [(self.downlink_device(rx.name, radio), rx.interfaces[radio].channel.loss_pct)
                      for rx in self.inventory.receivers if self.shaped(rx.name, radio)]
            for argv in radio_loss_argvs(losses):
                host.run(argv)

    def shaped(self, receiver: str, radio: str) -> bool:
        """Whether the testbed's shaping (HTB, radio loop, delay line, loss) acts on that path (not a real cell)."""
        return radio == "wifi" or self.lte_access[receiver].shaped

    def access_network(self, radio: str) -> AccessNetwork:
        """The inventory's AP (``wifi``) or cell (``lte``) as the sharing models see it."""
        spec = self.emu.wifi_ap if radio == "wifi" else self.emu.lte_cell
        sharing = self.emu.wifi_sharing if radio == "wifi" else self.emu.lte_sharing
        return AccessNetwork(sharing, spec.capacity_mbit,
                             {k: min(v, spec.capacity_mbit) for k, v in spec.capacity_by_active.items()}
                             if spec.capacity_by_active else None)

    def link_config(self) -> LinkConfig:
        """What the radio loop runs with."""
        rxs = self.inventory.receivers
        return LinkConfig(
            namespaces={"wifi": self.ns["ap"], "lte": self.ns["enb"]},
            networks={r: self.access_network(r) for r in ("wifi", "lte")},
            stations={r: {rx.name: (self.downlink_device(rx.name, r), rx.interfaces[r].channel.rate_mbit)
                          for rx in rxs if self.shaped(rx.name, r)} for r in ("wifi", "lte")},
            coexistence_factor=self.emu.coexistence, hz=self.emu.radio_loop_hz,
            hold_s=LinkConfig.hold_s / self.speedup)

    @property
    def radiolink_log(self) -> Path:
        """Where the radio loop logs each change (one JSON line; the first says it is ready)."""
        return self.state_dir / "radiolink.jsonl"

    def path_delays(self, radio: str) -> dict[str, float]:
        """Receiver address on ``radio`` -> base delay (ms), for the paths that have one."""
        return {self.nodes[rx.name].interfaces[radio].address: rx.interfaces[radio].channel.delay_ms
                for rx in self.inventory.receivers
                if rx.interfaces[radio].channel.delay_ms > 0 and self.shaped(rx.name, radio)}

    def _start_delaylines(self) -> None:
        for host, radio in ((self.ap, "wifi"), (self.enb, "lte")):
            delays = self.path_delays(radio)
            if delays:
                self._delaylines[radio] = delayline.start(host, delays)

    def _start_radiolink(self) -> None:
        log_path = self.radiolink_log
        log_path.unlink(missing_ok=True)
        self._radiolink = self.sender.start(radiolink_argv(self.link_config(), str(log_path)), label="radiolink")
        wait_until(lambda: log_path.exists() and log_path.stat().st_size > 0, 15,
                   f"radio loop (its first line in {log_path})", proc=self._radiolink)

    def _start_devices(self) -> None:
        profile = self.emu.power_profile
        for i, (name, node) in enumerate(self.nodes.items(), start=1):
            spec = self.inventory.receiver(name).meter
            argv = device_argv(str(self.meter_link(name)), profile,
                               ifaces={radio: intf.name for radio, intf in node.interfaces.items()},
                               control=str(self.meter_control(name)),
                               tail_control=str(self.tail_control(name)), period_s=self.meter_period_s,
                               noise_ma=spec.noise_ma,
                               noise_mv=spec.noise_mv, seed=i)
            self._devices[name] = node.host.start(argv, label=f"meter-device:{name}")
        end = time.monotonic() + 15  # one deadline for all: the devices start together
        for name in self.nodes:
            link = self.meter_link(name)
            wait_until(link.exists, time_left(end), f"emulated meter of {name} (its pty link {link})",
                       proc=self._devices[name])

    def rx_probe(self, node: str) -> Callable[[], int] | None:
        """The receiver's radios' received bytes from ``/proc/<pid>/net/dev`` of its emulated meter, a process
        that lives in the receiver's namespace for the whole campaign (about 20 us a look, no command)."""
        device = self._devices.get(node)
        pid = getattr(device, "pid", None)
        if pid is None:
            return None
        path = f"/proc/{pid}/net/dev"
        names = {intf.name for intf in self.nodes[node].interfaces.values()}

        def read() -> int:
            with open(path) as f:
                return received_bytes(f.read(), names)
        return read

    def sender_tail(self, clients: Mapping[str, BackgroundProcess], nbytes: int) -> SenderTail | None:
        """The senders' iperf3 servers paused from their last write to their clients' last read: on this machine they
        would spin on the cores the measurement shares (``harness.emulation.sendertail``); None when
        ``MPLAB_SENDER_PAUSE=off``."""
        if not sender_pause() or self._servers is None:
            return None
        pids = {rx: (server, proc.pid) for rx, proc in clients.items()
                if (server := self._servers.pid(rx)) is not None and getattr(proc, "pid", None) is not None}
        return SenderTail(pids, nbytes) if pids else None

    def meter_link(self, name: str) -> Path:
        """Where the emulated meter device of receiver ``name`` publishes its pty."""
        return self.state_dir / f"meter-{name}"

    def meter_control(self, name: str) -> Path:
        """The fault-injection file of that device (see ``harness.meters.emulated``)."""
        return self.state_dir / f"meter-{name}.control"

    def tail_control(self, name: str) -> Path:
        """Where that device takes radio-tail fast-forward requests (see ``harness.meters.emulated``)."""
        return self.state_dir / f"meter-{name}.tail"

    #: Deadline for the devices to answer a fast-forward request (they poll every 100 ms).
    SKIP_TAIL_S = 5.0

    def skip_tails(self, nodes: Sequence[str]) -> dict[str, TailSkip]:
        """The tails are the power model's state: fast-forward them in every device and say what they held.

        Each device answers with the tail it dropped; readings after its ``at_wall`` show idle power,
        and a later sample starts from idle radios exactly as after a waited tail. A device that does
        not answer within ``SKIP_TAIL_S`` is left out of the answer (the runner waits its tail out and
        meters it), and the answers the others gave are kept: their radios are already idle, so
        dropping their skipped energy would undercount their tails.
        """
        token = f"{os.getpid()}-{time.monotonic_ns()}"
        for name in nodes:
            atomic_write(self.tail_control(name), (token + "\n").encode())
        answers: dict[str, TailSkip] = {}

        def answered() -> bool:
            for name in nodes:
                if name not in answers:
                    skip = _tail_answer(self.tail_control(name), token)
                    if skip is not None:
                        answers[name] = skip
            return len(answers) == len(nodes)

        try:
            wait_until(answered, self.SKIP_TAIL_S, "emulated meters' tail fast-forward")
        except NotReady:
            log.warning("emulated meters of %s did not answer the tail fast-forward within %.0f s: "
                        "their tails are waited out", ", ".join(sorted(set(nodes) - set(answers))),
                        self.SKIP_TAIL_S)
        return answers

    def meters(self) -> dict[str, Meter]:
        # Through the same UM driver as a lab meter: the pty is just another serial port.
        return {name: meter_from_inventory(self.inventory.receiver(name).meter, str(self.meter_link(name)))
                for name in self.nodes}

    def radio_loss_counters(self) -> dict[str, dict[str, LossCounters]]:
        """The loss rules' counters in the AP and the eNB (``netcmd.radio_loss_argvs``), per receiver and radio.

        Only shaped paths have them (a real cell's path is left out). Raises ``TrafficError`` when the
        table cannot be read (it is part of the topology: a missing table is a broken testbed).
        """
        out: dict[str, dict[str, LossCounters]] = {rx.name: {} for rx in self.inventory.receivers}
        for host, radio in ((self.ap, "wifi"), (self.enb, "lte")):
            devs = {self.downlink_device(rx.name, radio): rx.name for rx in self.inventory.receivers
                    if self.shaped(rx.name, radio)}
            if not devs:
                continue
            try:
                text = host.run(radio_counters_argv()).stdout
            except CommandError as exc:
                raise TrafficError(f"[{host.name}] cannot read the radio loss counters: {exc}") from None
            for dev, c in parse_loss_counters(text, host.name).items():
                if dev in devs:
                    out[devs[dev]][radio] = c
        return out

    def qdisc_stats(self) -> dict[str, str]:
        out = {}
        for name, host in (("ap", self.ap), ("enb", self.enb)):
            try:
                out[name] = host.run(["tc", "-s", "-j", "qdisc", "show"]).stdout
            except CommandError as exc:
                out[name] = f"error: {exc}"
        return out

    # ------------------------------------------------------------ idle

    def idle_power_w(self, node: str) -> float | None:
        """The profile's base power: what the emulated meter reads with both radios idle."""
        return self.emu.power_profile.base_w

    def tail_s(self, mode: str) -> float:
        """The profile's longest tail among the radios ``mode`` uses, plus one counter-sampling period."""
        profile = self.emu.power_profile
        return max(getattr(profile, r).tail_s for r in MODE_RADIOS[mode]) + self.meter_period_s

    @property
    def meter_period_s(self) -> float:
        """How often the emulated meters read the receivers' byte counters (s)."""
        return SAMPLE_PERIOD_S / self.speedup

    # ------------------------------------------------------------ health

    #: How long a repaired link may take to carry its routes again.
    REPAIR_S = 5.0

    def check_health(self, nodes: Sequence[str]) -> Health:
        """Links up, addresses, routes and policy rules of each receiver as set-up made them; repair the rest.

        A link flap (``ip link set wlan0 down; up``) makes the kernel drop the routes through
        that link, in the main and the policy tables: they are put back here.
        """
        health = Health()
        for name in nodes:
            try:
                health.repaired += self._repair_node(name)
            except (MplabError, ValueError) as exc:
                health.broken[name] = str(exc)
                continue
            # A real cell is not repaired: a dead srsenb or a detached UE flags the sample instead.
            why = self.lte_access[name].health()
            if why:
                health.broken[name] = why
        return health

    def _repair_node(self, name: str) -> list[Repair]:
        node = self.nodes[name]
        i = self.index[name]
        return [Repair(name, msg) for msg in repair_receiver(node.host, i, node.interfaces["wifi"],
                                                             node.interfaces["lte"], self.REPAIR_S)]

    # ------------------------------------------------------------ teardown

    def teardown(self) -> None:
        """Stop servers and meter devices, delete the namespaces, undo the allowed-list change.

        Only while this testbed holds the prefix: a testbed refused a live prefix (or torn down
        already) removes nothing, so it can never take another's namespaces with it.
        """
        self.stop_servers()
        self.stop_all(self._devices)
        if self._radiolink is not None:
            self._radiolink.stop()
            self._radiolink = None
        self.stop_all(self._delaylines)
        for access in self.lte_access.values():
            access.down()
        if self._claim is None or not self._claim.held:
            self._up = False
            return
        clean_prefix(self.prefix, self.root, nested=False)  # the timers' cgroup too (harness.upkeep.clean)
        self._timers_on = False
        for host in (self.sender, self.ap, self.enb, *(node.host for node in self.nodes.values())):
            host.cgroup = None
        # After our state is gone, so that names_needed() only lists other live testbeds.
        for cc in reversed(self._ccs):
            try:
                cc.teardown(self.root)
            except Exception as exc:  # noqa: BLE001 - teardown is best effort, it must go on
                log.warning("congestion control %s teardown: %s", cc.implementation, exc)
        self._ccs.clear()
        self._up = False
        self.release_claim()


def _tail_answer(path: Path, token: str) -> TailSkip | None:
    """A device's answer to fast-forward request ``token`` (None until it has answered that one)."""
    try:
        answer = json.loads(path.with_name(path.name + ".done").read_text())
    except (FileNotFoundError, ValueError):
        return None
    if answer.get("token") != token:
        return None
    return TailSkip(float(answer["at_wall"]), float(answer["remaining_s"]), float(answer["remaining_j"]))
