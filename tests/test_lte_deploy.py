"""Deploy, restart order, status, logs and stop of the LTE cell, through Hosts in namespaces:
``NamespaceHost`` and ``SSHHost`` against a real sshd in each namespace.

The eNodeB and the EPC each get a namespace joined by a veth (the S1 network). Open5GS,
srsRAN and systemd cannot run here, so ``tests/standins`` provides ``systemctl``,
``journalctl`` and the daemons (the only mocks; see its docstring). The stand-in MME
listens on its S1AP address and the stand-in eNodeB connects to it across the veth, so
the S1 check reads a log line produced by a real connection between the namespaces.
"""
from __future__ import annotations

import mongomock
import pytest

import standins
from harness.upkeep.clean import clean_prefix
from harness.hosts.local import LocalHost, NamespaceHost
from harness.config.inventory import Inventory
from harness.hosts.netcmd import veth_argv
from lte.checks import check_s1
from harness.deploy.files import BACKUP_SUFFIX
from lte.deploy import LteHosts, LteStepError, collect_logs, lte_down, lte_status, lte_up
from harness.deploy.secrets import load_secrets
from harness.deploy.services import Systemd
from lte.services import START_ORDER
from rigs.ltelab import DAEMON_KIND, deploy_inventory, lab_data, write_secrets



@pytest.fixture
def s1(prefix, tmp_path):
    """Two namespaces (eNB, EPC) joined by the S1 veth; stand-in systemctl; all removed afterwards."""
    root = LocalHost("root")
    enb_ns, epc_ns = f"{prefix}enb", f"{prefix}epc"
    sdir = tmp_path / "standins"
    try:
        for ns in (enb_ns, epc_ns):
            root.run(["ip", "netns", "add", ns])
        root.run(veth_argv("s1", epc_ns, "s1", enb_ns))
        for ns, addr in ((epc_ns, "192.168.30.1/24"), (enb_ns, "192.168.30.2/24")):
            h = NamespaceHost(ns, ns)
            h.run(["ip", "addr", "add", addr, "dev", "s1"])
            h.run(["ip", "link", "set", "s1", "up"])
            h.run(["ip", "link", "set", "lo", "up"])
        yield {"enb": enb_ns, "epc": epc_ns, "dir": sdir}
    finally:
        standins.stop_all(sdir)
        clean_prefix(prefix)


def _controls(sdir):
    """The stand-in systemctl calls that change state (restart/stop), in order."""
    return [c for c in standins.calls(sdir) if not c.startswith("is-active")]


def _install(sdir, inv):
    units = {u: standins.daemon_argv(k, f"{inv.lte.epc.config_dir}/{k}.yaml") for u, k in DAEMON_KIND.items()}
    units["srsenb"] = standins.daemon_argv("srsenb", f"{inv.lte.enb.config_dir}/enb.conf")
    return standins.install(sdir, units)


def _hosts(kind, s1, tools, rig_factory):
    if kind == "netns":
        enb, epc = NamespaceHost("enb", s1["enb"]), NamespaceHost("epc", s1["epc"])
    else:
        rig = rig_factory()
        rig.add("enb", s1["enb"])
        rig.add("epc", s1["epc"])
        enb, epc = rig.ssh_host("enb"), rig.ssh_host("epc")
    svc = {role: Systemd(h, systemctl=str(tools["systemctl"]), journalctl=str(tools["journalctl"]))
           for role, h in (("enb", enb), ("epc", epc))}
    return LteHosts(enb=enb, epc=epc, services=svc)


@pytest.fixture
def rig_factory(prefix):
    rigs = []

    def make():
        from rigs.sshrig import SshdRig
        r = SshdRig(prefix)
        rigs.append(r)
        return r
    yield make
    for r in rigs:
        r.close()


