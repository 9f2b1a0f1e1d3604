"""The lab switch without a lab: the inventory's lab.switch section, the OpenFlow 1.3 handshake on bytes a
real OVS sent, the controller's preflight against a switch speaking that protocol, and serve's arguments.

The root tests drive a real OVS: a lab campaign with `steering: openflow` (tests/test_lab.py) and
`mplab controller serve --inventory --cap` (tests/test_controller_steering.py).
"""
from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import yaml

from harness.config.inventory import load_inventory
from harness.config.scenario import ControlSpec
from harness.config.switch import SwitchPorts
from harness.errors import ConfigError, PreflightError
from harness.testbeds.lab import LabTestbed
from harness.upkeep.ofprobe import (
    OFPT_FEATURES_REQUEST, OFPT_HELLO, OFPT_MULTIPART_REQUEST, features_request_bytes, hello_bytes, hello_versions,
    meter_features_request_bytes, parse, parse_features_reply, parse_meter_features, probe_switch,
)

from controller.congestion import port_occupancy, port_readings
from controller.policy import Context, Decision, ReceiverMeasurement
from controller.registry import make_policy
from controller.setup2 import Setup2Control
from controller.steering.openflow import SwitchSpec
from mplab.commands.controller import serve_decisions

REPO = Path(__file__).resolve().parent.parent

# Captured from OVS 3.1 (userspace datapath) answering harness.upkeep.ofprobe's messages.
#: HELLO of a bridge with protocols=OpenFlow10,OpenFlow13 would carry a bitmap; this one: OpenFlow13 only.
HELLO_13 = bytes.fromhex("04000010000000010001000800000010")
#: protocols=OpenFlow10: a plain 1.0 HELLO, then HELLO_FAILED/INCOMPATIBLE with OVS's text.
HELLO_10 = bytes.fromhex("0100000800000003")
ERROR_10 = bytes.fromhex("040100520000000000000000576520737570706f72742076657273696f6e20307830312c20796f75"
                         "20737570706f72742076657273696f6e20307830342c206e6f20636f6d6d6f6e2076657273696f6e732e")
FEATURES = bytes.fromhex("04060020000001010000aec3eab2ee4500000000fe0000000000004f00000000")
METER_FEATURES = bytes.fromhex("0413002000000102000b00000000000000040000000000020000000f08000000")
#: What OVS answers when its datapath has no meters (dpif_meter_get_features: all zero).
NO_METERS = METER_FEATURES[:16] + bytes(16)


def _lab_doc(**switch) -> dict:
    doc = yaml.safe_load((REPO / "inventory" / "lab.yaml").read_text())
    doc["lab"].pop("secrets_file")
    doc["lab"]["switch"].update(switch)
    return doc


def _load(tmp_path, doc) -> object:
    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(doc))
    return load_inventory(p)


def test_lab_switch_section_is_read_and_shares_its_fields_with_the_serve_spec(tmp_path):
    sw = load_inventory(REPO / "inventory" / "lab.yaml").lab.switch
    assert sw.listen == "192.168.100.5:6653" and (sw.listen_host, sw.listen_port) == ("192.168.100.5", 6653)
    assert sw.ports() == {"wifi": {"up": 1, "down": 2}, "lte": {"up": 3, "down": 4}}
    assert (sw.bridge, sw.host) == ("br-steer", "sw1")
    assert sw.capacity_mbit() == {"wifi": 60.0, "lte": 30.0}
    # The serve spec is the same schema plus receivers; its old key `switch:` still reads as `listen:`.
    spec = SwitchSpec.model_validate({"switch": sw.listen, "networks": {n: p.model_dump() for n, p in sw.networks.items()},
                                      "receivers": {"n1": {"wifi": "10.10.1.2", "lte": "10.20.1.2"}}})
    assert spec.listen == sw.listen and spec.networks == sw.networks
    assert [(r.name, dict(r.addresses)) for r in spec.steered()] == [("n1", {"wifi": "10.10.1.2", "lte": "10.20.1.2"})]


