"""Energy meters: the ``Meter`` interface, drivers, and the recorder that integrates energy.

A meter is opened, polled for ``Reading``s and closed. Drivers register in ``DRIVERS``
by meter kind (UM24C/UM25C/UM34C in ``um``, INA2xx line bridges in ``ina``);
``meter_from_inventory`` builds one from an inventory entry. The emulated device
(``harness.meters.emulated``) speaks the UM25C protocol over a pseudo-terminal, so
emulated energies reach records only through the same UM driver the lab uses.
"""
from harness.meters import ina as _ina  # noqa: F401  (registers the ina-line driver)
from harness.meters import um as _um  # noqa: F401  (registers the UM drivers)
from harness.meters.base import DRIVERS, Meter, Reading, meter_from_inventory, open_meter

__all__ = ["DRIVERS", "Meter", "Reading", "meter_from_inventory", "open_meter"]