@pytest.mark.root
@pytest.mark.parametrize("kind", ["netns", "ssh"])
def test_up_status_logs_down(kind, s1, tmp_path, rig_factory):
    inv = deploy_inventory(tmp_path)
    tools = _install(s1["dir"], inv)
    hosts = _hosts(kind, s1, tools, rig_factory)
    mme_yaml = tmp_path / "epc" / "etc" / "mme.yaml"
    mme_yaml.write_text("# the technician's hand-made config\n")
    secrets = load_secrets(write_secrets(tmp_path / "secrets.yaml"))
    db = mongomock.MongoClient().open5gs.subscribers
    try:
        rep = lte_up(inv, hosts, secrets, lambda: db, stamp="T1", settle_s=0.2)

        # Restarted in dependency order, each exactly once.
        assert _controls(s1["dir"]) == [f"restart {u.name}" for u in START_ORDER]
        assert rep.started == tuple(u.name for u in START_ORDER) and rep.version == "2.7.2"
        # What was replaced is kept, readable by root only; new files have no backup.
        backup = mme_yaml.with_name("mme.yaml" + BACKUP_SUFFIX + "-T1")
        assert backup.read_text() == "# the technician's hand-made config\n"
        assert backup.stat().st_mode & 0o777 == 0o600
        assert [p.backup for p in rep.pushed if p.backup] == [str(backup)]
        assert len(rep.pushed) == 11 and all(p.changed for p in rep.pushed)
        assert "s1ap:\n    server:\n      - address: 192.168.30.1" in mme_yaml.read_text()
        assert db.count_documents({}) == 3 and rep.subscribers.inserted
        # The UE pool's gateway is on a real TUN device in the EPC namespace.
        out = NamespaceHost("x", s1["epc"]).run(["ip", "-4", "addr", "show", "dev", "ogstun"]).stdout
        assert "10.45.0.1/16" in out
        # Everything runs and the MME saw the eNB's S1 connection across the veth.
        assert all(st.active for st in lte_status(inv, hosts))
        chk = check_s1(inv, hosts.epc)
        assert chk.ok, chk.detail
        assert chk.host == "epc" and "192.168.30.2" in chk.detail

        logs = collect_logs(inv, hosts, tmp_path / "logs")
        assert "eNB-S1 accepted[192.168.30.2]" in (tmp_path / "logs" / "epc" / "mme.log").read_text()
        assert "S1 connected" in (tmp_path / "logs" / "enb" / "srsenb.journal").read_text()
        assert len(logs) >= 16

        if kind == "netns":  # (once is enough: the SSH path writes the same files)
            # A second run changes nothing on disk and keeps no new backups; provisioning is idempotent.
            rep2 = lte_up(inv, hosts, secrets, lambda: db, stamp="T2", settle_s=0.2)
            assert not any(p.changed for p in rep2.pushed)
            assert not list(mme_yaml.parent.glob("*-T2"))
            assert rep2.subscribers.unchanged and db.count_documents({}) == 3
    finally:
        stopped = lte_down(inv, hosts)
    assert stopped == [u.name for u in reversed(START_ORDER)]
    assert _controls(s1["dir"])[-8:] == [f"stop {u.name}" for u in reversed(START_ORDER)]
    assert not any(st.active for st in lte_status(inv, hosts))
    hosts.enb.close()
    hosts.epc.close()


@pytest.mark.root
def test_failed_daemon_names_step_host_and_log(s1, tmp_path):
    # The MME is told to serve S1 on an address its host does not have: it cannot bind and exits.
    inv = deploy_inventory(tmp_path, epc_address="192.168.30.9")
    tools = _install(s1["dir"], inv)
    hosts = _hosts("netns", s1, tools, None)
    try:
        with pytest.raises(LteStepError) as ei:
            lte_up(inv, hosts, None, None, start_deadline_s=2, settle_s=0.2)
        e = ei.value
        assert (e.step, e.host) == ("start MME (open5gs-mmed)", "epc")
        assert "192.168.30.9" in str(e) and "bind failed" in str(e)      # the daemon's own words
        # It stopped there: the eNodeB was never started.
        assert "restart srsenb" not in _controls(s1["dir"])
    finally:
        lte_down(inv, hosts)


