"""Reliability figures for README "Reliability" (the fault guarantees): kills survived with resume, bad inputs refused,
what a crash leaves and that `mplab clean` removes it, signals, order independence.

    sudo uv run --frozen python bench/reliability.py [--kills 10] [--json out.json]

Everything runs under a fresh namespace prefix (never the shared default) and a scratch runs
directory; the real command line is driven in subprocesses, as a user would.

1. Kills: a 2-receiver WiFi sweep is SIGKILLed at random moments (seeded) and resumed each time.
   After every kill: what is left (namespaces, state, processes, stale claim); then the campaign
   must end complete, every sample with one record per receiver, none twice, and every record
   written before a kill still byte-identical afterwards.
2. Bad input: each kind of bad file or argument must exit 2 with a message and no traceback.
3. Signals: SIGTERM / SIGINT during set-up: exit 143 / 130, nothing left, the reason in sessions.jsonl.
4. Order: the same receiver's WiFi energy after an LTE sample and after a WiFi sample (seeded order).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


import yaml

from harness import machine
from harness.machine import STATE_ROOT
from harness.upkeep.clean import clean_prefix, list_namespaces
from harness.hosts.local import LocalHost
from harness.campaign.store import Campaign, incomplete_tail_start
from harness.upkeep.claim import claim_path

REPO = Path(__file__).resolve().parent.parent


def mplab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout)


def files(tmp: Path, prefix: str, receivers: list[tuple[float, float]], scenario: dict) -> Path:
    inv = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    inv["receivers"] = [{"name": f"n{i}", "meter": {"kind": "emulated-um25c"}, "interfaces": {
        "wifi": {"name": "wlan0", "channel": {"rate_mbit": w, "buffer_ms": 10}},
        "lte": {"name": "lte0", "channel": {"rate_mbit": lte, "buffer_ms": 60}}}}
        for i, (w, lte) in enumerate(receivers, start=1)]
    inv["emulation"]["namespace_prefix"] = prefix
    (tmp / "inv.yaml").write_text(yaml.safe_dump(inv))
    sc = {"name": "rel", "inventory": str(tmp / "inv.yaml"), "congestion_controls": ["cubic"], "retries": 0,
          **scenario}
    (tmp / "sc.yaml").write_text(yaml.safe_dump(sc))
    return tmp / "sc.yaml"


def leftovers(prefix: str) -> dict:
    """What a crash of the testbeds under ``prefix`` (K copies: nested prefixes) left on the machine."""
    root = LocalHost("root")
    ns = list_namespaces(root, prefix)
    procs = sum(len(root.run(["ip", "netns", "pids", n], check=False).stdout.split()) for n in ns)
    states = [d for d in STATE_ROOT.glob(prefix.rstrip("-") + "*") if d.is_dir()] if STATE_ROOT.exists() else []
    claims = [c for c in claim_path(prefix).parent.glob(prefix + "*")] if claim_path(prefix).parent.exists() else []
    users = [u for us in machine.struct_ops_users().values() for u in us if u.startswith(prefix)]
    return {"namespaces": len(ns), "processes": procs, "state_dirs": len(states), "claim_files": len(claims),
            "struct_ops_records": len(users)}


def _wait_for_kill_moment(proc: subprocess.Popen, samples: Path, size0: int, rng: random.Random) -> str:
    """Sleep until a random moment of the session: during set-up (a third of the kills), else within ~2
    samples after this session's first record. Returns which."""
    if rng.random() < 1 / 3:
        time.sleep(rng.uniform(0.2, 4.0))
        return "set-up"
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if samples.exists() and samples.stat().st_size > size0:
            break
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 2.5))
    return "mid-sweep"


