"""Where the CPU goes at a speed-up: CPU seconds per emulated GB, by component, of real campaigns at S.

Run as root (kernel MPTCP, iperf3, `make bpf` for the timer program that gives the testbed its cgroup):

    uv run python bench/speedup_cpu.py [--speedups 8,16] [--receivers 9] [--modes both] [--runs 2]
        [--file-size 16M] [--delay-ms 0] [--inventory emulated|paper-lab] [--out FILE] [--stage LABEL]

One campaign per S (cubic, the real runner, one testbed). At S > 1 every process the testbed's hosts start
runs in its cgroup (``harness.cc.timers``); while the campaign runs, this script moves each one, as it
appears, into a child cgroup per component (by its command line), and reads the children's ``cpu.stat``
(user and system time, exited processes included) every 20 ms:

- ``delay line``: ``harness.emulation.delayline`` (only where a channel has a base delay: ``--delay-ms``
  gives every channel one; the shipped emulated and paper-lab inventories have none);
- ``radio loop`` (``harness.emulation.radiolink``), ``meter devices`` (``harness.meters.emulated``);
- ``iperf3 server`` (the sender), ``iperf3 client`` (the receivers);
- ``orchestrator``: this process (the runner, the recorder's meter polls, the store), less this script's
  own polling thread (its thread CPU time);
- ``commands``: the short programs the runner runs (ip, tc, ss, nft), i.e. the children this process
  reaped less the testbed's short-lived processes (user and system together);
- ``ksoftirqd``: the kernel's softirq threads (machine-wide: other users' packets too). This kernel has no
  IRQ time accounting (``CONFIG_IRQ_TIME_ACCOUNTING`` unset), so softirq work done while a process runs is
  that process's system time: most of the kernel's packet path (veth, HTB, forwarding, TCP) is in the
  components' system time, which is printed beside the user time.

CPU time, not wall time: other users load the machine. Emulated GB: the bytes the records moved (1e9).
``wakes_per_s``: each long-lived component's wake-ups (voluntary context switches) per wall second and process
over the same span: the radio loop's should be 20 x S, a meter device's 10 x S plus the recorder's polls; fewer
means it fell behind.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import resource
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from harness.campaign.campaign import RunHooks, start_campaign
from harness.cc.timers import TimerScaling
from harness.config.inventory import Inventory, load_inventory
from harness.config.load import parse_model
from harness.config.scenario import Scenario
from harness.upkeep.clean import clean_prefix

REPO = Path(__file__).resolve().parent.parent
INVENTORIES = {"emulated": REPO / "inventory" / "emulated.yaml", "paper-lab": REPO / "inventory" / "paper-lab.yaml"}
#: Component -> what its command line contains (the first match wins; iperf3 by its role flag).
COMPONENTS = (("delay line", ("harness.emulation.delayline", "mplab-delayline")),
              ("radio loop", ("harness.emulation.radiolink",)),
              ("meter devices", ("harness.meters.emulated",)),
              ("iperf3 server", ("iperf3\0-s",)),
              ("iperf3 client", ("iperf3\0-c",)))


def component(cmdline: bytes) -> str | None:
    text = cmdline.decode(errors="replace")
    for name, needles in COMPONENTS:
        if any(n in text for n in needles):
            return name
    return None


def cpu_stat(cgroup: Path) -> dict[str, float]:
    """``cpu.stat``'s user and system time (s); empty if the cgroup is gone."""
    try:
        fields = dict(line.split() for line in (cgroup / "cpu.stat").read_text().splitlines())
    except OSError:
        return {}
    return {"user_s": int(fields["user_usec"]) / 1e6, "system_s": int(fields["system_usec"]) / 1e6}


def voluntary_switches(pid: str) -> int:
    """How often ``pid`` went to sleep of its own accord (its wake-ups)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def wakes_per_s(a: dict, b: dict) -> dict[str, float]:
    """Per component, each process's wake-ups per wall second between two snapshots (the mean over processes)."""
    wall = b["wall"] - a["wall"]
    out: dict[str, list[float]] = {}
    for pid, (name, n) in b["wakes"].items():
        if pid in a["wakes"] and wall > 0:
            out.setdefault(name, []).append((n - a["wakes"][pid][1]) / wall)
    return {name: sum(v) / len(v) for name, v in out.items()}


def ksoftirqd_s() -> float:
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if "(ksoftirqd/" in text:
            f = text.rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / 100  # USER_HZ
    return total