@pytest.mark.root
def test_version_detected_from_the_epc_host(s1, tmp_path, monkeypatch):
    # A stand-in open5gs-mmed that only answers -v, first on PATH.
    inv = deploy_inventory(tmp_path, version=None)
    tools = _install(s1["dir"], inv)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "open5gs-mmed").write_text("#!/bin/sh\necho 'Open5GS daemon v2.6.6'\n")
    (bindir / "open5gs-mmed").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    hosts = _hosts("netns", s1, tools, None)
    try:
        rep = lte_up(inv, hosts, None, None, settle_s=0.2)
        assert rep.version == "2.6.6"
        text = (tmp_path / "epc" / "etc" / "mme.yaml").read_text()
        assert "s1ap:\n    - addr: 192.168.30.1" in text            # the 2.6 layout
        assert check_s1(inv, hosts.epc).ok
    finally:
        lte_down(inv, hosts)


@pytest.mark.root
def test_provisioning_tunnel_through_ssh(s1, rig_factory, tmp_path):
    """MongoDB listens on the EPC's loopback: `lte up` reaches it through the EPC's SSH connection.

    A TCP echo server on 127.0.0.1:27017 inside the EPC namespace stands in for mongod (none can be
    installed here); what is tested is the forward: bytes go through sshd's direct-tcpip channel.
    """
    import socket
    from contextlib import ExitStack

    from lte.hosts import parse_mongo_uri, provision_uri
    rig = rig_factory()
    rig.add("epc", s1["epc"])
    epc = rig.ssh_host("epc")
    echo = NamespaceHost("epc", s1["epc"]).start(
        [__import__("sys").executable, "-c",
         "import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
         "s.bind(('127.0.0.1',27017));s.listen()\nwhile True:\n c,_=s.accept();c.sendall(c.recv(100).upper());c.close()"],
        label="echo")
    inv = deploy_inventory(tmp_path)
    try:
        with ExitStack() as stack:
            uri = provision_uri(inv, epc, stack)
            host, port, db = parse_mongo_uri(uri)
            assert (host, db) == ("127.0.0.1", "open5gs") and "directConnection=true" in uri
            reply = b""
            for _ in range(50):                 # the echo server may still be starting
                with socket.create_connection((host, port), timeout=5) as c:
                    c.sendall(b"hello mongod")
                    reply = c.recv(100)
                if reply:
                    break
                __import__("time").sleep(0.1)
            assert reply == b"HELLO MONGOD"
        # A namespace EPC needs no tunnel: the daemons' URI is used as is.
        assert provision_uri(inv, NamespaceHost("epc", s1["epc"]), ExitStack()) == "mongodb://localhost/open5gs"
    finally:
        echo.stop()
        epc.close()


def test_mongo_uri_parsing():
    from harness.errors import ConfigError
    from lte.hosts import parse_mongo_uri
    assert parse_mongo_uri("mongodb://localhost/open5gs") == ("127.0.0.1", 27017, "open5gs")
    assert parse_mongo_uri("mongodb://u:p@10.0.0.5:27018/db5") == ("10.0.0.5", 27018, "db5")
    with pytest.raises(ConfigError, match="provision_uri"):
        parse_mongo_uri("mongodb+srv://cluster.example/x")