@pytest.mark.parametrize("change, field, reason", [
    ({"listen": "192.168.100.5"}, "lab.switch.listen", "should match pattern"),
    ({"listen": "192.168.100.5:70000"}, "lab.switch", "listen: port 70000 is not a TCP port"),
    ({"networks": {"wifi": {"up": 1, "down": 2}, "lte": {"up": 2, "down": 4}}}, "lab.switch",
     "port 2 is also networks."),  # names both sides (networks.wifi.down, networks.lte.up)
    ({"networks": {"wifi": {"up": 1, "down": 2}}}, "lab.switch", "networks: missing ['lte']"),
    ({"networks": {"wifi": {"up": 1, "down": 2}, "lte": {"up": 0, "down": 4}}}, "lab.switch.networks.lte.up",
     "greater than or equal to 1"),
    ({"bridge": "a bridge"}, "lab.switch.bridge", "should match pattern"),
    ({"host": "nope"}, "(top level)", "lab.switch.host: 'nope' is not in lab.infra"),
    ({"host": "enb"}, "(top level)", "lab.switch.host: lab.infra 'enb' has role 'enb', expected 'switch'"),
    ({"port": 6653}, "lab.switch.port", "unknown field"),
])
def test_bad_lab_switch_is_one_line_naming_the_field_exit_2(tmp_path, change, field, reason):
    with pytest.raises(ConfigError) as exc:
        _load(tmp_path, _lab_doc(**change))
    msg = str(exc.value)
    assert exc.value.exit_code == 2 and "\n" not in msg
    assert exc.value.field == field and reason in msg, msg


