"""Loading YAML into pydantic models, with errors that name the file, the field and the reason."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class Strict(BaseModel):
    """Base for every on-disk config model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_message(exc: ValidationError) -> tuple[str, str]:
    """(field, reason) of the first error, plus a count of the others."""
    errors = exc.errors()
    first = errors[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    reason = first["msg"]
    if first["type"] == "extra_forbidden":
        reason = "unknown field (check its spelling and indentation)"
    if "input" in first and first["type"] not in ("missing", "extra_forbidden"):
        inp = first["input"]
        if not isinstance(inp, (dict, list)):
            reason += f" (got {inp!r})"
    if len(errors) > 1:
        reason += f"; and {len(errors) - 1} more error(s)"
    return _loc(loc), reason


def parse_model(model: type[M], data: object, source: str) -> M:
    """Validate ``data`` as ``model``; raise ``ConfigError`` naming ``source``, the field and the reason."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, reason = validation_message(exc)
        raise ConfigError(reason, source=source, field=field) from None


def load_yaml_model(model: type[M], path: str | Path) -> M:
    """Read a YAML file and validate it as ``model``."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError("file not found", source=str(p)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(p)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError(f"not valid YAML ({getattr(exc, 'problem', exc)})", source=str(p), field=where) from None
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(p))
    return parse_model(model, data, str(p))


def digest_model(obj: BaseModel) -> str:
    """A stable sha256 over a model's JSON form (used as inventory / scenario digests)."""
    return "sha256:" + hashlib.sha256(obj.model_dump_json().encode()).hexdigest()
