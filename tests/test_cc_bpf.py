"""Coupled congestion control (LIA, OLIA, BALIA, wVegas) as BPF struct_ops on the real kernel.

What is real here: the kernel, its verifier and struct_ops registration, MPTCP, iperf3
and the namespaces. Nothing is mocked, except ``multipath-tcp.org`` kernel detection
in the resolve test (this machine runs an upstream kernel; only the name is checked).
"""
from __future__ import annotations

import shutil
import time

import pytest

from conftest import allowed_ccs_apart_from_other_testbeds, small_inventory
from harness.campaign.campaign import RunHooks, start_campaign
from harness.cc import ALGORITHMS, Unavailable, bpfcc, resolve
from harness.cc.bpfcc import BpfCC, MptcpOrgCC
from harness.machine import ALLOWED_CC
from harness.testbeds.clean import clean_prefix, list_namespaces
from harness.errors import PreflightError
from harness.hosts.local import LocalHost
from harness.config.scenario import Scenario, load_scenario

#: struct_ops and the allowed list are machine-wide: `make test` runs this module alone (see pyproject's markers).
pytestmark = pytest.mark.machine

COUPLED = ("lia", "olia", "balia", "wvegas")
ROOT = LocalHost("root")
needs_build = pytest.mark.skipif(not (bpfcc.BUILD_DIR / "lia.bpf.o").exists(),
                                 reason="BPF objects not built: run `make bpf`")


def _allowed() -> list[str]:
    return ROOT.read_text(f"/proc/sys/{ALLOWED_CC.replace('.', '/')}").split()


def _wait_map_empty(algorithm: str, timeout_s: float = 10.0) -> int | None:
    """Entries left in the coupling map once sockets have had ``timeout_s`` to close."""
    deadline = time.monotonic() + timeout_s
    while True:
        n = bpfcc.conn_entries(ROOT, algorithm)
        if not n or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


# ---------------------------------------------------------------- no root needed

def test_resolve_picks_the_implementation_for_the_kernel_flavour():
    for a in COUPLED:
        up = resolve(a)
        assert isinstance(up, BpfCC)
        assert up.sock_name == f"mplab_{a}"
        digest = bpfcc.file_digest(bpfcc.object_path(a))
        # The record names the build: the object's SHA-256 prefix once it is built.
        assert up.implementation == (f"bpf:mplab_{a}@sha256:{digest}" if digest else f"bpf:mplab_{a}")
        org = resolve(a, "multipath-tcp.org")
        assert isinstance(org, MptcpOrgCC)
        assert (org.sock_name, org.implementation) == (a, f"mptcp.org:{a}")
    assert resolve("cubic", "multipath-tcp.org").implementation == "kernel:cubic"
    nothing = resolve("lia", "none")
    assert isinstance(nothing, Unavailable)
    with pytest.raises(PreflightError, match="no MPTCP"):
        nothing.check(ROOT)
    assert set(COUPLED) | {"cubic"} <= set(ALGORITHMS)


def test_cc_impl_names_the_build(tmp_path):
    """Two builds of one algorithm never share a cc_impl; an unbuilt one has no digest."""
    cc = BpfCC("olia", build_dir=tmp_path)
    assert cc.implementation == "bpf:mplab_olia" and bpfcc.object_digest(cc) is None
    (tmp_path / "olia.bpf.o").write_bytes(b"build one")
    first = cc.implementation
    (tmp_path / "olia.bpf.o").write_bytes(b"build two")
    assert first.startswith("bpf:mplab_olia@sha256:") and cc.implementation != first
    assert len(first.rsplit(":", 1)[1]) == bpfcc.DIGEST_HEX
    assert bpfcc.object_digest(resolve("cubic")) is None


def test_bpftool_argvs():
    assert bpfcc.register_argv(bpfcc.BUILD_DIR / "lia.bpf.o")[:3] == ["bpftool", "struct_ops", "register"]
    assert bpfcc.unregister_argv("mplab_lia") == ["bpftool", "struct_ops", "unregister", "name", "mplab_lia"]


def test_unbuilt_object_is_refused_with_the_fix(tmp_path):
    cc = BpfCC("wvegas", build_dir=tmp_path)
    with pytest.raises(PreflightError, match="make bpf"):
        cc.check(ROOT)


def test_scenarios_name_all_five():
    for name in ("quick", "paper-setup1"):
        sc = load_scenario(f"scenarios/{name}.yaml")
        assert {"lia", "olia", "balia", "wvegas", "cubic"} <= set(sc.congestion_controls), name


# ---------------------------------------------------------------- kernel

