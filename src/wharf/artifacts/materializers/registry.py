"""Which materializer saves a value, and the import paths recorded with each artifact.

Owns :class:`MaterializerRegistry`, :func:`default_registry` and the ``module:qualname``
import-path helpers. There is no module-level registry: build one with :func:`default_registry`
at an entry point and pass it on (one per process is typical).

Invariants: a registry never imports numpy or pandas by itself (lazy registration); loading by
recorded import path (:func:`load_materializer`, :func:`load_type`) never imports a module named
by stored data; it finds a class of the user's script under either of the script's module names
(``__main__``, ``__wharf_script__``: :mod:`~wharf.artifacts.materializers.script_classes`),
whichever process recorded the path, and only in a process running the script that recorded it
(:func:`recorded_path` names it; a path recorded without it warns that the class may be
another script's).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import types
import typing
import warnings
from typing import Any

from wharf.artifacts.materializers.base import Materializer
from wharf.artifacts.materializers.builtin import BuiltInContainerMaterializer, BuiltInMaterializer
from wharf.artifacts.materializers.cloudpickle_materializer import CloudpickleMaterializer
from wharf.artifacts.materializers.script_classes import (
    live_script_class,
    running_script,
    script_aliases,
    script_file_of,
    split_script_file,
    with_script_file,
)
from wharf.core.errors import MaterializationError

_MATERIALIZERS = "wharf.artifacts.materializers"
_LAZY_DEFAULTS = (
    ("numpy", f"{_MATERIALIZERS}.numpy_materializer:NumpyMaterializer"),
    ("pandas", f"{_MATERIALIZERS}.pandas_materializer:PandasMaterializer"),
)


class UnresolvedClassError(MaterializationError):
    """A recorded type or materializer names a class this process does not have: its module is
    not imported here, or it is a class of the pipeline's script that this process lacks."""


class ScriptClassError(UnresolvedClassError):
    """A recorded class was defined in the ``__main__`` of the script ``script`` (its file name)
    that made the artifact, and this process does not run that script."""

    def __init__(self, message: str, script: str) -> None:
        super().__init__(message)
        self.script = script


def type_path(t: type) -> str:
    """The ``module:qualname`` import path of a class (recorded as an artifact's data type)."""
    return f"{t.__module__}:{t.__qualname__}"


def recorded_path(t: type) -> str:
    """The import path recorded with an artifact for its data type or materializer: the
    ``module:qualname`` of :func:`type_path`, and for a class of the user's script the script's
    file name (``__main__:Point@train.py``), so that it loads only where that script runs."""
    return with_script_file(type_path(t), t)


def load_type(path: str) -> type:
    """The class at ``module:qualname`` in an already imported module; ``MaterializationError``
    otherwise (the module is never imported: the path may come from stored data). A class of a
    script (``__main__:Point@train.py``) is found only in a process running that script."""
    if path == "builtins:NoneType":
        return type(None)
    module_name, qualname = _split_path(path, "type")
    qualname, script = split_script_file(module_name, qualname)
    if script is not None:
        return _script_class(path, qualname, script, "type")
    modules = [sys.modules[n] for n in script_aliases(module_name) if n in sys.modules]
    if not modules:
        raise UnresolvedClassError(
            f"Cannot load type {path!r}: module {module_name!r} is not imported in this process "
            "(recorded import paths are never imported); import it first."
        )
    # the first that has it: a script's class may be under its other name (script_classes)
    module = next((m for m in modules if _has_attribute(m, qualname)), None)
    if module is None and len(script_aliases(module_name)) > 1:
        raise UnresolvedClassError(
            f"Cannot import type {path!r}: a class of the pipeline's script, which this process "
            f"does not define. {_IN_A_MODULE}"
        )
    try:
        obj = _attribute(module or modules[0], qualname, path, "type")
    except MaterializationError as exc:
        raise UnresolvedClassError(str(exc)) from exc.__cause__
    if not isinstance(obj, type):
        raise MaterializationError(f"{path!r} is not a class.")
    used_from = script_file_of(obj) if len(script_aliases(module_name)) > 1 else None
    if used_from is not None:
        warnings.warn(
            f"Type {path!r} was defined in the __main__ of the script that made the artifact, "
            f"and its record does not say which script (saved by an older Wharf, or by a script "
            f"without a file): this process uses the {qualname} of {used_from}, another "
            f"class of that name unless that is the same script. {_IN_A_MODULE}",
            UserWarning,
            stacklevel=_caller_outside_wharf(),
        )
    return obj


