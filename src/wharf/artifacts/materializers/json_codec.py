"""A lossless JSON encoding of plain Python data, shared by the built-in and pandas materializers.

"Plain data" is ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` and ``list``,
``tuple``, ``dict``, ``set``, ``frozenset`` of plain data, with *exact* types (subclasses could
not be rebuilt). Entry points: :func:`encode`/:func:`decode`, :func:`dumps`/:func:`loads`.

Invariants: ``decode(encode(value))`` rebuilds ``value`` with the same types and every float
bit; anything not plain makes :func:`encode` raise :class:`NotPlainDataError`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

TAG = "$type"
MAX_INT_BITS = 13_000
"""Larger ints exceed Python's default int-to-str digit limit; they are not plain data here."""


class NotPlainDataError(TypeError):
    """The value contains something :func:`encode` cannot represent losslessly."""


def dumps(value: object) -> str:
    """The JSON text of ``value``; raises :class:`NotPlainDataError`."""
    return json.dumps(encode(value), separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    return decode(json.loads(text))


def is_plain(value: object) -> bool:
    try:
        encode(value)
    except (NotPlainDataError, RecursionError):
        return False
    return True


def encode(value: object) -> Any:
    """``value`` as a JSON-compatible tree; :class:`NotPlainDataError` if it is not plain.

    Lists and dicts whose keys are all strings are written as native JSON. Everything else is
    a tagged object ``{"$type": <tag>, ...}``: tuples, sets and frozensets (``items``), dicts
    with a non-string key or a ``"$type"`` key (``items``: ``[key, value]`` pairs) and bytes
    (``base64``). Set items are sorted by their canonical JSON, so equal sets encode to equal
    text whatever the hash seed. Floats keep every bit (``repr``), including ``NaN`` and
    ``Infinity`` as Python's ``json`` module writes them. Dict order is preserved.
    """
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        t = type(value)
        raise NotPlainDataError(f"{t.__module__}.{t.__qualname__} is not plain data")
    return encoder(value)


def _same(value: Any) -> Any:
    return value


def _int(value: int) -> int:
    if value.bit_length() > MAX_INT_BITS:
        raise NotPlainDataError("int too large for JSON")
    return value


def _list(value: list[Any]) -> list[Any]:
    return [encode(item) for item in value]


def _dict(value: dict[Any, Any]) -> dict[str, Any]:
    if TAG not in value and all(type(key) is str for key in value):
        return {key: encode(item) for key, item in value.items()}
    return {TAG: "dict", "items": [[encode(k), encode(v)] for k, v in value.items()]}


def _tuple(value: tuple[Any, ...]) -> dict[str, Any]:
    return {TAG: "tuple", "items": [encode(item) for item in value]}


def _set(value: set[Any] | frozenset[Any]) -> dict[str, Any]:
    encoded = [encode(item) for item in value]
    encoded.sort(key=_canonical)
    return {TAG: type(value).__name__, "items": encoded}


def _bytes(value: bytes) -> dict[str, Any]:
    return {TAG: "bytes", "base64": base64.b64encode(value).decode("ascii")}


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    type(None): _same,
    bool: _same,
    float: _same,
    str: _same,
    int: _int,
    list: _list,
    dict: _dict,
    tuple: _tuple,
    set: _set,
    frozenset: _set,
    bytes: _bytes,
}


def decode(tree: Any) -> Any:
    """The inverse of :func:`encode`."""
    if isinstance(tree, list):
        return [decode(item) for item in tree]
    if not isinstance(tree, dict):
        return tree
    tag = tree.get(TAG)
    if tag is None:
        return {key: decode(item) for key, item in tree.items()}
    if tag == "tuple":
        return tuple(decode(item) for item in tree["items"])
    if tag == "set":
        return {decode(item) for item in tree["items"]}
    if tag == "frozenset":
        return frozenset(decode(item) for item in tree["items"])
    if tag == "dict":
        return {decode(key): decode(item) for key, item in tree["items"]}
    if tag == "bytes":
        return base64.b64decode(tree["base64"])
    raise ValueError(f"Unknown JSON tag {tag!r}.")


def _canonical(tree: Any) -> str:
    return json.dumps(tree, sort_keys=True, separators=(",", ":"))
