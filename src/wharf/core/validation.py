"""Pydantic validation errors as one line of plain words.

Owns: :func:`describe_errors` and :func:`describe_validation_error`, used wherever user input
(CLI options, YAML files, API bodies and query parameters) is validated with pydantic, and
:func:`body_not_json` (an API body that was not sent as JSON).
Invariant: the text is one line, names each bad field as the user wrote it (``classes[0].name``;
never pydantic's union branch tags such as ``constrained-int``), says what a valid value looks
like in plain words, and reports each field once; messages our own validators raise are kept,
without pydantic's ``Value error,`` prefix. Nothing here echoes a long or secret input.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

REQUEST_PARTS = ("body", "query", "path", "header", "cookie")
"""The first location part of an API validation error: where in the request, not a field."""

_TYPE_TAGS = frozenset(
    {"int", "str", "float", "bool", "bytes", "list", "dict", "tuple", "set", "none", "decimal"}
)
"""Names pydantic gives the branches of a union of simple types (``('gpu', 'int')``)."""

_PLAIN: dict[str, str] = {
    "missing": "is required",
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "decimal_parsing": "must be a number",
    "decimal_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "string_unicode": "must be text",
    "bytes_type": "must be text",
    "dict_type": "must be a mapping (KEY: VALUE entries)",
    "model_type": "must be a mapping (KEY: VALUE entries)",
    "model_attributes_type": "must be a mapping (KEY: VALUE entries)",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "frozen_set_type": "must be a list",
    "iterable_type": "must be a list",
    "uuid_parsing": "must be an id (a UUID)",
    "uuid_type": "must be an id (a UUID)",
    "uuid_version": "must be an id (a UUID)",
    "datetime_parsing": "must be a date and time (ISO 8601)",
    "datetime_type": "must be a date and time (ISO 8601)",
    "datetime_from_date_parsing": "must be a date and time (ISO 8601)",
    "date_parsing": "must be a date (YYYY-MM-DD)",
    "date_type": "must be a date (YYYY-MM-DD)",
    "time_delta_parsing": "must be a duration",
    "time_delta_type": "must be a duration",
    "url_parsing": "must be a URL",
    "url_type": "must be a URL",
    "url_scheme": "must be a URL with a supported scheme",
    "json_invalid": "is not valid JSON",
    "json_type": "must be JSON text",
    "string_pattern_mismatch": "is not a valid value",
    "none_required": "must be empty",
    "frozen_field": "cannot be changed",
    "frozen_instance": "cannot be changed",
}

PATTERN_WORDS: dict[str, str] = {
    r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$": (
        "must start with a letter or digit and hold only letters, digits and _ . : -"
        " (at most 128 characters)"
    ),
    r"^[a-z][a-z0-9_\-]{0,63}$": (
        "must start with a lower-case letter and hold only a-z, 0-9, _ and - (at most 64)"
    ),
    r"^[0-9a-f]{1,32}$": "must be hexadecimal digits (at most 32)",
}
"""Plain words for the patterns names and ids must match (keyed by the pattern's text)."""

_TYPE_ONLY = frozenset(t for t in _PLAIN if t.endswith(("_type", "_parsing")))


def describe_validation_error(
    error: ValidationError, title: str | None = None, model: type[BaseModel] | None = None
) -> str:
    """``error`` in plain words on one line, prefixed with ``Invalid {title}: `` if given."""
    return describe_errors(error.errors(include_url=False), title=title, model=model)


def body_not_json(errors: Sequence[Mapping[str, Any]], content_type: str | None) -> str | None:
    """What to tell an API caller whose body the framework did not parse because it was not
    sent as JSON (no ``Content-Type``, or another one): the whole body is then its only error,
    "not an object"; or whose JSON body did not parse (where, and why). None when it was
    sent as JSON, or when something else is wrong."""
    broken = next((e for e in errors if e.get("type") == "json_invalid"), None)
    if broken is not None:  # its location is ("body", offset): no field to name
        location = tuple(broken.get("loc", ()))
        at = f" at position {location[1]}" if len(location) > 1 else ""
        why = (broken.get("ctx") or {}).get("error") or "it does not parse"
        return f"Invalid request: the body is not valid JSON{at}: {why}."
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return None
    if [tuple(e.get("loc", ())) for e in errors] != [("body",)]:
        return None
    if errors[0].get("type") not in ("model_attributes_type", "dict_type", "model_type"):
        return None
    got = f"'{content_type[:100]}'" if content_type else "no Content-Type"
    return (
        f"Invalid request: send the body as JSON with 'Content-Type: application/json' (got {got})."
    )


def describe_errors(
    errors: Iterable[Mapping[str, Any]],
    *,
    title: str | None = None,
    model: type[BaseModel] | None = None,
    drop_prefix: Sequence[str] = (),
) -> str:
    """Errors as pydantic lists them (``type``, ``loc``, ``msg``, ``ctx``, ``input``) in plain
    words. ``drop_prefix``: leading location parts that are no field (``body`` of an API call).
    ``model``: the validated model, to suggest a field for a misspelt top-level one."""
    items = [dict(e) for e in errors]
    locations = _locations(items, drop_prefix)
    by_location: dict[tuple[Any, ...], dict[str, Any]] = {}
    for item, location in zip(items, locations, strict=True):
        if item.get("type") in {"too_short", "too_long"} and any(
            len(other) > len(location) and other[: len(location)] == location for other in locations
        ):
            continue  # "at least 1 item after validation": the items below it failed
        chosen = by_location.get(location)
        if chosen is None or (chosen.get("type") in _TYPE_ONLY and item["type"] not in _TYPE_ONLY):
            by_location[location] = item
    parts = [_sentence(location, item, model) for location, item in by_location.items()]
    text = "; ".join(parts) or "invalid value"
    text = " ".join(text.split())
    return f"Invalid {title}: {text}" if title else text[:1].upper() + text[1:]


def field_path(location: Sequence[Any]) -> str:
    """``('classes', 0, 'name')`` as ``classes[0].name``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _locations(items: list[dict[str, Any]], drop_prefix: Sequence[str]) -> list[tuple[Any, ...]]:
    raw = []
    for item in items:
        loc = tuple(item.get("loc", ()))
        if loc and drop_prefix and loc[0] in drop_prefix:
            loc = loc[1:]
        raw.append(tuple(p for p in loc if not _is_branch_tag(p)))
    tails: dict[tuple[Any, ...], set[Any]] = {}
    for loc in raw:
        if loc and loc[-1] in _TYPE_TAGS:
            tails.setdefault(loc[:-1], set()).add(loc[-1])
    return [
        loc[:-1] if loc and loc[-1] in _TYPE_TAGS and len(tails[loc[:-1]]) > 1 else loc
        for loc in raw
    ]


def _is_branch_tag(part: Any) -> bool:
    return isinstance(part, str) and any(c in part for c in "-[](),'\"")


def _sentence(location: tuple[Any, ...], item: dict[str, Any], model: Any) -> str:
    kind = str(item.get("type", ""))
    ctx = item.get("ctx") or {}
    field = f"'{field_path(location)}'" if location else "the input"
    if kind == "extra_forbidden":
        hint = _closest(location, model)
        return f"{field} is not a known field{hint}"
    if kind in {"too_short", "string_too_short"}:
        least = int(ctx.get("min_length", 1))
        what = "characters" if kind.startswith("string") else "entries"
        return f"{field} must not be empty" if least <= 1 else f"{field} needs {least}+ {what}"
    if kind in {"too_long", "string_too_long"} and ctx.get("max_length") is not None:
        what = "characters" if kind.startswith("string") else "entries"
        return f"{field} takes at most {ctx.get('max_length')} {what}"
    bounds = {
        "greater_than_equal": ("at least", "ge"),
        "greater_than": ("more than", "gt"),
        "less_than_equal": ("at most", "le"),
        "less_than": ("less than", "lt"),
        "multiple_of": ("a multiple of", "multiple_of"),
    }
    if kind in bounds and ctx.get(bounds[kind][1]) is not None:
        words, key = bounds[kind]
        return f"{field} must be {words} {ctx.get(key)}"
    given = "" if _secret(location) else _given(item)
    if kind == "string_pattern_mismatch" and str(ctx.get("pattern")) in PATTERN_WORDS:
        return f"{field} {PATTERN_WORDS[str(ctx['pattern'])]}{given}"
    if kind in {"literal_error", "enum"} and ctx.get("expected") is not None:
        return f"{field} must be {ctx.get('expected')}{given}"
    if kind in _PLAIN:
        return f"{field} {_PLAIN[kind]}{given if kind != 'missing' else ''}"
    message = str(item.get("msg", "is not valid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return f"{field}: {message}" if location else message


def _secret(location: tuple[Any, ...]) -> bool:
    return any(
        isinstance(p, str) and any(w in p.lower() for w in ("password", "key", "token", "secret"))
        for p in location
    )


def _given(item: Mapping[str, Any]) -> str:
    value = item.get("input")
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = repr(value)
        if len(text) <= 40:
            return f" (got {text})"
    return ""


def _closest(location: tuple[Any, ...], model: Any) -> str:
    if model is None or len(location) != 1 or not isinstance(location[0], str):
        return ""
    names = [info.alias or name for name, info in getattr(model, "model_fields", {}).items()]
    close = difflib.get_close_matches(location[0], names, n=1)
    if close:
        return f" (did you mean '{close[0]}'?)"
    return f" (known: {', '.join(names)})" if names else ""
