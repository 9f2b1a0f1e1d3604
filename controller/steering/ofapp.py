"""The os-ken app behind OpenFlow steering, run as its own process (``python -m controller.steering.ofapp SPEC``).

Flows it installs on the switch (OpenFlow 1.3, table 0; the reference paper's per-receiver
forwarding entries):

- per receiver and network, a downlink entry ``ip, in_port=<up>, nw_dst=<receiver address>
  -> output:<down>`` and an uplink entry ``ip, in_port=<down>, nw_src=<address> -> output:<up>``
  (priority 100); blocking a receiver on a network deletes both (``OFPFC_DELETE_STRICT``), as the
  paper deleted the forwarding entry; allowing it adds them back;
- ARP between each network's two ports (priority 10): the "radio" stays attached;
- nothing else: with the switch fail-secure, unmatched IP is dropped.

On every (re)connect it wipes table 0 and installs the entries for the current state (flows
outlive the controller with ``fail_mode=secure``). A deleted flow loses its byte counter, so the
downlink entry's stats are read just before it is deleted and carried forward.

Control: JSON lines on a unix socket (the spec's ``control_socket``): ``{"op": "ready"}``,
``{"op": "apply", "allowed": {rx: {net: bool}}}`` (replies after a barrier: the switch has
applied it), ``{"op": "counters"}`` (downlink bytes per receiver and network). os-ken 4.x has no
``osken-manager``: ``main`` calls ``cfg.CONF`` and ``AppManager.run_apps`` in a thread and exits
the process on SIGTERM/SIGINT (os-ken's threads ignore SIGINT and ``AppManager.close`` can hang).
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
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls  # noqa: E402
from os_ken.ofproto import ofproto_v1_3  # noqa: E402


class SteerApp(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.spec = _load_spec()
        self.nets: dict[str, dict] = self.spec["networks"]
        self.receivers: dict[str, dict[str, str]] = self.spec["receivers"]
        self.allowed = {rx: {net: True for net in self.nets} for rx in self.receivers}
        self.carried = {rx: {net: 0 for net in self.nets} for rx in self.receivers}
        self.dp = None
        self.ready = threading.Event()
        self.lock = threading.Lock()  # one control request at a time
        self._waits: dict[int, tuple[threading.Event, list]] = {}
        threading.Thread(target=self._serve, daemon=True, name="mplab-control").start()

    # ------------------------------------------------------------ switch side

    def _entries(self, rx: str, net: str):
        p = self.dp.ofproto_parser
        up, down, addr = self.nets[net]["up"], self.nets[net]["down"], self.receivers[rx][net]
        return [(p.OFPMatch(in_port=up, eth_type=0x0800, ipv4_dst=addr), down),
                (p.OFPMatch(in_port=down, eth_type=0x0800, ipv4_src=addr), up)]

    def _flow(self, match, out_port: int | None, prio: int, command) -> None:
        dp, ofp, p = self.dp, self.dp.ofproto, self.dp.ofproto_parser
        inst = [] if out_port is None else [p.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                                                    [p.OFPActionOutput(out_port)])]
        dp.send_msg(p.OFPFlowMod(datapath=dp, priority=prio, match=match, instructions=inst, command=command,
                                 out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))

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
        self._request(self.dp.ofproto_parser.OFPBarrierRequest(self.dp))

    def _install_all(self) -> None:
        ofp, p = self.dp.ofproto, self.dp.ofproto_parser
        self._flow(p.OFPMatch(), None, 0, ofp.OFPFC_DELETE)  # flows outlive a controller: start clean
        for net, ports in self.nets.items():
            for a, b in ((ports["up"], ports["down"]), (ports["down"], ports["up"])):
                self._flow(p.OFPMatch(in_port=a, eth_type=0x0806), b, PRIO_ARP, ofp.OFPFC_ADD)
        for rx in self.receivers:
            for net in self.nets:
                if self.allowed[rx][net]:
                    for match, out in self._entries(rx, net):
                        self._flow(match, out, PRIO_ENTRY, ofp.OFPFC_ADD)

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
        except TimeoutError as exc:
            self.logger.error("switch did not confirm the initial flows: %s", exc)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev) -> None:
        w = self._waits.pop(ev.msg.xid, None)
        if w:
            w[0].set()

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
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
            for match, out in self._entries(rx, net):
                if v:
                    self._flow(match, out, PRIO_ENTRY, ofp.OFPFC_ADD)
                else:
                    self._flow(match, None, PRIO_ENTRY, ofp.OFPFC_DELETE_STRICT)
            self.allowed[rx][net] = v
        self._barrier()
        return {"ok": True, "changed": len(changes), "apply_s": time.perf_counter() - t0}

    def counters(self) -> dict:
        now = self._downlink_bytes()
        return {"ok": True, "bytes": {rx: {net: self.carried[rx][net] + now.get((rx, net), 0) for net in self.nets}
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
    os._exit(1)  # run_apps returned: the app died


if __name__ == "__main__":
    main(sys.argv[1:])