def test_bad_lab_switch_through_the_command_line_exits_2_with_one_line(tmp_path, capsys):
    from mplab.cli import run as mplab

    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(_lab_doc(listen="sw1")))
    assert mplab(["controller", "serve", "--inventory", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lab.switch.listen" in err and str(p) in err, err


def test_emulated_inventory_refuses_a_lab_switch():
    from tests.conftest import small_inventory

    doc = small_inventory("mplab-tx-", [(10, 10)]).model_dump(mode="json", exclude_unset=True)
    doc["lab"] = {"switch": {"listen": "127.0.0.1:6653", "networks": {"wifi": {"up": 1, "down": 2},
                                                                       "lte": {"up": 3, "down": 4}}}}
    from harness.config.inventory import Inventory

    with pytest.raises(ValueError, match="lab.switch on an emulated inventory"):
        Inventory.model_validate(doc)


def test_openflow_handshake_parsers_on_bytes_ovs_sent():
    assert hello_versions(parse(HELLO_13)) == (4,)
    assert hello_versions(parse(HELLO_10)) == (1,)  # no bitmap: every version up to the header's
    both = bytes.fromhex("04000010000000010001000800000012")  # protocols=OpenFlow10,OpenFlow13
    assert hello_versions(parse(both)) == (1, 4)
    assert parse_features_reply(parse(FEATURES)) == (0xaec3eab2ee45, 254)
    assert parse_meter_features(parse(METER_FEATURES)) == (262144, ("drop",), ("kbps", "pktps", "burst", "stats"))
    assert parse_meter_features(parse(NO_METERS)) == (0, (), ())
    error = parse(ERROR_10)
    assert (error.type, error.code) == (0, 0) and b"no common versions" in bytes(error.data)
    # What the probe sends, built by os-ken (the HELLO by hand: a 1.3-only version bitmap).
    assert hello_bytes(1) == bytes.fromhex("04000010000000010001000800000010")
    assert features_request_bytes(2) == bytes.fromhex("0405000800000002")
    assert meter_features_request_bytes(3) == bytes.fromhex("0412001000000003000b000000000000")


class FakeSwitch:
    """A TCP listener answering each OpenFlow request with bytes a real OVS sent (or ``hello`` first)."""

    def __init__(self, hello: bytes = HELLO_13, meters: bytes = METER_FEATURES, after_hello: bytes = b"") -> None:
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.listen = f"127.0.0.1:{self.srv.getsockname()[1]}"
        self.replies = {OFPT_HELLO: hello + after_hello, OFPT_FEATURES_REQUEST: FEATURES,
                        OFPT_MULTIPART_REQUEST: meters}
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.srv.accept()
        with conn:
            try:
                while head := conn.recv(8):
                    conn.recv(int.from_bytes(head[2:4], "big") - 8)
                    conn.sendall(self.replies[head[1]])
            except OSError:
                pass  # the probe closed first (it refuses a 1.0 switch after its HELLO)

    def close(self) -> None:
        self.srv.close()


def test_probe_reads_a_switch_and_refuses_what_is_not_openflow_13():
    sw = FakeSwitch()
    info = probe_switch(sw.listen, timeout_s=3)
    assert (info.datapath_id, info.n_tables, info.max_meter, info.band_types) == (0xaec3eab2ee45, 254, 262144, ("drop",))
    sw = FakeSwitch(hello=HELLO_10, after_hello=ERROR_10)
    with pytest.raises(Exception, match=r"speaks OpenFlow \['1.0'\], not 1.3"):
        probe_switch(sw.listen, timeout_s=3)
    srv = socket.create_server(("127.0.0.1", 0))  # something else on the port: an SSH server's banner
    port = srv.getsockname()[1]

    def banner():
        c, _ = srv.accept()
        c.sendall(b"SSH-2.0-OpenSSH_9.2p1\r\n")
        c.recv(100)
        c.close()

    threading.Thread(target=banner, daemon=True).start()
    with pytest.raises(Exception, match="not OpenFlow"):
        probe_switch(f"127.0.0.1:{port}", timeout_s=3)
    srv.close()
    with pytest.raises(Exception, match="cannot connect"):
        probe_switch(f"127.0.0.1:{port}", timeout_s=3)



def test_a_switch_that_accepts_but_never_answers_is_named_with_the_wait_and_the_knob():
    """A slow switch (a userspace-datapath OVS on a loaded host) is told apart from a dead one by its wait."""
    srv = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody ever answers
    t0 = time.monotonic()
    with pytest.raises(PreflightError, match=r"no OpenFlow answer within 0.5 s \(lab.switch.answer_timeout_s\)"):
        probe_switch(f"127.0.0.1:{srv.getsockname()[1]}", timeout_s=0.5)
    assert time.monotonic() - t0 < 3  # the deadline holds even though the connection stays open
    srv.close()
    listen = {"listen": "127.0.0.1:6653", "networks": {"wifi": {"up": 1, "down": 2}, "lte": {"up": 3, "down": 4}}}
    assert SwitchPorts(**listen).answer_timeout_s == 15.0
    for bad in (0, float("inf"), 1e6):
        with pytest.raises(ValueError, match="answer_timeout_s"):
            SwitchPorts(**listen, answer_timeout_s=bad)

def _lab_testbed(tmp_path, **switch) -> LabTestbed:
    doc = _lab_doc(**switch)
    doc["lab"]["infra"] = [h for h in doc["lab"]["infra"] if h["name"] != "sw1"] + [{"name": "sw1", "role": "switch"}]
    return LabTestbed(_load(tmp_path, doc))


def _control(*policies: str) -> Setup2Control:
    return Setup2Control(ControlSpec(steering="openflow"), {p: make_policy(p) for p in policies}, 0)


def test_lab_preflight_of_openflow_steering_checks_the_switch_and_its_meters(tmp_path):
    sw = FakeSwitch()
    checks = _control("all-lte", "eemptcp").preflight(_lab_testbed(tmp_path, listen=sw.listen))
    assert [(c.name, c.ok, c.essential) for c in checks] == [("openflow steering", True, True),
                                                             ("rate caps (OpenFlow meters)", True, True)]
    assert "OpenFlow 1.3, datapath 0000aec3eab2ee45" in checks[0].detail
    # A switch without meters: the capping policies are refused before anything starts, saying why.
    sw = FakeSwitch(meters=NO_METERS)
    checks = _control("all-lte", "eemptcp", "mp-sdn").preflight(_lab_testbed(tmp_path, listen=sw.listen))
    caps = checks[1]
    assert not caps.ok and caps.essential
    assert "policies ['eemptcp', 'mp-sdn'] cap per-path rates" in caps.detail
    assert "lack drop bands, kbit/s rates, burst sizes, 18 meters" in caps.detail
    assert "no HTB on a lab switch" in caps.detail
    # mp-sdn reads each network's congestion as its down port's utilisation against the inventory's capacity.
    congestion = checks[2]
    assert congestion.name == "congestion signal" and congestion.ok and congestion.essential, congestion
    assert "(wifi 60, lte 30 Mbit/s;" in congestion.detail and "proxy for queue occupancy" in congestion.detail
    sw = FakeSwitch()
    doc = _lab_doc()
    del doc["lab"]["switch"]["networks"]["lte"]["capacity_mbit"]
    doc["lab"]["infra"] = [h for h in doc["lab"]["infra"] if h["name"] != "sw1"] + [{"name": "sw1", "role": "switch"}]
    doc["lab"]["switch"]["listen"] = sw.listen
    checks = _control("mp-sdn-energy").preflight(LabTestbed(_load(tmp_path, doc)))
    (congestion,) = [c for c in checks if c.name == "congestion signal"]
    assert not congestion.ok and congestion.essential
    assert "policies ['mp-sdn-energy']" in congestion.detail and "lab.switch.networks.{lte}.capacity_mbit" in congestion.detail
    assert "capacity_mbit" in congestion.fix
    # No capping policy: meters are not needed.
    sw = FakeSwitch(meters=NO_METERS)
    assert [c.ok for c in _control("all-lte").preflight(_lab_testbed(tmp_path, listen=sw.listen))] == [True]


def test_lab_preflight_of_openflow_steering_fails_clearly_without_a_switch(tmp_path):
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    srv.close()
    (check,) = _control("all-lte").preflight(_lab_testbed(tmp_path, listen=f"127.0.0.1:{port}"))
    assert not check.ok and "cannot connect" in check.detail and "ptcp:PORT" in check.fix
    doc = _lab_doc()
    del doc["lab"]["switch"]
    (check,) = _control("all-lte").preflight(LabTestbed(_load(tmp_path, doc)))
    assert not check.ok and "needs the inventory's lab.switch section" in check.detail
    # Other steering needs no switch.
    other = Setup2Control(ControlSpec(steering="host"), {"all-lte": make_policy("all-lte")}, 0)
    assert other.preflight(LabTestbed(_load(tmp_path, doc))) == []
    # ... but MP-SDN on a lab reads its congestion from the switch: refused without one, saying so.
    other = Setup2Control(ControlSpec(steering="host"), {"mp-sdn": make_policy("mp-sdn")}, 0)
    (check,) = other.preflight(LabTestbed(_load(tmp_path, doc)))
    assert not check.ok and "needs `steering: openflow` and lab.switch" in check.detail, check


#: Two replies of the OpenFlow app's `ports` op 0.495 s apart (the switch's clock), MP-SDN's first EI in the
#: lab campaign of tests/test_lab.py (20 / 4 Mbit/s paths, the LTE secondary saturating its path).
PORTS_BEFORE = {"wifi": {"port": 2, "tx_bytes": 1_204_310, "tx_packets": 861, "tx_dropped": 0, "duration_s": 9.812,
                         "meter_dropped_bytes": 0},
                "lte": {"port": 4, "tx_bytes": 402_118, "tx_packets": 290, "tx_dropped": 0, "duration_s": 9.812,
                        "meter_dropped_bytes": 0}}
PORTS_AFTER = {"wifi": {"port": 2, "tx_bytes": 2_112_920, "tx_packets": 1_473, "tx_dropped": 0, "duration_s": 10.307,
                        "meter_dropped_bytes": 0},
               "lte": {"port": 4, "tx_bytes": 676_970, "tx_packets": 475, "tx_dropped": 0, "duration_s": 10.307,
                       "meter_dropped_bytes": 0}}


def test_mp_sdn_on_a_lab_squeezes_tier_2_when_the_switch_port_is_saturated():
    caps = {"wifi": 20.0, "lte": 4.0}
    occ, detail = port_occupancy(port_readings(PORTS_BEFORE), port_readings(PORTS_AFTER), caps)
    assert detail["lte"]["tx_mbit"] == pytest.approx(4.442, abs=0.001)
    assert detail["lte"]["utilisation"] == pytest.approx(1.1105, abs=1e-3) and occ["lte"] == 1.0  # clipped
    assert occ["wifi"] == pytest.approx(14.685 / 20, abs=1e-3)
    policy = make_policy("mp-sdn")
    ms = [ReceiverMeasurement("n1", {"wifi": 19.2, "lte": 3.9})]
    out0 = policy.decide(ms, Context("cubic", 1, 3 << 20, epoch=0, capacity_mbit=caps))
    assert out0.trace["primary"] == {"n1": "wifi"} and out0.trace["tier2_mbit"] == caps
    out1 = policy.decide(ms, Context("cubic", 1, 3 << 20, epoch=1, occupancy=occ, capacity_mbit=caps))
    assert out1.trace["tier2_mbit"] == {"wifi": 20.0, "lte": 2.0}  # LTE congested: halved
    assert out1.assignment["n1"].caps_mbit == {"lte": 2.0}
    # Below CTh the limit grows again (the additive reading of ambiguity `mpsdn-increase`).
    half = {**PORTS_AFTER, "lte": {**PORTS_AFTER["lte"], "tx_bytes": 402_118 + 123_750}}  # 2 Mbit/s: 0.5
    occ2, _ = port_occupancy(port_readings(PORTS_BEFORE), port_readings(half), caps)
    assert occ2["lte"] == pytest.approx(0.5)
    out2 = policy.decide(ms, Context("cubic", 1, 3 << 20, epoch=2, occupancy=occ2, capacity_mbit=caps))
    assert out2.trace["tier2_mbit"]["lte"] == pytest.approx(2.0 * (1 + 0.5 * 0.35 / 0.5))
    # A port that dropped on transmit was full: congested, whatever its rate.
    dropped = {**half, "lte": {**half["lte"], "tx_dropped": 3}}
    assert port_occupancy(port_readings(PORTS_BEFORE), port_readings(dropped), caps)[0]["lte"] == 1.0
    # A restarted port (its clock went back) or a missing one: no occupancy for that network (its limit
    # stays), and the detail says why; the other network still reads.
    restarted = {**PORTS_AFTER, "lte": {**PORTS_AFTER["lte"], "duration_s": 0.2}}
    occ3, detail3 = port_occupancy(port_readings(PORTS_BEFORE), port_readings(restarted), caps)
    assert set(occ3) == {"wifi"} and "restarted" in detail3["lte"]["error"]
    occ4, detail4 = port_occupancy(port_readings(PORTS_BEFORE), port_readings({**PORTS_AFTER, "lte": None}), caps)
    assert set(occ4) == {"wifi"} and "no port statistics" in detail4["lte"]["error"]
    out3 = policy.decide(ms, Context("cubic", 1, 3 << 20, epoch=3, occupancy=occ4, capacity_mbit=caps))
    assert out3.trace["tier2_mbit"]["lte"] == out2.trace["tier2_mbit"]["lte"]


def test_serve_caps_and_assignments_are_checked_before_anything_starts():
    rx = {"n1", "n2"}
    got = serve_decisions(["n1=lte"], ["n1:lte=3", "n2:wifi=8.5"], rx)
    assert got == {"n1": Decision(frozenset({"lte"}), {"lte": 3.0}),
                   "n2": Decision(frozenset({"wifi", "lte"}), {"wifi": 8.5})}
    for bad, match in ((["n1:wifi=8"], "n1 is assigned \\['lte'\\], so wifi carries nothing to cap"),
                       (["n3:wifi=8"], "'n3' is not a receiver"), (["n1:wlan=8"], "network 'wlan'"),
                       (["n1:wifi=0"], "must be > 0"), (["n1=8"], "expected NAME:NET=MBIT")):
        with pytest.raises(ConfigError, match=match) as exc:
            serve_decisions(["n1=lte"], bad, rx)
        assert exc.value.field == "cap" and exc.value.exit_code == 2


def test_serve_takes_the_switch_from_a_spec_or_an_inventory_not_both(tmp_path, capsys):
    from mplab.cli import run as mplab

    inv = REPO / "inventory" / "lab.yaml"
    assert mplab(["controller", "serve"]) == 2
    assert mplab(["controller", "serve", str(tmp_path / "x.yaml"), "--inventory", str(inv)]) == 2
    assert "either as SPEC" in capsys.readouterr().err
    # A switch nobody listens at: a clear failure before the app is started.
    doc = _lab_doc(listen="127.0.0.1:1")
    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(doc))
    assert mplab(["controller", "serve", "--inventory", str(p), "--state-dir", str(tmp_path / "st")]) == 1
    assert "switch 127.0.0.1:1: cannot connect" in capsys.readouterr().err
    assert not (tmp_path / "st").exists()


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def test_the_app_exits_when_its_starter_is_killed_outright(tmp_path):
    """A campaign killed with SIGKILL sends its os-ken app no SIGTERM: the app notices its starter is gone."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from controller.steering.openflow import app_argv, free_tcp_port

    sock = tmp_path / "app.sock"
    spec = tmp_path / "ofapp.json"
    spec.write_text(json.dumps({"switch": "127.0.0.1:1", "control_socket": str(sock), "listen_port": free_tcp_port(),
                                "networks": {"wifi": {"up": 1, "down": 2}, "lte": {"up": 3, "down": 4}},
                                "receivers": {"n1": {"wifi": "10.10.1.2", "lte": "10.20.1.2"}}}))
    starter = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(sys.argv[1:]); "
                                "print(p.pid, flush=True); p.wait()", *app_argv(str(spec))],
                               stdout=subprocess.PIPE, text=True)
    app = int(starter.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while not sock.exists():  # the app is up (its control socket is made when os-ken builds it)
            assert not _gone(app) and time.monotonic() < deadline, "the app did not come up"
            time.sleep(0.05)
        starter.kill()
        starter.wait()
        deadline = time.monotonic() + 5
        while not _gone(app):
            assert time.monotonic() < deadline, "the app outlived its starter"
            time.sleep(0.05)
    finally:
        if not _gone(app):
            os.kill(app, signal.SIGKILL)
        starter.stdout.close()