class Splitter(threading.Thread):
    """Moves the testbed's processes into one child cgroup per component; ``snapshot`` reads every counter.

    The first snapshot is taken when the first iperf3 client appears (set-up is over), the last one by the
    campaign's hook after its last sample (before teardown): what lies between is the samples' cost.
    """

    def __init__(self, cgroup: Path) -> None:
        super().__init__(daemon=True)
        self.cgroup = cgroup
        self.last: dict[str, dict[str, float]] = {}
        self.stop = threading.Event()
        self.own_s = 0.0
        self.first: dict | None = None
        self.lock = threading.Lock()
        #: pid -> (component, voluntary context switches at the last sweep)
        self.wakes: dict[str, tuple[str, int]] = {}

    def snapshot(self) -> dict:
        with self.lock:
            self._sweep()
            return {"cg": json.loads(json.dumps(self.last)), "self": resource.getrusage(resource.RUSAGE_SELF),
                    "kids": resource.getrusage(resource.RUSAGE_CHILDREN), "soft": ksoftirqd_s(),
                    "own": self.own_s, "wall": time.monotonic(), "wakes": dict(self.wakes)}

    def _child(self, name: str) -> Path:
        d = self.cgroup / name.replace(" ", "-")
        d.mkdir(exist_ok=True)
        return d

    def _sweep(self) -> None:
        try:
            pids = (self.cgroup / "cgroup.procs").read_text().split()
        except OSError:
            return
        for pid in pids:
            try:
                name = component(Path(f"/proc/{pid}/cmdline").read_bytes())
                if name:
                    (self._child(name) / "cgroup.procs").write_text(pid)
                    if name == "iperf3 client" and self.first is None:
                        self.first = {}  # taken below, after this sweep's figures
            except OSError:
                continue  # gone, or not yet its final command (a gate's bash): next sweep
        for name in ("radio loop", "meter devices"):
            try:
                pids = (self.cgroup / name.replace(" ", "-") / "cgroup.procs").read_text().split()
            except OSError:
                continue  # not there yet
            for pid in pids:  # the component's own processes (the radio loop's tc children are in its cgroup too)
                with contextlib.suppress(OSError):
                    if pid in self.wakes or component(Path(f"/proc/{pid}/cmdline").read_bytes()) == name:
                        self.wakes[pid] = (name, voluntary_switches(pid))
        total = cpu_stat(self.cgroup)
        if total:
            self.last["testbed total"] = total
            for name, _ in COMPONENTS:
                d = self.cgroup / name.replace(" ", "-")
                if d.is_dir() and (st := cpu_stat(d)):
                    self.last[name] = st

    def run(self) -> None:
        while not self.stop.is_set():
            if self.cgroup.is_dir():
                with self.lock:
                    self._sweep()
                if self.first == {}:
                    self.first = self.snapshot()
            self.own_s = time.thread_time()
            time.sleep(0.02)


def _inventory(name: str, prefix: str, delay_ms: float) -> Inventory:
    data = load_inventory(INVENTORIES[name]).model_dump(mode="json")
    data["emulation"]["namespace_prefix"] = prefix
    if delay_ms:
        for rx in data["receivers"]:
            for intf in rx["interfaces"].values():
                if intf.get("channel"):
                    intf["channel"]["delay_ms"] = delay_ms
    return Inventory.model_validate(data)


