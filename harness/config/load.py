"""Loading YAML into pydantic models, with errors that name the file, the field and the reason.

Every validation error is reported (up to ``MAX_ERRORS``), each with its key, its line in the file
when it came from one (``file:line: key: reason``), and for an unknown key the nearest known ones
("did you mean ..."). A key given twice in one mapping is refused with both lines (YAML would let the
last one win silently). Numbers are strict: ``true`` is not a number, and floats must be finite.
"""
from __future__ import annotations

import difflib
import hashlib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from harness.errors import ConfigError

M = TypeVar("M", bound=BaseModel)

#: Largest config file mplab reads. Inventories and scenarios are a few KiB; a bigger file is a mistake
#: (a log or a data file named by accident) and would otherwise be parsed whole into memory.
MAX_CONFIG_BYTES = 1024 * 1024
#: Validation errors reported at most (the rest are counted).
MAX_ERRORS = 20
#: Longest line of a config file. A 10,000-character value is still read (and refused by its field, with
#: its name); a longer line is a data file or a generated blob named by mistake.
MAX_LINE_CHARS = 64 * 1024
#: Most nodes (keys, values, items) a config may hold once its aliases are expanded. The largest inventory
#: (64 receivers) has a few thousand; an alias bomb ("billion laughs": nine lists of nine aliases of the
#: previous one) would expand to 10^9 and take gigabytes to walk or validate.
MAX_NODES = 200_000


def _mentions_bool(annotation: object) -> bool:
    """Whether ``true``/``false`` can be a value of ``annotation`` (or of its items): bool, Any, a bool Literal."""
    if annotation is bool or annotation is Any or annotation is object:
        return True
    if typing.get_origin(annotation) is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    return any(_mentions_bool(a) for a in typing.get_args(annotation))


def _mentions_model(annotation: object) -> bool:
    """Whether ``annotation`` holds a model anywhere (its items are then checked by that model)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_mentions_model(a) for a in typing.get_args(annotation))


def _has_bool(value: object, annotation: object) -> bool:
    """A bool in ``value``: itself, or an item of a list or mapping of plain values (not of models)."""
    if isinstance(value, bool):
        return True
    if _mentions_model(annotation):
        return False
    if isinstance(value, list):
        return any(isinstance(v, bool) for v in value)
    if isinstance(value, dict):
        return any(isinstance(v, bool) for v in value.values())
    return False


class Strict(BaseModel):
    """Base for every on-disk config model: unknown fields are errors, values are frozen, numbers are strict.

    ``true``/``false`` is refused wherever the field is not a boolean (pydantic would read it as 1/0), and
    floats must be finite (``.inf``, ``.nan`` refused).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_numbers(cls, value: object, info: ValidationInfo) -> object:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _has_bool(value, field.annotation) and not _mentions_bool(field.annotation):
            raise ValueError("true/false is not a number or a name here")
        return value


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _clean_loc(loc: tuple) -> tuple:
    # pydantic adds validator names (function-after[...]) and union branches (type names) to a location.
    return tuple(p for p in loc if not (isinstance(p, str) and (p.startswith("function-") or "[" in p)))


def _known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """The field names the model allows at ``loc`` (the mapping an unknown key sits in)."""
    current: object = model
    for part in loc[:-1]:
        if isinstance(current, type) and issubclass(current, BaseModel):
            f = current.model_fields.get(str(part))
            if f is None:
                return []
            current = f.annotation
        current = _unwrap(current, part)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _unwrap(annotation: object, part: object) -> object:
    """The model inside Optional/list/dict of ``annotation``, as the next location part reaches it."""
    for _ in range(4):
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin in (list, tuple) and isinstance(part, int) and args:
            return args[0]
        if origin is dict and len(args) == 2:
            return args[1]
        models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        if models:
            return models[0]
        if origin in (typing.Annotated,) or isinstance(annotation, types.UnionType) or origin is typing.Union:
            annotation = args[0] if args else annotation
            continue
        return annotation
    return annotation


