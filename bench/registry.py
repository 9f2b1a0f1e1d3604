"""Benchmark: what checksums and the registry cost on a paper-size dataset.

Data: a synthetic campaign of the reference paper's size (5 CCs x 9 receiver counts x 3 modes x
45 samples = 30,375 rows), built with the real builder. Measured in this one run, as ratios:

- ``load_dataset`` with its ``SHA256SUMS`` check (every file, the Parquet one included) against
  the same load without it (the manifest removed from a copy): the price of the new check;
- ``mplab dataset publish`` and ``pull`` (a local SQLite MLflow store, so the network is not
  measured) against copying the folder with ``shutil.copytree``; the pulled copy is compared
  byte for byte.

Run: ``uv run python bench/registry.py [--repeats 5]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from harness.artifacts import SUMS_NAME
from harness.dataset.build import build_dataset, load_dataset
from harness.dataset.registry import publish, pull
from rigs.synthetic import write_synthetic_campaign


def timed(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` calls."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mplab-bench-registry-") as tmp_s:
        tmp = Path(tmp_s)
        os.chdir(tmp)
        os.environ.pop("MLFLOW_TRACKING_URI", None)
        c = write_synthetic_campaign(tmp / "runs", seed=1)
        ds = tmp / "datasets" / "paper"
        res = build_dataset([c.path], ds)
        size_mb = sum(p.stat().st_size for p in ds.iterdir()) / 1e6
        bare = tmp / "bare"
        shutil.copytree(ds, bare)
        (bare / SUMS_NAME).unlink()
        t_check = timed(lambda: load_dataset(ds), args.repeats)
        t_bare = timed(lambda: load_dataset(bare), args.repeats)
        t0 = time.perf_counter()
        v, _ = publish(ds)
        t_publish = time.perf_counter() - t0
        n = [0]

        def pull_once() -> None:
            n[0] += 1
            pull(f"{v.name}@{v.version}", tmp / f"pulled{n[0]}")

        def copy_once() -> None:
            n[0] += 1
            shutil.copytree(ds, tmp / f"copied{n[0]}")

        t_pull = timed(pull_once, args.repeats)
        t_copy = timed(copy_once, args.repeats)
        same = all((tmp / "pulled1" / p.name).read_bytes() == p.read_bytes() for p in ds.iterdir())
        n_files = len(list(ds.iterdir()))
    print(f"dataset: {res.rows} rows, {size_mb:.1f} MB in {n_files} files")
    print(f"load_dataset with SHA256SUMS check {t_check * 1000:.0f} ms vs without {t_bare * 1000:.0f} ms "
          f"(x{t_check / t_bare:.2f})")
    print(f"publish (first time, local sqlite store) {t_publish:.2f} s")
    print(f"pull {t_pull * 1000:.0f} ms vs copytree {t_copy * 1000:.1f} ms (x{t_pull / t_copy:.0f}); "
          f"byte-identical: {same}")


if __name__ == "__main__":
    main()