def kills(tmp: Path, n_kills: int, seed: int, testbeds: int = 1) -> dict:
    """``n_kills`` SIGKILLs of `mplab run [--testbeds K]` at random moments, each followed by `--resume`, the
    last resume to completion; then records lost, duplicated and changed (bytes), and what is left."""
    prefix = f"mplab-brl{uuid.uuid4().hex[:4]}-"
    sc = files(tmp, prefix, [(20, 8), (12, 10)], {"receiver_counts": [1, 2], "modes": ["wifi"],
                                                  "samples_per_case": 12, "file_size": "512K", "settle_s": 0})
    runs = tmp / "runs"
    path = runs / "k"
    rng = random.Random(seed)
    survived, cycles, left = 0, [], []
    changed = 0
    prev = b""
    extra = ["--testbeds", str(testbeds)] if testbeds > 1 else []
    t0 = time.monotonic()
    try:
        for k in range(n_kills + 1):
            started = (path / "manifest.json").exists()
            args = (["run", "--resume", str(path)] if started else
                    ["run", str(sc), "--runs-dir", str(runs), "--id", "k"]) + extra
            size0 = (path / "samples.jsonl").stat().st_size if (path / "samples.jsonl").exists() else 0
            proc = subprocess.Popen([sys.executable, "-m", "mplab", *args], cwd=REPO, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            if k == n_kills:  # the last one runs to the end
                err = proc.communicate(timeout=900)[1]
                if proc.returncode != 0:
                    raise SystemExit(f"final resume exited {proc.returncode}: {err[-2000:]}")
                break
            when = _wait_for_kill_moment(proc, path / "samples.jsonl", size0, rng)
            if proc.poll() is not None:
                cycles.append(f"finished before the kill (exit {proc.returncode})")
                if proc.returncode != 0:
                    raise SystemExit(f"run {k + 1} exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
                break
            before = len(Campaign.open(path).completed()) if (path / "manifest.json").exists() else 0
            proc.kill()
            proc.wait()
            now = path / "samples.jsonl"
            data = now.read_bytes() if now.exists() else b""
            # Everything complete before this kill must still be there, byte for byte.
            if not data.startswith(prev[:incomplete_tail_start(prev)]):
                changed += 1
            prev = data
            torn = incomplete_tail_start(data) < len(data)
            cycles.append(f"{when}: {before} samples recorded" + (" (torn tail)" if torn else ""))
            left.append(leftovers(prefix))
            survived += 1
        final = (path / "samples.jsonl").read_bytes()
        if not final.startswith(prev[:incomplete_tail_start(prev)]):
            changed += 1
        after_resume = leftovers(prefix)
        wall = time.monotonic() - t0
        # What `mplab clean` removes after a crash (one more kill, then clean instead of resume).
        proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc), "--runs-dir", str(runs), "--id",
                                 "k2", *extra], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not list_namespaces(LocalHost("root"), prefix) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)
        proc.kill()
        proc.wait()
        crash_left = leftovers(prefix)
        res = mplab("clean", "--prefix", prefix)
        after_clean = leftovers(prefix)
        again = mplab("clean", "--prefix", prefix)
    finally:
        clean_prefix(prefix)
    c = Campaign.open(path)
    recs = c.records()
    keys = [(r["sample_id"], r["receiver"]) for r in recs]
    per_sample: dict[str, list] = {}
    for r in recs:
        per_sample.setdefault(r["sample_id"], []).append(r)
    complete = all(len(v) == v[0]["n_receivers"] for v in per_sample.values())
    planned = c.manifest["plan"]
    return {"testbeds": testbeds, "kills": survived, "planned": len(planned), "recorded": len(per_sample),
            "lost": len(set(planned) - set(per_sample)),
            "duplicates": len(keys) - len(set(keys)), "changed": changed, "damaged": len(c.damaged()),
            "all_complete": complete,
            "ok": sum(1 for v in per_sample.values() if v[0]["sample_status"] == "ok"),
            "torn_tails_repaired": len(list(path.glob("samples.jsonl.torn-*"))),
            "aborted_raw_kept": len(list((path / "raw" / ".aborted").glob("*"))) if (path / "raw" / ".aborted").exists() else 0,
            "kill_and_resume_wall_s": round(wall, 1),
            "cycles": cycles, "left_after_kills": left, "left_after_final_resume": after_resume,
            "crash_left": crash_left, "clean_exit": res.returncode, "after_clean": after_clean,
            "clean_again": again.stdout.strip().splitlines()[-1] if again.stdout.strip() else ""}


