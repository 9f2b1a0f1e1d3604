"""Why MP-SDN's WiFi primary carries less than its 20 Mbit/s on the lab-switch rig (docs/schemes.md, MP-SDN's WiFi primary).

    uv run python bench/mpsdn_wifi.py [--files 3M,12M] [--testbed lab-switch|emulated] [--rmem "MIN DEF MAX"]

Rig: tests/test_lab.py's lab campaign (rigs/labswitch.py: one receiver, 20 Mbit/s WiFi, 4 Mbit/s
LTE, a userspace OVS between the sender and the AP / eNB, the os-ken app driving it, the lab reached over
SSH). Per file size one campaign of: all-wifi (WiFi alone, uncapped), all-both (MPTCP on both, uncapped),
mp-sdn (EI 0.5 s, as the test). A sampler thread dumps the switch's flows and meters
(``ovs-ofctl -O OpenFlow13 dump-flows / dump-meters``) every 0.25 s during the run; the report says per
policy: the per-interface throughput over the transfer, whether the WiFi downlink entry ever carried a meter,
the meters seen, and MP-SDN's epochs (LTE Tier-2 limit, port utilisation per network). The same sampler reads
the sender's ``ss -tin`` (per subflow: rtt, cwnd, busy, how many samples had unsent data) and ``nstat``'s
MPTcpExt / TcpExt counters around each transfer. ``--testbed emulated`` runs the three policies on the
emulated testbed (nftables steering, HTB caps; no switch samples); ``--rmem`` sets the receiver's tcp_rmem
on the lab-switch rig. Results: docs/schemes.md ("MP-SDN: why the WiFi primary ...").

Namespace prefix ``mplab-mpw-``; nothing else on the machine is touched.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path


from harness.campaign.campaign import start_campaign
from harness.config.scenario import Scenario
from harness.hosts.local import NamespaceHost

from controller.setup2 import control_factory

from rigs.labswitch import lab_switch_rig

REPO = Path(__file__).resolve().parent.parent

PREFIX = "mplab-mpw-"


class Sampler:
    """dump-flows / dump-meters every ``period_s`` while a transfer runs, tagged with the policy."""

    def __init__(self, ofctl, sender, period_s: float = 0.25) -> None:
        self.ofctl, self.sender, self.period_s, self.policy = ofctl, sender, period_s, None
        self.samples: list[dict] = []
        #: policy -> the sender's MPTcpExt / TcpExt counters that moved during its transfer.
        self.nstat: dict[str, dict[str, int]] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            pol = self.policy
            if pol is None:
                continue
            try:
                self.samples.append({"t": time.monotonic(), "policy": pol, "flows": self.ofctl("dump-flows"),
                                     "meters": self.ofctl("dump-meters"),
                                     "ss": self.sender.run(["ss", "-tinH", "state", "established"]).stdout})
            except Exception as exc:  # noqa: BLE001 - the switch may be gone at the end
                self.samples.append({"t": time.monotonic(), "policy": pol, "error": str(exc)})

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(5)


def nstat(host) -> dict[str, int]:
    """The sender namespace's absolute MPTcpExt and TcpExt counters (``nstat -az``, history not touched)."""
    out = {}
    for ln in host.run(["nstat", "-asz"]).stdout.splitlines():
        parts = ln.split()
        if len(parts) >= 2 and parts[0].startswith(("MPTcpExt", "TcpExt")) and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