@pytest.mark.root
def test_srsepc_up_keeps_the_sqn_it_wrote_back(s1, tmp_path):
    """epc.kind srsepc: epc.conf and user_db.csv pushed, srsepc then srsenb, S1 Setup in srsepc's log; the
    SQNs srsepc writes back on exit survive the next `lte up` (a reset would be silent attach trouble)."""
    d = lab_data()
    e, c = d["lte"]["enb"], d["lte"]["epc"]
    e.update(config_dir=str(tmp_path / "enb" / "etc"), log_path=str(tmp_path / "enb" / "enb.log"))
    c.update(kind="srsepc", config_dir=str(tmp_path / "epc" / "etc"), log_dir=str(tmp_path / "epc" / "log"),
             user_db=str(tmp_path / "epc" / "etc" / "user_db.csv"))
    for p in ("enb/etc", "epc/etc", "epc/log"):
        (tmp_path / p).mkdir(parents=True, exist_ok=True)
    inv = Inventory.model_validate(d)
    units = {"srsepc": standins.daemon_argv("srsepc", f"{inv.lte.epc.config_dir}/epc.conf"),
             "srsenb": standins.daemon_argv("srsenb", f"{inv.lte.enb.config_dir}/enb.conf")}
    tools = standins.install(s1["dir"], units)
    hosts = _hosts("netns", s1, tools, None)
    secrets = load_secrets(write_secrets(tmp_path / "s.yaml"))
    db = tmp_path / "epc" / "etc" / "user_db.csv"
    try:
        rep = lte_up(inv, hosts, secrets, None, stamp="T1", settle_s=0.2)
        assert rep.version == "srsepc" and rep.started == ("srsepc", "srsenb")
        assert rep.sqn.new == ("001010000000001", "001010000000002", "001010000000003")
        assert db.stat().st_mode & 0o777 == 0o600
        assert "n2,mil,001010000000002,00112233445566778899aabbccddeeff,opc,63bfa50ee6523365ff14c1f45f88737d," \
               "8000,000000000000,9,10.45.0.12" in db.read_text()
        assert "mme_bind_addr = 192.168.30.1" in (tmp_path / "epc" / "etc" / "epc.conf").read_text()
        for _ in range(50):                     # the stand-in eNB connects within a few 100 ms
            if check_s1(inv, hosts.epc).ok:
                break
            __import__("time").sleep(0.1)
        assert check_s1(inv, hosts.epc).detail == "S1 Setup Request answered with S1 Setup Response"
        assert lte_status(inv, hosts)[0].unit == "srsepc"
        lte_down(inv, hosts)                    # srsepc writes the advanced SQNs back
        assert ",000000000020,9," in db.read_text()
        rep2 = lte_up(inv, hosts, secrets, None, stamp="T2", settle_s=0.2)
        assert rep2.sqn.kept == tuple(f"00101000000000{i} 000000000020" for i in (1, 2, 3))
        assert db.read_text().count(",000000000020,9,") == 3 and "mplab" in db.read_text()
        # each `up` stops srsepc before reading the file (so that it has written its SQNs), then starts in order
        # (srsepc is stopped only when it runs: the first `up` finds no running unit to stop)
        assert _controls(s1["dir"]) == ["restart srsepc", "restart srsenb", "stop srsenb",
                                        "stop srsepc", "restart srsepc", "restart srsenb"]
    finally:
        lte_down(inv, hosts)


@pytest.mark.parametrize("kind", ["open5gs", "srsepc"])
def test_unknown_srsran_release_refused_before_anything_is_pushed(kind, tmp_path):
    from harness.errors import ConfigError
    d = lab_data()
    d["lte"]["enb"].update(version="21.10", config_dir=str(tmp_path / "enb"))
    d["lte"]["epc"].update(kind=kind, config_dir=str(tmp_path / "epc"), version="2.7.2",
                           user_db=str(tmp_path / "epc" / "user_db.csv"))
    inv = Inventory.model_validate(d)
    hosts = LteHosts(enb=LocalHost("enb"), epc=LocalHost("epc"))
    secrets = load_secrets(write_secrets(tmp_path / "s.yaml"))
    with pytest.raises(ConfigError, match="srsRAN 4G 21.10.0 is not a release mplab knows"):
        lte_up(inv, hosts, secrets, None)
    assert not (tmp_path / "enb").exists() and not (tmp_path / "epc").exists()


def test_unknown_open5gs_version_refused_before_anything_is_pushed(tmp_path):
    from harness.errors import ConfigError
    d = lab_data()
    d["lte"]["enb"].update(config_dir=str(tmp_path / "enb"))
    d["lte"]["epc"].update(config_dir=str(tmp_path / "epc"), version="2.5.9")
    inv = Inventory.model_validate(d)
    with pytest.raises(ConfigError, match="Open5GS 2.5.9 is not a version mplab knows"):
        lte_up(inv, LteHosts(enb=LocalHost("enb"), epc=LocalHost("epc")), None, None)
    assert not (tmp_path / "enb").exists() and not (tmp_path / "epc").exists()


