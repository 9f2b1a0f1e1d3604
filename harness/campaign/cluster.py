"""Shards of one campaign across machines, through Ray (`mplab run SCENARIO --cluster ADDRESS`).

Ray is an optional dependency (``pip install 'mplab[cluster]'``); without it this module is never
imported and the single-machine path is unchanged.

The driver (the machine that runs `mplab run`) plans the campaign, writes its manifest and
holds its lock, cuts the shuffled plan into shards of consecutive samples and submits one Ray
task per shard. Each task asks for one unit of the custom ``testbed`` resource, so a node
started with ``--resources '{"testbed": 1}'`` runs one shard at a time. On its node a task
builds that node's emulated testbed (namespace prefix ``<prefix>r<node id>-``, so two nodes on
one host never meet), preflights it, runs the shard into a scratch campaign with the same
runner as a local campaign, and returns the records, the raw output (a tar) and the session's
interference. A scenario with policies: the driver sends the controller's factory (``mplab.cli``
mounts ``controller.setup2.control_factory``; Ray pickles it by reference, so every node imports it
from its own checkout) and each task builds its own controller on its own testbed, as each of
``--testbeds K`` copies has its own (the model directory must then be at the same path on every
node). A task whose node dies is retried elsewhere by Ray (``SHARD_RETRIES``); a
failed shard's partial output never reaches the store. The driver gathers each finished shard
into the one campaign store (raw output first, then the records in one append) and skips a
sample already recorded, so every planned sample is recorded once.

Workers need root (network namespaces): start each node's ``ray start`` as root from the same
checkout and virtual environment as the driver (docs/cluster.md). mplab never runs ``ray
stop``: it kills by process name machine-wide.
"""
from __future__ import annotations

import io
import json
import logging
import math
import os
import socket
import tarfile
import tempfile
import time
from pathlib import Path

from harness.campaign.campaign import (
    RunHooks, execute_samples, build_control, build_controls, build_testbeds, campaign_inputs, claimed, create_campaign,
    pending_plans, preflight_or_raise, resolve_ccs,
)
from harness.campaign.control import ControlFactory
from harness.campaign.plan import SamplePlan, plan_campaign, plan_samples
from harness.campaign.runner import SampleOutcome, stop_on_signals
from harness.campaign.store import Campaign, check_writable
from harness.config.inventory import Inventory
from harness.config.scenario import Scenario
from harness.errors import ConfigError, PreflightError, StoreError, missing_extra
from harness.files import atomic_write, owned_temp_dir

log = logging.getLogger("mplab.cluster")

#: The custom Ray resource a node offers per emulated testbed it can run at once.
TESTBED_RESOURCE = "testbed"
#: How often Ray retries a shard whose worker or node died.
SHARD_RETRIES = 3


def _ray():
    # Ray >= 2.4x turns a driver started by `uv run` into a runtime env that re-runs `uv run` on every
    # worker (and packs the working directory): nodes run mplab from their own venv instead (docs/cluster.md).
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    try:
        import ray
    except ImportError:
        raise missing_extra("cluster", "--cluster", "ray") from None
    return ray


#: How long `--cluster HOST:PORT` waits for the head's port to answer before anything is planned or created.
REACH_TIMEOUT_S = 3.0


def check_reachable(address: str, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """Refuse a cluster address that is malformed (``ConfigError``, 2) or whose head does not answer within
    ``timeout_s`` (``PreflightError``, 1), before Ray is imported: ``ray.init`` on a dead address waits minutes
    for its GCS (``Failed to get cluster ID from GCS server: TimedOut``) and does not stop for SIGTERM.

    ``auto`` and ``local`` (Ray finds or starts the cluster itself) are left to Ray.
    """
    if address in ("auto", "local"):
        return
    hostport = address.removeprefix("ray://")
    host, sep, port_text = hostport.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError(f"{address!r} is not a cluster address: HOST:PORT (the head's GCS port, e.g. "
                          "10.0.0.1:6379), ray://HOST:PORT, or auto", field="--cluster")
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s):
            pass
    except socket.gaierror as exc:
        raise PreflightError(f"--cluster {address}: cannot resolve {host!r} ({exc.strerror}); nothing was "
                             "created") from None
    except OSError as exc:
        why = f"no answer within {timeout_s:.0f} s" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise PreflightError(f"--cluster {address}: the head does not answer ({why}); is `ray start --head` running "
                             "there? Nothing was created") from None


