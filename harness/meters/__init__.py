"""Energy meters: the ``Meter`` interface, drivers, and the recorder that integrates energy.

A meter is opened, polled for ``Reading``s and closed (``base``). Drivers: UM24C/UM25C/UM34C
in ``um``, INA2xx line bridges in ``ina``, listed by kind in ``drivers.DRIVERS``, which also
builds a meter from an inventory entry. The emulated device (``emulated``) speaks the UM25C
protocol over a pseudo-terminal, its power from ``power.PowerModel``, so emulated energies
reach records only through the same UM driver the lab uses. ``recorder`` integrates each
receiver's energy over its transfer window; ``idle`` waits until receivers read their idle
power again between samples and times the radio tail. ``ser2net`` is the command line that serves a
lab receiver's meter over TCP (RFC 2217).

Leaves to others: which meter a receiver has (the inventory, ``harness.config``), when to
record (``harness.campaign.runner``), where meter devices live (``harness.testbeds``).
"""
