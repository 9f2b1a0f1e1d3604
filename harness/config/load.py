"""Loading YAML into pydantic models, with errors that name the file, the field and the reason."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: Largest config file mplab reads. Inventories and scenarios are a few KiB; a bigger file is a mistake
#: (a log or a data file named by accident) and would otherwise be parsed whole into memory.
MAX_CONFIG_BYTES = 1024 * 1024


class Strict(BaseModel):
    """Base for every on-disk config model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def validation_message(exc: ValidationError, echo_input: bool = True) -> tuple[str, str]:
    """(field, reason) of the first error, plus a count of the others; the bad value too if ``echo_input``."""
    errors = exc.errors()
    first = errors[0]
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    reason = first["msg"]
    if first["type"] == "extra_forbidden":
        reason = "unknown field (check its spelling and indentation)"
    if echo_input and "input" in first and first["type"] not in ("missing", "extra_forbidden"):
        inp = first["input"]
        if not isinstance(inp, (dict, list)):
            reason += f" (got {inp!r})"
    if len(errors) > 1:
        reason += f"; and {len(errors) - 1} more error(s)"
    return _loc(loc), reason


def parse_model(model: type[M], data: object, source: str, *, echo_input: bool = True) -> M:
    """Validate ``data`` as ``model``; raise ``ConfigError`` naming ``source``, the field and the reason.

    ``echo_input=False`` leaves the offending value out of the message (secrets files).
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, reason = validation_message(exc, echo_input=echo_input)
        raise ConfigError(reason, source=source, field=field) from None
    except RecursionError:
        raise ConfigError("nested too deeply", source=source) from None


def read_config_text(path: str | Path, max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The text of a config file: UTF-8, at most ``max_bytes``; ``ConfigError`` naming the file otherwise."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            data = f.read(max_bytes + 1)  # never more than the limit, whatever the file's size
    except FileNotFoundError:
        raise ConfigError("file not found", source=str(p)) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a file", source=str(p)) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", source=str(p)) from None
    if len(data) > max_bytes:
        raise ConfigError(f"larger than {max_bytes // 1024} KiB; config files are small text files "
                          "(is this the right file?)", source=str(p))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
                          source=str(p)) from None


def parse_yaml(text: str, source: str) -> object:
    """``yaml.safe_load`` with every failure (syntax, absurd nesting) as a ``ConfigError``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise ConfigError(f"not valid YAML ({getattr(exc, 'problem', exc)})", source=source, field=where) from None
    except RecursionError:
        raise ConfigError("nested too deeply to be a config file", source=source) from None


def load_yaml_model(model: type[M], path: str | Path) -> M:
    """Read a YAML file and validate it as ``model``."""
    p = Path(path)
    data = parse_yaml(read_config_text(p), str(p))
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(p))
    return parse_model(model, data, str(p))


def digest_model(obj: BaseModel) -> str:
    """A stable sha256 over a model's JSON form (used as inventory / scenario digests)."""
    return "sha256:" + hashlib.sha256(obj.model_dump_json().encode()).hexdigest()