def shards(plans: list[SamplePlan], size: int) -> list[list[SamplePlan]]:
    """The plan cut into shards of ``size`` consecutive samples (the plan's shuffled order is kept)."""
    if size < 1:
        raise ConfigError(f"shard size {size}: at least 1", field="shard_size")
    return [plans[i:i + size] for i in range(0, len(plans), size)]


def node_prefix(inventory: Inventory, node_id: str) -> str:
    """The namespace prefix of the testbed a Ray node builds (unique per node, stable across its shards)."""
    return f"{inventory.emulation.namespace_prefix}r{node_id[:6].lower()}-"


class NodeLacksInput(ConfigError):
    """A node lacks something a shard needs (e.g. the policy's model folder): every shard sent to it would fail
    the same way, so this is not retried (an application error; Ray retries those only with retry_exceptions)."""


def check_node_inputs(scenario: Scenario, node_id: str) -> None:
    """Refuse, before this node builds a testbed, a shard whose inputs this node cannot read (the model folder
    a policy scenario names must be at the same path on every node)."""
    if scenario.model is None or scenario.model.startswith("models:/"):
        return  # a registered model: each node pulls it from the registry when it builds its controller
    model = Path(scenario.model)
    if not model.is_dir():
        raise NodeLacksInput(f"Ray node {node_id[:6]} has no model folder {model} (the scenario's model must be "
                             "at the same path on every node)")
    if not os.access(model, os.R_OK | os.X_OK) or any(not os.access(f, os.R_OK) for f in model.iterdir()):
        raise NodeLacksInput(f"Ray node {node_id[:6]} cannot read the model folder {model}")


def run_shard(manifest: dict, sample_ids: list[str], control_factory: ControlFactory | None = None) -> dict:
    """On a worker node: run ``sample_ids`` of the campaign on this node's testbed (with a controller of its
    own, built by ``control_factory``, for policy samples); return what to store."""
    import ray  # only ever called inside a Ray task

    node_id = ray.get_runtime_context().get_node_id()
    return run_shard_on(manifest, sample_ids, node_id, control_factory)


def shard_manifest(manifest: dict, sample_ids: list[str]) -> dict:
    """The manifest of a node's scratch campaign: the driver's, with the shard's samples in its plan (a make-up's
    are not in the manifest's), so that the scratch store takes their records as its own."""
    planned = list(manifest.get("plan") or [])
    known = set(planned)
    return {**{k: v for k, v in manifest.items() if k not in ("schema_version", "campaign")},
            "plan": planned + [sid for sid in sample_ids if sid not in known]}


def run_shard_on(manifest: dict, sample_ids: list[str], node_id: str,
                 control_factory: ControlFactory | None = None) -> dict:
    """``run_shard`` on the node ``node_id`` names (the part that needs no Ray)."""
    with owned_temp_dir("shard") as tmp:  # a node killed mid-shard leaves it to `mplab clean`
        scratch = Campaign.create(Path(tmp), manifest["campaign"], shard_manifest(manifest, sample_ids))
        scenario, inventory = campaign_inputs(scratch)
        check_node_inputs(scenario, node_id)
        # This node's controller, never the driver's: it steers the testbed built here.
        controls = build_controls(scenario, f"{manifest['campaign']} (Ray node {node_id[:6]})", control_factory, 1)
        data = inventory.model_dump(mode="json")
        data["emulation"]["namespace_prefix"] = node_prefix(inventory, node_id)
        inventory = Inventory.model_validate(data)
        (testbed,) = build_testbeds(inventory, 1, False, speedup=scenario.speedup)
        # The node's own prefix, claimed like any campaign's: a second shard (or campaign) on it is refused.
        with stop_on_signals(), claimed([testbed], f"campaign {manifest['campaign']} (Ray node {node_id[:6]})"):
            ccs = resolve_ccs(scenario, testbed)
            preflight_or_raise(testbed, ccs, controls[0] if controls else None)
            execute_samples(scratch, scenario, inventory, [testbed], ccs, plan_samples(scenario, inventory, sample_ids),
                            RunHooks(), controls=controls)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for sid in sample_ids:
                if (scratch.path / "raw" / sid).exists():
                    tar.add(scratch.path / "raw" / sid, arcname=sid)
        return {"node": node_id, "testbed": testbed.name, "records": scratch.records(),
                "raw_tar": buf.getvalue(), "interference": scratch.manifest.get("interference", [])}


