"""Steering backends by name (see ``controller.steering.base`` for the seam)."""
from __future__ import annotations

from collections.abc import Callable

#: Backend name -> module path and class; imported lazily (openflow pulls in os-ken and OVS tools).
BACKENDS: dict[str, str] = {
    "nftables": "controller.steering.nftables:NftSteering",
    "openflow": "controller.steering.openflow:OpenFlowSteering",
    "host": "controller.steering.host:HostSteering",
}


def backend_class(name: str) -> Callable:
    """The class of a registered backend (``ConfigError`` for an unknown name)."""
    import importlib

    from harness.errors import ConfigError

    try:
        mod, cls = BACKENDS[name].split(":")
    except KeyError:
        raise ConfigError(f"unknown steering backend {name!r} (known: {', '.join(BACKENDS)})",
                          field="steering") from None
    return getattr(importlib.import_module(mod), cls)
