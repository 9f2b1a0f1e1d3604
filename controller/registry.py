"""The policy registry: every policy by name, what it does, its parameters and defaults.

``POLICIES`` maps a name to a ``PolicyInfo``: the factory taking the policy's parameters (a dict
from the scenario or the command line), a one-line summary, the parameters it accepts, and what it
needs besides the probe rates (an energy model; each path's RTT and loss). The reference paper's
policies come from ``controller.policy``, the related schemes from ``controller.related``. A module
of its own so that both can be listed without an import cycle. ``make_policy`` checks every
parameter's name and type against the defaults before a policy is built, so a scenario and
``mplab controller decide --param`` are refused the same way (one line, exit 2).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from harness.errors import ConfigError

from controller import schemes
from controller.policy import Policy, Predict, make_fixed, make_ref_is, make_ref_is_tuned
from controller.related import POWER_KEYS, RELATED

_BAND = ("band", "base")


@dataclass(frozen=True)
class PolicyInfo:
    """A registered policy: how to build it and what to tell a user about it."""

    factory: Callable[..., Policy]
    summary: str
    params: tuple[str, ...] = ()
    #: Its factory takes the energy model's ``predict``.
    needs_model: bool = False
    #: It reads each path's RTT (and loss) besides the probe rates (``PathStats``).
    needs_paths: bool = False
    #: Where the rule comes from when it is not a paper's: mplab's own derivation.
    derived: str | None = None


POLICIES: dict[str, PolicyInfo] = {
    "all-wifi": PolicyInfo(make_fixed("wifi"), "every receiver on WiFi alone (single-path TCP): a baseline"),
    "all-lte": PolicyInfo(make_fixed("lte"), "every receiver on LTE alone (single-path TCP): a baseline"),
    "all-both": PolicyInfo(make_fixed("both"), "every receiver on both networks (MPTCP, no controller): the reference "
                                           "paper's MPTCP baseline"),
    "ref-is": PolicyInfo(make_ref_is, "Interface Selection: both networks when a receiver's WiFi and LTE probe rates "
                                  "are within the band of each other, else its faster network", _BAND),
    "ref-is-tuned": PolicyInfo(make_ref_is_tuned, "Interface Selection, then Tuning: every receiver IS put on both "
                                              "moves to its faster network if the energy model predicts less total "
                                              "energy from throughputs re-measured under each assignment",
                               _BAND, needs_model=True),
    "es-mptcp": PolicyInfo(RELATED["es-mptcp"], "per receiver, the top-k paths by energy per bit (b + theta/x), "
                                                "k maximising throughput per energy for this file size",
                           ("objective", "time_mode", "p_floor", "w0", *POWER_KEYS), needs_paths=True),
    "ee-mptcp": PolicyInfo(RELATED["ee-mptcp"], "per receiver, the top-k paths by energy per bit, k maximising "
                                                "throughput minus energy, with a round-by-round window model",
                           ("w0", "ssthresh0", "objective", "energy_scale", *POWER_KEYS), needs_paths=True),
    "eemptcp": PolicyInfo(RELATED["eemptcp"], "per receiver, the split of its rate across paths that maximises "
                                              "bits per joule under an energy cap, enforced as per-path rate caps",
                          ("emax_mode", "step_mbit", *POWER_KEYS)),
    "mp-sdn": PolicyInfo(RELATED["mp-sdn"], "each receiver's faster network is its primary; the secondaries on a "
                                            "network share a Tier-2 rate limit regulated every EI from its queue "
                                            "occupancy (per-path caps)",
                         ("cth", "alpha", "floor_mbit", "occ_min", "ei_s", "initial_mbit")),  # no power model
    "mp-sdn-energy": PolicyInfo(RELATED["mp-sdn-energy"], "MP-SDN, and a secondary held at the floor for m EIs is "
                                                          "dropped; re-admitted when its network calms down and the "
                                                          "second path pays for itself",
                                ("cth", "alpha", "floor_mbit", "occ_min", "ei_s", "initial_mbit", "m", "margin",
                                 "p0_mw", *POWER_KEYS),
                                derived="the energy rule is mplab's (MP-SDN has no energy variant)"),
    "marginal-efficiency": PolicyInfo(RELATED["marginal-efficiency"], "the best single path by bits per joule with "
                                                                      "the device's base power, plus the other path "
                                                                      "if it beats that alone",
                                      ("p0_mw", *POWER_KEYS), derived="mplab's rule (no paper)"),
}
#: Policies whose factory takes the energy model's ``predict``.
NEEDS_MODEL = frozenset(n for n, i in POLICIES.items() if i.needs_model)

#: What each parameter means (``mplab controller policies``, docs/schemes.md says more).
PARAM_DOCS: dict[str, str] = {
    "band": "IS band: both networks when |R_wifi - R_lte| <= band * base(R_wifi, R_lte)",
    "base": "IS band base: max, min or mean of the two probe rates",
    "objective": "ratio (throughput / energy) or difference (throughput - energy)",
    "time_mode": "completion time by counting rounds, or size / aggregate rate",
    "p_floor": "loss floor of the LIA fixed point (probability)",
    "w0": "initial window (segments)",
    "ssthresh0": "initial slow-start threshold (segments)",
    "energy_scale": "divides the energy term of the difference (mJ per Mbit/s)",
    "emax_mode": "the energy cap E_max: " + ", ".join(schemes.EMAX_MODES),
    "step_mbit": "grid step of the rate split (Mbit/s)",
    "cth": "congestion threshold of queue occupancy (0..1)",
    "alpha": "Tier-2 increase factor",
    "floor_mbit": "least Tier-2 limit per network (Mbit/s)",
    "occ_min": "occupancy floor in the increase rule",
    "ei_s": "execution interval (s)",
    "initial_mbit": "Tier-2 limit before congestion is seen (Mbit/s; null: the network's capacity)",
    "m": "EIs at the floor before a secondary is dropped",
    "margin": "occupancy below cth - margin re-admits a dropped secondary",
    "p0_mw": "the device's base power (mW)",
    "wifi_b": "WiFi power per Mbit/s (mW)", "wifi_theta": "WiFi base power (mW)",
    "lte_b": "LTE power per Mbit/s (mW)", "lte_theta": "LTE base power (mW)",
}


def _no_predict(rows):  # only to read a model policy's defaults; never called
    raise ConfigError("reading defaults: no model")


def parameter_defaults(name: str) -> dict[str, object]:
    """The policy's parameters and their defaults, in the order it declares them."""
    info = _info(name)
    shown = info.factory(**({"predict": _no_predict} if info.needs_model else {})).params()
    power = {f"{net}_{k}": v for net, (b, th) in schemes.PAPER_POWER.items() for k, v in (("b", b), ("theta", th))}
    return {k: shown.get(k, power.get(k)) for k in info.params}


