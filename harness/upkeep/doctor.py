"""`mplab doctor`: is this machine able to run mplab? Checked at set-up time, not in the first experiment.

Three kinds of checks, each a ``Check`` with what was found and how to fix a failure:

- every ``local`` program of ``harness.tools.TOOLS``: where it is and its package's version,
  and how iperf3 gets MPTCP sockets;
- the kernel: MPTCP enabled, BTF with BPF struct_ops for TCP congestion control (and the
  built BPF objects), and, as root, the features the emulated testbed uses tried for real in
  a scratch network namespace (veth, HTB + bfifo, TBF, nftables with counters and ``numgen``,
  MPTCP endpoints), removed afterwards;
- the Python environment's key packages.

``make setup`` ends with it; a failed essential check makes it exit non-zero. What it leaves to
others: a testbed's own preflight (``harness.upkeep.preflight``, ``Testbed.preflight``) checks the
hosts of one inventory before a campaign.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from importlib import metadata

from harness.cc.bpfcc import BTF, COUPLED, object_path
from harness.errors import MplabError, PreflightError
from harness.hosts.local import LocalHost, NamespaceHost
from harness.upkeep.preflight import Check
from harness.upkeep.preflight import kernel_checks
from harness.tools import TOOLS, probe
from harness.traffic import Iperf3

#: Python packages whose versions the doctor reports (distribution names).
PYTHON_PACKAGES = ("typer", "pydantic", "pyserial", "fabric", "pandas", "pyarrow", "onnxruntime", "mlflow-skinny")
#: The wheel's extras: the package that tells whether each is installed, and what needs it.
EXTRAS = {"train": ("torch", "`mplab train`"), "cluster": ("ray", "`mplab run --cluster`")}
#: The kernel type BPF struct_ops congestion controls register through.
STRUCT_OPS_TYPE = b"bpf_struct_ops_tcp_congestion_ops"


def tool_checks() -> list[Check]:
    """Every local program: found, with its package version; missing required ones fail."""
    out = []
    local = [t for t in TOOLS.values() if t.where == "local"]
    # Part of every Debian system: one line, unless one is missing.
    base = [probe(t) for t in local if t.essential]
    gone = [st.tool for st in base if st.path is None]
    out.append(Check("local", "base system programs", not gone,
                     f"missing: {', '.join(t.program for t in gone)}" if gone else
                     ", ".join(st.tool.program for st in base),
                     "apt install " + " ".join(sorted({t.package for t in gone})) if gone else ""))
    for tool in local:
        if tool.essential:
            continue
        st = probe(tool)
        detail = f"{st.path} ({tool.package} {st.version or 'version unknown'})" if st.path else "not found"
        out.append(Check("local", f"program {tool.program}", st.path is not None, detail,
                         f"apt install {tool.package} (make setup installs it): {tool.purpose}",
                         essential=tool.required))
    try:
        ip3 = Iperf3.check(LocalHost())
        out.append(Check("local", "iperf3 MPTCP", True, f"iperf3 {ip3.version}, MPTCP via {ip3.mptcp_mode}"))
    except PreflightError as exc:
        out.append(Check("local", "iperf3 MPTCP", False, str(exc), "apt install iperf3 mptcpize (make setup)"))
    return out


def bpf_checks() -> list[Check]:
    """BTF, struct_ops for TCP congestion control, and mplab's built BPF objects."""
    try:
        with open(BTF, "rb") as f:
            btf = f.read()
    except OSError as exc:
        return [Check("local", "kernel BTF", False, f"{BTF}: {exc.strerror}",
                      "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (the coupled CCs need it)")]
    out = [Check("local", "kernel BTF", True, f"{BTF} ({len(btf) // 1024} KiB)")]
    has = STRUCT_OPS_TYPE in btf
    out.append(Check("local", "BPF struct_ops (tcp_congestion_ops)", has,
                     "supported" if has else "the kernel's BTF has no bpf_struct_ops_tcp_congestion_ops",
                     "Linux >= 6.0 with CONFIG_BPF_JIT=y: LIA/OLIA/BALIA/wVegas need it"))
    missing = [a for a in COUPLED if not object_path(a).exists()]
    out.append(Check("local", "BPF congestion controls built", not missing,
                     f"missing: {', '.join(missing)}" if missing else ", ".join(COUPLED),
                     "a wheel built by `make wheel` carries them; in a checkout: make bpf (needs clang, bpftool)"))
    return out