def _with_enb_tac(inv: Inventory, tac: int) -> Inventory:
    """``inv`` whose eNB broadcasts ``tac`` (bypassing the inventory's agreement check: a lab whose eNB config
    drifted from the MME's, which is what S1 Setup failures look like in the field)."""
    return inv.model_copy(update={"lte": inv.lte.model_copy(update={"enb": inv.lte.enb.model_copy(
        update={"tac": tac})})})


@pytest.mark.root
def test_up_fails_when_s1_setup_fails(s1, tmp_path):
    inv = _with_enb_tac(deploy_inventory(tmp_path), 8)           # the MME serves TAC 7 only
    tools = _install(s1["dir"], inv)
    hosts = _hosts("netns", s1, tools, None)
    try:
        with pytest.raises(LteStepError) as ei:
            lte_up(inv, hosts, None, None, settle_s=0.2, s1_deadline_s=10)
        e = ei.value
        assert e.step == "S1 Setup between eNB and MME" and e.host == "epc"
        assert "S1 Setup Failure, cause unknown-PLMN" in str(e) and "likely side: EPC" in str(e)
        # every daemon is active: only the S1 check tells the cell is not up
        assert all(st.active for st in lte_status(inv, hosts))
        chk = check_s1(inv, hosts.epc)
        assert not chk.ok and "Cannot find Served TAI" in chk.detail and chk.fix.startswith("EPC side")
    finally:
        lte_down(inv, hosts)


@pytest.mark.root
def test_check_fails_once_the_enb_has_left(s1, tmp_path):
    import time
    inv = deploy_inventory(tmp_path)
    tools = _install(s1["dir"], inv)
    hosts = _hosts("netns", s1, tools, None)
    try:
        rep = lte_up(inv, hosts, None, None, settle_s=0.2)
        assert "S1Setup procedure completed successfully" in rep.s1 and check_s1(inv, hosts.epc).ok
        hosts.services["enb"].stop("srsenb")
        mme_log = tmp_path / "epc" / "log" / "mme.log"
        end = time.monotonic() + 10
        while "[Removed]" not in mme_log.read_text() and time.monotonic() < end:
            time.sleep(0.1)
        chk = check_s1(inv, hosts.epc)
        assert not chk.ok and chk.detail == "eNB 192.168.30.2 was accepted and later removed (eNBs now 0)"
        assert chk.fix.startswith("eNB side")
    finally:
        lte_down(inv, hosts)


def test_mongodb_down_refused_before_anything_is_pushed(tmp_path):
    from lte.subscribers import SubscriberError

    def down():
        raise SubscriberError("cannot reach MongoDB at mongodb://127.0.0.1:1/open5gs: connection refused")
    inv = deploy_inventory(tmp_path)
    h = LocalHost("epc")
    with pytest.raises(LteStepError, match=r"reach MongoDB \(the subscriber store\) before pushing anything.*"
                                           r"connection refused"):
        lte_up(inv, LteHosts(enb=h, epc=h), None, down)
    assert not list((tmp_path / "epc" / "etc").iterdir()) and not list((tmp_path / "enb" / "etc").iterdir())


def test_a_daemon_that_restarted_during_the_start_fails(tmp_path):
    from lte.verify import check_restarts, take_marks
    inv = deploy_inventory(tmp_path)
    hss = tmp_path / "epc" / "log" / "hss.log"
    hss.write_text("11/25 10:00:00.000: [app] INFO: Configuration: '/etc/open5gs/hss.yaml' "
                   "(../lib/app/ogs-init.c:133)\n")
    h = LocalHost("epc")
    marks = take_marks(inv, h)
    check_restarts(h, marks)                                # the earlier start does not count
    start = "11/26 10:00:0{}.000: [app] INFO: Configuration: '/etc/open5gs/hss.yaml' (../lib/app/ogs-init.c:133)\n"
    with hss.open("a") as f:
        f.write(start.format(1) + "11/26 10:00:01.100: [dbi] ERROR: Failed to connect to server "
                "[mongodb://localhost/open5gs] (../lib/dbi/ogs-mongoc.c:123)\n" + start.format(2))
    with pytest.raises(LteStepError, match=r"hss.log shows 2 starts since `lte up` began: the daemon restarted 1 "
                                           r"time\(s\) \(the HSS exits when it cannot reach MongoDB"):
        check_restarts(h, marks)


