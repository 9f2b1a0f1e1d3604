"""The policy registry: every policy by name, built from its scenario parameters.

``POLICIES`` maps a name to a factory taking the policy's parameters (a dict from the scenario or
the command line): the reference paper's policies from ``controller.policy``, the related schemes
from ``controller.related``. A module of its own so that both can be listed without an import cycle.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from harness.errors import ConfigError

from controller.policy import Policy, Predict, _fixed, _ref_is, _ref_is_tuned
from controller.related import RELATED

#: Policy name -> factory(**params). ``predict`` is passed to the factories that need a model.
POLICIES: dict[str, Callable[..., Policy]] = {
    "all-wifi": _fixed("wifi"),
    "all-lte": _fixed("lte"),
    "all-both": _fixed("both"),
    "ref-is": _ref_is,
    "ref-is-tuned": _ref_is_tuned,
    **RELATED,
}
#: Policies whose factory takes the energy model's ``predict``.
NEEDS_MODEL = frozenset({"ref-is-tuned"})


def make_policy(name: str, params: Mapping | None = None, predict: Predict | None = None) -> Policy:
    """Build a registered policy by name (``ConfigError`` for an unknown name or bad parameters)."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ConfigError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})", field="policies") from None
    kw = dict(params or {})
    if name in NEEDS_MODEL:
        kw["predict"] = predict
    try:
        return factory(**kw)
    except TypeError as exc:
        raise ConfigError(f"policy {name}: {exc}", field="policies") from None