def one(s: float, args: argparse.Namespace, runs: Path) -> dict:
    prefix = f"mplab-cpu{uuid.uuid4().hex[:4]}-"
    inv = _inventory(args.inventory, prefix, args.delay_ms)
    sc = parse_model(Scenario, {"name": "cpu", "congestion_controls": ["cubic"], "receiver_counts": args.receivers,
                                "modes": args.modes, "samples_per_case": args.runs, "file_size": args.file_size,
                                "speedup": s, "retries": 0, "seed": 5, "transfer_timeout_s": 600}, "bench")
    timers = TimerScaling(prefix, s)
    if timers.check():
        raise SystemExit(f"S = {s:g}: no testbed cgroup to account in ({timers.check()})")
    splitter = Splitter(timers.cgroup)
    done, last = [0], {}

    def on_sample(_outcome) -> None:
        done[0] += 1
        if done[0] == n_samples:
            last.update(splitter.snapshot())

    n_samples = len(args.receivers) * len(args.modes) * args.runs
    splitter.start()
    try:
        c = start_campaign(sc, inv, runs, campaign_id=f"cpu-s{s:g}", hooks=RunHooks(on_sample=on_sample))
    finally:
        splitter.stop.set()
        splitter.join()
        clean_prefix(prefix, nested=False)
    a, b = splitter.first, last
    if not a or not b:
        raise SystemExit(f"S = {s:g}: the campaign ended before its samples could be accounted")
    records = list(c.records())
    nbytes = sum(r["bytes"] or 0 for r in records if r["status"] == "ok")

    def delta(name: str) -> dict[str, float]:
        zero = {"user_s": 0.0, "system_s": 0.0}  # a component that had not started yet
        return {k: b["cg"].get(name, zero)[k] - a["cg"].get(name, zero)[k] for k in ("user_s", "system_s")}

    parts = {name: delta(name) for name, _ in COMPONENTS if name in b["cg"]}
    total = delta("testbed total")
    parts["other in the testbed"] = {k: total[k] - sum(p[k] for p in parts.values()) for k in ("user_s", "system_s")}
    parts["orchestrator"] = {"user_s": b["self"].ru_utime - a["self"].ru_utime - (b["own"] - a["own"]),
                             "system_s": b["self"].ru_stime - a["self"].ru_stime}
    kids = (b["kids"].ru_utime - a["kids"].ru_utime) + (b["kids"].ru_stime - a["kids"].ru_stime)
    # Reaped within the window: the commands and the testbed's short-lived processes (the iperf3s; the long-lived
    # ones are reaped at teardown, after it).
    reaped = sum(parts[n]["user_s"] + parts[n]["system_s"] for n in ("iperf3 server", "iperf3 client",
                                                                     "other in the testbed") if n in parts)
    parts["commands"] = {"user_s": max(0.0, kids - reaped), "system_s": 0.0}
    parts["ksoftirqd (machine)"] = {"user_s": 0.0, "system_s": b["soft"] - a["soft"]}
    gb = nbytes / 1e9
    wall = b["wall"] - a["wall"]
    return {"speedup": s, "wall_s": wall, "emulated_gb": gb, "records": len(records),
            "failed": sum(r["status"] != "ok" for r in records),
            "flagged": sum(bool(r["flags"]) for r in records),
            "cpu_s": parts, "wakes_per_s": wakes_per_s(a, b),
            "cpu_s_per_gb": {k: (v["user_s"] + v["system_s"]) / gb for k, v in parts.items()} if gb else {}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inventory", default="emulated", choices=sorted(INVENTORIES))
    ap.add_argument("--speedups", default="8,16")
    ap.add_argument("--receivers", default="9")
    ap.add_argument("--modes", default="both")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--file-size", default="16M")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="a base delay on every channel (the delay line runs)")
    ap.add_argument("--out", type=Path, default=None, help="append the results as JSON lines here")
    ap.add_argument("--stage", default=None, help="a label for what was measured, kept in each result's `stage`")
    args = ap.parse_args()
    args.receivers = [int(x) for x in args.receivers.split(",")]
    args.modes = args.modes.split(",")
    with tempfile.TemporaryDirectory(prefix="mplab-bench-cpu-") as tmp:
        for s in (float(x) for x in args.speedups.split(",")):
            res = one(s, args, Path(tmp) / f"s{s:g}")
            res["args"] = {k: v for k, v in vars(args).items() if k not in ("out", "stage")}
            if args.stage:
                res["stage"] = args.stage
            total = sum(v["user_s"] + v["system_s"] for v in res["cpu_s"].values())
            print(f"S = {s:g}: {res['emulated_gb']:.3f} emulated GB in {res['wall_s']:.1f} s wall, "
                  f"{total:.2f} CPU s ({total / max(res['emulated_gb'], 1e-9):.1f} CPU s per GB); "
                  f"{res['failed']} failed, {res['flagged']} flagged of {res['records']} records", flush=True)
            print("  wakes per s and process: " + ", ".join(f"{k} {v:.0f}" for k, v in res["wakes_per_s"].items()))
            for name, v in sorted(res["cpu_s"].items(), key=lambda kv: -(kv[1]["user_s"] + kv[1]["system_s"])):
                both = v["user_s"] + v["system_s"]
                print(f"  {name:22s} {both:7.2f} s (user {v['user_s']:6.2f}, system {v['system_s']:6.2f})  "
                      f"{both / max(res['emulated_gb'], 1e-9):7.1f} s/GB  {both / total:5.1%}", flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
