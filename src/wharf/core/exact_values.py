"""Parameter values kept exactly through a stored spec (:data:`ExactValues`).

A step run in another process (isolated, on Kubernetes) reads its parameters from the stored
snapshot, and plain JSON does not keep every value a step may be given: a tuple comes back a
list, the key ``1`` comes back ``"1"``, NaN comes back null, and a string holding a lone
surrogate cannot be written at all. So each value plain JSON keeps is stored as it is (what a
person reads in a snapshot), and any other as ``{MARK: tree}``, where ``tree`` tags every
container with its kind (``["tuple", [...]]``, ``["dict", [[key, value], ...]]``) and every
string or float JSON cannot hold; reading the spec turns the tree back into the value.

Invariant: :func:`decode` of :func:`encode` of a value ``json.dumps`` accepts is that value, of
the same types (a subclass of a JSON type comes back as that type: an ``IntEnum`` as its int,
a named tuple as a tuple). A dict whose only key is :data:`MARK` is stored as a tree too, so
no stored value is read back as another; as a parameter itself (:func:`reserved`) it is
refused where steps and pipelines are given values, since a spec built from it would read it
as a tree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

MARK = "__wharf_exact__"


MAX_NESTING = 200
"""Most levels of lists, tuples and dicts in a parameter value (the spec's JSON writer stops
at about 250, the spec's own levels included)."""


def unstorable(value: Any) -> str | None:
    """Why a spec cannot keep ``value`` as a parameter, worded to follow "Parameter 'x' of
    step 's' is"; None if it can."""
    deep = f"nested more than {MAX_NESTING} levels deep, more than a run's record keeps"
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:  # no JSON type; a circular reference; a huge int
        return f"{_a(type(value).__name__)} that JSON cannot write ({exc})"
    except RecursionError:
        return deep
    if _deeper_than(value, MAX_NESTING):
        return deep
    if reserved(value):
        return RESERVED_TEXT
    return None


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _deeper_than(value: Any, limit: int) -> bool:
    """``value`` holds more than ``limit`` levels of containers (walked without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list | tuple):
            continue
        if depth > limit:
            return True
        pending.extend(
            (child, depth + 1) for child in item if isinstance(child, dict | list | tuple)
        )
    return False


def reserved(value: Any) -> bool:
    """``value`` has the shape of a stored tree: no parameter may be such a dict."""
    return isinstance(value, dict) and len(value) == 1 and MARK in value


RESERVED_TEXT = f"a dict whose only key is '{MARK}', which Wharf reserves"


def _kept(value: Any) -> bool:
    """Plain JSON writes ``value`` and reads it back equal, of the same types."""
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, float):
        return math.isfinite(value)
    if value is None or isinstance(value, bool | int):
        return True
    if isinstance(value, list):
        return all(_kept(item) for item in value)
    if isinstance(value, dict):
        if reserved(value):
            return False
        return all(isinstance(k, str) and _utf8(k) and _kept(v) for k, v in value.items())
    return False


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _tree(value: Any) -> Any:
    if isinstance(value, dict):
        return ["dict", [[_tree(k), _tree(v)] for k, v in value.items()]]
    if isinstance(value, tuple):
        return ["tuple", [_tree(item) for item in value]]
    if isinstance(value, list):
        return ["list", [_tree(item) for item in value]]
    if isinstance(value, str):
        return str(value) if _utf8(value) else ["str", value.encode("utf-8", "surrogatepass").hex()]
    if isinstance(value, float) and not math.isfinite(value):
        return ["float", repr(float(value))]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if value is None:
        return None
    raise TypeError(f"A {type(value).__name__} is not a parameter value (JSON values only).")


def _value(tree: Any) -> Any:
    if not isinstance(tree, list):
        return tree
    kind, content = tree
    if kind == "dict":
        return {_value(k): _value(v) for k, v in content}
    if kind == "tuple":
        return tuple(_value(item) for item in content)
    if kind == "list":
        return [_value(item) for item in content]
    if kind == "str":
        return bytes.fromhex(content).decode("utf-8", "surrogatepass")
    if kind == "float":
        return float(content)
    raise ValueError(f"Unknown kind '{kind}' in a stored parameter value.")


def encode(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as stored: each one plain JSON keeps as it is, any other as a tagged tree."""
    return {name: value if _kept(value) else {MARK: _tree(value)} for name, value in values.items()}


def decode(values: Any) -> Any:
    """The values :func:`encode` stored (anything but a dict is left for validation to
    refuse)."""
    if not isinstance(values, dict):
        return values
    return {
        name: _value(value[MARK]) if isinstance(value, dict) and set(value) == {MARK} else value
        for name, value in values.items()
    }


def readable(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as a step run records them for people (plain JSON: a tuple reads as a list):
    a string holding a lone surrogate, which no store can hold, with it written out
    (``\\udcff``)."""
    return {name: _readable(value) for name, value in values.items()}


def _readable(value: Any) -> Any:
    if isinstance(value, str):
        return value if _utf8(value) else value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {_readable(k): _readable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_readable(item) for item in value]
    return value


ExactValues = Annotated[
    dict[str, Any],
    BeforeValidator(decode),
    PlainSerializer(encode, return_type=dict[str, Any]),
]
"""A spec's parameters (name -> value): stored by :func:`encode`, read by :func:`decode`."""