class Spy:
    """The campaign's controller, unchanged, telling the sampler which policy's transfer runs."""

    def __init__(self, inner, sampler: Sampler) -> None:
        self.inner, self.sampler = inner, sampler

    def started(self, plan) -> None:
        self.sampler.policy = plan.policy
        self._nstat0 = nstat(self.sampler.sender)
        self.inner.started(plan)

    def finish(self, plan) -> None:
        self.sampler.policy = None
        now = nstat(self.sampler.sender)
        self.sampler.nstat[plan.policy] = {k: v - self._nstat0.get(k, 0) for k, v in now.items()
                                           if v != self._nstat0.get(k, 0)}
        self.inner.finish(plan)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def scenario(file_size: str, steering: str = "openflow") -> Scenario:
    return Scenario.model_validate({
        "schema_version": 1, "name": "mpw", "congestion_controls": ["cubic"], "receiver_counts": [1],
        "modes": [], "samples_per_case": 1, "file_size": file_size, "transfer_timeout_s": 60,
        "retries": 0, "settle_s": 0, "shuffle": False, "seed": 1,
        "policies": ["all-wifi", "all-both", {"name": "mp-sdn", "params": {"ei_s": 0.5}}],
        "control": {"steering": steering, "probe_s": 0.5, "warm_s": 0.2}})


def subflows(samples: list[dict]) -> dict:
    """Sender subflow (iperf3 data port 5201 side) -> medians over the samples of rtt_ms, cwnd, and how many
    samples each was receiver-window limited (``rwnd_limited`` growing) or had unacked data."""
    import re
    import statistics
    per: dict[str, dict[str, list]] = {}
    for s in samples:
        pairs, head = [], None
        for ln in s.get("ss", "").splitlines():
            if ln[:1].isspace() and head is not None:
                pairs.append((head, ln))
            else:
                head = ln
        for head, info in pairs:
            parts = head.split()
            if len(parts) < 4:
                continue
            local, peer = parts[2], parts[3]
            if local.endswith(":22") or peer.endswith(":22"):
                continue
            d = per.setdefault(f"{local}>{peer}", {"rtt_ms": [], "cwnd": [], "rwnd_limited_ms": [], "bytes_acked": [],
                                                         "busy_ms": [], "sndbuf_limited_ms": [], "app_limited": [],
                                                         "notsent": [], "unacked": []})
            for key, pat in (("rtt_ms", r" rtt:([\d.]+)"), ("cwnd", r" cwnd:(\d+)"),
                             ("rwnd_limited_ms", r"rwnd_limited:(\d+)ms"), ("bytes_acked", r"bytes_acked:(\d+)"),
                             ("busy_ms", r"busy:(\d+)ms"), ("sndbuf_limited_ms", r"sndbuf_limited:(\d+)ms"),
                             ("notsent", r"notsent:(\d+)"), ("unacked", r"unacked:(\d+)")):
                m = re.search(pat, info)
                if m:
                    d[key].append(float(m.group(1)))
            d["app_limited"].append(" app_limited" in info)
    return {k: {"n": len(v["rtt_ms"]), "rtt_ms_median": statistics.median(v["rtt_ms"]) if v["rtt_ms"] else None,
                "cwnd_median": statistics.median(v["cwnd"]) if v["cwnd"] else None,
                "rwnd_limited_ms_last": v["rwnd_limited_ms"][-1] if v["rwnd_limited_ms"] else 0,
                "bytes_acked_last": v["bytes_acked"][-1] if v["bytes_acked"] else 0,
                "busy_ms_last": v["busy_ms"][-1] if v["busy_ms"] else 0,
                "sndbuf_limited_ms_last": v["sndbuf_limited_ms"][-1] if v["sndbuf_limited_ms"] else 0,
                "app_limited_samples": sum(v["app_limited"]),
                "notsent_median": statistics.median(v["notsent"] or [0]),
                "unacked_median": statistics.median(v["unacked"] or [0]),
                "samples_with_notsent": len(v["notsent"])}
            for k, v in per.items() if v["bytes_acked"] and v["bytes_acked"][-1] > 100_000}