def _source_build(bindir, version="23.4.0"):
    """A "source build" directory: srsenb and srsepc wrappers around the stand-ins, answering --version."""
    bindir.mkdir(parents=True, exist_ok=True)
    for prog in ("srsenb", "srsepc"):
        argv = " ".join(standins.daemon_argv(prog, "CONFIG")[:-1])
        p = bindir / prog
        p.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "Version {version}"; exit 0; fi\n'
                     f'exec {argv} "$1"\n')
        p.chmod(0o755)


@pytest.mark.root
def test_source_built_srsran_runs_under_mplabs_own_units(s1, tmp_path):
    """No srsenb/srsepc units exist on the hosts (a source build): `lte up` writes mplab-srsepc/mplab-srsenb,
    reloads systemd and starts them, and never stops a unit that does not exist."""
    d = lab_data()
    e, c = d["lte"]["enb"], d["lte"]["epc"]
    e.update(config_dir=str(tmp_path / "enb" / "etc"), log_path=str(tmp_path / "enb" / "enb.log"),
             bin_dir=str(tmp_path / "bin"))
    c.update(kind="srsepc", config_dir=str(tmp_path / "epc" / "etc"), log_dir=str(tmp_path / "epc" / "log"),
             user_db=str(tmp_path / "epc" / "etc" / "user_db.csv"), bin_dir=str(tmp_path / "bin"))
    for p in ("enb/etc", "epc/etc", "epc/log", "units"):
        (tmp_path / p).mkdir(parents=True, exist_ok=True)
    inv = Inventory.model_validate(d)
    assert (inv.lte.enb.unit, inv.lte.epc.unit) == ("mplab-srsenb", "mplab-srsepc")
    _source_build(tmp_path / "bin")
    tools = standins.install(s1["dir"], {})                     # no distribution units at all
    (s1["dir"] / "unit_dir").write_text(str(tmp_path / "units"))
    hosts = _hosts("netns", s1, tools, None)
    secrets = load_secrets(write_secrets(tmp_path / "s.yaml"))
    try:
        rep = lte_up(inv, hosts, secrets, None, settle_s=0.2, unit_dir=str(tmp_path / "units"))
        assert rep.started == ("mplab-srsepc", "mplab-srsenb") and "S1 Setup Response" in rep.s1
        unit = (tmp_path / "units" / "mplab-srsenb.service").read_text()
        assert f"ExecStart={tmp_path}/bin/srsenb {tmp_path}/enb/etc/enb.conf" in unit and "Restart=no" in unit
        # one reload per host whose unit changed (the eNB and the EPC here), then the start order
        assert _controls(s1["dir"]) == ["daemon-reload -"] * 2 + ["restart mplab-srsepc", "restart mplab-srsenb"]
    finally:
        lte_down(inv, hosts)


@pytest.mark.root
def test_srsran_release_pinned_differently_from_the_host_is_refused(s1, tmp_path):
    d = lab_data()
    d["lte"]["enb"].update(config_dir=str(tmp_path / "enb"), bin_dir=str(tmp_path / "bin"), version="22.10")
    inv = Inventory.model_validate(d)
    _source_build(tmp_path / "bin", version="23.4.0")
    tools = standins.install(s1["dir"], {})
    hosts = _hosts("netns", s1, tools, None)
    from harness.errors import ConfigError
    with pytest.raises(ConfigError, match=r"lte.enb.version: srsRAN 4G 22.10 is pinned but host enb runs 23.04.0 "
                                          r"\(srsenb --version\)") as ei:
        lte_up(inv, hosts, None, None)
    assert ei.value.exit_code == 2 and not (tmp_path / "enb").exists()           # nothing pushed


