"""Congestion controls, by name.

Scenarios name *algorithms* (``cubic``, ``lia``, ...). Which *implementation* runs
depends on the kernel: the kernel's own module for the uncoupled ones; on a
multipath-tcp.org kernel its in-kernel lia/olia/balia/wvegas; on upstream kernels
mplab's BPF struct_ops programs (``harness.cc.bpfcc``, sources in ``harness/cc/bpf``). Every record stores the
implementation that ran, and a scenario naming an algorithm that cannot run here is
refused at preflight, never silently replaced by another.

The life cycle of an implementation on one host: ``check()`` (no side effects),
``setup()`` once per campaign, ``teardown()`` at the end. ``sock_name`` is what the
kernel accepts in ``TCP_CONGESTION`` and ``net.ipv4.tcp_congestion_control``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from harness.cc.bpfcc import BpfCC, MptcpOrgCC
from harness.cc.cubic import BpfCubic, scalable
from harness.errors import CommandError, PreflightError
from harness.hosts.local import Host

AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


@dataclass(frozen=True)
class Algorithm:
    """An algorithm as scenarios name it."""

    name: str
    coupled: bool
    reference: str


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a for a in (
        Algorithm("cubic", False, "RFC 9438; Linux tcp_cubic"),
        Algorithm("reno", False, "RFC 5681; Linux tcp_reno"),
        Algorithm("lia", True, "RFC 6356 (Linked Increases)"),
        Algorithm("olia", True, "Khalili et al., IEEE/ACM ToN 2013 (Opportunistic LIA)"),
        Algorithm("balia", True, "Peng et al., IEEE/ACM ToN 2016 (Balanced LIA)"),
        Algorithm("wvegas", True, "Cao et al., ICNP 2012 (weighted Vegas)"),
    )
}


class CongestionControl(Protocol):
    """One implementation of an algorithm on one kind of kernel."""

    algorithm: str
    #: "kernel:cubic", "mptcp.org:lia", "bpf:mplab_lia" — stored in every record.
    implementation: str
    sock_name: str

    def check(self, host: Host) -> None:
        """Raise ``PreflightError`` (what is missing, how to get it) if this cannot run on ``host``."""

    def setup(self, host: Host, owner: str | None = None) -> None:
        """Make the algorithm selectable on ``host`` (per campaign; idempotent).

        ``owner``: the testbed prefix to record as the user of a machine-wide registration (BPF
        struct_ops), so that `mplab clean --prefix` removes only its own; None records nothing.
        """

    def teardown(self, host: Host) -> None:
        """Undo ``setup`` (best effort, idempotent)."""


def available(host: Host) -> list[str]:
    """Congestion controls the host's kernel has registered."""
    return host.read_text(AVAILABLE).split()


class KernelCC:
    """An uncoupled algorithm the kernel ships (built in or as ``tcp_<name>`` module)."""

    def __init__(self, algorithm: str) -> None:
        self.algorithm = algorithm
        self.sock_name = algorithm
        self.implementation = f"kernel:{algorithm}"

    def check(self, host: Host) -> None:
        if self.sock_name in available(host):
            return
        if host.exists(f"/lib/modules/{host.run(['uname', '-r']).stdout.strip()}"):
            res = host.run(["modinfo", f"tcp_{self.sock_name}"], check=False)
            if res.returncode == 0:
                return  # loadable; setup() loads it
        raise PreflightError(
            f"[{host.name}] congestion control {self.sock_name!r} is not available "
            f"(kernel has: {' '.join(available(host))}); build the kernel with CONFIG_TCP_CONG_"
            f"{self.sock_name.upper()} or install its module")

    def setup(self, host: Host, owner: str | None = None) -> None:  # nothing machine-wide to record
        if self.sock_name not in available(host):
            try:
                host.run(["modprobe", f"tcp_{self.sock_name}"])
            except CommandError as exc:
                raise PreflightError(f"[{host.name}] cannot load tcp_{self.sock_name}: {exc}") from None

    def teardown(self, host: Host) -> None:
        """Kernel modules stay loaded: unloading could pull them from under other users' sockets."""


#: How each algorithm is implemented on an upstream kernel: the uncoupled ones by the kernel,
#: the coupled ones by mplab's BPF struct_ops programs (``harness/cc/bpf``).
UPSTREAM: dict[str, type] = {"cubic": KernelCC, "reno": KernelCC,
                             "lia": BpfCC, "olia": BpfCC, "balia": BpfCC, "wvegas": BpfCC}
#: ... and on a multipath-tcp.org kernel, which has its own coupled algorithms.
MPTCP_ORG: dict[str, type] = {"cubic": KernelCC, "reno": KernelCC,
                              "lia": MptcpOrgCC, "olia": MptcpOrgCC, "balia": MptcpOrgCC, "wvegas": MptcpOrgCC}


def kernel_flavour(host: Host) -> str:
    """``multipath-tcp.org`` (out-of-tree v0.9x), ``upstream`` (net/mptcp), or ``none``."""
    if host.exists("/proc/sys/net/mptcp/mptcp_enabled"):
        return "multipath-tcp.org"
    if host.exists("/proc/sys/net/mptcp/enabled"):
        return "upstream"
    return "none"


#: Kernel flavour (``kernel_flavour``) -> implementations.
FLAVOURS: dict[str, dict[str, type]] = {"upstream": UPSTREAM, "multipath-tcp.org": MPTCP_ORG}


class Unavailable:
    """An algorithm with no implementation for this kernel: fails ``check`` with the reason."""

    def __init__(self, algorithm: str, why: str) -> None:
        self.algorithm = algorithm
        self.sock_name = algorithm
        self.implementation = "unavailable"
        self.why = why

    def check(self, host: Host) -> None:
        raise PreflightError(f"[{host.name}] congestion control {self.algorithm!r} cannot run: {self.why}")

    def setup(self, host: Host, owner: str | None = None) -> None:  # protocol signature
        self.check(host)

    def teardown(self, host: Host) -> None:
        pass


def resolve(algorithm: str, flavour: str = "upstream", speedup: float = 1.0) -> CongestionControl:
    """The implementation of ``algorithm`` for a kernel of ``flavour`` (``upstream``, ``multipath-tcp.org``).

    ``speedup``: the testbed's S. On an upstream kernel at a whole S > 1, ``cubic`` is mplab's BPF Cubic whose
    clock runs S times faster (``harness.cc.cubic``: ``mplab_cubic_s<S>``); at S = 1 the kernel's own.

    An algorithm with no implementation for the flavour resolves to ``Unavailable``,
    whose ``check`` fails preflight with the reason: never to another algorithm.
    """
    if algorithm not in ALGORITHMS:
        raise KeyError(algorithm)
    impls = FLAVOURS.get(flavour)
    if impls is None:
        return Unavailable(algorithm, f"the kernel has no MPTCP (flavour {flavour!r}): "
                                      "use Linux >= 5.19 with CONFIG_MPTCP=y")
    if algorithm == "cubic" and flavour == "upstream" and scalable(speedup):
        return BpfCubic(int(speedup))
    impl = impls.get(algorithm)
    if impl is None:
        return Unavailable(algorithm, f"no implementation for a {flavour} kernel")
    return impl(algorithm)