def summarise(rec: dict, samples: list[dict], wifi_addr: str) -> dict:
    wifi_lines = [ln for s in samples if "flows" in s for ln in s["flows"].splitlines() if f"nw_dst={wifi_addr}" in ln]
    meters = sorted({ln.strip() for s in samples if "meters" in s for ln in s["meters"].splitlines()
                     if "meter=" in ln})
    out = {"label": rec.get("policy") or rec.get("mode"), "status": rec["status"],
           "throughput_mbit": rec.get("throughput_mbit"), "iface_throughput_mbit": rec.get("iface_throughput_mbit"),
           "iface_bytes": rec.get("iface_bytes"), "caps_mbit": rec.get("caps_mbit"),
           "samples": len(samples), "wifi_entry_metered": any("meter:" in ln for ln in wifi_lines),
           "meters_seen": meters}
    out["subflows"] = subflows(samples)
    out["sample_errors"] = sorted({x["error"][:200] for x in samples if "error" in x})
    out["ss_example"] = next((x["ss"] for x in samples[len(samples) // 2:] if x.get("ss")), "")[:1500]
    if rec.get("control_epochs"):
        out["epochs"] = [{"epoch": e.get("epoch"), "lte_tier2": e.get("tier2_mbit", {}).get("lte"),
                          "caps": e.get("caps_mbit"),
                          "util": {n: round(c.get("utilisation", -1), 2) for n, c in (e.get("congestion") or {}).items()},
                          "occupancy": {n: round(v, 2) for n, v in (e.get("occupancy") or {}).items()},
                          "tx_mbit": {n: round(c.get("tx_mbit", -1), 2) for n, c in (e.get("congestion") or {}).items()}}
                         for e in rec["control_epochs"]]
    return out


def run(file_size: str, rmem: str | None = None) -> list[dict]:
    with lab_switch_rig(PREFIX, [(20, 4)]) as r, tempfile.TemporaryDirectory(prefix="mplab-mpw-") as d:
        wifi = str(r.lab.receivers[0].interfaces["wifi"].address)
        if rmem:  # the receiver's socket buffer (its namespace only): min default max, bytes
            NamespaceHost("n1", r.tb.ns["n1"]).run(["sysctl", "-q", "-w", f"net.ipv4.tcp_rmem={rmem}"])
        with Sampler(r.ofctl, NamespaceHost("snd", r.tb.ns["snd"])) as smp:
            def factory(sc, source):
                return Spy(control_factory(sc, source), smp)
            campaign = start_campaign(scenario(file_size), r.lab, Path(d) / "runs", campaign_id="mpw",
                                      control_factory=factory)
            records = campaign.records()
        out = []
        for rec in records:
            label = rec.get("policy") or rec.get("mode")
            out.append(summarise(rec, [s for s in smp.samples if s["policy"] == label], wifi))
            out[-1]["sender_counters"] = smp.nstat.get(label, {})
        return out


def run_emulated(file_size: str) -> list[dict]:
    """The same campaign on the emulated testbed: nftables steering, HTB caps at the gateways."""
    from rigs.inventories import small_inventory
    with tempfile.TemporaryDirectory(prefix="mplab-mpw-") as d:
        campaign = start_campaign(scenario(file_size, "nftables"), small_inventory(PREFIX + "e", [(20, 4)]),
                                  Path(d) / "runs", campaign_id="mpwe", control_factory=control_factory)
        return [{**summarise(rec, [], ""), "label": rec.get("policy"), "caps_by": rec.get("caps_by")}
                for rec in campaign.records()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default="3M,12M")
    ap.add_argument("--rmem", help='the receiver\'s net.ipv4.tcp_rmem on the lab-switch rig, e.g. "4096 4194304 33554432"')
    ap.add_argument("--testbed", choices=("lab-switch", "emulated"), default="lab-switch")
    args = ap.parse_args()
    for fs in args.files.split(","):
        for row in (run(fs, args.rmem) if args.testbed == "lab-switch" else run_emulated(fs)):
            print(json.dumps({"file": fs, "testbed": args.testbed, "rmem": args.rmem, **row}))


if __name__ == "__main__":
    main()
