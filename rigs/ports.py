"""A free TCP port on loopback for tests, rigs and benches (the library never imports it)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick for an ephemeral bind, released at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
