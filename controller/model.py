"""An exported energy model as a controller sees it: ``model.onnx`` and ``model.json``, nothing else.

The controller never imports ``training``: it rebuilds each feature vector from the order and
encodings that model.json records (``features.order``, ``features.encodings``) and asks ONNX
Runtime for the energy. ``check_covers`` refuses a model whose validity (the congestion controls,
receiver counts and file size it was trained on) does not cover what a scenario asks for.

``EnergyModel.open`` takes a folder or a registered model (``models:/NAME@alias``,
``models:/NAME/VERSION``), resolved by ``harness.model_registry`` (the one resolver); model.json is
read by ``harness.modelfile`` (the one reader).

Example::

    m = EnergyModel.open("models:/energy@champion")   # or EnergyModel.load("models/quick-setup2")
    m.predict([{"n_receivers": 3, "cc": "cubic", "mode": "both",
                "wifi_throughput_mbit": 12.0, "lte_throughput_mbit": 9.5}])   # -> [joules]
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import ConfigError
from harness.modelfile import read_model_json
from harness.onnxrt import open_session
#: Numeric features a controller can fill in, by name in ``features.order``.
NUMERIC = ("n_receivers", "wifi_throughput_mbit", "lte_throughput_mbit")


@dataclass(frozen=True)
class Validity:
    """What a model was trained on: a scenario outside it is refused."""

    ccs: tuple[str, ...]
    receiver_counts: tuple[int, ...]
    file_bytes: tuple[int, ...]


def _validity(meta: Mapping, source: str) -> Validity:
    v = meta.get("validity")
    if not isinstance(v, Mapping):
        raise ConfigError("model.json has no 'validity' section (congestion controls, receiver counts, file "
                          "size); re-train the model with this mplab (`mplab train`)", source=source,
                          field="validity")
    try:
        return Validity(tuple(v["ccs"]), tuple(int(n) for n in v["receiver_counts"]),
                        tuple(int(b) for b in v["file_bytes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"malformed validity section ({exc})", source=source, field="validity") from None


@dataclass
class EnergyModel:
    """An ONNX Runtime session and the model.json that says how to feed it."""

    session: object
    meta: dict
    order: tuple[str, ...]
    validity: Validity
    path: Path
    input_name: str = "features"
    output_name: str = "energy_j"
    #: What the user named: the folder, or the ``models:/`` reference it was resolved from.
    source: str = ""
    #: Column of each one-hot value and of each numeric feature, worked out once from ``order``
    #: (``matrix`` runs twice per ref-is-tuned decision: no string parsing per row).
    _cc_col: dict[str, int] = field(init=False, repr=False)
    _mode_col: dict[str, int] = field(init=False, repr=False)
    _numeric: tuple[tuple[int, str], ...] = field(init=False, repr=False)
    _outputs: list[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._cc_col = {n[3:]: j for j, n in enumerate(self.order) if n.startswith("cc=")}
        self._mode_col = {n[5:]: j for j, n in enumerate(self.order) if n.startswith("mode=")}
        self._numeric = tuple((j, n) for j, n in enumerate(self.order) if not n.startswith(("cc=", "mode=")))
        self._outputs = [self.output_name]
        self.source = self.source or str(self.path)

    @classmethod
    def load(cls, model_dir: str | Path, threads: int = 1) -> EnergyModel:
        """Open ``models/<name>/``; ``ConfigError`` (exit 2) when it is missing or not one we can read."""
        d = Path(model_dir)
        meta_path = d / "model.json"
        meta = read_model_json(d)  # exists, JSON, a schema_version we read (harness.modelfile)
        try:
            order = tuple(meta["features"]["order"])
        except (KeyError, TypeError):
            raise ConfigError("no features.order", source=str(meta_path), field="features") from None
        for name in order:
            if name not in NUMERIC and not name.startswith(("cc=", "mode=")):
                raise ConfigError(f"feature {name!r} is not one a controller can compute", source=str(meta_path),
                                  field="features.order")
        validity = _validity(meta, str(meta_path))
        # One set-up with training.runtime (harness.onnxrt): caller's thread only, no spinning pool.
        sess = open_session(d / "model.onnx", threads)
        inp = meta.get("input", {}).get("name", "features")
        out = meta.get("output", {}).get("name", "energy_j")
        return cls(sess, meta, order, validity, d, inp, out)

    @classmethod
    def open(cls, ref: str | Path, tracking_uri: str | None = None, threads: int = 1) -> EnergyModel:
        """``load`` for a folder or a registered model (``models:/NAME@alias``, ``models:/NAME/VERSION``).

        The reference names the model in errors and records (``source``); the folder is the verified
        copy ``harness.model_registry.resolve_model`` keeps in its cache.
        """
        from harness.model_registry import resolve_model

        m = cls.load(resolve_model(ref, tracking_uri), threads)
        m.source = str(ref)
        return m

    @property
    def ccs(self) -> tuple[str, ...]:
        return tuple(self._cc_col)

    def matrix(self, rows: Sequence[Mapping]) -> np.ndarray:
        """Feature rows in model.json's order (float32, [n, F]).

        Built as Python lists and converted once: per-element stores into a numpy array cost
        ~0.1 us each, and this runs on every decision.
        """
        width, cc_col, mode_col, numeric = len(self.order), self._cc_col, self._mode_col, self._numeric
        out = []
        for r in rows:
            v = [0.0] * width
            j = cc_col.get(r["cc"])
            if j is None:
                raise ConfigError(f"congestion control {r['cc']!r} is not one the model knows ({list(self.ccs)})",
                                  source=str(self.path), field="cc")
            v[j] = 1.0
            j = mode_col.get(r["mode"])
            if j is not None:  # a mode the model has no column for encodes as all zeros, as before
                v[j] = 1.0
            for j, name in numeric:
                v[j] = float(r[name])
            out.append(v)
        return np.array(out, dtype=np.float32).reshape(len(out), width)

    def predict(self, rows: Sequence[Mapping]) -> np.ndarray:
        """Energy (J) per row; rows carry n_receivers, cc, mode, wifi_throughput_mbit, lte_throughput_mbit."""
        if not rows:
            return np.zeros(0)
        out = self.session.run(self._outputs, {self.input_name: self.matrix(rows)})[0]
        return np.asarray(out, dtype=np.float64).reshape(-1)

    def check_covers(self, ccs: Iterable[str], receiver_counts: Iterable[int], file_bytes: int,
                     source: str = "scenario") -> None:
        """Refuse (``ConfigError``, exit 2) a scenario outside what the model was trained on."""
        v = self.validity
        problems = []
        bad_cc = sorted(set(ccs) - set(v.ccs) - set(self.ccs))
        if bad_cc:
            problems.append(f"congestion control(s) {bad_cc} not in its training data {list(v.ccs)}")
        lo, hi = min(v.receiver_counts), max(v.receiver_counts)
        bad_n = sorted(n for n in receiver_counts if not lo <= n <= hi)
        if bad_n:
            problems.append(f"receiver count(s) {bad_n} outside its training range {lo}..{hi}")
        if file_bytes not in v.file_bytes:
            problems.append(f"file size {file_bytes} B is not the one it was trained for {list(v.file_bytes)} "
                            "(the model predicts the energy of a whole transfer of that size)")
        if problems:
            raise ConfigError(f"model {self.source} does not cover the scenario: " + "; ".join(problems)
                              + "; train a model on a sweep that does (`make setup2`)", source=source, field="model")
