"""Reliability figures for README "Reliability" (issue 14): kills survived with resume, bad inputs refused,
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from harness import machine  # noqa: E402
from harness.machine import STATE_ROOT  # noqa: E402
from harness.testbeds.clean import clean_prefix, list_namespaces  # noqa: E402
from harness.hosts.local import LocalHost  # noqa: E402
from harness.campaign.store import Campaign, incomplete_tail_start  # noqa: E402
from harness.testbeds.claim import claim_path  # noqa: E402


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


def bad_inputs(tmp: Path) -> dict:
    good = yaml.safe_load((REPO / "inventory" / "emulated.yaml").read_text())
    quick = REPO / "scenarios" / "quick.yaml"

    def inv_file(name: str, mutate=None, raw: bytes | None = None) -> Path:
        p = tmp / f"bad-{name}.yaml"
        if raw is not None:
            p.write_bytes(raw)
        else:
            doc = json.loads(json.dumps(good))
            mutate(doc)
            p.write_text(yaml.safe_dump(doc))
        return p

    def sc_file(name: str, **changes) -> Path:
        doc = yaml.safe_load(quick.read_text())
        doc["inventory"] = str(REPO / "inventory" / "emulated.yaml")
        doc.update(changes)
        p = tmp / f"sc-{name}.yaml"
        p.write_text(yaml.safe_dump(doc))
        return p

    huge = tmp / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    cases = {
        "inventory not UTF-8": ("inv", inv_file("latin1", raw=(REPO / "inventory" / "emulated.yaml").read_bytes()
                                                .replace(b"emulated-9", "émulé".encode("latin-1")))),
        "inventory nested 5000 deep": ("inv", inv_file("deep", raw=b"a: " + b"[" * 5000 + b"]" * 5000)),
        "inventory of 50 MB": ("inv", huge),
        "inventory missing": ("inv", tmp / "nope.yaml"),
        "inventory is a directory": ("inv", tmp),
        "inventory not YAML": ("inv", inv_file("notyaml", raw=b"a: [1, 2\nb: }")),
        "inventory not a mapping": ("inv", inv_file("list", raw=b"- 1\n- 2\n")),
        "inventory unknown field": ("inv", inv_file("unknown", lambda d: d.update(colour="red"))),
        "inventory wrong type": ("inv", inv_file("type", lambda d: d["receivers"][0].update(name=7))),
        "inventory negative rate": ("inv", inv_file("neg", lambda d: d["receivers"][0]["interfaces"]["wifi"]
                                                    ["channel"].update(rate_mbit=-1))),
        "inventory no receivers": ("inv", inv_file("none", lambda d: d.update(receivers=[]))),
        "inventory bad prefix": ("inv", inv_file("prefix", lambda d: d["emulation"].update(
            namespace_prefix="../x"))),
        "scenario not UTF-8": ("sc", inv_file("sc-latin1", raw=quick.read_bytes() + "# é\n".encode("latin-1"))),
        "scenario unknown congestion control": ("sc", sc_file("cc", congestion_controls=["reno2"])),
        "scenario unknown mode": ("sc", sc_file("mode", modes=["5g"])),
        "scenario zero samples": ("sc", sc_file("zero", samples_per_case=0)),
        "scenario bad file size": ("sc", sc_file("size", file_size="lots")),
        "scenario more receivers than the inventory": ("sc", sc_file("many", receiver_counts=[12])),
        "scenario unknown field": ("sc", sc_file("field", colour="red")),
        "--id ../x": ("args", ["run", str(quick), "--id", "../x", "--inventory", str(tmp / "nope.yaml")]),
        "--id a/b": ("args", ["run", str(quick), "--id", "a/b", "--inventory", str(tmp / "nope.yaml")]),
        "unknown option": ("args", ["run", "--bogus"]),
        "unknown command": ("args", ["bogus"]),
        "missing argument (status)": ("args", ["status"]),
        "option without its value": ("args", ["run", "--inventory"]),
        "scenario and --resume both": ("args", ["run", str(quick), "--resume", str(tmp)]),
        "--prefix outside mplab-": ("args", ["clean", "--prefix", "x-"]),
        "dataset from no campaign": ("args", ["dataset", "build", str(tmp / "nope"), "-o", str(tmp / "d")]),
    }
    results = {}
    for kind, (role, what) in cases.items():
        if role == "inv":
            args = ["run", str(quick), "--inventory", str(what), "--dry-run"]
        elif role == "sc":
            args = ["run", str(what), "--dry-run"]
        else:
            args = what
        res = mplab(*args)
        clean_msg = "Traceback" not in res.stderr and res.stderr.strip() != ""
        results[kind] = {"exit": res.returncode, "clean": clean_msg,
                         "message": res.stderr.strip().splitlines()[-1][:160] if res.stderr.strip() else ""}
    refused = sum(1 for r in results.values() if r["exit"] == 2 and r["clean"])
    return {"kinds": len(results), "refused_exit_2": refused, "results": results}


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
            out[part] = {"bad": lambda: bad_inputs(sub), "signals": lambda: signals(sub),
                         "kills": lambda: kills(sub, args.kills, args.seed, args.testbeds), "order": lambda: order(sub)}[part]()
            out[part]["bench_s"] = round(time.monotonic() - t, 1)
            print(json.dumps({part: out[part]}, indent=1), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
