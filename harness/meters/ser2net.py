"""ser2net: a receiver's meter shared over TCP with RFC 2217, for the orchestrator to read.

A UM25C pairs over Bluetooth with the receiver it powers (``/dev/rfcomm0`` there);
ser2net on the receiver serves that device as ``rfc2217://<receiver>:<port>`` and the
meter driver opens the URL with pyserial's ``serial_for_url``. If the receiver already
serves the port (a system ser2net configured by hand), mplab uses it; otherwise mplab
starts its own foreground ser2net for the campaign, configured entirely on the command
line (no file written, nothing left behind), and stops it with the campaign.
"""
from __future__ import annotations

from harness.config.inventory import Ser2Net


def ser2net_argv(cfg: Ser2Net, name: str, bind: str | None = None) -> list[str]:
    """A foreground ser2net serving ``cfg.device`` on ``cfg.tcp_port`` with RFC 2217.

    Args:
        cfg: the meter's ser2net section from the inventory.
        name: connection name (the receiver's name), also used for the pid file.
        bind: address to listen on (default: every address).
    """
    where = f"{bind},{cfg.tcp_port}" if bind else str(cfg.tcp_port)
    return ["ser2net", "-n", "-u", "-P", f"/tmp/mplab-ser2net-{name}.pid",
            "-Y", f"connection: &mplab-{name}",
            "-Y", f"  accepter: telnet(rfc2217),tcp,{where}",
            "-Y", f"  connector: serialdev,{cfg.device},{cfg.baud}n81,local",
            "-Y", "  options:",
            "-Y", "    kickolduser: true",
            "-Y", "    mdns: false"]