def _reason(err: dict, model: type[BaseModel] | None, echo_input: bool) -> str:
    reason = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        reason = "unknown field (check its spelling and indentation)"
        loc = _clean_loc(err["loc"])
        if model is not None and loc and isinstance(loc[-1], str):
            near = difflib.get_close_matches(loc[-1], _known_keys(model, loc), n=3, cutoff=0.6)
            if near:
                reason += "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    elif echo_input and "input" in err and err["type"] != "missing":
        inp = err["input"]
        if not isinstance(inp, (dict, list)):
            got = repr(inp)
            # A 10,000-character value would bury the message: its start and its length say enough.
            reason += f" (got {got[:60]}... ({len(inp):,} characters))" if len(got) > 80 and isinstance(
                inp, str) else f" (got {got[:80]})"
    return reason


def validation_errors(exc: ValidationError, model: type[BaseModel] | None = None, echo_input: bool = True,
                      lines: dict[tuple, int] | None = None) -> list[tuple[str, int | None, str]]:
    """Every error as (key, line or None, reason), in file order when lines are known."""
    out = []
    for err in exc.errors():
        loc = _clean_loc(err["loc"])
        line = None
        if lines:
            for n in range(len(loc), -1, -1):  # a missing key: the line of the mapping that lacks it
                if loc[:n] in lines:
                    line = lines[loc[:n]]
                    break
        out.append((_loc(loc), line, _reason(err, model, echo_input)))
    if lines:
        out.sort(key=lambda e: (e[1] is None, e[1] or 0))
    return out


def validation_message(exc: ValidationError, echo_input: bool = True) -> tuple[str, str]:
    """(field, reason) of the first error, plus a count of the others; the bad value too if ``echo_input``."""
    errors = validation_errors(exc, echo_input=echo_input)
    field, _, reason = errors[0]
    if len(errors) > 1:
        reason += f"; and {len(errors) - 1} more error(s)"
    return field, reason