@pytest.mark.root
@needs_build
def test_window_arithmetic_matches_the_equations():
    """mplab_math.h, run in the kernel, against the papers' equations in floating point."""
    from harness.cc.calc import (BpfCalculator, Subflow, reference_balia, reference_lia_cnt,
                                 reference_olia_inc, reference_wvegas_alpha, reference_wvegas_diff)

    def rate(w: int, rtt: int) -> int:
        return (w << 16) // rtt

    cases = [
        [Subflow(10, 20_000, 5_000), Subflow(10, 20_000, 5_000)],                 # twins
        [Subflow(10, 20_000, 5_000), Subflow(30, 60_000, 9_000)],                 # same rate, RTT x3
        [Subflow(40, 10_000, 90_000), Subflow(8, 80_000, 1_000)],                 # fast and slow path
        [Subflow(25, 15_000, 30_000), Subflow(25, 30_000, 30_000), Subflow(5, 5_000, 40_000)],
        [Subflow(120, 2_000, 400_000), Subflow(300, 150_000, 200_000)],           # LTE-like vs WiFi-like
        [Subflow(17, 33_000, 0)],                                                  # one subflow: Reno
    ]
    checked = 0
    with BpfCalculator(bpfcc.BUILD_DIR / "calc.bpf.o") as bpf:
        for sf in cases:
            sf = [Subflow(s.cwnd, s.srtt_us, s.loss_int, rate(s.cwnd, s.srtt_us)) for s in sf]
            for me in range(len(sf)):
                got = bpf.run(sf, me, cwnd=sf[me].cwnd, base_rtt_us=sf[me].srtt_us // 2, rtt_us=sf[me].srtt_us)
                # Integer arithmetic truncates: allow one unit or 2 % (3 % for BALIA's two quotients).
                ref = reference_lia_cnt(sf, me)
                assert got.lia_cnt == pytest.approx(ref, rel=0.02, abs=1), ("lia", sf, me)
                if len(sf) > 1:
                    ref = reference_olia_inc(sf, me) * 2**16
                    assert got.olia_inc == pytest.approx(ref, rel=0.02, abs=2), ("olia", sf, me)
                ai, md = reference_balia(sf, me)
                assert got.balia_cnt == pytest.approx(ai, rel=0.03, abs=1), ("balia ai", sf, me)
                assert got.balia_md == pytest.approx(md, abs=1), ("balia md", sf, me)
                assert got.wvegas_alpha == int(reference_wvegas_alpha(sf, me)), ("wvegas alpha", sf, me)
                assert got.wvegas_diff == int(reference_wvegas_diff(sf[me].cwnd, sf[me].srtt_us // 2,
                                                                    sf[me].srtt_us)), ("wvegas diff", sf, me)
                checked += 1
    assert checked == 12
    # The coupled increase is gentler than Reno's on every path of a two-path connection.
    with BpfCalculator(bpfcc.BUILD_DIR / "calc.bpf.o") as bpf:
        twins = [Subflow(10, 20_000, 0, rate(10, 20_000))] * 2
        assert bpf.run(twins, 0).lia_cnt == 40 > twins[0].cwnd


@pytest.mark.root
@needs_build
def test_a_program_the_kernel_refuses_fails_preflight(tmp_path):
    if "mplab_lia" in bpfcc.registered(ROOT):
        pytest.skip("mplab_lia is registered by a live testbed")
    shutil.copy(bpfcc.BUILD_DIR / "calc.bpf.o", tmp_path / "lia.bpf.o")   # no struct_ops in it
    with pytest.raises(PreflightError, match="refused"):
        BpfCC("lia", build_dir=tmp_path).check(ROOT)
    assert "mplab_lia" not in bpfcc.registered(ROOT)


def _skip_if_shared(*algorithms: str) -> None:
    """struct_ops and their coupling maps are machine-wide: another live testbed (a developer's machine shared
    with other runs; never CI) keeps them registered and fills their maps, which these tests assert on."""
    busy = sorted(f"mplab_{a}" for a in algorithms if f"mplab_{a}" in bpfcc._needed_elsewhere())
    if busy:
        pytest.skip(f"a live testbed on this machine uses {', '.join(busy)}")


@pytest.mark.root
@needs_build
def test_register_is_idempotent_and_cleanup_unregisters_leftovers(prefix):
    _skip_if_shared("balia")
    cc = BpfCC("balia")
    cc.check(ROOT)
    assert "mplab_balia" not in bpfcc.registered(ROOT) or "mplab_balia" in bpfcc._needed_elsewhere()
    try:
        cc.setup(ROOT)
        cc.setup(ROOT)
        assert "mplab_balia" in bpfcc.registered(ROOT)
        # A crashed run leaves it registered: cleaning any prefix removes what no live testbed needs.
        done = clean_prefix(prefix, ROOT)
        assert "struct_ops mplab_balia" in done
        assert "mplab_balia" not in bpfcc.registered(ROOT)
        cc.teardown(ROOT)
        cc.teardown(ROOT)
    finally:
        cc.teardown(ROOT)


@pytest.mark.root
@needs_build
def test_scenario_naming_an_unloadable_algorithm_is_refused_before_the_sweep(prefix, tmp_path, monkeypatch):
    monkeypatch.setattr(bpfcc, "BUILD_DIR", tmp_path / "empty")
    inv = small_inventory(prefix, [(20, 8)])
    sc = Scenario(name="refused", congestion_controls=["cubic", "olia"], receiver_counts=[1], modes=["both"],
                  samples_per_case=1, file_size="1M")
    with pytest.raises(PreflightError) as err:
        start_campaign(sc, inv, tmp_path / "runs")
    assert "olia" in str(err.value) and "make bpf" in str(err.value)
    assert "cubic" not in str(err.value).split("olia")[0].split("\n")[-1]
    assert not list_namespaces(ROOT, prefix)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.root
@needs_build
def test_every_algorithm_moves_the_file_intact_uses_both_paths_and_empties_its_map(prefix, tmp_path):
    """One campaign, disjoint WiFi/LTE paths, each algorithm; the runner's own records are checked."""
    _skip_if_shared(*COUPLED)
    allowed_before = allowed_ccs_apart_from_other_testbeds()
    algos = ["lia", "olia", "balia", "wvegas", "cubic"]
    inv = small_inventory(prefix, [(16, 10)])
    sc = Scenario(name="cc-all", congestion_controls=algos, receiver_counts=[1], modes=["both"],
                  samples_per_case=1, file_size="3M", transfer_timeout_s=60, settle_s=0.1)
    leftovers: dict[str, int | None] = {}

    def on_sample(outcome) -> None:
        if outcome.plan.cc in COUPLED:
            leftovers[outcome.plan.cc] = _wait_map_empty(outcome.plan.cc)

    campaign = start_campaign(sc, inv, tmp_path / "runs", hooks=RunHooks(on_sample=on_sample))
    records = {r["cc"]: r for r in campaign.records()}
    assert set(records) == set(algos)
    for a, r in records.items():
        sock = f"mplab_{a}" if a in COUPLED else a
        assert r["status"] == "ok", (a, r["error"])
        assert r["bytes"] == sc.file_bytes, a
        assert r["sender_cc"] == sock, a
        want = (f"bpf:{sock}@sha256:{bpfcc.file_digest(bpfcc.object_path(a))}" if a in COUPLED else "kernel:cubic")
        assert r["cc_impl"] == want
        if a in ("lia", "olia", "balia"):
            wifi, lte = r["iface_bytes"]["wifi"], r["iface_bytes"]["lte"]
            # Coupling must not starve a disjoint path: each carries a real part of the file.
            assert min(wifi, lte) > 0.15 * sc.file_bytes, (a, r["iface_bytes"])
    assert leftovers == {a: 0 for a in COUPLED}
    # Teardown: struct_ops unregistered (unless another live testbed needs them), allowed list as before.
    others = bpfcc._needed_elsewhere()
    assert not [n for n in bpfcc.registered(ROOT) if n not in others]
    assert allowed_ccs_apart_from_other_testbeds() == allowed_before
    assert not list_namespaces(ROOT, prefix)


@pytest.mark.root
@needs_build
def test_lia_couples_both_subflows_at_a_shared_bottleneck_without_starving_them(prefix):
    """Two subflows and one TCP flow through one 50 Mbit/s FIFO on a router (harness/testing/bottleneck.py).

    Only what a broken coupling gets wrong by a wide margin: a missing coupling map (the
    subflows never meet in one entry) and a starving alpha (the connection gets next to
    nothing; healthy medians are 0.48-0.57 of the TCP flow). How LIA and uncoupled cubic
    compare with a TCP flow (ratios, theory about 1 and 2) is measured by bench/fidelity.py:
    those ratios vary too much on a loaded 2-core machine to gate a landing on.
    """
    from harness.testing.bottleneck import SharedBottleneck

    lia = resolve("lia")
    with SharedBottleneck(prefix, [lia], rate_mbit=50, buffer_bytes=75_000) as bn:
        c = bn.compete(lia, duration_s=6, omit_s=2)
    print("lia ratio", round(c.ratio, 2), "coupled subflows", c.coupled_subflows)
    assert c.coupled_subflows == 2, "the coupling map did not hold both subflows"
    assert c.ratio >= 0.1, f"coupled MPTCP starved: {c.ratio:.2f} of a TCP flow (healthy: about 0.5)"
    assert c.mptcp_bytes > 0 and c.tcp_bytes > 0
    assert not list_namespaces(ROOT, prefix)
    assert _wait_map_empty("lia") in (0, None)
