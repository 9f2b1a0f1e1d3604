"""The lab switch rig shared by tests/test_lab.py and bench/labswitch.py.

An emulated testbed whose sender and receivers run a real sshd (``rigs.sshrig``), with a
real OVS (userspace datapath, ``controller.steering.ovs.splice_switch``) between the sender and the
AP / eNB listening ``ptcp:PORT`` on every address of its namespace, which has a management veth and
an sshd of its own: the *lab* inventory built from it names that OVS in ``lab.switch`` (a
``lab.infra`` machine with role switch), so a lab campaign reaches everything over the network as on
a lab. Not installed with mplab (rigs/ is not in the wheel); it uses the controller's splice.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from harness.cc import resolve
from harness.config.inventory import Inventory
from harness.testbeds.emulated import EmulatedTestbed
from rigs.sshrig import SshdRig, add_lab_switch, lab_inventory

from controller.steering.ovs import SpliceRig, splice_switch

from rigs.inventories import small_inventory


@dataclass
class LabSwitchRig:
    tb: EmulatedTestbed
    switch: SpliceRig
    sshd: SshdRig
    lab: Inventory

    def ofctl(self, *args: str) -> str:
        """``ovs-ofctl -O OpenFlow13 CMD <bridge> ARGS...`` in the switch's namespace."""
        sw = self.switch
        return sw.switch.host.run(["ovs-ofctl", "-O", "OpenFlow13", args[0],
                                   f"unix:{sw.switch.state_dir}/{sw.bridge}.mgmt", *args[1:]]).stdout


@contextmanager
def lab_switch_rig(prefix: str, channels: list[tuple[float, float]], port: int = 6653) -> Iterator[LabSwitchRig]:
    """The rig for receivers with these (wifi, lte) Mbit/s channels; everything removed after."""
    tb = EmulatedTestbed(small_inventory(prefix, channels))
    sw = rig = None
    try:
        tb.setup([resolve("cubic")])
        sw = splice_switch(tb, listen_port=port, listen_address=None)  # ptcp:PORT, as on a lab switch
        rig = SshdRig(prefix)
        rig.add_testbed(tb)
        # Each network's nominal capacity: what its receivers' channels carry together (the rig's bottleneck).
        caps = {"wifi": sum(w for w, _ in channels), "lte": sum(lte for _, lte in channels)}
        yield LabSwitchRig(tb, sw, rig, Inventory.model_validate(add_lab_switch(lab_inventory(tb, rig), rig, sw,
                                                                                capacity_mbit=caps)))
    finally:
        if rig is not None:
            rig.close()
        if sw is not None:
            sw.stop()
        tb.teardown()