def _real_srs_units(inv, tmp_path):
    """Units running the real srsepc and srsenb (S1 over the test rigs' SCTP-over-UDP shim when the kernel has
    no SCTP); skip when they are not installed."""
    import shutil
    from harness.deploy.trial import find_program
    from rigs.sctpshim import build_shim, kernel_has_sctp
    from lte.realcheck import bin_dirs
    progs = {p: find_program(p, bin_dirs()) for p in ("srsepc", "srsenb")}
    if None in progs.values():
        pytest.skip(f"{', '.join(p for p, x in progs.items() if x is None)} not installed (PATH or $MPLAB_LTE_BIN)")
    env = ["env", "LD_PRELOAD=/usr/libexec/coreutils/libstdbuf.so", "_STDBUF_O=L"]
    if not kernel_has_sctp():
        if shutil.which("clang") is None:
            pytest.skip("no kernel SCTP and no clang for the test rigs' SCTP-over-UDP shim")
        shim = build_shim(tmp_path / "shim")
        env = ["env", f"LD_PRELOAD={shim} /usr/libexec/coreutils/libstdbuf.so", "_STDBUF_O=L"]
    return {"srsepc": [*env, progs["srsepc"], f"{inv.lte.epc.config_dir}/epc.conf"],
            "srsenb": [*env, progs["srsenb"], f"{inv.lte.enb.config_dir}/enb.conf"]}


def _srsepc_inventory(tmp_path) -> Inventory:
    d = lab_data()
    e, c = d["lte"]["enb"], d["lte"]["epc"]
    e.update(config_dir=str(tmp_path / "enb" / "etc"), log_path=str(tmp_path / "enb" / "enb.log"), n_prb=6,
             rf={"device_name": "zmq", "device_args": "tx_port=tcp://*:2000,rx_port=tcp://localhost:2001,"
                                                      "base_srate=1.92e6"})
    c.update(kind="srsepc", config_dir=str(tmp_path / "epc" / "etc"), log_dir=str(tmp_path / "epc" / "log"),
             user_db=str(tmp_path / "epc" / "etc" / "user_db.csv"))
    for p in ("enb/etc", "epc/etc", "epc/log"):
        (tmp_path / p).mkdir(parents=True, exist_ok=True)
    return Inventory.model_validate(d)


@pytest.mark.root
@pytest.mark.real_lte
@pytest.mark.parametrize("enb_tac", [7, 8])
def test_real_srsepc_and_srsenb_up_waits_for_s1_and_fails_when_it_fails(s1, tmp_path, enb_tac):
    """`lte up` with the real srsepc and srsenb (the stand-in systemctl only runs them): S1 Setup seen with the
    right TAC; with a TAC the MME does not serve, `lte up` fails naming the EPC side."""
    inv = _srsepc_inventory(tmp_path)
    inv = _with_enb_tac(inv, enb_tac) if enb_tac != 7 else inv
    tools = standins.install(s1["dir"], _real_srs_units(inv, tmp_path))
    hosts = _hosts("netns", s1, tools, None)
    secrets = load_secrets(write_secrets(tmp_path / "s.yaml"))
    try:
        if enb_tac == 7:
            rep = lte_up(inv, hosts, secrets, None, settle_s=0.5, s1_deadline_s=60)
            assert "S1 Setup Request answered with S1 Setup Response" in rep.s1, rep.s1
            # (The eNB leaving is not checked here: over the test rigs' SCTP-over-UDP shim srsepc never sees the
            # association end, so it deletes the eNB only when it exits; test_check_fails_once_the_enb_has_left
            # covers the check on the MME's removal lines.)
            assert check_s1(inv, hosts.epc, epc_console=hosts.services["epc"].logs("srsepc", 300)).ok
        else:
            with pytest.raises(LteStepError) as ei:
                lte_up(inv, hosts, secrets, None, settle_s=0.5, s1_deadline_s=60)
            assert ei.value.step == "S1 Setup between eNB and MME", str(ei.value)
            assert "likely side: EPC" in str(ei.value), str(ei.value)
    finally:
        lte_down(inv, hosts)