_IN_A_MODULE = (
    "Define the classes your steps return (and your materializers) in a module that your "
    "scripts import: artifacts saved after that load wherever it is imported."
)


def _script_class(path: str, qualname: str, script: str, what: str) -> type:
    """The class ``qualname`` of the script ``script`` loaded in this process; a
    :class:`ScriptClassError` that says why there is none."""
    found = live_script_class(script, qualname)
    if found is not None:
        return found
    running = running_script()
    if running is None:
        here = "this process runs no script"
    else:
        here = f"this process runs {running}"
        scripts = [sys.modules.get(name) for name in script_aliases("__main__")]
        if any(m is not None and _has_attribute(m, qualname) for m in scripts):
            here += f", which has a {qualname} of its own"
    raise ScriptClassError(
        f"Cannot load {what} {path!r}: {qualname} was defined in the __main__ of {script}, the "
        f"script that made the artifact, so only a process running {script} has it ({here}). "
        f"{_IN_A_MODULE}",
        script,
    )


_WHARF_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _caller_outside_wharf() -> int:
    """The ``stacklevel`` of the first caller of this function's caller outside Wharf."""
    frame = sys._getframe(2)
    level = 2
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_WHARF_DIR):
        frame = frame.f_back
        level += 1
    return level


def _describe(t: Any) -> str:
    return type_path(t) if isinstance(t, type) else repr(t)


def materializer_path(cls: type[Materializer]) -> str:
    """The import path recorded for artifacts written by ``cls``."""
    return type_path(cls)


_WHARF_LAZY_PATHS = frozenset(path for _, path in _LAZY_DEFAULTS)
"""Wharf's own materializers that are imported on first use (their modules import numpy or
pandas): the only materializer paths ever imported."""


def load_materializer(path: str) -> type[Materializer]:
    """The materializer class at ``module:qualname``, checked before anything is imported: it
    must be a :class:`Materializer` subclass defined in this process
    (:func:`known_materializers`) or one of Wharf's lazily loaded ones; ``MaterializationError``
    otherwise."""
    module_name, qualname = _split_path(path, "materializer")
    qualname, script = split_script_file(module_name, qualname)
    if script is not None:
        cls = _script_class(path, qualname, script, "materializer")
        if not issubclass(cls, Materializer):
            raise MaterializationError(f"{path!r} is not a Materializer subclass.")
        return cls
    known = known_materializers()
    for name in script_aliases(module_name):  # a script's, under either of its names
        found = known.get(f"{name}:{qualname}")
        if found is not None:
            return found
    if path not in _WHARF_LAZY_PATHS:
        raise UnresolvedClassError(
            f"Unknown materializer {path!r}: no Materializer subclass with this import path is "
            "defined in this process (recorded import paths are never imported); import the "
            "module that defines it first."
        )
    return _import_materializer(path)


def _import_materializer(path: str) -> type[Materializer]:
    """Import the materializer at ``path``: only for paths written in code (Wharf's defaults,
    :meth:`MaterializerRegistry.register_lazy`), never for a recorded one."""
    module_name, qualname = _split_path(path, "materializer")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MaterializationError(f"Cannot import materializer {path!r}: {exc}") from exc
    obj = _attribute(module, qualname, path, "materializer")
    if not (isinstance(obj, type) and issubclass(obj, Materializer)):
        raise MaterializationError(f"{path!r} is not a Materializer subclass.")
    return obj


def known_materializers() -> dict[str, type[Materializer]]:
    """Every :class:`Materializer` subclass defined (and still alive) in this process, by import
    path; a path defined twice names one of its classes."""
    found: dict[str, type[Materializer]] = {}
    pending = list(Materializer.__subclasses__())
    while pending:
        cls = pending.pop()
        found[type_path(cls)] = cls
        pending.extend(cls.__subclasses__())
    return found


