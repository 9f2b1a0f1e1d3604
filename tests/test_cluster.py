"""Campaign shards on a Ray cluster (`mplab run --cluster`): a head and a worker started here, one store.

The cluster is two `ray start --block` nodes on 127.0.0.1, each in its own session with its
own `testbed` resource, stopped by pid (never `ray stop`) even when the test fails. Skipped
without Ray (`uv sync --extra cluster`).
"""
from __future__ import annotations

import collections
import json
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import small_inventory

from harness.campaign import cluster
from harness.campaign.plan import SamplePlan
from harness.config.scenario import Scenario
from harness.errors import ConfigError
from harness.hosts.local import LocalHost
from harness.upkeep.clean import clean_prefix, list_namespaces


def _plans(n: int) -> list[SamplePlan]:
    return [SamplePlan(f"c-s{i:03d}", "c", "cubic", 1, "wifi", i, ("n1",)) for i in range(n)]


def test_shards_keep_the_plan_order():
    plans = _plans(7)
    got = cluster.shards(plans, 3)
    assert [len(s) for s in got] == [3, 3, 1]
    assert [p for s in got for p in s] == plans
    assert cluster.default_shard_size(6075) == 20 and cluster.default_shard_size(10) == 1


@pytest.mark.root
@pytest.mark.timeout(600)
def test_two_node_ray_cluster_runs_one_campaign_and_retries_a_killed_workers_shard(tmp_path, prefix):
    """With a policy among the modes: the node that runs its shard builds its own controller (the driver's
    factory, pickled by reference) and steers its own testbed."""
    from controller.setup2 import control_factory

    try:
        ray = cluster._ray()  # as the driver imports it (no `uv run` runtime env for the workers)
    except ConfigError as exc:
        pytest.skip(str(exc))
    from rigs import raycluster as rc

    inv = small_inventory(prefix, [(10, 8)])
    sc = Scenario(name="cl", congestion_controls=["cubic"], receiver_counts=[1], modes=["wifi", "lte"],
                  policies=["all-lte"], samples_per_case=1, file_size="1M", transfer_timeout_s=30, retries=1,
                  settle_s=0, seed=5)
    workdir = Path(tempfile.mkdtemp(prefix="mplab-ray-", dir="/tmp"))  # short: Ray's unix sockets live here
    port = rc.free_port()
    address = f"127.0.0.1:{port}"
    nodes: list = []
    killed = threading.Event()
    try:
        head = rc.start_node("head", workdir, head=True, port=port, resources={"testbed": 1})
        nodes.append(head)
        rc.wait_port(port, head.proc, head.log, 90)
        worker = rc.start_node("worker", workdir, head=False, address=address, resources={"testbed": 1})
        nodes.append(worker)
        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        try:
            deadline = time.monotonic() + 120
            while ray.cluster_resources().get("testbed", 0) < 2:
                assert worker.proc.poll() is None, worker.log.read_text()[-2000:]
                assert time.monotonic() < deadline, "the worker did not join within 120 s"
                time.sleep(0.5)
            (wid,) = [n["NodeID"] for n in ray.nodes()
                      if n["Alive"] and n.get("NodeManagerPort") == worker.node_manager_port]
        finally:
            ray.shutdown()
        wprefix = cluster.node_prefix(inv, wid)

        def kill_worker_mid_shard():
            # Once the worker's testbed exists (its first shard is running), kill the whole node as a crash.
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if f"{wprefix}n1" in list_namespaces(LocalHost("root"), wprefix, nested=False):
                    time.sleep(1.0)
                    worker.stop(kill=True)
                    killed.set()
                    return
                time.sleep(0.1)

        t = threading.Thread(target=kill_worker_mid_shard, daemon=True)
        t.start()
        c = cluster.start_cluster_campaign(sc, inv, tmp_path, address, campaign_id="cl", shard_size=1,
                                           control_factory=control_factory)
        t.join(5)
    finally:
        for n in reversed(nodes):
            n.stop()
        clean_prefix(prefix)
        left = [p for n in nodes for p in n.pids()]
        shutil.rmtree(workdir, ignore_errors=True)
    assert not left, f"Ray processes left running: {left}"
    assert killed.is_set(), "the worker never started a shard"
    recs = c.records()
    per_sample = collections.Counter(r["sample_id"] for r in recs)
    assert sorted(per_sample) == sorted(c.manifest["plan"]) and set(per_sample.values()) == {1}
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    assert all(r["campaign"] == "cl" for r in recs)
    assert all(r["testbed"].startswith(prefix + "r") for r in recs)  # each node's own testbed
    (pol,) = [r for r in recs if r["policy"] is not None]
    assert pol["assignment"] == pol["mode"] == "lte" and pol["steering"] == "nftables", pol
    assert pol["iface_bytes"]["lte"] >= 2**20 and pol["iface_bytes"]["wifi"] < 64 * 1024, pol  # steered on its node
    assert c.manifest["control"]["instances"].startswith("one per testbed (each Ray node's"), c.manifest["control"]
    # Every sample has its raw output in the one store.
    assert all((c.path / "raw" / sid / "records.json").exists() for sid in per_sample)
    events = [json.loads(x) for x in (c.path / "sessions.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "finished" and events[-1]["cluster_stats"]["samples"] == len(per_sample)


def test_test_rig_nodes_never_share_a_port_or_land_in_a_worker_range(tmp_path):
    # Ray refuses a node two of whose components share a port ("... is trying to use a port number N that
    # is used by other components"), which a worker-port range drawn after the others used to hit now and then.
    import re

    from rigs import raycluster as rc

    gcs = rc.free_port()
    singles: list[int] = [gcs]
    ranges: list[range] = []
    for i in range(12):
        argv = rc.node_argv(head=i == 0, address=None if i == 0 else f"127.0.0.1:{gcs}", port=gcs if i == 0 else None,
                            resources={}, temp_dir=tmp_path, object_store_bytes=2**26,
                            node_manager_port=rc.free_port())
        opts = dict(re.fullmatch(r"--([a-z-]+)=(.*)", a).groups() for a in argv if re.fullmatch(r"--[a-z-]+=\d+", a))
        low, high = int(opts.pop("min-worker-port")), int(opts.pop("max-worker-port"))
        opts.pop("object-store-memory"), opts.pop("num-cpus")
        singles += [int(v) for k, v in opts.items() if k != "port"]
        ranges.append(range(low, high + 1))
    assert len(singles) == len(set(singles)), "a port handed out twice"
    for r in ranges:
        assert not [p for p in singles if p in r], f"a component port inside worker range {r}"
    flat = [p for r in ranges for p in r]
    assert len(flat) == len(set(flat)), "two worker ranges overlap"


def test_a_node_without_the_model_folder_refuses_its_shard_before_building_a_testbed(tmp_path, prefix):
    """run_shard_on (no Ray needed) checks what the shard needs first: a missing or unreadable model folder is a
    NodeLacksInput (a ConfigError, exit 2, which Ray does not retry) naming the node and the path, and no
    namespace of the node's prefix is ever made."""
    inv = small_inventory(prefix, [(20, 10)])
    model = tmp_path / "models" / "m"
    sc = {"name": "c", "congestion_controls": ["cubic"], "receiver_counts": [1], "modes": [],
          "policies": ["ref-is"], "model": str(model), "samples_per_case": 1, "file_size": "1M",
          "transfer_timeout_s": 30, "retries": 0, "settle_s": 0}
    manifest = {"schema_version": 1, "campaign": "c", "scenario": Scenario.model_validate(sc).model_dump(mode="json"),
                "inventory": inv.model_dump(mode="json")}
    node = "abcdef0123456789"
    with pytest.raises(cluster.NodeLacksInput, match=f"abcdef .*{model}") as err:
        cluster.run_shard_on(manifest, ["c-s000"], node)
    assert isinstance(err.value, ConfigError) and err.value.exit_code == 2
    model.mkdir(parents=True)
    (model / "model.onnx").write_bytes(b"")
    (model / "model.onnx").chmod(0)
    if not __import__("os").access(model / "model.onnx", __import__("os").R_OK):  # root reads a mode-0 file
        with pytest.raises(cluster.NodeLacksInput, match="cannot read"):
            cluster.run_shard_on(manifest, ["c-s000"], node)
    assert list_namespaces(LocalHost(), cluster.node_prefix(inv, node), False) == []