def format_errors(errors: list[tuple[str, int | None, str]], source: str) -> str:
    """One line per error (``source:line: key: reason``), at most ``MAX_ERRORS``, then how many more."""
    shown = [f"{source}{f':{line}' if line else ''}: {key}: {reason}" for key, line, reason in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        shown.append(f"... and {len(errors) - MAX_ERRORS} more error(s)")
    head = f"{len(errors)} error(s) in {source}:\n  " if len(errors) > 1 else ""
    return head + "\n  ".join(shown)


def parse_model(model: type[M], data: object, source: str, *, echo_input: bool = True,
                lines: dict[tuple, int] | None = None) -> M:
    """Validate ``data`` as ``model``; raise ``ConfigError`` naming ``source`` and every bad key with its reason.

    ``echo_input=False`` leaves the offending value out of the message (secrets files); ``lines`` (from
    ``parse_yaml_lines``) puts each error's line in the file into the message.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = validation_errors(exc, model, echo_input=echo_input, lines=lines)
        if len(errors) == 1:
            key, line, reason = errors[0]
            raise ConfigError(reason, source=f"{source}:{line}" if line else source, field=key) from None
        raise ConfigError(format_errors(errors, source)) from None
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


def check_line_lengths(text: str, source: str, max_chars: int = MAX_LINE_CHARS) -> None:
    """Refuse a line longer than ``max_chars`` (``ConfigError`` naming its line) before the text is parsed."""
    for number, line in enumerate(text.split("\n"), 1):
        if len(line) > max_chars:
            raise ConfigError(f"line {number} is {len(line):,} characters long (at most {max_chars:,}); "
                              "config files are small text files (is this the right file?)", source=source)


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML lets the last one win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class says so
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (lines {first} and {key_node.start_mark.line + 1}); "
                    "keep one", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


_IN_PROGRESS = -1
#: Deepest nesting of mappings and lists read; configs nest a few levels.
MAX_DEPTH = 100


def check_depth(text: str, source: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse nesting deeper than ``max_depth`` from the parser's events (a loop, not recursion), before
    the recursive composer spends seconds reaching Python's recursion limit on ``[[[[...]]]]``."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > max_depth:
                raise ConfigError(f"nested too deeply to be a config file (more than {max_depth} levels by line "
                                  f"{event.start_mark.line + 1})", source=source)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def check_expansion(node: yaml.Node | None, source: str, max_nodes: int = MAX_NODES) -> None:
    """Refuse a document whose aliases would expand past ``max_nodes`` nodes, before anything expands them.

    ``yaml.compose`` shares one node for an anchor and all its aliases, so the document is a graph no
    bigger than its text; walking it as a tree (the line map, construction, validation) expands every
    alias. Each node's expanded size is counted once (memoised), so the check itself stays linear.
    """
    sizes: dict[int, int] = {}
    aliases = 0

    def size(n: yaml.Node, depth: int) -> int:
        nonlocal aliases
        known = sizes.get(id(n))
        if known == _IN_PROGRESS:
            raise ConfigError(f"line {n.start_mark.line + 1}: an alias (*name) inside the value it names "
                              "(a value that contains itself)", source=source)
        if known is not None:
            aliases += 1
            return known
        if depth > 200:  # configs nest a few levels; Python's own limit is 1000 frames
            raise ConfigError("nested too deeply to be a config file", source=source)
        sizes[id(n)] = _IN_PROGRESS
        total = 1
        if isinstance(n, yaml.MappingNode):
            total += sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total += sum(size(item, depth + 1) for item in n.value)
        sizes[id(n)] = total
        if total > max_nodes:
            raise ConfigError(f"expands to more than {max_nodes:,} values once its aliases (*name) are expanded "
                              f"(an alias bomb?); {aliases} alias(es) seen by line {n.start_mark.line + 1}; "
                              "write the values out", source=source)
        return total

    if node is not None:
        size(node, 0)


def _line_map(node: yaml.Node | None, loc: tuple = (), out: dict[tuple, int] | None = None) -> dict[tuple, int]:
    """Location (as pydantic reports it) -> 1-based line of its key (or item) in the file."""
    out = {} if out is None else out
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key: object = key_node.value
                if key_node.tag.endswith(":int") and key_node.value.lstrip("-").isdigit():
                    key = int(key_node.value)
                out[(*loc, key)] = key_node.start_mark.line + 1
                _line_map(value_node, (*loc, key), out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[(*loc, i)] = item.start_mark.line + 1
            _line_map(item, (*loc, i), out)
    return out


def parse_yaml_lines(text: str, source: str) -> tuple[object, dict[tuple, int]]:
    """``parse_yaml`` and where each key is: (data, location -> line)."""
    check_line_lengths(text, source)
    try:
        check_depth(text, source)
        node = yaml.compose(text, Loader=_Loader)
        check_expansion(node, source)
        data = _Loader(text).get_single_data() if node is not None else None
    except yaml.YAMLError as exc:
        # PyYAML's own types: only a MarkedYAMLError (most, not all, of its errors) carries a position and
        # a problem, so the attributes are looked up on the foreign exception rather than assumed.
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        problem = str(getattr(exc, "problem", None) or exc)
        raise ConfigError(problem if "given twice" in problem else f"not valid YAML ({problem})",
                          source=source, field=where) from None
    except RecursionError:
        raise ConfigError("nested too deeply to be a config file", source=source) from None
    return data, _line_map(node)


def parse_yaml(text: str, source: str) -> object:
    """``yaml.safe_load`` (keys given twice refused) with every failure (syntax, absurd nesting) as a ``ConfigError``."""
    return parse_yaml_lines(text, source)[0]


def load_yaml_model(model: type[M], path: str | Path) -> M:
    """Read a YAML file and validate it as ``model`` (every error with its line)."""
    p = Path(path)
    data, lines = parse_yaml_lines(read_config_text(p), str(p))
    if not isinstance(data, dict):
        raise ConfigError("expected a mapping at the top level", source=str(p))
    return parse_model(model, data, str(p), lines=lines)


def digest_model(obj: BaseModel) -> str:
    """A stable sha256 over a model's JSON form (used as inventory / scenario digests)."""
    return "sha256:" + hashlib.sha256(obj.model_dump_json().encode()).hexdigest()