def _split_path(path: str, what: str) -> tuple[str, str]:
    module_name, sep, qualname = path.partition(":")
    if not (module_name and sep and qualname):
        raise MaterializationError(f"Invalid {what} import path {path!r}: expected 'module:name'.")
    return module_name, qualname


def _has_attribute(obj: object, qualname: str) -> bool:
    try:
        for attribute in qualname.split("."):
            obj = getattr(obj, attribute)
    except AttributeError:
        return False
    return True


def _attribute(obj: object, qualname: str, path: str, what: str) -> object:
    try:
        for attribute in qualname.split("."):
            obj = getattr(obj, attribute)
    except AttributeError as exc:
        raise MaterializationError(f"Cannot import {what} {path!r}: {exc}") from exc
    return obj


class MaterializerRegistry:
    """Chooses a materializer class for a value or a type (:meth:`for_value`,
    :meth:`for_type`)."""

    def __init__(self, fallback: type[Materializer] | None = CloudpickleMaterializer) -> None:
        self._fallback = fallback
        self._by_type: dict[type, list[tuple[int, type[Materializer]]]] = {}
        self._lazy: dict[str, list[tuple[int, str]]] = {}
        self._candidates: dict[type, tuple[type[Materializer], ...]] = {}
        self._warned: set[object] = set()
        self._sequence = 0
        self._lock = threading.RLock()

    @property
    def fallback(self) -> type[Materializer] | None:
        return self._fallback

    def register(self, materializer: type[Materializer], *types: type) -> None:
        """Register ``materializer`` for ``types`` (default: its ``ASSOCIATED_TYPES``).

        A later registration takes precedence over earlier ones for the same type.
        """
        _check_materializer(materializer)
        with self._lock:
            self._sequence += 1
            self._add(self._sequence, materializer, types or materializer.ASSOCIATED_TYPES)

    def register_lazy(self, package: str, materializer: str) -> None:
        """Register the materializer at import path ``materializer`` for its
        ``ASSOCIATED_TYPES``, importing it only once a type defined in the top-level package
        ``package`` (``"numpy"``) is looked up; it keeps the priority of this call."""
        with self._lock:
            self._sequence += 1
            self._lazy.setdefault(package, []).append((self._sequence, materializer))
            self._candidates.clear()

    def for_value(self, value: object, *, warn: bool = True) -> type[Materializer]:
        """The materializer for ``value``; ``warn=False``: no warning when it is the fallback
        (see :meth:`warn_pickled`).

        Selection: walk ``type(value).__mro__`` from the most specific class, trying for each
        class the materializers registered for exactly that class, most recently registered
        first; the first whose ``can_save(value)`` is true wins. Otherwise the fallback
        (cloudpickle by default) is used, with a ``UserWarning`` once per type per registry;
        without a fallback, ``MaterializationError``. ``save_artifact`` asks with
        ``warn=False`` and warns only once the fallback has saved the value, so a value it
        cannot save fails with one clean error and no warning."""
        t = type(value)
        candidates = self._candidates.get(t)
        if candidates is None:
            candidates = self._resolve(t)
        for candidate in candidates:
            if candidate.can_save(value):
                return candidate
        return self._use_fallback(t, declined=bool(candidates), warn=warn)

    def warn_pickled(self, value: object, at: tuple[str, int] | None = None) -> None:
        """The fallback warning for ``value``'s type (once per type), after the fallback saved
        it; ``at``: the (file, line) it is attributed to (a step's function), else the caller
        of ``save_artifact``."""
        t = type(value)
        candidates = self._candidates.get(t)
        if candidates is None:
            candidates = self._resolve(t)
        self._warn_fallback(t, declined=bool(candidates), stacklevel=4, at=at)

    def for_type(self, data_type: Any) -> type[Materializer]:
        """The materializer normally used for values of ``data_type``.

        ``list[int]`` is treated as ``list``. Value-dependent refusals (``can_save``) are not
        known here: ``for_value`` may still pick another materializer for a given value.
        """
        origin = typing.get_origin(data_type) or data_type
        if not isinstance(origin, type) or origin is types.UnionType:
            return self._use_fallback(data_type)
        candidates = self._candidates.get(origin)
        if candidates is None:
            candidates = self._resolve(origin)
        return candidates[0] if candidates else self._use_fallback(origin)

    def _add(
        self, sequence: int, materializer: type[Materializer], types: tuple[type, ...]
    ) -> None:
        for t in types:
            entries = self._by_type.setdefault(t, [])
            entries.append((sequence, materializer))
            entries.sort(key=lambda entry: -entry[0])
        self._candidates.clear()

    def _resolve(self, t: type) -> tuple[type[Materializer], ...]:
        with self._lock:
            if self._lazy:
                for cls in t.__mro__:
                    package = (getattr(cls, "__module__", None) or "").partition(".")[0]
                    if package in self._lazy:
                        self._import_lazy(package)
            candidates = tuple(
                materializer for cls in t.__mro__ for _, materializer in self._by_type.get(cls, ())
            )
            self._candidates[t] = candidates
            return candidates

    def _import_lazy(self, package: str) -> None:
        loaded = [(seq, _import_materializer(path)) for seq, path in self._lazy[package]]
        del self._lazy[package]  # only once every import succeeded; a failure repeats
        for sequence, materializer in loaded:
            self._add(sequence, materializer, materializer.ASSOCIATED_TYPES)

    def _use_fallback(
        self, t: Any, declined: bool = False, warn: bool = True
    ) -> type[Materializer]:
        if self._fallback is None:
            what = "can save this value" if declined else "is registered"
            raise MaterializationError(f"No materializer {what} for type {_describe(t)!r}.")
        if warn:
            self._warn_fallback(t, declined, stacklevel=4)
        return self._fallback

    def _how_to_avoid(self, t: Any) -> str:
        """How the user makes a step save ``t`` otherwise: a materializer of theirs is used
        only where a step names it (nothing registers one with the engine's registry)."""
        registered = {m for entries in self._by_type.values() for _, m in entries}
        listing = sorted(
            cls.__name__
            for cls in known_materializers().values()
            if cls is not self._fallback
            and cls not in registered
            and isinstance(t, type)
            and any(base in cls.ASSOCIATED_TYPES for base in t.__mro__[:-1])
        )
        if listing:
            name = listing[0]
            return (
                f"{name} lists it in its ASSOCIATED_TYPES, but a step uses a materializer of "
                f"yours only when it names it: @step(output_materializers={name})."
            )
        return (
            "To avoid this, write a Materializer for it and name it in the step: "
            "@step(output_materializers=YourMaterializer)."
        )

    def _warn_fallback(
        self, t: Any, declined: bool, stacklevel: int, at: tuple[str, int] | None = None
    ) -> None:
        if self._fallback is None:
            return
        if t not in self._warned:
            with self._lock:
                first = t not in self._warned
                self._warned.add(t)
            if first:
                reason = (
                    "has no materializer that can save this value (for example it holds "
                    "non-JSON items)"
                    if declined
                    else "has no dedicated materializer"
                )
                message = (
                    f"Type {_describe(t)!r} {reason} and is pickled with "
                    f"{self._fallback.__name__}; the artifact can only be loaded with compatible "
                    f"Python and library versions. {self._how_to_avoid(t)}"
                )
                if at is None:
                    warnings.warn(message, UserWarning, stacklevel=stacklevel)
                else:
                    warnings.warn_explicit(message, UserWarning, *at)


def _check_materializer(materializer: object) -> None:
    if not (isinstance(materializer, type) and issubclass(materializer, Materializer)):
        raise TypeError(f"{materializer!r} is not a Materializer subclass.")


def default_registry() -> MaterializerRegistry:
    """A new registry with Wharf's materializers: built-in scalars and containers, numpy and
    pandas (lazily, so neither is imported until a value of theirs is seen), cloudpickle last."""
    registry = MaterializerRegistry(fallback=CloudpickleMaterializer)
    registry.register(BuiltInMaterializer)
    registry.register(BuiltInContainerMaterializer)
    for package, path in _LAZY_DEFAULTS:
        registry.register_lazy(package, path)
    return registry