def _set(doc: dict, path: tuple, value) -> dict:
    """A deep copy of ``doc`` with ``path`` (keys and list indexes) set to ``value`` (``DELETE``: removed)."""
    doc = json.loads(json.dumps(doc))
    node = doc
    for k in path[:-1]:
        node = node[k]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


DELETE = object()
RX = ("receivers", 0)
WIFI = (*RX, "interfaces", "wifi", "channel")
PROFILE = ("emulation", "power_profile")


def _inventory_cases() -> dict[str, tuple]:
    """Kind -> (path, value): one change to a good emulated inventory."""
    cases: dict[str, tuple] = {
        "inventory unknown top-level key": (("colour",), "red"),
        "inventory misspelled key (receiver)": (("receiver",), []),
        "inventory unknown receiver key": ((*RX, "colour"), "red"),
        "inventory unknown channel key": ((*WIFI, "rate_mbits"), 5),
        "inventory receiver name a number": ((*RX, "name"), 7),
        "inventory receiver name with spaces": ((*RX, "name"), "n 1"),
        "inventory no receivers": (("receivers",), []),
        "inventory receivers not a list": (("receivers",), "n1"),
        "inventory missing sender": (("sender",), DELETE),
        "inventory sender address not an IP": (("sender", "address"), "nowhere"),
        "inventory kind unknown": (("kind",), "cloud"),
        "inventory schema_version 99": (("schema_version",), 99),
        "inventory missing lte interface": ((*RX, "interfaces", "lte"), DELETE),
        "inventory interface name too long": ((*RX, "interfaces", "wifi", "name"), "w" * 20),
        "inventory meter kind unknown": ((*RX, "meter", "kind"), "um99"),
        "inventory namespace prefix ../x": (("emulation", "namespace_prefix"), "../x"),
        "inventory namespace prefix without mplab-": (("emulation", "namespace_prefix"), "foo-"),
        "inventory sharing unknown": (("emulation", "wifi_ap", "sharing"), "lottery"),
        "inventory wifi sharing on LTE model": (("emulation", "wifi_ap", "sharing"), "proportional-fair"),
        "inventory coexistence 0": (("emulation", "coexistence_factor"), 0),
        "inventory coexistence 2": (("emulation", "coexistence_factor"), 2),
        "inventory radio loop 1000 Hz": (("emulation", "radio_loop_hz"), 1000),
        "inventory missing power profile": (("emulation", "power_profile"), DELETE),
    }
    for field, where in (("rate_mbit", WIFI), ("buffer_ms", WIFI), ("capacity_mbit", ("emulation", "wifi_ap"))):
        for label, value in (("negative", -1), ("zero", 0), ("true", True), ("inf", float("inf")),
                             ("nan", float("nan")), ("1e300", 1e300), ("a string", "fast"), ("null", None)):
            cases[f"inventory {field} {label}"] = ((*where, field), value)
    for field, value in (("delay_ms", -5), ("delay_ms", 5000), ("loss_pct", 100), ("loss_pct", -1)):
        cases[f"inventory {field} {value}"] = ((*WIFI, field), value)
    for field, value in (("base_w", -0.1), ("base_w", 1e9), ("volts", 0), ("volts", 1000), ("base_w", True)):
        cases[f"inventory power profile {field} {value}"] = ((*PROFILE, field), value)
    for field, value in (("active_mw", -1), ("tail_s", 1e6), ("mw_per_mbit", float("inf")), ("tail_s", False)):
        cases[f"inventory wifi power {field} {value}"] = ((*PROFILE, "wifi", field), value)
    return cases


