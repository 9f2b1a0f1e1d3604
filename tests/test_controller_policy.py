"""Policies: ref-is against a table of probe rates, ref-is-tuned with ONNX models of known weights,
and models whose feature spec does not cover a scenario (refused, exit 2)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.errors import ConfigError

from controller.model import EnergyModel
from controller.policy import Context, Decision, NodeFailed, PathStats, ReceiverMeasurement, RefIS, RefISTuned
from controller.registry import POLICIES, make_policy

ORDER = ["n_receivers", "cc=balia", "cc=cubic", "mode=wifi", "mode=lte", "mode=both",
         "wifi_throughput_mbit", "lte_throughput_mbit"]
CTX = Context(cc="cubic", n_receivers=3, file_bytes=8 * 2**20)


def write_model(d: Path, weights: list[float], bias: float, validity: dict | None = None) -> Path:
    """A linear 'energy model' as ONNX: energy_j = features . weights + bias (one Gemm)."""
    w = numpy_helper.from_array(np.array([weights], dtype=np.float32), "W")
    b = numpy_helper.from_array(np.array([bias], dtype=np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["features", "W", "b"], ["energy_j"], transB=1)], "linear",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", len(ORDER)])],
        [helper.make_tensor_value_info("energy_j", TensorProto.FLOAT, ["n", 1])], [w, b])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.onnx").write_bytes(m.SerializeToString())
    meta = {"schema_version": 1, "features": {"order": ORDER},
            "input": {"name": "features"}, "output": {"name": "energy_j"},
            "validity": validity if validity is not None else
            {"ccs": ["balia", "cubic"], "receiver_counts": [1, 2, 3, 4], "file_bytes": [8 * 2**20]}}
    (d / "model.json").write_text(json.dumps(meta))
    return d


def meas(*rows: tuple[str, float, float]) -> list[ReceiverMeasurement]:
    return [ReceiverMeasurement(rx, {"wifi": w, "lte": lte}) for rx, w, lte in rows]


# (wifi Mbit/s, lte Mbit/s, band, base, expected mode)
IS_TABLE = [
    (10.0, 10.0, 0.10, "max", "both"),
    (10.0, 9.0, 0.10, "max", "both"),      # |1| <= 0.1 * 10: on the band's edge, inclusive
    (10.0, 8.9, 0.10, "max", "wifi"),
    (8.9, 10.0, 0.10, "max", "lte"),
    (10.0, 9.05, 0.10, "min", "wifi"),     # base min: 0.95 > 0.905
    (10.0, 9.0, 0.10, "min", "wifi"),      # base min: 1.0 > 0.9
    (10.0, 9.0, 0.10, "mean", "wifi"),     # 1.0 > 0.95
    (10.0, 9.5, 0.10, "mean", "both"),
    (30.0, 0.0, 0.10, "max", "wifi"),      # a dead LTE path
    (0.0, 5.0, 0.10, "max", "lte"),
    (10.0, 7.0, 0.30, "max", "both"),      # a wider band
    (10.0, 7.0, 0.0, "max", "wifi"),       # band 0: both only when equal
    (5.0, 5.0, 0.0, "max", "both"),
]


@pytest.mark.parametrize("w,lte,band,base,want", IS_TABLE)
def test_ref_is_against_probe_table(w, lte, band, base, want):
    out = RefIS(band=band, base=base).decide(meas(("n1", w, lte)), CTX)
    assert out.assignment["n1"].mode == want
    assert out.trace["params"] == {"band": band, "base": base}


def test_ref_is_whole_assignment_and_dead_node():
    out = RefIS().decide(meas(("n1", 20, 5), ("n2", 5, 20), ("n3", 12, 11.5)), CTX)
    assert {rx: d.mode for rx, d in out.assignment.items()} == {"n1": "wifi", "n2": "lte", "n3": "both"}
    with pytest.raises(NodeFailed, match="n2"):
        RefIS().decide(meas(("n1", 20, 5), ("n2", 0.0, 0.0)), CTX)
    with pytest.raises(ConfigError):
        RefIS(base="median")
    with pytest.raises(ConfigError):
        RefIS(band=1.5)
    # The tuned policy checks the same band when it is made, not at its first decision.
    with pytest.raises(ConfigError, match="band"):
        RefISTuned(lambda rows: [0.0] * len(rows), band=1.5)
    with pytest.raises(ConfigError, match="base"):
        RefISTuned(lambda rows: [0.0] * len(rows), base="median")


def _weights(both: float = 0.0, wifi: float = 0.0, lte: float = 0.0, per_mbit: float = 0.0) -> list[float]:
    w = [0.0] * len(ORDER)
    w[ORDER.index("mode=both")] = both
    w[ORDER.index("mode=wifi")] = wifi
    w[ORDER.index("mode=lte")] = lte
    w[ORDER.index("wifi_throughput_mbit")] = per_mbit
    w[ORDER.index("lte_throughput_mbit")] = per_mbit
    return w


class Recorder:
    """A measurement callback returning fixed rates, remembering the assignments it ran."""

    def __init__(self, rates: dict[str, dict[str, float]]) -> None:
        self.rates = rates
        self.calls: list[dict[str, str]] = []

    def __call__(self, a):
        self.calls.append({rx: d.mode for rx, d in a.items()})
        return {rx: {r: self.rates[rx][r] for r in d.ifaces} for rx, d in a.items()}


M = meas(("n1", 12.0, 11.5), ("n2", 20.0, 4.0), ("n3", 9.0, 9.6))
#: The same receivers with the transport state the related schemes read (RTT, loss, cwnd per path).
M_PATHS = [ReceiverMeasurement(m.receiver, m.probe_mbit, {"wifi": PathStats(0.025, 0.01, 12), "lte": PathStats(0.06, 0.0, 40)})
           for m in M]
RATES = {"n1": {"wifi": 12.0, "lte": 11.0}, "n2": {"wifi": 20.0, "lte": 4.0}, "n3": {"wifi": 9.0, "lte": 9.5}}


def test_ref_is_tuned_replaces_is_when_the_model_says_both_costs_more(tmp_path):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(both=10.0), 50.0))
    rec = Recorder(RATES)
    out = RefISTuned(model.predict).decide(M, CTX, rec)
    assert {rx: d.mode for rx, d in out.assignment.items()} == {"n1": "wifi", "n2": "wifi", "n3": "lte"}
    assert out.trace["adopted"] == "tuned"
    assert out.trace["is_assignment"] == {"n1": "both", "n2": "wifi", "n3": "both"}
    assert out.trace["is_energy_total_j"] == pytest.approx(170.0)
    assert out.trace["tuned_energy_total_j"] == pytest.approx(150.0)
    assert rec.calls == [out.trace["is_assignment"], out.trace["tuned_assignment"]]  # measured under each


def test_ref_is_tuned_keeps_is_when_the_model_says_single_paths_cost_more(tmp_path):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(wifi=8.0, lte=8.0), 50.0))
    out = RefISTuned(model.predict).decide(M, CTX, Recorder(RATES))
    assert {rx: d.mode for rx, d in out.assignment.items()} == {"n1": "both", "n2": "wifi", "n3": "both"}
    assert out.trace["adopted"] == "is"
    # n2 is on wifi in both: 58 + 100 (IS) vs 58 * 3 (tuned)
    assert out.trace["is_energy_total_j"] == pytest.approx(158.0)
    assert out.trace["tuned_energy_total_j"] == pytest.approx(174.0)


def test_ref_is_tuned_uses_measured_throughputs_not_probes(tmp_path):
    # Energy falls with throughput; the measured rates under the tuned assignment are far lower than
    # the probes, so only a policy that re-measures keeps IS.
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(per_mbit=-1.0), 100.0))
    low = {rx: {r: v / 4 for r, v in rates.items()} for rx, rates in RATES.items()}

    def measure(a):
        single = all(len(d.ifaces) == 1 for rx, d in a.items() if rx != "n2")
        src = low if single else RATES
        return {rx: {r: src[rx][r] for r in d.ifaces} for rx, d in a.items()}

    out = RefISTuned(model.predict).decide(M, CTX, measure)
    assert out.trace["adopted"] == "is"


def test_ref_is_tuned_tie_adopts_tuned_and_no_both_needs_no_measurement(tmp_path):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(), 50.0))
    assert RefISTuned(model.predict).decide(M, CTX, Recorder(RATES)).trace["adopted"] == "tuned"
    rec = Recorder(RATES)
    out = RefISTuned(model.predict).decide(meas(("n1", 20, 5), ("n2", 5, 20)), CTX, rec)
    assert out.trace["adopted"] == "is" and rec.calls == []


def test_every_registered_policy_assigns_every_receiver(tmp_path):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(both=1.0), 50.0))
    for name in POLICIES:
        p = make_policy(name, predict=model.predict)
        assert p.name == name
        rec = Recorder(RATES)
        out = p.decide(M_PATHS, CTX, rec)
        assert len(rec.calls) <= p.measures, f"{name} measured more windows than it declares (dry-run ETA)"
        assert set(out.assignment) == {"n1", "n2", "n3"}
        assert all(isinstance(d, Decision) for d in out.assignment.values())
        assert isinstance(p.params(), dict)
    with pytest.raises(ConfigError, match="unknown policy"):
        make_policy("no-such-policy")
    with pytest.raises(ConfigError, match="needs a model"):
        make_policy("ref-is-tuned")
    with pytest.raises(ConfigError):
        make_policy("ref-is", {"bandwidth": 3})


def test_decision_caps_and_validation():
    d = Decision(frozenset({"wifi", "lte"}), caps_mbit={"lte": 5.0})
    assert d.mode == "both" and d.caps_mbit == {"lte": 5.0}
    with pytest.raises(ValueError):
        Decision(frozenset())
    with pytest.raises(ValueError):
        Decision(frozenset({"ethernet"}))


def test_model_matches_known_weights(tmp_path):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(both=10.0, per_mbit=0.5), 50.0))
    e = model.predict([{"n_receivers": 3, "cc": "cubic", "mode": "both", "wifi_throughput_mbit": 4.0,
                        "lte_throughput_mbit": 2.0}])
    assert e.tolist() == pytest.approx([63.0])


@pytest.mark.parametrize("ccs,counts,size,what", [
    (["cubic", "lia"], [2, 3], 8 * 2**20, "congestion control"),
    (["cubic"], [3, 6], 8 * 2**20, "receiver count"),
    (["balia"], [1], 60 * 2**20, "file size"),
])
def test_model_that_does_not_cover_the_scenario_is_refused(tmp_path, ccs, counts, size, what):
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(), 50.0))
    with pytest.raises(ConfigError, match=what) as exc:
        model.check_covers(ccs, counts, size)
    assert exc.value.exit_code == 2
    model.check_covers(["cubic"], [1, 4], 8 * 2**20)  # inside: accepted


def test_model_without_validity_or_with_unknown_features_is_refused(tmp_path):
    d = write_model(tmp_path / "m", _weights(), 50.0)
    meta = json.loads((d / "model.json").read_text())
    del meta["validity"]
    (d / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="validity"):
        EnergyModel.load(d)
    meta["validity"] = {"ccs": ["cubic"], "receiver_counts": [1], "file_bytes": [1]}
    meta["features"]["order"] = ORDER[:-1] + ["rssi_dbm"]
    (d / "model.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="rssi_dbm"):
        EnergyModel.load(d)
    with pytest.raises(ConfigError, match="not an exported model"):
        EnergyModel.load(tmp_path / "nothing")


def _mplab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mplab", *args], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent, env={**__import__("os").environ,
                                                                           "MPLAB_LOG": "ERROR"})


def test_cli_decide_prints_the_assignment_and_refuses_a_model_outside_its_spec(tmp_path):
    model = write_model(tmp_path / "m", _weights(both=10.0), 50.0)
    res = _mplab("controller", "decide", "--model", str(model), "--cc", "cubic", "--probe", "n1=20,5",
                 "--probe", "n2=12,11.5", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["assignment"] == {"n1": "wifi", "n2": "wifi"} and doc["trace"]["adopted"] == "tuned"
    bad = _mplab("controller", "decide", "--model", str(model), "--cc", "lia", "--probe", "n1=20,5")
    assert bad.returncode == 2 and "does not cover" in bad.stderr, bad.stderr
    too_many = _mplab("controller", "decide", "--model", str(model), "--cc", "cubic",
                      *[f"--probe=n{i}=5,5" for i in range(1, 7)])
    assert too_many.returncode == 2 and "receiver count" in too_many.stderr
    garbled = _mplab("controller", "decide", "--policy", "ref-is", "--probe", "n1=fast")
    assert garbled.returncode == 2 and "NAME=WIFI_MBIT,LTE_MBIT" in garbled.stderr


def test_ref_is_tuned_asks_the_model_once_per_decision_on_the_callers_thread(tmp_path):
    """Both assignments' rows go to ONNX Runtime in one run (same energies as one call each), and the
    session is the shared harness.onnxrt set-up: no intra-op pool, no spinning threads."""
    model = EnergyModel.load(write_model(tmp_path / "m", _weights(both=10.0, per_mbit=0.5), 50.0))
    calls = []

    def predict(rows):
        calls.append(len(rows))
        return model.predict(rows)

    pol = RefISTuned(predict)
    out = pol.decide(M, CTX, Recorder(RATES))
    assert calls == [6]  # 3 receivers x (IS, tuned)
    for which in ("is", "tuned"):
        a = {rx: Decision.of(mode) for rx, mode in out.trace[f"{which}_assignment"].items()}
        alone = pol.energies(a, out.trace[f"{which}_throughput_mbit"], CTX)
        assert out.trace[f"{which}_energy_j"] == alone and len(set(alone.values())) > 1
    opts = model.session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 1)
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert opts.get_session_config_entry("session.inter_op.allow_spinning") == "0"


def test_a_slow_log_handler_is_not_counted_as_decision_latency(tmp_path):
    """The decision latency the records carry is the decision itself: a log handler that takes 300 ms
    runs after the clock stops, and the log line still says what the trace says."""
    import logging
    import time

    from controller.policy import timed_decide

    class Slow(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record):
            time.sleep(0.3)
            self.lines.append(record.getMessage())

    model = EnergyModel.load(write_model(tmp_path / "m", _weights(both=10.0), 50.0))
    pol = RefISTuned(model.predict)
    pol.decide(M, CTX, Recorder(RATES))  # warm the session: the first run is not what is measured here
    slow, logger = Slow(), logging.getLogger("mplab")
    old_level = logger.level
    logger.addHandler(slow)
    logger.setLevel(logging.DEBUG)
    try:
        out, latency_s = timed_decide(pol, M, CTX, Recorder(RATES))
    finally:
        logger.removeHandler(slow)
        logger.setLevel(old_level)
    assert slow.lines, "the decision is still logged"
    assert "-> tuned" in slow.lines[-1] and out.trace["adopted"] == "tuned"
    assert 0 <= latency_s < 0.15  # 0.3 s per log call if any handler ran inside the timed span


def test_policies_lists_every_policy_with_its_paper_parameters_and_defaults():
    res = _mplab("controller", "policies", "--json")
    assert res.returncode == 0, res.stderr
    docs = {d["name"]: d for d in json.loads(res.stdout)}
    assert set(docs) == set(POLICIES)
    assert docs["ref-is"]["params"] == {"band": 0.1, "base": "max"}
    assert docs["es-mptcp"]["params"]["w0"] == 10.0 and docs["es-mptcp"]["params"]["lte_theta"] == 1288.0
    assert "Electronics 2022, 11(3), 490" in docs["es-mptcp"]["paper"] and "Dong" in docs["es-mptcp"]["paper"]
    assert "Shams" in docs["ref-is-tuned"]["paper"] and "energy model" in " ".join(docs["ref-is-tuned"]["needs"])
    assert docs["marginal-efficiency"]["paper"] is None and "no paper" in docs["marginal-efficiency"]["derived"]
    assert "RTT" in " ".join(docs["ee-mptcp"]["needs"])
    text = _mplab("controller", "policies")
    assert text.returncode == 0 and "--param band=0.1" in text.stdout and "{'" not in text.stdout


def test_decide_takes_rtt_loss_and_params_offline():
    """es-mptcp without an RTT: one line naming it, exit 2; with per-path RTT and loss: a decision whose
    inputs are the ones given (a 25 ms 1 %-loss WiFi path beside a lossless 65 ms LTE one)."""
    base = ("controller", "decide", "--policy", "es-mptcp", "--probe", "n1=20,5", "--probe", "n2=3,4")
    missing = _mplab(*base)
    assert missing.returncode == 2 and "RTT" in missing.stderr and "--rtt" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    res = _mplab(*base, "--rtt", "wifi=25ms", "--rtt", "lte=0.065s", "--rtt", "n2:lte=80", "--loss", "wifi=1%",
                 "--file-size", "600K", "--param", "objective=difference", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["paths"]["n1"]["wifi"] == {"rtt_s": pytest.approx(0.025), "loss": pytest.approx(0.01)}
    assert doc["paths"]["n1"]["lte"]["rtt_s"] == pytest.approx(0.065)
    assert doc["paths"]["n2"]["lte"]["rtt_s"] == pytest.approx(0.080)  # per receiver beats for every receiver
    assert doc["params"]["objective"] == "difference" and doc["file_bytes"] == 600 * 1024
    assert set(doc["assignment"]) == {"n1", "n2"}
    ee = _mplab("controller", "decide", "--policy", "ee-mptcp", "--probe", "n1=20,5", "--rtt", "wifi=25ms",
                "--rtt", "lte=65ms")
    assert ee.returncode == 0, ee.stderr
    assert "w0=10, ssthresh0=64" in ee.stdout and "{'" not in ee.stdout  # parameters readable, not a dict
    for bad, needle in ((("--param", "nope=1"), "no parameter nope"), (("--param", "band=wide"), "band must be"),
                        (("--rtt", "wifi=fast"), "not a positive time"), (("--loss", "lte=150%"), "not a loss")):
        r = _mplab("controller", "decide", "--policy", "ref-is", "--probe", "n1=20,5", *bad)
        assert r.returncode == 2 and needle in r.stderr, (bad, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_decide_shows_caps_in_the_table():
    res = _mplab("controller", "decide", "--policy", "eemptcp", "--probe", "n1=10,4", "--probe", "n2=6,6",
                 "--param", "step_mbit=0.5")
    assert res.returncode == 0, res.stderr
    js = json.loads(_mplab("controller", "decide", "--policy", "eemptcp", "--probe", "n1=10,4", "--probe",
                           "n2=6,6", "--param", "step_mbit=0.5", "--json").stdout)
    assert js["caps_mbit"], "eemptcp's split is a per-path cap"
    assert "caps Mbit/s" in res.stdout
    for caps in js["caps_mbit"].values():
        for net, mbit in caps.items():
            assert f"{net} <= {mbit:.3g}" in res.stdout


def test_scenario_params_are_checked_by_name_and_type():
    with pytest.raises(ConfigError, match="no parameter cwnd"):
        make_policy("es-mptcp", {"cwnd": 3})
    with pytest.raises(ConfigError, match="must be a number"):
        make_policy("mp-sdn", {"cth": "high"})
    with pytest.raises(ConfigError, match="whole number"):
        make_policy("mp-sdn-energy", {"m": 2.5})
    assert make_policy("mp-sdn-energy", {"m": 2}).params()["m"] == 2
    assert make_policy("ref-is", {"band": 0}).params()["band"] == 0.0
