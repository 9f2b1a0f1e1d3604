"""The physical lab: real machines reached over SSH, driven by the same runner as the emulation.

``LabTestbed`` builds an ``SSHHost`` for the sender and each receiver from a lab
inventory. It does not build a network (the lab's radios, eNodeB, EPC and APs are
deployed by ``lte``/``wifi``); it checks that everything a sample needs is there
(``preflight``), and for a campaign it starts one iperf3 server per receiver on the
sender, serves meters through ser2net where the inventory asks for it, measures
each host's clock offset, and remembers every default it changes (the default
congestion control) to put it back at teardown.

Start synchronisation: receivers' clients are pre-spawned behind the gate
(``harness.hosts.local.GATE_SCRIPT``) over already-open SSH channels and released by one
write each, so connection and process start-up stay out of the skew. Each release
is timestamped by the receiver's own clock; ``SSHHost`` maps that to the
orchestrator's clock with the offset measured at set-up, so ``started_at`` in the
records is comparable across receivers.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence

from harness.cc import CongestionControl
from harness.errors import ConfigError, MplabError, PreflightError
from harness.hosts.local import BackgroundProcess, Host
from harness.config.inventory import Inventory, Lab
from harness.meters.base import Meter
from harness.meters.drivers import open_meter
from harness.hosts.netcmd import sysctl_argv
from harness.hosts.ready import wait_until
from harness.upkeep.preflight import (
    Check, cc_checks, clock_check, interface_checks, iperf3_check, kernel_checks, reachable, reachable_failure,
    tcp_reachable,
)
from harness.deploy.secrets import Secrets, load_secrets
from harness.upkeep.ofprobe import switch_check
from harness.meters.ser2net import ser2net_argv
from harness.testbeds.base import Node, NodeInterface, Testbed, parallel
from harness.traffic import Iperf3

log = logging.getLogger("mplab.lab")

DEFAULT_CC = "net.ipv4.tcp_congestion_control"


class LabTestbed(Testbed):
    """A sender and receivers on real machines, over SSH."""

    kind = "lab"

    def __init__(self, inventory: Inventory, hosts: dict[str, Host] | None = None) -> None:
        """Build hosts from ``inventory`` (``hosts`` may supply some by name, e.g. tests' namespace hosts)."""
        # SSH (paramiko, fabric: a tenth of a second or more to import) only once a lab is built: planning a
        # campaign, or a dry run, imports this module through the testbed registry and needs none of it.
        from harness.deploy.machines import ssh_host

        super().__init__(inventory)
        if inventory.emulation is not None:
            raise MplabError(f"inventory {inventory.name!r} has an emulation section: it describes an emulated "
                             "testbed, not a lab")
        gaps = inventory.lab_gaps()
        if gaps:
            raise ConfigError(f"inventory {inventory.name!r} cannot drive a lab sweep: " + "; ".join(gaps))
        self.lab = inventory.lab or Lab()
        self.SERVER_POLL_TIMEOUT_S = self.lab.command_timeout_s
        hosts = hosts or {}
        snd = inventory.sender
        self.sender = hosts.get(snd.name) or ssh_host(inventory, snd.name, snd.ssh)
        self.server_address = str(snd.address)
        for i, rx in enumerate(inventory.receivers, start=1):
            host = hosts.get(rx.name) or ssh_host(inventory, rx.name, rx.ssh)
            intfs = {radio: NodeInterface(radio, intf.name, str(intf.address))
                     for radio, intf in rx.interfaces.items()}
            self.nodes[rx.name] = Node(rx.name, host, intfs, rx.meter.kind, self.lab.iperf3_base_port + i)
        self.infra: dict[str, Host] = {h.name: hosts.get(h.name) or ssh_host(inventory, h.name, h.ssh)
                                       for h in self.lab.infra if h.ssh is not None}
        self.clock_offsets_s: dict[str, float | None] = {}
        self._ser2net: dict[str, BackgroundProcess] = {}
        self._saved_cc: dict[str, str] = {}
        self._secrets: Secrets | None = None

    def clock_offsets(self) -> dict[str, float | None]:
        """Per host, measured at preflight and again at set-up."""
        return dict(self.clock_offsets_s)

    @property
    def secrets(self) -> Secrets | None:
        """The lab's secrets (loaded on first use; refused unless the file is mode 0600)."""
        if self._secrets is None and self.lab.secrets_file:
            self._secrets = load_secrets(self.lab.secrets_file)
        return self._secrets

    def all_hosts(self) -> dict[str, Host]:
        """Every machine by name: sender, receivers, infrastructure hosts with SSH."""
        return {self.sender.name: self.sender, **{n: node.host for n, node in self.nodes.items()}, **self.infra}

    # ------------------------------------------------------------ preflight

    def preflight(self, ccs: Sequence[CongestionControl], only: Sequence[str] | None = None) -> list[Check]:
        """Every check on every host (in parallel); ``only`` restricts it to some host names."""
        checks: list[Check] = [Check("orchestrator", "secrets file", True, "none configured", essential=False)]
        if self.lab.secrets_file:
            try:
                s = self.secrets
                checks[0] = Check("orchestrator", "secrets file", True,
                                  f"{self.lab.secrets_file}: {len(s.values())} value(s), mode 0600")
            except MplabError as exc:
                checks[0] = Check("orchestrator", "secrets file", False, str(exc), f"chmod 600 {self.lab.secrets_file}")
        names = [n for n in self.all_hosts() if only is None or n in only]
        for result in parallel(lambda n: self._host_checks(n, ccs), names):
            checks += result
        if self.lab.switch is not None and (only is None or "switch" in only or self.lab.switch.host in only):
            down = {c.host for c in checks if c.name == "reachable" and not c.ok}
            checks += self.switch_checks(essential=False, unreachable=down)
        return checks

    def switch_checks(self, essential: bool = True, unreachable: set[str] | frozenset[str] = frozenset()
                      ) -> list[Check]:
        """The lab switch answers as an OpenFlow 1.3 switch; with ``host`` and ``bridge`` set, the bridge's
        settings read over SSH. Not essential in a plain preflight: only ``steering: openflow`` needs the
        switch (its controller makes the same check essential). ``unreachable``: hosts that already have their
        failed ``reachable`` row (the bridge of a switch host among them is not read)."""
        sw = self.lab.switch
        if sw is None:
            return [Check("switch", "lab.switch", False, "the inventory has no lab.switch section",
                          "add lab.switch: {listen: HOST:PORT, networks: {wifi: {up, down}, lte: {up, down}}}",
                          essential=essential)]
        check, _ = switch_check(sw.listen, essential=essential, timeout_s=sw.answer_timeout_s)
        out = [check]
        host = self.infra.get(sw.host) if sw.host else None
        if host is not None and sw.bridge and sw.host not in unreachable:  # an unreachable host has its FAIL row
            try:
                res = host.run(["ovs-vsctl", "--timeout=5", "get", "bridge", sw.bridge, "protocols", "fail_mode"],
                               check=False, timeout=self.lab.command_timeout_s)
            except MplabError as exc:  # an unreachable switch host is a failed row, like any other host
                return [*out, reachable_failure(host, exc, essential=essential)]
            if res.returncode != 0:
                out.append(Check(sw.host, f"bridge {sw.bridge}", False, res.stderr.strip()[-300:] or "ovs-vsctl failed",
                                 f"ovs-vsctl add-br {sw.bridge} (and lab.switch.bridge names it)", essential=essential))
            else:
                protocols, _, fail_mode = res.stdout.strip().partition("\n")
                out.append(Check(sw.host, f"bridge {sw.bridge}", "OpenFlow13" in protocols,
                                 f"protocols {protocols}, fail_mode {fail_mode or '[]'}",
                                 f"ovs-vsctl set bridge {sw.bridge} protocols=OpenFlow13", essential=essential))
                # Standalone: the bridge forwards like a learning switch when no controller is connected,
                # so traffic a decision blocked flows again if the controller stops. Worth knowing, not fatal.
                out.append(Check(sw.host, f"bridge {sw.bridge} fail_mode", fail_mode.strip() == "secure",
                                 f"fail_mode {fail_mode.strip() or '[] (standalone)'}",
                                 f"ovs-vsctl set-fail-mode {sw.bridge} secure", essential=False))
        return out

    def _host_checks(self, name: str, ccs: Sequence[CongestionControl]) -> list[Check]:
        """Per role: every host is reachable and has its clock offset read; the sender and receivers (the
        MPTCP endpoints) also have MPTCP, the congestion controls and iperf3; the receivers their
        interfaces and meters. Infrastructure hosts (eNodeB, EPC, AP, switch) carry no MPTCP socket."""
        host = self.all_hosts()[name]
        first = reachable(host, timeout_s=self.lab.command_timeout_s)
        if not first.ok:
            return [first]
        out = [first]
        try:
            is_node = name in self.nodes
            if name == self.sender.name or is_node:
                # Only the MPTCP endpoints need it: the eNodeB, EPC, APs and switch forward the subflows'
                # packets (an eNB or AP image without CONFIG_MPTCP is fine); they get reachable + clock.
                out += kernel_checks(host)
                out += cc_checks(host, ccs)
                check, ip3 = iperf3_check(host)
                out.append(check)
                if name == self.sender.name:
                    self.sender_iperf3 = ip3 or self.sender_iperf3
                    res = host.run(["ip", "-j", "-4", "addr", "show"], check=False)
                    out.append(Check(name, "service address", self.server_address in res.stdout,
                                     f"{self.server_address} {'present' if self.server_address in res.stdout else 'missing'}",
                                     f"ip addr add {self.server_address}/32 dev lo (or the sender's uplink)"))
                else:
                    self.nodes[name].iperf3 = ip3
            if is_node:
                node = self.nodes[name]
                for radio, intf in node.interfaces.items():
                    out += interface_checks(host, radio, intf.name, intf.address, self.server_address)
                out += self._meter_checks(name)
            check, off = clock_check(host, self.lab.max_clock_offset_s)
            self.clock_offsets_s[name] = off
            out.append(check)
        except MplabError as exc:
            out.append(Check(name, "checks", False, f"stopped early: {exc}", "see the message"))
        return out

    def _meter_checks(self, name: str) -> list[Check]:
        rx = self.inventory.receiver(name)
        host = self.nodes[name].host
        port = self.inventory.meter_port(rx)
        out = []
        if rx.meter.ser2net is not None:
            cfg = rx.meter.ser2net
            has = host.which("ser2net")
            out.append(Check(name, "ser2net", has is not None, has or "not installed", "apt install ser2net"))
            dev = host.exists(cfg.device)
            out.append(Check(name, "meter device", dev, f"{cfg.device} {'present' if dev else 'missing'}",
                             "pair the meter (bluetoothctl) and bind it: rfcomm bind 0 <meter MAC> 1"))
            if port and name not in self._ser2net:
                served, detail = tcp_reachable(port)
                # Not essential: set-up starts our own ser2net when nothing serves the port yet.
                out.append(Check(name, "ser2net port", served, detail + ("" if served else
                                 " (nothing serving yet: set-up will start ser2net)"), essential=False))
            return out
        if port and port.startswith(("rfc2217://", "socket://")):
            ok, detail = tcp_reachable(port)
            out.append(Check(name, "meter port", ok, detail,
                             "start ser2net on the receiver (or add a ser2net section for this meter)"))
            if not ok:
                return out
        out.append(self._meter_answers(name, rx.meter.kind, port))
        return out

    def _meter_answers(self, name: str, kind: str, port: str | None) -> Check:
        if port is None:
            return Check(name, "meter", False, "no port", "set meter.port in the inventory")
        m = open_meter(kind, port)
        try:
            m.open()
            r = m.poll()
            return Check(name, "meter", True, f"{kind} on {port}: {r.volts:.2f} V {r.amps:.3f} A")
        except Exception as exc:  # noqa: BLE001 - any failure to read is a failed check, with its reason
            return Check(name, "meter", False, f"{kind} on {port}: {exc}",
                         "check the meter is on, paired and in range; close other programs reading it")
        finally:
            m.close()

    # ------------------------------------------------------------ setup

    def setup(self, ccs: Sequence[CongestionControl]) -> None:
        """Congestion controls, clock offsets, ser2net, iperf3 servers; undone by ``teardown`` on failure."""
        from harness.hosts.ssh import SSHHost

        try:
            hosts = [self.sender, *(n.host for n in self.nodes.values())]
            for cc in ccs:
                parallel(cc.setup, hosts)
            for h in hosts:
                self._saved_cc[h.name] = h.read_text(f"/proc/sys/{DEFAULT_CC.replace('.', '/')}").strip()
            offsets = parallel(lambda h: (h.name, h.clock_offset_s()), hosts)
            self.clock_offsets_s.update(dict(offsets))
            for h in hosts:
                if isinstance(h, SSHHost):
                    h.orchestrator_offset_s = self.clock_offsets_s[h.name]
            if self.sender_iperf3 is None:
                self.sender_iperf3 = Iperf3.check(self.sender)
            for node in self.nodes.values():
                if node.iperf3 is None:
                    node.iperf3 = Iperf3.check(node.host)
            self._start_ser2net()
            self.ensure_servers()
        except BaseException:
            self.teardown()
            raise

    def _start_ser2net(self) -> None:
        for rx in self.inventory.receivers:
            cfg = rx.meter.ser2net
            port = self.inventory.meter_port(rx)
            if cfg is None or port is None or tcp_reachable(port, 1.0)[0]:
                continue
            host = self.nodes[rx.name].host
            self._ser2net[rx.name] = host.start(ser2net_argv(cfg, rx.name), label=f"ser2net:{rx.name}")
            wait_until(lambda: tcp_reachable(port, 0.5)[0], 10, f"[{rx.name}] ser2net serving {port}",  # noqa: B023 - waited for within this iteration
                       proc=self._ser2net[rx.name], poll_s=0.05)

    def meters(self) -> dict[str, Meter]:
        out = {}
        for rx in self.inventory.receivers:
            port = self.inventory.meter_port(rx)
            if port is None:
                raise PreflightError(f"receiver {rx.name}: meter has no port")
            out[rx.name] = open_meter(rx.meter.kind, port)
        return out

    def radio_loss_counters(self) -> None:
        """None: a lab has no loss counters of its own. Its radios lose packets in the air (and its
        WiFi retries many of them at the MAC), where nothing mplab installs can count them; a policy
        reading path loss falls back to the sender's retransmission ratio on a lab."""
        return None

    def host_groups(self) -> dict[str, list[str]]:
        return dict(self.inventory.lab.groups) if self.inventory.lab else {}

    def disconnect(self) -> None:
        """Close the SSH connections; teardown only undoes what this object did (after a preflight: nothing)."""
        self.teardown()

    # ------------------------------------------------------------ teardown

    def teardown(self) -> None:
        """Stop our servers and ser2net, put default congestion controls back, close connections."""
        self.stop_servers()
        self.stop_all(self._ser2net)
        hosts = {h.name: h for h in [self.sender, *(n.host for n in self.nodes.values())]}
        for name, cc in self._saved_cc.items():
            try:
                hosts[name].run(sysctl_argv(DEFAULT_CC, cc), timeout=10.0)
            except Exception as exc:  # noqa: BLE001 - restoring is best effort: every host is tried, each failure logged
                log.warning("[%s] could not restore %s=%s: %s", name, DEFAULT_CC, cc, exc)
        self._saved_cc.clear()
        for h in self.all_hosts().values():
            h.close()
