"""What the cache key holds of loaded code and of the values code holds: those a step's function
closes over (a step made by a factory, ``def make(v): @step def s(): return v``, has one source
for every ``v``), its parameters' defaults that a run does not record (no JSON values), and
the defaults and closed-over values of the functions these reach (a helper the step closes
over, a cache policy's source dependency), and the module-level objects a step reads
(``execution.module_references``).

Owns :func:`closure_values`, :func:`held_values`, :func:`held_value_digest` and
:func:`loaded_code_digest`. A value counts by its content, as an input artifact does: JSON data
(None, bool, int, float, str, lists and str-keyed dicts of them) by its canonical encoding
(``core.cache_key.canonical``); a function, class or module by its loaded code (its bytecode, and a
function's defaults and closed-over values by these rules, its decorators' too: each level of its
``__wrapped__`` chain; a class's attributes by these rules, an enum member by its value); a numpy
array by its dtype, shape and bytes; a container by its items, each by these rules; any other object
by its pickled bytes. Never by ``repr``: a summary (numpy's ``[0, 0, 0, ..., 0, 0, 0]``) or a repr
without the object's state gave two different values one key, a wrong cache hit. A value none of
these reads (it cannot be pickled) is *unhashed*: the key cannot tell it from another of its type,
so a step holding one is not cached (``sdk.compiler.StepDefaults.merge``, ``execution.caching``)
unless its code is left out of its key. Each function, class or module is read once per reading: met
again (a recursive inner function in its own closure), it counts as the order of its first meeting.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import io
import json
import pickle
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import CodeType, ModuleType
from typing import Any

from wharf.core.cache_key import canonical

PICKLE_PROTOCOL = 5
"""Fixed, so that a Python version with another default pickles a value as before."""

_UNBOUND = object()


@dataclass(frozen=True)
class HeldValues:
    """The key's fact of some held values: ``digest`` (None if there are none) and what of them
    it could not read (``'name', a Type (why)``)."""

    digest: str | None
    unhashed: tuple[str, ...] = ()


class UnhashedValueError(Exception):
    """A value the key cannot read (the message says which and why)."""


@dataclass
class _Reading:
    """One reading: the functions, classes and modules met so far, in order (kept, so that
    their ids stay theirs while it lasts)."""

    order: dict[int, int] = field(default_factory=dict)
    kept: list[Any] = field(default_factory=list)
    own_module: str | None = None
    """The module whose functions and classes a pickle names by qualified name and code
    (:func:`held_value_digest`); None: pickled as they are, by module and name."""

    def first_meeting(self, obj: Any) -> int | None:
        """None the first time ``obj`` is met (then remembered); its order after."""
        found = self.order.get(id(obj))
        if found is None:
            self.order[id(obj)] = len(self.order)
            self.kept.append(obj)
        return found


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
    reading = _Reading()
    for name, value in named:
        if value is _UNBOUND:
            parts.append([name, "unbound"])
            continue
        try:
            parts.append([name, _fact(value, reading)])
        except (UnhashedValueError, RecursionError) as exc:
            why = str(exc) if isinstance(exc, UnhashedValueError) else "nested too deep"
            parts.append([name, ["unhashed", _kind(value)]])
            unhashed.append(f"'{name}', a {type(value).__qualname__} ({why})")
    digest = hashlib.sha256(canonical(parts).encode()).hexdigest()
    return HeldValues(digest, tuple(unhashed))


def held_value_digest(value: Any, own_module: str) -> str:
    """SHA-256 of one value's fact by :func:`held_values`' rules, where a function or class of
    ``own_module`` (a script's: ``__main__`` where it runs, ``__wharf_script__`` where an
    orchestrator loads it), in the value or its pickle (an instance's class), counts by its
    qualified name and loaded code, never by its module's name. Raises
    :class:`UnhashedValueError` if the value cannot be read."""
    try:
        fact = _fact(value, _Reading(own_module=own_module))
    except RecursionError as exc:
        raise UnhashedValueError("nested too deep") from exc
    return hashlib.sha256(canonical(fact).encode()).hexdigest()


def loaded_code_digest(obj: Any) -> str:
    """SHA-256 of the code of a function, class or module as loaded in this process: each
    function's bytecode, constants and names (recursively, for nested code), not its file or
    line numbers, and its defaults and closed-over values by content (:func:`held_values`'
    rules; a decorated function's wrappers too); for a class its methods, nested classes and
    attributes (plain data by value, others by these rules, an enum member by its value), for a
    module the functions and classes it defines. The same code holding the same values digests alike
    in any process of the same Python version. Raises :class:`UnhashedValueError` if a value
    it holds cannot be read."""
    try:
        reading = _Reading()
        reading.first_meeting(_unwrapped(obj) if callable(obj) else obj)
        digest = _digest(obj, reading)
        wrappers = _wrappers(obj, reading)
        if not wrappers:
            return digest
        return hashlib.sha256(f"{digest}\0{canonical(wrappers)}".encode()).hexdigest()
    except RecursionError as exc:
        raise UnhashedValueError("nested too deep") from exc


def _fact(value: Any, reading: _Reading) -> Any:
    if _plain_data(value):
        return ["value", canonical(value)]
    code = _code_of(value, reading)
    if code is not None:
        return code
    # a subclass of a container (a namedtuple, a Counter) is pickled: it may hold more
    if type(value) in (list, tuple):
        return [type(value).__name__, [_fact(v, reading) for v in value]]
    if type(value) in (set, frozenset):  # in no particular order
        return ["set", sorted((_fact(v, reading) for v in value), key=_encoded)]
    if type(value) is dict:  # in no particular order, as dicts compare
        items = ([_fact(k, reading), _fact(v, reading)] for k, v in value.items())
        return ["dict", sorted(items, key=_encoded)]
    array = _numpy_array(value)
    if array is not None:
        data = hashlib.sha256(array.tobytes()).hexdigest()
        return ["array", _kind(value), array.dtype.str, list(array.shape), data]
    return ["pickle", _kind(value, reading.own_module), _pickled(value, reading)]


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


def _code_of(value: Any, reading: _Reading) -> list[Any] | None:
    """The fact of a function, class or module (a decorated one's, a step's function's): its
    loaded code's digest, or the order of its first meeting if met before in this reading;
    None for any other value."""
    inner = _unwrapped(value) if callable(value) else value
    if inspect.isfunction(inner) or inspect.isclass(inner) or inspect.ismodule(inner):
        met = reading.first_meeting(inner)
        fact = ["code", _digest(inner, reading)] if met is None else ["met", met]
        wrappers = _wrappers(value, reading)
        return [*fact, wrappers] if wrappers else fact
    return None


def _wrappers(value: Any, reading: _Reading) -> list[Any]:
    """What the decorators around a function hold, each level of its ``__wrapped__`` chain
    outermost first (``@retry(times=3)``'s ``times``): a wrapper function's code, defaults and
    closed-over values (:func:`_function_values`), a ``functools.lru_cache`` wrapper's
    ``cache_parameters()``; other wrappers (a step object) count nothing. Empty if nothing
    wraps it, so that the fact of an undecorated function stays as it was."""
    levels: list[Any] = []
    seen: set[int] = set()
    while callable(value) and not inspect.isclass(value) and id(value) not in seen:
        inner = getattr(value, "__wrapped__", None)
        if inner is None:
            break
        seen.add(id(value))
        code = getattr(value, "__code__", None)
        parameters = getattr(value, "cache_parameters", None)
        if inspect.isfunction(value) and isinstance(code, CodeType):
            met = reading.first_meeting(value)
            if met is not None:
                levels.append(["met", met])
            else:
                values = _function_values(value, code, reading)
                levels.append(["wrapper", _code_bytes(code).hex(), values])
        elif callable(parameters):
            levels.append(["cache", _fact(parameters(), reading)])
        value = inner
    return levels


def _unwrapped(value: Any) -> Any:
    try:
        return inspect.unwrap(value)
    except ValueError:  # a cycle of __wrapped__
        return value


def _digest(obj: Any, reading: _Reading) -> str:
    h = hashlib.sha256()
    target = _unwrapped(obj) if callable(obj) else obj
    target = getattr(target, "__func__", target)  # a bound or class method
    code = getattr(target, "__code__", None)
    if isinstance(code, CodeType):
        h.update(_code_bytes(code))
        h.update(canonical(_function_values(target, code, reading)).encode())
    elif isinstance(target, ModuleType | type):
        owner = target.__name__ if isinstance(target, ModuleType) else target.__module__
        for name, member in sorted(vars(target).items()):
            codes = [
                p
                for p in _parts(member)
                if getattr(p, "__module__", None) == owner
                and (inspect.isfunction(p) or inspect.isclass(p))
            ]
            for part in codes:
                h.update(name.encode() + b"\0")
                met = reading.first_meeting(part)
                h.update(_digest(part, reading).encode() if met is None else b"met:%d" % met)
            wrappers = _wrappers(getattr(member, "__func__", member), reading) if codes else []
            if wrappers:  # a decorated function's decorators (@functools.lru_cache(maxsize=8))
                h.update(f"{name}\0wrapped\0{canonical(wrappers)}".encode())
            plain = not codes and not name.startswith("__") and _plain_data(member)
            if isinstance(target, type) and plain:  # a class attribute of data (rate = 0.1)
                h.update(f"{name}\0{canonical(member)}".encode())
            elif isinstance(target, type) and not codes and _counted_attribute(name, member):
                fact = _attribute_fact(target, name, member, reading)
                h.update(f"{name}\0held\0{canonical(fact)}".encode())
    return h.hexdigest()


def _counted_attribute(name: str, member: Any) -> bool:
    """Whether a class attribute that is no plain data and no code of the class's module
    counts by content: an object (``DEFAULTS = Config(lr=0.1)``), an enum member, a class of
    another module. Not Python's own (``__doc__``), an enum's (``_member_map_``) or abc's
    (``_abc_impl``) attributes, nor descriptors (a function, a property, a slot: methods of
    other modules count as before, not at all)."""
    dunder = name.startswith("__") and name.endswith("__")
    sunder = len(name) > 2 and name[0] == name[-1] == "_" and name[1] != "_"
    if dunder or sunder or name == "_abc_impl" or _plain_data(member):
        return False
    return inspect.isclass(member) or not hasattr(type(member), "__get__")


def _attribute_fact(cls: type, name: str, member: Any, reading: _Reading) -> Any:
    """A class attribute's fact by :func:`_fact`; an enum member by its value (``FAST = 1``),
    not its pickle, which names it."""
    try:
        if isinstance(member, enum.Enum):
            return ["member", type(member).__qualname__, _fact(member.value, reading)]
        return _fact(member, reading)
    except UnhashedValueError as exc:
        where = f"attribute {name} of {cls.__qualname__}, a {type(member).__qualname__}"
        raise UnhashedValueError(f"{where}: {exc}") from exc


def _function_values(func: Any, code: CodeType, reading: _Reading) -> list[Any]:
    """A function's defaults and the values it closes over, each by :func:`_fact`."""
    named: list[tuple[str, Any]] = []
    defaults = getattr(func, "__defaults__", None) or ()
    positional = code.co_varnames[: code.co_argcount]
    named += zip((f"default of {n}" for n in positional[-len(defaults) :]), defaults, strict=False)
    kwdefaults = getattr(func, "__kwdefaults__", None) or {}
    named += ((f"default of {n}", v) for n, v in sorted(kwdefaults.items()))
    for name, cell in zip(code.co_freevars, getattr(func, "__closure__", None) or (), strict=False):
        try:
            named.append((f"closed-over {name}", cell.cell_contents))
        except ValueError:  # not bound yet
            named.append((f"closed-over {name}", _UNBOUND))
    facts = []
    for name, value in named:
        try:
            facts.append([name, "unbound" if value is _UNBOUND else _fact(value, reading)])
        except UnhashedValueError as exc:
            where = f"{name} of {getattr(func, '__qualname__', '?')}"
            raise UnhashedValueError(f"{where}, a {type(value).__qualname__}: {exc}") from exc
    return facts


def _parts(member: Any) -> list[Any]:
    """The functions (or class) behind a class or module attribute."""
    if isinstance(member, property):
        return [p for p in (member.fget, member.fset, member.fdel) if p is not None]
    member = getattr(member, "__func__", member)  # a staticmethod's, a classmethod's
    return [_unwrapped(member)]  # a decorated function's (functools.wraps)


def _code_bytes(code: CodeType) -> bytes:
    consts = []
    for const in code.co_consts:
        if isinstance(const, CodeType):
            consts.append(_code_bytes(const).hex())
        elif isinstance(const, frozenset):  # its order follows string hashing
            consts.append("frozenset" + repr(sorted(repr(c) for c in const)))
        else:  # a literal (number, str, bytes, tuple of them...), whose repr is whole
            consts.append(f"{type(const).__name__}:{const!r}")
    parts = [
        code.co_name,
        code.co_code.hex(),
        code.co_exceptiontable.hex(),
        repr(consts),
        repr(code.co_names),
        repr(code.co_varnames),
        repr(code.co_freevars),
        repr(code.co_cellvars),
        repr((code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount)),
        repr(code.co_flags),
    ]
    return hashlib.sha256("\0".join(parts).encode()).digest()


def _numpy_array(value: Any) -> Any:
    """``value`` as a contiguous numpy array if it is an array or scalar of numpy (not a
    subclass: a masked array's bytes leave its mask out) with no Python objects in it."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not (type(value) is numpy.ndarray or isinstance(value, numpy.generic)):
        return None
    array = numpy.ascontiguousarray(value)
    return None if array.dtype.hasobject else array


def _pickled(value: Any, reading: _Reading) -> str:
    try:
        if reading.own_module is None:
            data = pickle.dumps(value, protocol=PICKLE_PROTOCOL)
        else:
            buffer = io.BytesIO()
            _OwnPickler(buffer, reading).dump(value)
            data = buffer.getvalue()
    except (RecursionError, UnhashedValueError):
        raise
    except Exception as exc:
        raise UnhashedValueError(f"cannot be pickled: {exc}") from exc
    return hashlib.sha256(data).hexdigest()


class _OwnPickler(pickle.Pickler):
    """Pickles a function or class of the reading's own module as its qualified name and its
    loaded code's fact (an instance of a class the script defines: the class's methods count,
    its module's name does not), and a set by its items' facts, sorted (one pickle in every
    process, whatever its ``PYTHONHASHSEED``)."""

    def __init__(self, file: io.BytesIO, reading: _Reading) -> None:
        super().__init__(file, protocol=PICKLE_PROTOCOL)
        self.reading = reading

    def persistent_id(self, obj: Any) -> Any:
        if type(obj) in (set, frozenset):  # pickled in an order string hashing varies
            return canonical(_fact(obj, self.reading))
        if not (inspect.isfunction(obj) or inspect.isclass(obj)):
            return None
        if getattr(obj, "__module__", None) != self.reading.own_module:
            return None
        code = _code_of(obj, self.reading)
        return canonical(["own", obj.__qualname__, code])


def _kind(value: Any, own_module: str | None = None) -> str:
    module = type(value).__module__
    if own_module is not None and module == own_module:
        return f"<own>.{type(value).__qualname__}"
    return f"{module}.{type(value).__qualname__}"


def _encoded(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