def gather(campaign: Campaign, result: dict, plans: dict[str, SamplePlan], hooks: RunHooks) -> list[str]:
    """Store one finished shard: each sample's raw output into place, then its records; returns the samples stored."""
    done = campaign.completed()
    by_sample: dict[str, list[dict]] = {}
    for r in result["records"]:
        if r.get("campaign") != campaign.id:
            raise StoreError(f"shard from node {result['node']} returned a record of campaign {r.get('campaign')!r}")
        by_sample.setdefault(r["sample_id"], []).append(r)
    stored = []
    with tempfile.TemporaryDirectory(prefix="mplab-gather-", dir=campaign.path) as tmp:
        with tarfile.open(fileobj=io.BytesIO(result["raw_tar"]), mode="r:gz") as tar:
            tar.extractall(tmp, filter="data")
        for sid, recs in by_sample.items():
            if sid in done or sid not in plans:
                log.warning("%s: %s from node %s is already recorded (or not planned); skipped", campaign.id, sid,
                            result["node"])
                continue
            src = Path(tmp) / sid
            if src.exists():
                partial = campaign.path / "raw" / f".partial-{sid}"
                if partial.exists():
                    campaign.set_aside(partial)  # a driver crash's leftover: kept, never deleted
                os.replace(src, partial)
                campaign.commit_raw(sid)
            campaign.append(recs)
            stored.append(sid)
            hooks.on_sample(SampleOutcome(plans[sid], recs[0]["sample_status"], recs[0].get("attempts") or 1, recs,
                                          0.0, max((r.get("duration_s") or 0.0) for r in recs)))
    return stored


def run_on_cluster(campaign: Campaign, plans: list[SamplePlan], address: str, *, shard_size: int,
                   hooks: RunHooks, resumed: bool = False, control_factory: ControlFactory | None = None) -> dict:
    """Run ``plans`` as shards on the Ray cluster at ``address`` and gather them into ``campaign``
    (each shard's node builds its own controller with ``control_factory``)."""
    ray = _ray()
    from ray.exceptions import RayTaskError

    ray.init(address=address, logging_level="WARNING", log_to_driver=False)
    stats: dict = {"shards": 0, "samples": 0, "by_node": {}}
    try:
        with stop_on_signals(), campaign.lock():  # SIGTERM/SIGHUP: cancel the shards, log the session
            nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and n["Resources"].get(TESTBED_RESOURCE)]
            if not nodes:
                raise ConfigError(f"the Ray cluster at {address} has no node with a {TESTBED_RESOURCE!r} resource "
                                  f"(start workers with --resources '{{\"{TESTBED_RESOURCE}\": 1}}')")
            campaign.log_session({"event": "resume" if resumed else "start", "pending": len(plans),
                                  "cluster": address, "nodes": len(nodes)})
            hooks.on_start(campaign, plans)
            outcome = "interrupted"
            task = ray.remote(run_shard).options(resources={TESTBED_RESOURCE: 1}, num_cpus=0, max_retries=SHARD_RETRIES)
            by_id = {p.sample_id: p for p in plans}
            pending = {task.remote(campaign.manifest, [p.sample_id for p in shard], control_factory): shard
                       for shard in shards(plans, shard_size)}
            try:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1)
                    pending.pop(ready[0])
                    try:
                        result = ray.get(ready[0])
                    except RayTaskError as exc:
                        if isinstance(exc.cause, NodeLacksInput):  # one line, not the worker's traceback
                            raise NodeLacksInput(str(exc.cause)) from None
                        raise
                    stored = gather(campaign, result, by_id, hooks)
                    stats["shards"] += 1
                    stats["samples"] += len(stored)
                    stats["by_node"][result["testbed"]] = stats["by_node"].get(result["testbed"], 0) + len(stored)
                    for entry in result["interference"]:
                        campaign.manifest.setdefault("interference", []).append({**entry, "node": result["node"]})
                outcome = "finished"
            finally:
                for ref in pending:
                    ray.cancel(ref, force=True)
                _save_manifest(campaign)
                campaign.log_session({"event": outcome, "cluster_stats": stats})
    finally:
        ray.shutdown()
    return stats


