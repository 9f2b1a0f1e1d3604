"""Which driver reads which meter kind, and building a meter from its inventory entry.

``DRIVERS`` is the one registry, written out here: adding a driver is one module with a
``Meter`` subclass and its factory, and one line below (then the contract tests in
tests/test_meters_contract.py run over it). The kind is what every record stores as
``meter_kind``.
"""
from __future__ import annotations

from typing import Any

from harness.config.inventory import MeterSpec
from harness.errors import MeterError
from harness.meters import ina, um
from harness.meters.base import Meter, MeterFactory

#: Meter kind -> factory.
DRIVERS: dict[str, MeterFactory] = {
    **{model: um.factory(model, model) for model in um.MODELS},
    # The emulated testbed's device speaks the UM25C protocol; the recorded kind differs, and its live
    # values are its mean since the previous poll (harness.meters.emulated: an integrating device).
    "emulated-um25c": um.factory("um25c", "emulated-um25c", interval_mean=True),
    "ina-line": ina.make,
}


def open_meter(kind: str, port: str, **options: Any) -> Meter:
    """An unopened meter of ``kind`` on ``port``."""
    try:
        factory = DRIVERS[kind]
    except KeyError:
        raise KeyError(f"unknown meter kind {kind!r} (known: {', '.join(sorted(DRIVERS))})") from None
    return factory(port, **options)


def meter_from_inventory(spec: MeterSpec, port: str | None = None) -> Meter:
    """An unopened meter for an inventory entry; ``port`` overrides the entry's (emulated devices)."""
    port = port or spec.port
    if not port:
        raise MeterError(f"{spec.kind} meter has no port (set 'port' in the inventory)")
    options: dict[str, Any] = {"baudrate": spec.baudrate, "timeout_s": spec.timeout_s, "rate_hz": spec.rate_hz}
    if spec.line_format is not None:
        options["line_format"] = spec.line_format
    return open_meter(spec.kind, port, **options)