def _info(name: str) -> PolicyInfo:
    try:
        return POLICIES[name]
    except KeyError:
        raise ConfigError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})", field="policies") from None


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_params(name: str, params: Mapping[str, object]) -> dict[str, object]:
    """``params`` checked against the policy's: known names, a number where the default is one (ints as
    floats where the default is a float), text where it is text. Returns them ready for the factory."""
    info = _info(name)
    unknown = sorted(set(params) - set(info.params))
    if unknown:
        takes = f"its parameters are {', '.join(info.params)}" if info.params else "it takes no parameters"
        raise ConfigError(f"policy {name} has no parameter {', '.join(unknown)} ({takes})", field="params")
    defaults = parameter_defaults(name)
    out = {}
    for k, v in params.items():
        d = defaults[k]
        if (_is_number(d) or d is None) and _is_number(v):
            out[k] = float(v) if isinstance(d, float) or d is None else v
        elif isinstance(d, str) and isinstance(v, str):
            out[k] = v
        elif d is None and v is None:
            out[k] = None
        else:
            want = "a number" if _is_number(d) else "a number or null" if d is None else "text"
            raise ConfigError(f"policy {name}: {k} must be {want} (got {v!r})", field=f"params.{k}")
        if _is_number(d) and isinstance(d, int):  # a count (MP-SDN-energy's m): a whole number
            if not float(out[k]).is_integer():
                raise ConfigError(f"policy {name}: {k} must be a whole number (got {v!r})", field=f"params.{k}")
            out[k] = int(out[k])
    return out


def make_policy(name: str, params: Mapping | None = None, predict: Predict | None = None) -> Policy:
    """Build a registered policy by name (``ConfigError`` for an unknown name or bad parameters)."""
    info = _info(name)
    kw: dict = check_params(name, dict(params or {}))
    if info.needs_model:
        kw["predict"] = predict
    try:
        return info.factory(**kw)
    except TypeError as exc:
        raise ConfigError(f"policy {name}: {exc}", field="policies") from None


def describe_params(params: Mapping[str, object]) -> str:
    """``band=0.1, base=max``: parameters as a person reads them (not a Python dict)."""
    def fmt(v: object) -> str:
        if v is None:
            return "null"
        if isinstance(v, float):
            return f"{v:g}"
        return str(v)
    return ", ".join(f"{k}={fmt(v)}" for k, v in params.items()) or "no parameters"