def _save_manifest(campaign: Campaign) -> None:
    atomic_write(campaign.path / "manifest.json", (json.dumps(campaign.manifest, indent=2) + "\n").encode())


def default_shard_size(n_plans: int) -> int:
    """Shards small enough to spread and to lose little on a node failure, large enough to amortise set-up."""
    return max(1, min(20, math.ceil(n_plans / 50)))


def start_cluster_campaign(scenario: Scenario, inventory: Inventory, runs_dir: Path, address: str, *,
                           campaign_id: str | None = None, scenario_source: str = "scenario",
                           hooks: RunHooks | None = None, shard_size: int | None = None,
                           control_factory: ControlFactory | None = None) -> Campaign:
    """Plan and create a campaign here, run it on the cluster (each node preflights its own testbed and,
    for policies, builds its own controller)."""
    if inventory.emulation is None:
        raise ConfigError("--cluster runs emulated testbeds on the cluster's nodes; "
                          f"{inventory.name!r} is a {inventory.kind} testbed", field="cluster")
    if len(scenario.speedups) > 1:
        raise ConfigError(f"--cluster runs one speed-up per campaign; this one runs its modes at "
                          f"{', '.join(f'{s:g}' for s in scenario.speedups)}: give one --speedup, or run the modes "
                          "as campaigns of their own", field="cluster")
    check_reachable(address)
    _ray()
    plans = plan_campaign(scenario, inventory, scenario_source)
    # Built here only to refuse a bad policy or model before anything starts, and for the manifest;
    # never set up (each node builds and sets up its own).
    control = build_control(scenario, scenario_source, control_factory)
    check_writable(runs_dir)
    (testbed,) = build_testbeds(inventory, 1, False, speedup=scenario.speedup)
    ccs = resolve_ccs(scenario, testbed)
    campaign = create_campaign(scenario, inventory, runs_dir, plans, testbed, ccs, [], campaign_id=campaign_id,
                               parallel_section={"cluster": address, "started_at": time.time()},
                               controls=[control] if control is not None else None,
                               controls_where="each Ray node's, built on the node")
    run_on_cluster(campaign, plans, address, shard_size=shard_size or default_shard_size(len(plans)),
                   hooks=hooks or RunHooks(), control_factory=control_factory)
    return campaign


def resume_cluster_campaign(path: Path, address: str, *, hooks: RunHooks | None = None,
                            shard_size: int | None = None, control_factory: ControlFactory | None = None) -> Campaign:
    """Run a campaign's samples without records on the cluster."""
    check_reachable(address)
    _ray()
    campaign = Campaign.open(path)
    campaign.check_writable()
    scenario, inventory = campaign_inputs(campaign)
    build_control(scenario, str(campaign.path / "manifest.json"), control_factory)  # refused before anything runs
    with campaign.lock():
        for msg in campaign.repair():
            log.warning("%s: %s", campaign.id, msg)
    plans = pending_plans(campaign, scenario, inventory)
    run_on_cluster(campaign, plans, address, shard_size=shard_size or default_shard_size(len(plans)),
                   hooks=hooks or RunHooks(), resumed=True, control_factory=control_factory)
    return campaign