def _scenario_cases() -> dict[str, tuple]:
    """Kind -> (key, value): one change to a good scenario (DELETE: the key removed)."""
    cases: dict[str, tuple] = {
        "scenario misspelled key (sample_per_case)": ("sample_per_case", 3),
        "scenario unknown key": ("colour", "red"),
        "scenario missing samples_per_case": ("samples_per_case", DELETE),
        "scenario missing name": ("name", DELETE),
        "scenario name with a slash": ("name", "a/b"),
        "scenario unknown congestion control": ("congestion_controls", ["reno2"]),
        "scenario congestion controls repeated": ("congestion_controls", ["cubic", "cubic"]),
        "scenario no congestion controls": ("congestion_controls", []),
        "scenario unknown mode": ("modes", ["5g"]),
        "scenario modes repeated": ("modes", ["wifi", "wifi"]),
        "scenario no modes and no policies": ("modes", []),
        "scenario more receivers than the inventory": ("receiver_counts", [12]),
        "scenario receiver count 0": ("receiver_counts", [0]),
        "scenario receiver count true": ("receiver_counts", [True]),
        "scenario receiver count 1e6": ("receiver_counts", [1_000_000]),
        "scenario samples 0": ("samples_per_case", 0),
        "scenario samples -1": ("samples_per_case", -1),
        "scenario samples true": ("samples_per_case", True),
        "scenario samples 10000000": ("samples_per_case", 10_000_000),
        "scenario samples 1e30": ("samples_per_case", 1e30),
        "scenario samples 2.5": ("samples_per_case", 2.5),
        "scenario samples a string": ("samples_per_case", "many"),
        "scenario file size lots": ("file_size", "lots"),
        "scenario file size 0": ("file_size", "0"),
        "scenario file size 1T": ("file_size", "1000G"),
        "scenario file size 400 digits": ("file_size", "9" * 400),
        "scenario transfer timeout inf": ("transfer_timeout_s", float("inf")),
        "scenario transfer timeout nan": ("transfer_timeout_s", float("nan")),
        "scenario transfer timeout 0": ("transfer_timeout_s", 0),
        "scenario transfer timeout 1e300": ("transfer_timeout_s", 1e300),
        "scenario retries 99": ("retries", 99),
        "scenario retries true": ("retries", True),
        "scenario settle -1": ("settle_s", -1),
        "scenario settle 1e9": ("settle_s", 1e9),
        "scenario idle timeout inf": ("idle_timeout_s", float("inf")),
        "scenario idle tolerance -1": ("idle_tolerance_w", -1),
        "scenario seed -1": ("seed", -1),
        "scenario seed 1e400 digits": ("seed", 10 ** 400),
        "scenario seed true": ("seed", True),
        "scenario shuffle a string": ("shuffle", "sometimes"),
        "scenario receiver selection unknown": ("receiver_selection", "random"),
        "scenario policy unknown name": ("policies", ["Bad Name"]),
        "scenario schema_version 2": ("schema_version", 2),
    }
    return cases


