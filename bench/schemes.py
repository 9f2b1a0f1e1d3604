"""The related schemes on the emulated testbed: caps held, MP-SDN's Tier-2 trace, ES-MPTCP by file size,
and a side-by-side table of every policy.

    uv run python bench/schemes.py caps            # per-path HTB caps: configured vs counted rate
    uv run python bench/schemes.py trace           # mp-sdn: one sample, its epochs (EI 1 s)
    uv run python bench/schemes.py sizes           # es-mptcp, 256 KiB .. 32 MiB: the set, its inputs, the switch
    uv run python bench/schemes.py table RUNS/...  # side by side of a schemes.yaml campaign, via mplab's report

Rates are counted network-side by the nftables steering's per-receiver counters (IP bytes); HTB
shapes whole frames, so IP bytes run ~1 % below a cap. Each part uses its own namespace prefix.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


import yaml

from harness.campaign.campaign import start_campaign
from harness.cc import resolve
from harness.config.inventory import Inventory
from harness.config.scenario import ControlSpec, Scenario
from harness.upkeep.clean import clean_prefix
from harness.testbeds.emulated import EmulatedTestbed

from controller import schemes
from controller.policy import Decision
from controller.setup2 import Setup2Control, control_factory

REPO = Path(__file__).resolve().parent.parent


def inventory(prefix: str, receivers: list[tuple[float, float]], wifi_cap: float | None = None) -> Inventory:
    base = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    base["receivers"] = [{"name": f"n{i}", "meter": {"kind": "emulated-um25c"}, "interfaces": {
        "wifi": {"name": "wlan0", "channel": {"rate_mbit": w, "buffer_ms": 10}},
        "lte": {"name": "lte0", "channel": {"rate_mbit": lte, "buffer_ms": 60}}}}
        for i, (w, lte) in enumerate(receivers, start=1)]
    base["name"] = "bench-schemes"
    base["emulation"]["namespace_prefix"] = prefix
    if wifi_cap:
        base["emulation"]["wifi_ap"]["capacity_mbit"] = wifi_cap
    return Inventory.model_validate(base)


def caps(seconds: float) -> None:
    prefix = "mplab-bench-schemes-caps-"
    tb = EmulatedTestbed(inventory(prefix, [(20, 14), (16, 12)]))
    cubic = resolve("cubic")
    tb.preflight([cubic])
    ctl = Setup2Control(ControlSpec(warm_s=1.0), {}, 0)
    rows = []
    try:
        tb.setup([cubic])
        ctl.setup(tb)
        print(f"cap backend: {type(ctl.caps).__name__}")
        tb.apply_cc(cubic, ["n1", "n2"])
        wifi, lte, both = frozenset({"wifi"}), frozenset({"lte"}), frozenset({"wifi", "lte"})
        # Single-path caps (n1 on WiFi, n2 on LTE), then both paths of each receiver capped under MPTCP.
        for label, a in (("single path", {"n1": Decision(wifi, {"wifi": 8.0}), "n2": Decision(lte, {"lte": 6.0})}),
                         ("single path", {"n1": Decision(wifi, {"wifi": 3.0}), "n2": Decision(lte, {"lte": 1.0})}),
                         ("single path", {"n1": Decision(wifi, {"wifi": 15.0}), "n2": Decision(lte, {"lte": 10.0})}),
                         ("MPTCP, both capped", {"n1": Decision(both, {"wifi": 8.0, "lte": 3.0}),
                                                 "n2": Decision(both, {"wifi": 2.0, "lte": 6.0})})):
            ctl.enforce(a)
            rates = ctl.window(["n1", "n2"], a, seconds)
            for rx, d in a.items():
                for net, x in d.caps_mbit.items():
                    rows.append((label, rx, net, x, rates[rx][net]))
        ctl.finish(type("P", (), {"receivers": ("n1", "n2")})())
    finally:
        ctl.teardown()
        tb.teardown()
        clean_prefix(prefix)
    print(f"\n| transfer | receiver | path | cap (Mbit/s) | counted (Mbit/s, {seconds:.0f} s after 1 s warm-up) | error |")
    print("|---|---|---|---|---|---|")
    for label, rx, net, cap, got in rows:
        print(f"| {label} | {rx} | {net} | {cap:.1f} | {got:.2f} | {got / cap - 1:+.1%} |")
    single = [abs(g / c - 1) for lab, _, _, c, g in rows if lab == "single path"]
    print(f"worst |error|, single path: {max(single):.1%}; overshoot anywhere: "
          f"{max(g / c - 1 for *_, c, g in rows):+.1%}")


def paper_links(prefix: str, n: int) -> Inventory:
    """inventory/schemes-paper-links.yaml (WLAN 25 Mbit/s, 25 ms, 1 %; 3G-like 5 Mbit/s, 65 ms), n receivers."""
    base = yaml.safe_load((REPO / "inventory" / "schemes-paper-links.yaml").read_text())
    base["receivers"] = base["receivers"][:n]
    base["emulation"]["namespace_prefix"] = prefix
    return Inventory.model_validate(base)


def campaign(prefix: str, receivers, policies, file_size: str, out: Path, wifi_cap: float | None = None,
             inv: Inventory | None = None, **control) -> list[dict]:
    sc = Scenario.model_validate({
        "name": "bench-schemes", "congestion_controls": ["cubic"], "receiver_counts": [len(receivers)],
        "modes": [], "policies": policies, "samples_per_case": 1, "file_size": file_size,
        "transfer_timeout_s": 120, "retries": 1, "settle_s": 0.2,
        "control": {"probe_s": 1.5, "warm_s": 0.5, **control}})
    try:
        camp = start_campaign(sc, inv or inventory(prefix, receivers, wifi_cap), out, control_factory=control_factory)
    finally:
        clean_prefix(prefix)
    return camp.records()


def trace(file_size: str) -> None:
    # n1 WiFi primary (LTE secondary), n2 and n3 LTE primary (WiFi secondary): their WiFi subflows are
    # Tier 2 on an AP of 15 Mbit/s shared by 34 Mbit/s of station ceilings (congested) while n1's
    # transfer keeps it busy; n1 ends first, then demand on the AP drops.
    with tempfile.TemporaryDirectory(prefix="mplab-bench-") as tmp:
        recs = campaign("mplab-bench-schemes-tr-", [(20, 6), (8, 12), (6, 12)],
                        [{"name": "mp-sdn", "params": {"ei_s": 1.0}}], file_size, Path(tmp), wifi_cap=15)
    for r in sorted(recs, key=lambda r: r["receiver"]):
        print(f"\n{r['receiver']}: status {r['status']}, primary {r['policy_trace']['primary']}, "
              f"{r['duration_s']:.1f} s, {r['throughput_mbit']:.2f} Mbit/s, caps at start {r['caps_mbit']}")
        print("| t (s) | occupancy wifi | occupancy lte | Tier-2 wifi | Tier-2 lte | cap | wifi Mbit/s | lte Mbit/s |")
        print("|---|---|---|---|---|---|---|---|")
        for e in r["control_epochs"] or []:
            if "error" in e:
                print(f"| error: {e['error']} |")
                continue
            o, t2, x = e["occupancy"], e["tier2_mbit"], e["rate_mbit"] or {}
            print(f"| {e['t_s']:.1f} | {o.get('wifi', 0):.2f} | {o.get('lte', 0):.2f} | {t2['wifi']:.2f} | "
                  f"{t2['lte']:.2f} | {e['caps_mbit']} | {x.get('wifi', 0):.2f} | {x.get('lte', 0):.2f} |")


def recorded_paths(rec: dict) -> dict[str, schemes.PathState]:
    """The ES-MPTCP inputs a record holds: capacity = probe rate, RTT and loss from its path_stats."""
    st = rec["path_stats"] or {}
    return {r: schemes.PathState(x, st[r]["rtt_s"], st[r]["loss"], st[r]["cwnd_pkts"])
            for r, x in (rec["probe_mbit"] or {}).items() if r in st and x > 0.01}


def sizes(file_sizes: list[str]) -> None:
    # The paper's links (inventory/schemes-paper-links.yaml), one receiver; the 3G path's power constants.
    # One campaign per size (each probes afresh); per size the live decision, its measured inputs and
    # the size at which the pure rule, on those inputs, switches sets.
    params = {"lte_b": 122.1, "lte_theta": 817.9}
    pol = {"name": "es-mptcp", "params": params}
    power = {"wifi": (137.0, 132.9), "lte": (params["lte_b"], params["lte_theta"])}
    prefix = "mplab-bench-schemes-sz-"
    print("| file | chosen | switch at (pure rule, these inputs) | WLAN probe Mbit/s, min RTT ms, loss (source) "
          "| 3G probe Mbit/s, min RTT ms, loss (source) | retrans ratio WLAN / 3G | srtt ms WLAN / 3G "
          "| Mbit/s | J |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size in file_sizes:
        with tempfile.TemporaryDirectory(prefix="mplab-bench-") as tmp:
            recs = campaign(prefix, [(25, 5)], [pol], size, Path(tmp), inv=paper_links(prefix, 1))
        for r in recs:
            if r["status"] != "ok":
                print(f"| {size} | failed: {r['error']} |")
                continue
            paths = recorded_paths(r)
            sw = schemes.es_mptcp_switch(paths, power)
            want = schemes.es_mptcp(paths, power, r["bytes"]).paths
            st = r["path_stats"]

            def path(n: str) -> str:
                s_ = st.get(n, {})  # noqa: B023 - called within this iteration, before the variable moves on
                return (f"{r['probe_mbit'][n]:.2f}, {s_.get('rtt_s', 0) * 1000:.1f}, {s_.get('loss', 0):.4f} "  # noqa: B023 - called within this iteration, before the variable moves on
                        f"({(s_.get('source') or {}).get('loss')}, {s_.get('loss_pkts')})")
            chosen = r["assignment"] + ("" if {"both": {"wifi", "lte"}}.get(r["assignment"], {r["assignment"]}) == want
                                        else " (pure rule differs!)")
            print(f"| {size} | {chosen} | {f'{sw.at_bytes / 2**20:.2f} MiB' if sw else 'none'} | {path('wifi')} | "
                  f"{path('lte')} | {st['wifi']['retrans_ratio']:.4f} / {st['lte']['retrans_ratio']:.4f} | "
                  f"{st['wifi']['srtt_s'] * 1000:.1f} / {st['lte']['srtt_s'] * 1000:.1f} | "
                  f"{r['throughput_mbit']:.2f} | {r['energy_j']:.2f} |")


def table(path: Path) -> None:
    """The side by side of a campaign of scenarios/schemes.yaml, through the analysis report (analysis/schemes.py).

    Prints the report's summary tables (what README quotes) and how long the report took; the full tables,
    the papers' headlines and the figure are in the report (`mplab report RUN -o reports/schemes`).
    """
    import time

    from analysis.report import build_report

    with tempfile.TemporaryDirectory(prefix="mplab-bench-") as tmp:
        t0 = time.monotonic()
        res = build_report([path], Path(tmp) / "report")
        seconds = time.monotonic() - t0
        if res.markdown is None:
            sys.exit(f"{path}: no records carry a policy")
        md = res.markdown.read_text()
    start = md.index("## Summary")
    end = md.index("\n## ", start + 1)
    print(md[start:end].strip())
    t = res.schemes
    print(f"\n{len(t)} policy cases; losing to all-both on the mean: "
          + ", ".join(f"{r.policy} (N={r.n_receivers})" for r in t.itertuples() if r.verdict_all_both == "loses"))
    print(f"report built in {seconds:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("caps", "trace", "sizes", "table"))
    ap.add_argument("campaign", nargs="?", type=Path)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--file-size", default="24M")
    ap.add_argument("--sizes", default="256K,512K,1M,2M,4M,8M,16M,32M", help="sizes part: comma-separated")
    args = ap.parse_args()
    if args.part == "caps":
        caps(args.seconds)
    elif args.part == "trace":
        trace(args.file_size)
    elif args.part == "sizes":
        sizes(args.sizes.split(","))
    else:
        table(args.campaign)


if __name__ == "__main__":
    main()
