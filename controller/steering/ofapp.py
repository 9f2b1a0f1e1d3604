"""The os-ken app behind OpenFlow steering, run as its own process (``python -m controller.steering.ofapp SPEC``).

Flows it installs on the switch (OpenFlow 1.3, table 0; the reference paper's per-receiver
forwarding entries):

- per receiver and network, a downlink entry ``ip, in_port=<up>, nw_dst=<receiver address>
  -> output:<down>`` and an uplink entry ``ip, in_port=<down>, nw_src=<address> -> output:<up>``
  (priority 100); blocking a receiver on a network deletes both (``OFPFC_DELETE_STRICT``), as the
  paper deleted the forwarding entry; allowing it adds them back;
- ARP between each network's two ports (priority 10): the "radio" stays attached;
- nothing else: with the switch fail-secure, unmatched IP is dropped;
- rate caps: per receiver and network one meter (id ``1 + k``, *k* the pair's place in the spec's
  receivers x networks), kbit/s, one DROP band with an explicit burst (``OFPMF_KBPS | OFPMF_BURST |
  OFPMF_STATS``); the downlink entry of a capped pair carries ``meter:<id>`` before its output.
  Setting a cap adds the meter, then modifies the entry (``OFPFC_MODIFY_STRICT``: counters kept);
  changing it is ``OFPMC_MODIFY`` (the entry untouched); lifting it modifies the entry back, then
  deletes the meter (a meter deleted while in use takes its entries with it). Each step is
  confirmed by a barrier before the next; an error the switch sends for any of them fails the request.

On every (re)connect it wipes table 0 and installs the entries for the current state (flows
outlive the controller with ``fail_mode=secure``), meters included. A deleted flow loses its byte
counter, so the downlink entry's stats are read just before it is deleted and carried forward. A
flow counts what it matched, also what its meter then dropped: the counters subtract each meter's
dropped bytes (its band statistics, read before the meter is modified or deleted, which resets or
removes them, and carried forward).

Control: JSON lines on a unix socket (the spec's ``control_socket``): ``{"op": "ready"}``,
``{"op": "apply", "allowed": {rx: {net: bool}}}`` (replies after a barrier: the switch has
applied it), ``{"op": "counters"}`` (downlink bytes per receiver and network),
``{"op": "caps", "caps": {rx: {net: {"kbps": K, "burst_kbit": B} | null}}}`` (set, change or lift
meters; replies after the barrier), ``{"op": "meters"}`` (each meter's configuration and
statistics), ``{"op": "meter_features"}`` (the switch's OFPMP_METER_FEATURES), ``{"op": "ports"}`` (each network's
down port's transmit counters, OFPMP_PORT_STATS, and its meters' dropped bytes: MP-SDN's congestion
signal on a lab, ``controller.congestion``). os-ken 4.x has no
``osken-manager``: ``main`` calls ``cfg.CONF`` and ``AppManager.run_apps`` in a thread and exits
the process on SIGTERM/SIGINT (os-ken's threads ignore SIGINT and ``AppManager.close`` can hang), and
within 0.5 s of its starter's death (a campaign killed outright must not leave a controller on a lab switch).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time

SPEC_ENV = "MPLAB_OFAPP_SPEC"
PRIO_ENTRY, PRIO_ARP = 100, 10
REPLY_S = 5.0


def _load_spec() -> dict:
    with open(os.environ[SPEC_ENV]) as f:
        return json.load(f)


from os_ken.base import app_manager  # noqa: E402 - the app module must be importable by os-ken's loader
from os_ken.controller import ofp_event  # noqa: E402 - after the spec reader, as the first os-ken import
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls  # noqa: E402 - after the spec reader, as the first os-ken import
from os_ken.ofproto import ofproto_v1_3  # noqa: E402 - after the spec reader, as the first os-ken import


class SteerApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spec = _load_spec()
        self.nets: dict[str, dict] = self.spec["networks"]
        self.receivers: dict[str, dict[str, str]] = self.spec["receivers"]
        self.allowed = {rx: {net: True for net in self.nets} for rx in self.receivers}
        self.carried = {rx: {net: 0 for net in self.nets} for rx in self.receivers}
        #: (rx, net) -> {"kbps", "burst_kbit"} of the meters installed, their ids, and what meters
        #: since modified or deleted dropped (subtracted from the counters).
        self.caps: dict[tuple[str, str], dict] = {}
        self.meter_ids = {(rx, net): 1 + k for k, (rx, net) in
                          enumerate((rx, net) for rx in self.receivers for net in self.nets)}
        self.dropped = {rx: {net: 0 for net in self.nets} for rx in self.receivers}
        self.dp = None
        self.ready = threading.Event()
        self.lock = threading.Lock()  # one control request at a time
        self._waits: dict[int, tuple[threading.Event, list]] = {}
        #: Errors the switch sent, by the xid of the message they answer; the xids sent since the last barrier.
        self._errors: dict[int, str] = {}
        self._sent: list[int] = []
        threading.Thread(target=self._serve, daemon=True, name="mplab-control").start()

    # ------------------------------------------------------------ switch side

    def _entries(self, rx: str, net: str):
        p = self.dp.ofproto_parser
        up, down, addr = self.nets[net]["up"], self.nets[net]["down"], self.receivers[rx][net]
        return [(p.OFPMatch(in_port=up, eth_type=0x0800, ipv4_dst=addr), down),
                (p.OFPMatch(in_port=down, eth_type=0x0800, ipv4_src=addr), up)]

    def _send(self, msg) -> None:
        """Send ``msg``, remembering its xid: ``_barrier`` fails if the switch answered it with an error."""
        self.dp.set_xid(msg)
        self._sent.append(msg.xid)
        self.dp.send_msg(msg)

    def _flow(self, match, out_port: int | None, prio: int, command, meter: int | None = None) -> None:
        dp, ofp, p = self.dp, self.dp.ofproto, self.dp.ofproto_parser
        inst = [] if out_port is None else [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                                                    [p.OFPActionOutput(out_port)])]
        if meter is not None:
            inst.insert(0, p.OFPInstructionMeter(meter))
        self._send(p.OFPFlowMod(datapath=dp, priority=prio, match=match, instructions=inst, command=command,
                                out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))

    def _meter(self, command, meter_id: int, band: dict | None = None) -> None:
        ofp, p = self.dp.ofproto, self.dp.ofproto_parser
        bands = [] if band is None else [p.OFPMeterBandDrop(rate=int(band["kbps"]), burst_size=int(band["burst_kbit"]))]
        self._send(p.OFPMeterMod(self.dp, command=command, flags=ofp.OFPMF_KBPS | ofp.OFPMF_BURST | ofp.OFPMF_STATS,
                                 meter_id=meter_id, bands=bands))

    def _meter_of(self, rx: str, net: str) -> int | None:
        return self.meter_ids[(rx, net)] if (rx, net) in self.caps else None

    def _add_entries(self, rx: str, net: str, command) -> None:
        """The pair's downlink entry (with its meter, if capped) and uplink entry."""
        (down_match, down_out), (up_match, up_out) = self._entries(rx, net)
        self._flow(down_match, down_out, PRIO_ENTRY, command, self._meter_of(rx, net))
        self._flow(up_match, up_out, PRIO_ENTRY, command)

    def _request(self, msg) -> list:
        """Send ``msg`` and wait for its (multipart) reply."""
        self.dp.set_xid(msg)
        ev, bodies = threading.Event(), []
        self._waits[msg.xid] = (ev, bodies)
        self.dp.send_msg(msg)
        if not ev.wait(REPLY_S):
            self._waits.pop(msg.xid, None)
            raise TimeoutError(f"no reply to {type(msg).__name__} within {REPLY_S} s")
        return bodies

    def _barrier(self) -> None:
        """Wait until the switch has processed everything sent; raise if it refused any of it."""
        sent, self._sent = self._sent, []
        self._request(self.dp.ofproto_parser.OFPBarrierRequest(self.dp))
        errors = [self._errors.pop(x) for x in sent if x in self._errors]
        if errors:
            raise RuntimeError(f"the switch refused {len(errors)} message(s): {'; '.join(errors)}")

    def _install_all(self) -> None:
        ofp, p = self.dp.ofproto, self.dp.ofproto_parser
        self._flow(p.OFPMatch(), None, 0, ofp.OFPFC_DELETE)  # flows and meters outlive a controller: start clean
        self._meter(ofp.OFPMC_DELETE, ofp.OFPM_ALL)
        for (rx, net), band in self.caps.items():
            self._meter(ofp.OFPMC_ADD, self.meter_ids[(rx, net)], band)
        for ports in self.nets.values():
            for a, b in ((ports["up"], ports["down"]), (ports["down"], ports["up"])):
                self._flow(p.OFPMatch(in_port=a, eth_type=0x0806), b, PRIO_ARP, ofp.OFPFC_ADD)
        for rx in self.receivers:
            for net in self.nets:
                if self.allowed[rx][net]:
                    self._add_entries(rx, net, ofp.OFPFC_ADD)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev) -> None:
        self.dp = ev.msg.datapath
        self._install_all()
        # The barrier is answered in MAIN_DISPATCHER, which this handler blocks: confirm later.
        threading.Thread(target=self._confirm_ready, daemon=True).start()

    def _confirm_ready(self) -> None:
        try:
            self._barrier()
            self.ready.set()
        except (TimeoutError, RuntimeError) as exc:
            self.logger.error("switch did not confirm the initial flows and meters: %s", exc)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev) -> None:
        w = self._waits.pop(ev.msg.xid, None)
        if w:
            w[0].set()

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev) -> None:
        m = ev.msg
        self._errors[m.xid] = f"type {m.type} code {m.code}"
        self.logger.warning("switch error for xid %s: type %s code %s", m.xid, m.type, m.code)

    @set_ev_cls([ofp_event.EventOFPFlowStatsReply, ofp_event.EventOFPMeterStatsReply,
                 ofp_event.EventOFPMeterConfigStatsReply, ofp_event.EventOFPMeterFeaturesStatsReply,
                 ofp_event.EventOFPPortStatsReply],
                MAIN_DISPATCHER)
    def _stats_reply(self, ev) -> None:
        w = self._waits.get(ev.msg.xid)
        if not w:
            return
        w[1].extend(ev.msg.body)
        if not ev.msg.flags & self.dp.ofproto.OFPMPF_REPLY_MORE:
            self._waits.pop(ev.msg.xid, None)
            w[0].set()

    def _downlink_bytes(self) -> dict[tuple[str, str], int]:
        p = self.dp.ofproto_parser
        by_addr = {(self.nets[net]["up"], addr): (rx, net) for rx, a in self.receivers.items()
                   for net, addr in a.items()}
        out = {}
        for st in self._request(p.OFPFlowStatsRequest(self.dp, table_id=0)):
            m = st.match
            if st.priority == PRIO_ENTRY and "ipv4_dst" in m:
                key = by_addr.get((m.get("in_port"), m["ipv4_dst"]))
                if key:
                    out[key] = st.byte_count
        return out

    # ------------------------------------------------------------ control side

    def apply(self, allowed: dict) -> dict:
        ofp = self.dp.ofproto
        t0 = time.perf_counter()
        changes = [(rx, net, bool(v)) for rx, nets in allowed.items() for net, v in nets.items()
                   if self.allowed[rx][net] != bool(v)]
        if any(not v for _, _, v in changes):
            now = self._downlink_bytes()  # a deleted flow takes its counter with it
            for rx, net, v in changes:
                if not v:
                    self.carried[rx][net] += now.get((rx, net), 0)
        for rx, net, v in changes:
            if v:
                self._add_entries(rx, net, ofp.OFPFC_ADD)
            else:
                for match, _ in self._entries(rx, net):
                    self._flow(match, None, PRIO_ENTRY, ofp.OFPFC_DELETE_STRICT)
            self.allowed[rx][net] = v
        self._barrier()
        return {"ok": True, "changed": len(changes), "apply_s": time.perf_counter() - t0}

    def _meter_stats(self) -> dict[tuple[str, str], dict]:
        """(rx, net) -> the meter's statistics, for the meters installed."""
        p, ofp = self.dp.ofproto_parser, self.dp.ofproto
        by_id = {mid: key for key, mid in self.meter_ids.items()}
        out = {}
        for st in self._request(p.OFPMeterStatsRequest(self.dp, 0, ofp.OFPM_ALL)):
            key = by_id.get(st.meter_id)
            if key in self.caps:
                out[key] = {"packets_in": st.packet_in_count, "bytes_in": st.byte_in_count,
                            "dropped_packets": sum(b.packet_band_count for b in st.band_stats),
                            "dropped_bytes": sum(b.byte_band_count for b in st.band_stats),
                            "flow_count": st.flow_count, "duration_s": st.duration_sec + st.duration_nsec / 1e9}
        return out

    def set_caps(self, caps: dict) -> dict:
        """Add, change or delete meters to match ``caps`` (pairs not named keep theirs)."""
        ofp = self.dp.ofproto
        t0 = time.perf_counter()
        changes = [(rx, net, band, self.caps.get((rx, net))) for rx, nets in caps.items() for net, band in nets.items()
                   if self.caps.get((rx, net)) != band]
        added = [(rx, net, b) for rx, net, b, have in changes if have is None]
        changed = [(rx, net, b) for rx, net, b, have in changes if have is not None and b is not None]
        lifted = [(rx, net) for rx, net, b, have in changes if have is not None and b is None]
        # Modifying or deleting a meter resets or removes its statistics: what it dropped is carried.
        before = self._meter_stats() if changed or lifted else {}

        def carry(rx: str, net: str) -> None:
            self.dropped[rx][net] += before.get((rx, net), {}).get("dropped_bytes", 0)

        for rx, net, band in added:
            self._meter(ofp.OFPMC_ADD, self.meter_ids[(rx, net)], band)
        for rx, net, band in changed:
            self._meter(ofp.OFPMC_MODIFY, self.meter_ids[(rx, net)], band)
        self._barrier()  # the meters exist before an entry points at them (and a refusal changes nothing here)
        for rx, net, band in added + changed:
            self.caps[(rx, net)] = band
        for rx, net, _ in changed:
            carry(rx, net)
        for rx, net in lifted:
            del self.caps[(rx, net)]
        for rx, net in [(rx, net) for rx, net, _ in added] + lifted:
            if self.allowed[rx][net]:
                match, out = self._entries(rx, net)[0]
                self._flow(match, out, PRIO_ENTRY, ofp.OFPFC_MODIFY_STRICT, self._meter_of(rx, net))
        if lifted:
            self._barrier()  # no entry points at a meter any more before it is deleted
            for rx, net in lifted:
                carry(rx, net)
                self._meter(ofp.OFPMC_DELETE, self.meter_ids[(rx, net)])
        self._barrier()
        return {"ok": True, "changed": len(changes), "apply_s": time.perf_counter() - t0}

    def meters(self) -> dict:
        """Per receiver and network with a meter: its id, rate, burst and statistics."""
        stats = self._meter_stats()
        out: dict = {}
        for (rx, net), band in self.caps.items():
            out.setdefault(rx, {})[net] = {"meter_id": self.meter_ids[(rx, net)], **band, **stats.get((rx, net), {})}
        return {"ok": True, "meters": out}

    def meter_features(self) -> dict:
        ofp, p = self.dp.ofproto, self.dp.ofproto_parser
        (f,) = self._request(p.OFPMeterFeaturesStatsRequest(self.dp, 0))
        bands = {ofp.OFPMBT_DROP: "drop", ofp.OFPMBT_DSCP_REMARK: "dscp_remark"}
        flags = {ofp.OFPMF_KBPS: "kbps", ofp.OFPMF_PKTPS: "pktps", ofp.OFPMF_BURST: "burst", ofp.OFPMF_STATS: "stats"}
        return {"ok": True, "max_meter": f.max_meter, "max_bands": f.max_bands,
                "band_types": [n for t, n in bands.items() if f.band_types & (1 << t)],
                "capabilities": [n for b, n in flags.items() if f.capabilities & b]}

    def ports(self) -> dict:
        """Each network's down port (towards the AP / eNB): its transmit counters and the switch's clock for
        them (the port's age), and what the network's meters dropped so far (carried across modifications)."""
        p, ofp = self.dp.ofproto_parser, self.dp.ofproto
        stats = {st.port_no: st for st in self._request(p.OFPPortStatsRequest(self.dp, 0, ofp.OFPP_ANY))}
        drops = self._meter_stats() if self.caps else {}
        out = {}
        for net, ports in self.nets.items():
            st = stats.get(ports["down"])
            meter = sum(self.dropped[rx][net] + drops.get((rx, net), {}).get("dropped_bytes", 0)
                        for rx in self.receivers)
            out[net] = None if st is None else {
                "port": ports["down"], "tx_bytes": st.tx_bytes, "tx_packets": st.tx_packets,
                "tx_dropped": st.tx_dropped, "duration_s": st.duration_sec + st.duration_nsec / 1e9,
                "meter_dropped_bytes": meter}
        return {"ok": True, "ports": out}

    def counters(self) -> dict:
        now = self._downlink_bytes()
        drops = self._meter_stats() if self.caps else {}
        return {"ok": True, "bytes": {rx: {net: self.carried[rx][net] + now.get((rx, net), 0) - self.dropped[rx][net]
                                           - drops.get((rx, net), {}).get("dropped_bytes", 0) for net in self.nets}
                                      for rx in self.receivers}}

    def _handle(self, req: dict) -> dict:
        op = req.get("op")
        if op == "ready":
            return {"ok": self.ready.wait(float(req.get("timeout", 10)))}
        if not self.ready.is_set():
            return {"ok": False, "error": "switch not connected"}
        with self.lock:
            if op == "apply":
                return self.apply(req["allowed"])
            if op == "counters":
                return self.counters()
            if op == "caps":
                return self.set_caps(req["caps"])
            if op == "meters":
                return self.meters()
            if op == "meter_features":
                return self.meter_features()
            if op == "ports":
                return self.ports()
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _serve(self) -> None:
        path = self.spec["control_socket"]
        if os.path.exists(path):
            os.unlink(path)
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(4)
        while True:
            conn, _ = srv.accept()
            with conn, conn.makefile("rw") as f:
                for line in f:
                    try:
                        reply = self._handle(json.loads(line))
                    except Exception as exc:  # noqa: BLE001 - the reply carries it to the caller
                        reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                    f.write(json.dumps(reply) + "\n")
                    f.flush()


def main(argv: list[str]) -> None:
    """``ofapp SPEC.json``: connect to the switch the spec names and serve until SIGTERM/SIGINT."""
    from os_ken import cfg

    parent = os.getppid()
    os.environ[SPEC_ENV] = argv[0]
    spec = _load_spec()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, f: os._exit(0))
    # os-ken connects to OVS (which listens): no 4-9 s reconnect back-off after a restart. Its own
    # listener is moved to a port nothing uses, so it never competes with the switch's.
    cfg.CONF(["--ofp-switch-address-list", spec["switch"], "--ofp-listen-host", "127.0.0.1",
              "--ofp-tcp-listen-port", str(spec.get("listen_port", 16653))], project="os_ken")
    t = threading.Thread(target=app_manager.AppManager.run_apps, args=(["controller.steering.ofapp"],),
                         daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.5)
        if os.getppid() != parent:
            # Whoever started us was killed outright (no SIGTERM came): an app left behind would keep a
            # lab switch under a controller nobody drives, and its socket and spec would linger.
            os._exit(0)
    os._exit(1)  # run_apps returned: the app died


if __name__ == "__main__":
    main(sys.argv[1:])
