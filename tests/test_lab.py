"""The lab path end to end: the same sweep through SSHHosts as through namespace hosts.

Rig: an emulated testbed whose sender and receiver namespaces each run a real OpenSSH
server (``rigs.sshrig``); a *lab* inventory points at them, so ``start_campaign``
builds a ``LabTestbed`` that reaches every machine over SSH, exactly as on the lab.
Meters are the emulated UM25C devices, read as real UM25Cs through their ptys, and one
through ser2net (``rfc2217://``) started on its receiver by the lab set-up.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.campaign.campaign import start_campaign
from harness.cc import resolve
from harness.testbeds.emulated import EmulatedTestbed
from harness.errors import ConfigError, PreflightError
from harness.hosts.local import NamespaceHost
from harness.config.inventory import Inventory
from harness.testbeds.lab import LabTestbed
from harness.campaign.runner import Interrupted
from harness.config.scenario import Scenario
from rigs.sshrig import lab_inventory, sshd_testbed
from harness.hosts.netcmd import sysctl_argv
from harness.upkeep.preflight import failed_essentials
from conftest import small_inventory


def _scenario(name: str, **kw) -> Scenario:
    base = {"schema_version": 1, "name": name, "congestion_controls": ["cubic"], "receiver_counts": [3],
            "modes": ["both"], "samples_per_case": 1, "file_size": "1M", "transfer_timeout_s": 30, "retries": 0,
            "settle_s": 0, "shuffle": False, "seed": 1}
    base.update(kw)
    return Scenario.model_validate(base)


def _inv(prefix: str) -> Inventory:
    return small_inventory(prefix, [(20, 10), (15, 10), (10, 10)])


@contextmanager
def _rig(prefix: str):
    """(emulated inventory, emulated testbed set up with sshd in every namespace, rig)."""
    inv = _inv(prefix)
    with sshd_testbed(inv) as (tb, rig):
        yield inv, tb, rig


@pytest.fixture
def rigged(prefix):
    with _rig(prefix) as r:
        yield r


def _pids(ns: str) -> list[str]:
    return subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except (FileNotFoundError, ProcessLookupError):
        return []


def _iperf3_left(tb: EmulatedTestbed, role: str | None = None) -> list[str]:
    """iperf3 clients, and servers the lab started (ports from 5300), in the testbed's namespaces.

    The emulated testbed underneath keeps its own servers on 5201.. : those are not the lab's.
    """
    left = []
    for ns in tb.ns.values():
        for pid in _pids(ns):
            cmd = _cmdline(pid)
            if "iperf3" not in cmd:
                continue
            is_client = "-c" in cmd and "-R" in cmd  # a transfer client, not a `sh -c` probe
            lab_server = "-s" in cmd and int(cmd[cmd.index("-p") + 1]) >= 5300
            if is_client or (role != "client" and lab_server):
                left.append(f"{ns}:{pid}:{' '.join(cmd)}")
    return left


@pytest.mark.root
def test_sweep_over_ssh_has_the_namespace_records_shape(prefix, tmp_path):
    # The namespace run first (start_campaign builds and removes its own emulated testbed) ...
    ns_records = start_campaign(_scenario("ns", retries=1), _inv(prefix), tmp_path / "runs",
                                campaign_id="ns").records()
    # ... then the same sweep over SSH, on the same topology with sshd in every namespace.
    secret = "5ecret-" + prefix  # a SIM key the lab knows: it must reach no file of the campaign
    secrets = tmp_path / "secrets.yaml"
    secrets.write_text(f'sim: {{"001010000000001": {{k: "{secret}", opc: "{secret}"}}}}\n')
    secrets.chmod(0o600)
    with _rig(prefix) as (_, tb, rig):
        data = lab_inventory(tb, rig, ser2net={"n2": 24000 + os.getpid() % 1000})
        data["lab"]["secrets_file"] = str(secrets)
        lab = Inventory.model_validate(data)
        campaign = start_campaign(_scenario("ssh", retries=1), lab, tmp_path / "runs", campaign_id="ssh")
        records = campaign.records()
        left = _iperf3_left(tb)
    assert len(records) == len(ns_records) == 3
    for r in records:
        assert r["status"] == "ok", r["error"]
        assert r["testbed_kind"] == "lab" and r["bytes"] == 1024 * 1024
        assert r["energy_j"] and r["energy_j"] > 0 and r["meter_readings"] > 0, {
            k: r[k] for k in ("receiver", "energy_j", "meter_readings", "flags", "window_start", "window_end")}
        assert r["started_at"] is not None
    assert {tuple(sorted(r)) for r in records} == {tuple(sorted(r)) for r in ns_records}
    for a, b in zip(sorted(records, key=lambda r: r["receiver"]), sorted(ns_records, key=lambda r: r["receiver"])):
        for k in a:  # same types wherever both have a value
            if a[k] is not None and b[k] is not None:
                assert type(a[k]) is type(b[k]) or {type(a[k]), type(b[k])} <= {int, float}, k
    manifest = campaign.manifest
    assert manifest["testbed"]["kind"] == "lab"
    assert set(manifest["testbed"]["clock_offsets_s"]) >= {"snd", "n1", "n2", "n3"}
    assert left == []
    assert any(c["name"] == "secrets file" and c["ok"] for c in manifest["preflight"])
    for f in campaign.path.rglob("*"):
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f


@pytest.mark.root
def test_preflight_over_ssh_reports_and_refuses(rigged):
    inv, tb, rig = rigged
    # An eNodeB machine (the emulated eNB's namespace) whose kernel has MPTCP off, and a receiver with it off:
    # net.mptcp.enabled is per network namespace. Only the receiver must fail.
    for ns in ("enb", "n3"):
        NamespaceHost(ns, tb.ns[ns]).run(sysctl_argv("net.mptcp.enabled", "0"))
    enb = rig.add("enb1", tb.ns["enb"])
    data = lab_inventory(tb, rig)
    data["lab"]["infra"] = [{"name": "enb1", "role": "enb", "ssh": {"address": enb.address}}]
    data["receivers"][0]["interfaces"]["lte"]["name"] = "wwan9"  # an adapter that is not plugged in
    lab = LabTestbed(Inventory.model_validate(data))
    try:
        checks = lab.preflight([resolve("cubic")])
    finally:
        lab.teardown()
    by = {(c.host, c.name): c for c in checks}
    assert by[("enb1", "reachable")].ok
    assert [c for c in failed_essentials(checks) if c.host == "enb1"] == [], [c for c in checks if c.host == "enb1"]
    assert not [c for c in checks if c.host == "enb1" and "MPTCP" in c.name], "an eNB needs no MPTCP"
    assert not by[("n3", "MPTCP enabled")].ok and "net.mptcp.enabled = 0" in by[("n3", "MPTCP enabled")].detail
    assert by[("n3", "MPTCP enabled")].essential
    assert by[("snd", "reachable")].ok and by[("n2", "reachable")].ok
    assert by[("n1", "kernel flavour")].ok and "upstream" in by[("n1", "kernel flavour")].detail
    assert by[("n2", "MPTCP enabled")].ok
    assert by[("n2", "interface wifi (wlan0)")].ok and by[("n2", "route from lte")].ok
    assert by[("n2", "meter")].ok and by[("n3", "iperf3")].ok
    assert by[("snd", "congestion control cubic")].ok
    bad = by[("n1", "interface lte (wwan9)")]
    assert not bad.ok and "wwan9" in bad.detail and bad.fix
    assert abs(float(by[("n3", "clock offset")].detail.split()[0])) < 500


@pytest.mark.root
def test_dead_host_fails_its_samples_and_others_continue(rigged, tmp_path):
    inv, tb, rig = rigged
    lab = Inventory.model_validate(lab_inventory(tb, rig))
    sc = _scenario("dead", receiver_counts=[1, 3], samples_per_case=2)
    from harness.campaign.campaign import RunHooks

    def on_sample(outcome):
        if outcome.plan.index == 1 and outcome.plan.n_receivers == 1:  # unshuffled: runs first
            # n3 stops answering (its management link drops every packet) after the first sample.
            NamespaceHost("n3", tb.ns["n3"]).run(["ip", "link", "set", "mgmt0", "down"])

    campaign = start_campaign(sc, lab, tmp_path / "runs", campaign_id="dead", hooks=RunHooks(on_sample=on_sample))
    records = campaign.records()
    one = [r for r in records if r["n_receivers"] == 1]
    three = [r for r in records if r["n_receivers"] == 3]
    assert len(one) == 2 and all(r["status"] == "ok" for r in one)
    # Their tails were waited out against the idle power learnt from the meter (not to the deadline).
    assert not [f for r in one for f in r["flags"] if "tail-unsettled" in f], [r["flags"] for r in one]
    assert len(three) == 6 and all(r["status"] == "failed" for r in three)
    assert all("n3" in r["error"] for r in three)


@pytest.mark.root
def test_abort_leaves_no_iperf3_anywhere(rigged, tmp_path):
    inv, tb, rig = rigged
    lab = Inventory.model_validate(lab_inventory(tb, rig))
    sc = _scenario("abort", file_size="40M", samples_per_case=3)
    stop = threading.Event()

    def interrupt_when_clients_run():
        while not stop.is_set():
            if _iperf3_left(tb, "client"):
                time.sleep(0.3)  # mid-transfer
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    t = threading.Thread(target=interrupt_when_clients_run, daemon=True)
    t.start()
    try:
        with pytest.raises(Interrupted):
            start_campaign(sc, lab, tmp_path / "runs", campaign_id="abort")
    finally:
        stop.set()
        t.join(5)
    assert _iperf3_left(tb) == []


def test_lab_sweep_needs_ssh_and_addresses():
    data = {"schema_version": 1, "kind": "lab", "name": "x", "sender": {"address": "10.0.0.1"},
            "receivers": [{"name": "r1", "meter": {"kind": "um25c", "port": "/dev/rfcomm0"},
                           "interfaces": {"wifi": {"name": "wlan0"}, "lte": {"name": "wwan0"}}}]}
    inv = Inventory.model_validate(data)  # enough for meters-only commands
    with pytest.raises(ConfigError, match=r"cannot drive a lab sweep: sender: needs an 'ssh' section.*"
                                          r"receivers.r1.interfaces.wifi: needs its 'address'") as exc:
        LabTestbed(inv)
    assert exc.value.exit_code == 2
    data["sender"]["ssh"] = {"address": "192.0.2.1"}
    data["receivers"][0]["ssh"] = {"address": "192.0.2.11"}
    data["receivers"][0]["interfaces"] = {"wifi": {"name": "wlan0", "address": "10.1.0.2"},
                                          "lte": {"name": "wwan0", "address": "10.2.0.2"}}
    tb = LabTestbed(Inventory.model_validate(data))  # no 'lab' section: the defaults
    assert tb.sender.user == "root" and tb.nodes["r1"].port == 5201


def test_unreachable_lab_refuses_to_start(tmp_path):
    key = tmp_path / "k"
    key.write_text("x")
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    data = {"schema_version": 1, "kind": "lab", "name": "x",
            "sender": {"address": "10.0.0.1", "ssh": {"address": "127.0.0.1", "port": 1}},
            "receivers": [{"name": "r1", "meter": {"kind": "um25c", "port": "/dev/nonexistent-meter"},
                           "ssh": {"address": "127.0.0.1", "port": 1},
                           "interfaces": {"wifi": {"name": "wlan0", "address": "10.1.0.2"},
                                          "lte": {"name": "wwan0", "address": "10.2.0.2"}}}],
            "lab": {"ssh_defaults": {"key_file": str(key), "known_hosts": str(kh), "connect_timeout_s": 2}}}
    with pytest.raises(PreflightError, match=r"\[r1\] reachable: .*cannot connect"):
        start_campaign(_scenario("u", receiver_counts=[1]), Inventory.model_validate(data), tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


class _FlowsAtFinish:
    """The controller of a campaign, unchanged, with a look at the switch's flows when each transfer ends
    (``finish`` is called before the controller allows both networks again)."""

    def __init__(self, inner, ofctl) -> None:
        self.inner, self.ofctl, self.flows = inner, ofctl, []

    def finish(self, plan) -> None:
        self.flows.append((plan.policy, self.ofctl("dump-flows")))
        self.inner.finish(plan)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.root
def test_lab_campaign_steers_and_caps_at_the_lab_switch(prefix, tmp_path):
    """A lab campaign with `steering: openflow`: the os-ken app runs here and drives a real OVS reached over
    the management network (the lab switch: a userspace OVS between the sender and the AP/eNB, its
    machine reached over SSH), named by the inventory's lab.switch. EEMPTCP on a fast WiFi and a slow LTE
    path decides WiFi alone, capped at its probe rate: the LTE entry is gone at the switch, the WiFi entry
    carries a meter and counted the file, and the records say so. MP-SDN in the same run reads each
    network's congestion from the switch's port towards it (utilisation against the inventory's
    capacity): the saturated LTE secondary reads congested and its Tier-2 limit falls."""
    from controller.setup2 import control_factory

    from rigs.labswitch import lab_switch_rig

    spies = []
    with lab_switch_rig(prefix, [(20, 4)]) as r:
        def factory(scenario, source):
            spies.append(_FlowsAtFinish(control_factory(scenario, source), r.ofctl))
            return spies[-1]

        # 3 MB: two MP-SDN epochs of 0.5 s at least (24 Mbit/s in all), eemptcp's WiFi alone ~1.3 s.
        sc = _scenario("labsw", receiver_counts=[1], modes=[], file_size="3M",
                       policies=["eemptcp", {"name": "mp-sdn", "params": {"ei_s": 0.5}}],
                       control={"steering": "openflow", "probe_s": 0.5, "warm_s": 0.2})
        campaign = start_campaign(sc, r.lab, tmp_path / "runs", campaign_id="labsw", control_factory=factory)
        records = campaign.records()
        bridge = r.switch.bridge
        wifi, lte = (str(r.lab.receivers[0].interfaces[k].address) for k in ("wifi", "lte"))
    checks = {(c["host"], c["name"]): c for c in campaign.manifest["preflight"]}
    assert checks[("switch", "openflow steering")]["ok"] and checks[("switch", "openflow steering")]["essential"]
    assert checks[("switch", "OpenFlow 1.3")]["ok"] and not checks[("switch", "OpenFlow 1.3")]["essential"]
    assert checks[("switch", "rate caps (OpenFlow meters)")]["ok"]
    assert checks[("sw", f"bridge {bridge}")]["ok"], checks[("sw", f"bridge {bridge}")]
    assert checks[("controller", "congestion signal")]["ok"], checks[("controller", "congestion signal")]
    by_policy = {rec["policy"]: rec for rec in records}
    r = by_policy["eemptcp"]
    assert r["status"] == "ok", r["error"]
    assert r["steering"] == "openflow" and r["caps_by"] == "openflow-meter", r
    assert r["assignment"] == "wifi" and set(r["caps_mbit"]) == {"wifi"}, (r["assignment"], r["caps_mbit"])
    (flows,) = [f for policy, f in spies[0].flows if policy == "eemptcp"]
    down = [ln for ln in flows.splitlines() if f"nw_dst={wifi}" in ln]
    assert f"nw_dst={lte}" not in flows, "LTE was not decided: its entry must be gone from the switch"
    assert len(down) == 1 and "meter:" in down[0], flows
    # Flow statistics trail the datapath by up to one revalidation (100 ms, ~0.25 MB at this rate).
    assert int(down[0].split("n_bytes=")[1].split(",")[0]) >= r["bytes"] // 2, down[0]
    assert r["iface_bytes"]["lte"] < 20_000, r["iface_bytes"]  # a blocked subflow's SYNs at most
    # MP-SDN: WiFi primary, the LTE secondary capped by its Tier-2 limit (4 Mbit/s, the LTE capacity, at
    # epoch 0); every epoch reads the switch's ports, and the LTE subflow filling its path reads congested.
    m = by_policy["mp-sdn"]
    assert m["status"] == "ok", m["error"]
    assert m["policy_trace"]["primary"] == "wifi" and m["policy_trace"]["tier2_mbit"]["lte"] == 4, m["policy_trace"]
    epochs = m["control_epochs"]
    assert epochs and all("error" not in e for e in epochs), epochs
    assert {e["occupancy_source"] for e in epochs} == {"switch-port"}, epochs
    assert all(e["congestion"][net]["capacity_mbit"] == cap for e in epochs for net, cap in (("wifi", 20), ("lte", 4)))
    # The LTE subflow fills its 4 Mbit/s path (its meter lets it, at 4 Mbit/s, until the first EI): the port
    # reads saturated, and every epoch that reads so halves the limit (floored), as Algorithm 2 says: the
    # Tier-2 limit falls below its epoch-0 value.
    saturated = [i for i, e in enumerate(epochs) if e["congestion"]["lte"]["utilisation"] >= 0.85]
    assert saturated, [e["congestion"]["lte"] for e in epochs]
    for i in saturated:
        prev = epochs[i - 1]["tier2_mbit"]["lte"] if i else 4.0
        assert epochs[i]["occupancy"]["lte"] >= 0.85
        assert epochs[i]["tier2_mbit"]["lte"] == pytest.approx(max(0.1, prev / 2)), epochs[i]
        assert epochs[i]["caps_mbit"] == {"lte": pytest.approx(epochs[i]["tier2_mbit"]["lte"])}, epochs[i]
    # The primary is never metered (docs/schemes.md, MP-SDN's WiFi primary: its shortfall under MP-SDN is MPTCP's, see
    # docs/schemes.md): at the end of the transfer the WiFi downlink entry has no meter, the LTE one has.
    (sdn_flows,) = [f for policy, f in spies[0].flows if policy == "mp-sdn"]
    sdn_down = {net: [ln for ln in sdn_flows.splitlines() if f"nw_dst={addr}" in ln and "meter:" in ln]
                for net, addr in (("wifi", wifi), ("lte", lte))}
    assert not sdn_down["wifi"] and len(sdn_down["lte"]) == 1, sdn_flows
    # WiFi's port carried the file's WiFi share (its utilisation against 20 Mbit/s). The epochs start at the
    # release, the clients over SSH a moment later: on a loaded machine the first epoch (0.5 s) once ended before
    # the transfer's first bytes, so the first epoch that saw WiFi traffic is the one held to the capacity.
    wifi_tx = [e["congestion"]["wifi"]["tx_mbit"] for e in epochs]
    assert any(x > 0 for x in wifi_tx), wifi_tx
    assert next(x for x in wifi_tx if x > 0) <= 20 * 1.2, wifi_tx