def bad_inputs(tmp: Path) -> dict:
    """At least 100 kinds of bad input, each run for real (no --dry-run where a run would build something):
    the exit code, whether the message is clean (one error, no traceback) and whether anything was created
    (the runs directory, a namespace or state under the case's prefix) before the refusal."""
    good_inv = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    quick = yaml.safe_load((REPO / "scenarios" / "quick.yaml").read_text())
    prefix = f"mplab-bbi{uuid.uuid4().hex[:4]}-"
    good_inv["emulation"]["namespace_prefix"] = prefix
    good_inv_path = tmp / "good-inv.yaml"
    good_inv_path.write_text(yaml.safe_dump(good_inv))
    good_sc = {**quick, "inventory": str(good_inv_path), "congestion_controls": ["cubic"], "samples_per_case": 1,
               "file_size": "256K", "receiver_counts": [1], "modes": ["wifi"]}
    good_sc_path = tmp / "good-sc.yaml"
    good_sc_path.write_text(yaml.safe_dump(good_sc))
    cases: dict[str, list[str]] = {}
    n = 0

    def write(name: str, text: str | bytes) -> Path:
        nonlocal n
        n += 1
        p = tmp / f"case{n:03d}-{name}.yaml"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        return p

    for kind, (path, value) in _inventory_cases().items():
        p = write("inv", yaml.safe_dump(_set(good_inv, path, value)))
        cases[kind] = ["run", str(good_sc_path), "--inventory", str(p)]
    for kind, (key, value) in _scenario_cases().items():
        p = write("sc", yaml.safe_dump(_set(good_sc, (key,), value)))
        cases[kind] = ["run", str(p)]
    raw_inv = good_inv_path.read_bytes()
    huge = tmp / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    files_raw = {
        "inventory not UTF-8": raw_inv.replace(b"emulated-9", "émulé".encode("latin-1")),
        "inventory nested 5000 deep": b"a: " + b"[" * 5000 + b"]" * 5000,
        "inventory not YAML": b"a: [1, 2\nb: }",
        "inventory not a mapping": b"- 1\n- 2\n",
        "inventory empty": b"",
        "inventory a duplicated key": raw_inv + b"name: again\n",
        "inventory a tab for indentation": b"kind: emulated\nsender:\n\tname: snd\n",
        "inventory binary junk": bytes(range(256)),
    }
    for kind, data in files_raw.items():
        cases[kind] = ["run", str(good_sc_path), "--inventory", str(write("raw", data))]
    cases["inventory of 50 MB"] = ["run", str(good_sc_path), "--inventory", str(huge)]
    cases["inventory missing"] = ["run", str(good_sc_path), "--inventory", str(tmp / "nope.yaml")]
    cases["inventory is a directory"] = ["run", str(good_sc_path), "--inventory", str(tmp)]
    cases["scenario a duplicated key"] = ["run", str(write("sc", good_sc_path.read_bytes() + b"seed: 3\n"))]
    cases["scenario not UTF-8"] = ["run", str(write("sc", good_sc_path.read_bytes() + "# é\n".encode("latin-1")))]
    cases["scenario missing"] = ["run", str(tmp / "nope-sc.yaml")]
    cases["scenario names a missing inventory"] = ["run", str(write("sc", yaml.safe_dump(
        {**good_sc, "inventory": str(tmp / "gone.yaml")})))]
    sc = str(good_sc_path)
    args_cases = {
        "--id ../x": ["run", sc, "--id", "../x"],
        "--id a/b": ["run", sc, "--id", "a/b"],
        "--id empty": ["run", sc, "--id", ""],
        "--id 101 characters": ["run", sc, "--id", "x" * 101],
        "--testbeds 0": ["run", sc, "--testbeds", "0"],
        "--testbeds -1": ["run", sc, "--testbeds", "-1"],
        "--testbeds 65": ["run", sc, "--testbeds", "65"],
        "--testbeds two": ["run", sc, "--testbeds", "two"],
        "--shard-size 0": ["run", sc, "--cluster", "127.0.0.1:1", "--shard-size", "0"],
        "--cluster with --testbeds 2": ["run", sc, "--cluster", "127.0.0.1:1", "--testbeds", "2"],
        "unknown option": ["run", "--bogus"],
        "unknown command": ["bogus"],
        "missing argument (status)": ["status"],
        "option without its value": ["run", "--inventory"],
        "no scenario and no --resume": ["run"],
        "scenario and --resume both": ["run", sc, "--resume", str(tmp)],
        "--resume of a directory that is no campaign": ["run", "--resume", str(tmp)],
        "--resume of a missing directory": ["run", "--resume", str(tmp / "gone")],
        "status of a directory that is no campaign": ["status", str(tmp)],
        "--prefix outside mplab-": ["clean", "--prefix", "x-"],
        "dataset from no campaign": ["dataset", "build", str(tmp / "nope"), "-o", str(tmp / "d")],
        "dataset build without -o": ["dataset", "build", str(tmp)],
        "calibrate --tolerance 5": ["calibrate", "--tolerance", "5", "--out", str(tmp / "cal.yaml")],
        "cc check of an unknown algorithm": ["cc", "check", "reno2"],
    }
    cases.update(args_cases)
    results = {}
    for kind, args in cases.items():
        runs = tmp / "runs" / f"r{len(results):03d}"
        if args[0] == "run" and "--resume" not in args and "--runs-dir" not in args:
            args = [*args, "--runs-dir", str(runs)]
        res = mplab(*args, timeout=120)
        err = res.stderr.strip()
        created = (runs.exists() and any(runs.iterdir())) or bool(list_namespaces(LocalHost("root"), prefix)) \
            or (STATE_ROOT / prefix.rstrip("-")).exists() or (tmp / "d").exists() or (tmp / "cal.yaml").exists()
        results[kind] = {"exit": res.returncode, "traceback": "Traceback" in res.stderr, "created": created,
                         "message": err.splitlines()[-1][:200] if err else ""}
        if created:
            clean_prefix(prefix)
    clean_prefix(prefix)
    codes: dict[int, int] = {}
    for r in results.values():
        codes[r["exit"]] = codes.get(r["exit"], 0) + 1
    return {"kinds": len(results), "exit_codes": dict(sorted(codes.items())),
            "tracebacks": sum(r["traceback"] for r in results.values()),
            "created_before_refusal": sum(r["created"] and r["exit"] != 0 for r in results.values()),
            "accepted": sorted(k for k, r in results.items() if r["exit"] == 0),
            "results": results}


