"""Remote ports: a meter behind a real ser2net (as on a remote SBC), read through pyserial URLs."""
from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from meter_devices import DeviceProcess, default_profile

from harness.errors import MeterError
from harness.hosts.local import LocalHost
from harness.hosts.ready import listening_ports
from harness.meters.drivers import open_meter
from harness.meters.recorder import Recorder
from rigs.ports import free_port

pytestmark = pytest.mark.skipif(shutil.which("ser2net") is None, reason="needs ser2net (make setup installs it)")


def _listening() -> set[int]:
    return listening_ports(LocalHost())


@pytest.fixture
def ser2net(tmp_path):
    """A ser2net 4 serving one emulated UM34C on loopback: raw TCP and RFC 2217 (telnet) accepters."""
    with DeviceProcess(tmp_path, model="um34c", profile=default_profile(base_w=2.7)):
        raw, tel = free_port(), free_port()
        pts = str((tmp_path / "dev.pty").resolve())
        cfg = tmp_path / "ser2net.yaml"
        cfg.write_text(f"connection: &raw\n  accepter: tcp,127.0.0.1,{raw}\n  connector: serialdev,{pts},9600n81,local\n"
                       f"connection: &tel\n  accepter: telnet(rfc2217),tcp,127.0.0.1,{tel}\n"
                       f"  connector: serialdev,{pts},9600n81,local\n")
        proc = subprocess.Popen(["ser2net", "-n", "-u", "-P", str(tmp_path / "ser2net.pid"), "-c", str(cfg)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            # Ready when both ports listen. Not by connecting: a probe connection would open the device,
            # and ser2net refuses a second user of a device whose first connection is still closing.
            while not {raw, tel} <= _listening():
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("ser2net did not start")
                time.sleep(0.05)
            yield {"socket": f"socket://127.0.0.1:{raw}", "rfc2217": f"rfc2217://127.0.0.1:{tel}?ign_set_control",
                   "proc": proc}
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(5)


@pytest.mark.parametrize("scheme", ["socket", "rfc2217"])
def test_um34c_through_ser2net(ser2net, scheme):
    with open_meter("um34c", ser2net[scheme]) as m:
        rs = [m.poll() for _ in range(3)]
    assert all(abs(r.amps - 2.7 / 5.1) <= 0.0005 + 1e-9 for r in rs)
    assert m.stats.bad_frames == 0


def test_recorder_flags_a_remote_meter_that_goes_away(ser2net):
    m = open_meter("um34c", ser2net["socket"], timeout_s=0.3)
    m.open()
    with Recorder({"r1": m}) as rec:
        t0 = rec.wait_first()
        time.sleep(0.4)
        ser2net["proc"].terminate()            # the SBC's ser2net dies: the TCP connection drops
        ser2net["proc"].wait(5)
        time.sleep(1.0)
        t1 = time.time()
        rec.wait_covered(t1)
        e = rec.energy("r1", t0, t1)
    assert any(f.startswith("meter-fault") for f in e.flags), e.flags
    assert any("reopen failed" in f or "read failed" in f or "no valid frame" in f for f in e.flags)
    with pytest.raises(MeterError, match="cannot open"):
        open_meter("um34c", ser2net["socket"]).open()
