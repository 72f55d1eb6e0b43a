"""What the cache key holds of the values a step's function holds itself: those it closes over
(a step made by a factory, ``def make(v): @step def s(): return v``, has one source for every
``v``) and its parameters' defaults that a run does not record (no JSON values).

Owns :func:`closure_values`. A value counts by its content, as an input artifact does: JSON
data (None, bool, int, float, str, lists and str-keyed dicts of them) by its canonical
encoding (``core.cache_key.canonical``); a function, class or module by its loaded code
(``execution.caching.loaded_code_digest``); a numpy array by its dtype, shape and bytes; a
container by its items, each by these rules; any other object by its pickled bytes. Never by
``repr``: a summary (numpy's ``[0, 0, 0, ..., 0, 0, 0]``) or a repr without the object's state
gave two different values one key, a wrong cache hit. A value none of these reads (it cannot
be pickled) is *unhashed*: the key cannot tell it from another of its type, so a step holding
one is not cached (``sdk.compiler.StepDefaults.merge``) unless its code is left out of its key.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import pickle
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from wharf.core.cache_key import canonical
from wharf.execution.caching import loaded_code_digest

PICKLE_PROTOCOL = 5
"""Fixed, so that a Python version with another default pickles a value as before."""

_UNBOUND = object()


@dataclass(frozen=True)
class HeldValues:
    """The key's fact of some held values: ``digest`` (None if there are none) and what of them
    it could not read (``'name', a Type (why)``)."""

    digest: str | None
    unhashed: tuple[str, ...] = ()


class _UnhashedError(Exception):
    """A value the key cannot read (the message says why)."""


def closure_values(func: Any) -> HeldValues:
    """The values ``func`` closes over, by name (a cell not bound yet counts as such), then
    its parameters' defaults that are no JSON values (``default of cfg``), which a run does not
    record (``core.step_interface.StepInterface.records``): the function uses them where it
    runs. Its JSON defaults are recorded as the run's parameters, and count as those."""
    named = []
    cells = getattr(func, "__closure__", None) or ()
    code = getattr(func, "__code__", None)
    for name, cell in zip(code.co_freevars if code else (), cells, strict=False):
        try:
            named.append((name, cell.cell_contents))
        except ValueError:  # not bound yet
            named.append((name, _UNBOUND))
    named.extend((f"default of {name}", value) for name, value in _unrecorded_defaults(func))
    return held_values(named) if named else HeldValues(None)


def _unrecorded_defaults(func: Any) -> list[tuple[str, Any]]:
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # no signature to read
        return []
    found = []
    for parameter in parameters:
        if parameter.default is inspect.Parameter.empty:
            continue
        try:
            json.dumps(parameter.default)
        except (TypeError, ValueError):
            found.append((parameter.name, parameter.default))
    return found


def held_values(named: Iterable[tuple[str, Any]]) -> HeldValues:
    """The key's fact of these (name, value) pairs, in their order."""
    parts: list[Any] = []
    unhashed: list[str] = []
    for name, value in named:
        if value is _UNBOUND:
            parts.append([name, "unbound"])
            continue
        try:
            parts.append([name, _fact(value)])
        except (_UnhashedError, RecursionError) as exc:
            why = str(exc) if isinstance(exc, _UnhashedError) else "nested too deep"
            parts.append([name, ["unhashed", _kind(value)]])
            unhashed.append(f"'{name}', a {type(value).__qualname__} ({why})")
    digest = hashlib.sha256(canonical(parts).encode()).hexdigest()
    return HeldValues(digest, tuple(unhashed))


def _fact(value: Any) -> Any:
    if _plain_data(value):
        return ["value", canonical(value)]
    code = _code_of(value)
    if code is not None:
        return ["code", code]
    # a subclass of a container (a namedtuple, a Counter) is pickled: it may hold more
    if type(value) in (list, tuple):
        return [type(value).__name__, [_fact(v) for v in value]]
    if type(value) in (set, frozenset):  # in no particular order
        return ["set", sorted((_fact(v) for v in value), key=_encoded)]
    if type(value) is dict:  # in no particular order, as dicts compare
        return ["dict", sorted(([_fact(k), _fact(v)] for k, v in value.items()), key=_encoded)]
    array = _numpy_array(value)
    if array is not None:
        data = hashlib.sha256(array.tobytes()).hexdigest()
        return ["array", _kind(value), array.dtype.str, list(array.shape), data]
    return ["pickle", _kind(value), _pickled(value)]


def _plain_data(value: Any) -> bool:
    """JSON data, which its canonical encoding tells apart: None, bool, int, float, str (not a
    subclass: an enum member is not its value), lists of them and dicts of them by str (a tuple
    is encoded as a list, so a tuple or a set is counted item by item, tagged)."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) is list:
        return all(_plain_data(v) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain_data(v) for k, v in value.items())
    return False


def _code_of(value: Any) -> str | None:
    """The loaded code's digest of a function, class or module (a decorated one's, a step's
    function's); None for any other value."""
    try:
        inner = inspect.unwrap(value) if callable(value) else value
    except ValueError:  # a cycle of __wrapped__
        inner = value
    if inspect.isfunction(inner) or inspect.isclass(inner) or inspect.ismodule(inner):
        return loaded_code_digest(inner)
    return None


def _numpy_array(value: Any) -> Any:
    """``value`` as a contiguous numpy array if it is an array or scalar of numpy (not a
    subclass: a masked array's bytes leave its mask out) with no Python objects in it."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not (type(value) is numpy.ndarray or isinstance(value, numpy.generic)):
        return None
    array = numpy.ascontiguousarray(value)
    return None if array.dtype.hasobject else array


def _pickled(value: Any) -> str:
    try:
        data = pickle.dumps(value, protocol=PICKLE_PROTOCOL)
    except RecursionError:
        raise
    except Exception as exc:
        raise _UnhashedError(f"cannot be pickled: {exc}") from exc
    return hashlib.sha256(data).hexdigest()


def _kind(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _encoded(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