def signals(tmp: Path) -> dict:
    out = {}
    for signum, name in ((signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")):
        prefix = f"mplab-bsg{uuid.uuid4().hex[:4]}-"
        d = tmp / name
        d.mkdir()
        sc = files(d, prefix, [(20, 8)], {"receiver_counts": [1], "modes": ["wifi"], "samples_per_case": 3,
                                          "file_size": "1M"})
        proc = subprocess.Popen([sys.executable, "-m", "mplab", "run", str(sc), "--runs-dir", str(d / "runs"),
                                 "--id", "s"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not list_namespaces(LocalHost("root"), prefix) and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.send_signal(signum)
            err = proc.communicate(timeout=120)[1]
            last = json.loads((d / "runs" / "s" / "sessions.jsonl").read_text().splitlines()[-1])
            out[name] = {"exit": proc.returncode, "left": leftovers(prefix), "session": last.get("reason"),
                         "stderr": err.strip().splitlines()[-1][:200] if err.strip() else ""}
        finally:
            if proc.poll() is None:
                proc.kill()
            clean_prefix(prefix)
    return out


def order(tmp: Path) -> dict:
    prefix = f"mplab-bor{uuid.uuid4().hex[:4]}-"
    d = tmp / "order"
    d.mkdir()
    sc = files(d, prefix, [(10, 30)], {"receiver_counts": [1], "modes": ["lte", "wifi"], "samples_per_case": 3,
                                       "file_size": "6M", "settle_s": 0, "seed": 8})
    t0 = time.monotonic()
    try:
        res = mplab("run", str(sc), "--runs-dir", str(d / "runs"), "--id", "o", timeout=900)
    finally:
        clean_prefix(prefix)
    wall = time.monotonic() - t0
    recs = {r["sample_id"]: r for r in Campaign.open(d / "runs" / "o").records()}
    a, b = recs["cubic-n1-wifi-s001"], recs["cubic-n1-wifi-s002"]  # after LTE, after WiFi
    lte = [r for r in recs.values() if r["mode"] == "lte"]
    return {"exit": res.returncode, "wall_s": round(wall, 1),
            "wifi_after_lte_j": round(a["energy_j"], 3), "wifi_after_wifi_j": round(b["energy_j"], 3),
            "energy_ratio": round(a["energy_j"] / b["energy_j"], 4),
            "power_ratio": round(a["mean_power_w"] / b["mean_power_w"], 4),
            "lte_idle_wait_s": [r["idle_wait_s"] for r in lte],
            "lte_tail_energy_j": [round(r["tail_energy_j"], 2) for r in lte]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--testbeds", type=int, default=1, help="kills: K parallel testbeds (--testbeds K)")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--only", choices=["kills", "bad", "signals", "order"], action="append")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    parts = args.only or ["bad", "signals", "kills", "order"]
    tmp = Path(tempfile.mkdtemp(prefix="mplab-bench-rel-"))
    out: dict = {}
    try:
        for part in parts:
            t = time.monotonic()
            sub = tmp / part
            sub.mkdir()
            out[part] = {"bad": lambda: bad_inputs(sub), "signals": lambda: signals(sub),  # noqa: B023 - called within this iteration, before the variable moves on
                         "kills": lambda: kills(sub, args.kills, args.seed, args.testbeds), "order": lambda: order(sub)}[part]()  # noqa: B023 - called within this iteration, before the variable moves on
            out[part]["bench_s"] = round(time.monotonic() - t, 1)
            print(json.dumps({part: out[part]}, indent=1), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