def _namespace_steps(ns: str) -> list[tuple[str, list[str], str]]:
    """(feature, argv inside ``ns``, fix) for every kernel feature the emulated testbed uses."""
    return [
        ("veth pair", ["ip", "link", "add", "mpd0", "type", "veth", "peer", "name", "mpd1"],
         "CONFIG_VETH"),
        ("link up", ["ip", "link", "set", "mpd0", "up"], ""),
        ("address", ["ip", "addr", "add", "10.255.0.1/30", "dev", "mpd0"], ""),
        ("HTB qdisc", ["tc", "qdisc", "add", "dev", "mpd0", "root", "handle", "1:", "htb", "default", "10"],
         "CONFIG_NET_SCH_HTB"),
        ("HTB class", ["tc", "class", "add", "dev", "mpd0", "parent", "1:", "classid", "1:10", "htb",
                       "rate", "10mbit", "ceil", "20mbit"], "CONFIG_NET_SCH_HTB"),
        ("bfifo qdisc", ["tc", "qdisc", "add", "dev", "mpd0", "parent", "1:10", "handle", "10:", "bfifo",
                         "limit", "30000"], "CONFIG_NET_SCH_FIFO"),
        ("TBF qdisc", ["tc", "qdisc", "add", "dev", "mpd1", "root", "tbf", "rate", "10mbit", "burst", "32kb",
                       "latency", "50ms"], "CONFIG_NET_SCH_TBF"),
        ("nftables table", ["nft", "add", "table", "inet", "mplab_doctor"], "CONFIG_NF_TABLES, CONFIG_NF_TABLES_INET"),
        ("nftables chain", ["nft", "add", "chain", "inet", "mplab_doctor", "fwd_check",
                            "{ type filter hook forward priority 0; policy accept; }"], "CONFIG_NF_TABLES"),
        ("nftables counter + numgen", ["nft", "add", "rule", "inet", "mplab_doctor", "fwd_check", "ip", "daddr",
                                       "10.255.0.2", "numgen", "random", "mod", "100", "<", "1", "counter", "drop"],
         "CONFIG_NFT_NUMGEN, CONFIG_NFT_COUNTER"),
        ("MPTCP endpoint", ["ip", "mptcp", "endpoint", "add", "10.255.0.1", "dev", "mpd0", "subflow"],
         "CONFIG_MPTCP"),
    ]


def namespace_checks(run_id: int | None = None) -> list[Check]:
    """As root: try each kernel feature in a scratch namespace ``mplab-doctor-<pid>``, removed afterwards."""
    if os.geteuid() != 0:
        return [Check("local", "namespace features", False, f"not checked: needs root (euid {os.geteuid()})",
                      "run `sudo mplab doctor`: the emulated testbed needs root", essential=False)]
    root = LocalHost("root")
    ns = f"mplab-doctor-{run_id or os.getpid()}"
    res = root.run(["ip", "netns", "add", ns], check=False)
    if res.returncode != 0:
        return [Check("local", "network namespace", False, res.stderr.strip(), "CONFIG_NET_NS")]
    out = [Check("local", "network namespace", True, ns)]
    try:
        host = NamespaceHost(ns, ns)
        for feature, argv, fix in _namespace_steps(ns):
            r = host.run(argv, check=False)
            out.append(Check("local", feature, r.returncode == 0, "works" if r.returncode == 0 else
                             (r.stderr.strip().splitlines() or ["failed"])[-1], f"kernel option {fix}" if fix else ""))
    finally:
        root.run(["ip", "netns", "del", ns], check=False)
    return out


def python_checks() -> list[Check]:
    """Versions of the Python packages mplab is built on, and which of its extras are installed.

    A missing base package is a broken install; a missing extra is a choice (``[train]``: PyTorch,
    ``[cluster]``: Ray), reported with what it enables and how to add it, and not a failure.
    """
    out = []
    for dist in PYTHON_PACKAGES:
        try:
            out.append(Check("local", f"python {dist}", True, metadata.version(dist), essential=False))
        except metadata.PackageNotFoundError:
            out.append(Check("local", f"python {dist}", False, "not installed",
                             "reinstall mplab (pip install --force-reinstall mplab; in a checkout, make setup)",
                             essential=False))
    for extra, (dist, enables) in EXTRAS.items():
        try:
            detail = f"installed ({dist} {metadata.version(dist)})"
        except metadata.PackageNotFoundError:
            detail = f"not installed: {enables} needs it (pip install 'mplab[{extra}]')"
        out.append(Check("local", f"extra [{extra}]", True, detail, essential=False))
    return out


def kernel_feature_checks() -> list[Check]:
    """The kernel release and whether MPTCP is on (the same checks a testbed's preflight runs)."""
    try:
        return kernel_checks(LocalHost())
    except MplabError as exc:
        return [Check("local", "kernel", False, str(exc), "")]


SECTIONS: tuple[tuple[str, Callable[[], list[Check]]], ...] = (
    ("programs", tool_checks),
    ("kernel", kernel_feature_checks),
    ("BPF", bpf_checks),
    ("namespace features", namespace_checks),
    ("python", python_checks),
)


def run_doctor() -> list[Check]:
    """Every check of every section, in order."""
    return [c for _, section in SECTIONS for c in section()]
