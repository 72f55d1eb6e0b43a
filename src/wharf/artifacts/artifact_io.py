"""Save and load one artifact: the two calls the execution engine makes per step output/input.

Owns :func:`save_artifact`, :func:`load_artifact` and :class:`SavedArtifact`.

Invariants: a URI holds either a complete artifact (whose :class:`SavedArtifact` was returned)
or nothing; every failure to save or load is one single-line
:class:`~wharf.core.errors.MaterializationError` naming the type, the materializer and the cause
(the original exception chained); the recorded ``data_type`` and ``materializer`` are
``module:qualname`` import paths (:mod:`wharf.artifacts.materializers.registry`).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from wharf.artifacts.hashing import content_hash
from wharf.artifacts.materializers.associated_types import value_problem
from wharf.artifacts.materializers.base import Materializer
from wharf.artifacts.materializers.registry import (
    MaterializerRegistry,
    load_materializer,
    load_type,
    recorded_path,
    type_path,
)
from wharf.artifacts.store import ArtifactStore
from wharf.artifacts.watched import WatchedStore
from wharf.core.errors import MaterializationError


@dataclass(frozen=True, slots=True)
class SavedArtifact:
    """What the metadata store records about a saved artifact. ``content_hash`` is
    :func:`wharf.artifacts.hashing.content_hash` of what was stored (for a single file,
    computed from the bytes as they are written when :mod:`wharf.artifacts.watched` can vouch
    for them)."""

    uri: str
    data_type: str
    """Import path of the value's type, ``module:qualname`` (``@`` and the script's file name
    for a class of the user's script: :func:`~.registry.recorded_path`)."""
    materializer: str
    """Import path of the materializer class that wrote it (the same way)."""
    content_hash: str


def save_artifact(
    value: Any,
    store: ArtifactStore,
    uri: str,
    registry: MaterializerRegistry,
    materializer: type[Materializer] | str | None = None,
    *,
    warn_at: tuple[str, int] | None = None,
) -> SavedArtifact:
    """Save ``value`` as a new artifact at ``uri`` (e.g. from ``store.new_uri(...)``).

    ``materializer`` (a class or its ``module:qualname`` path) overrides the registry's choice;
    it must save ``value``'s type (:mod:`~wharf.artifacts.materializers.associated_types`),
    else nothing is written.
    ``uri`` must not exist yet; on any failure everything written there is removed before
    raising. Crash safety without fsync: files are published by atomic rename and the engine
    records a version only after this returned, so no record points at a partial or missing
    file (``LocalArtifactStore(fsync=True)`` adds power-loss safety). A single-file
    materializer's artifact is one file, no directory of its own. A value pickled by the
    registry's fallback warns (once per type), attributed to ``warn_at`` (file, line: the
    step's function) if given, else to the caller.
    """
    data_type = type(value)
    if materializer is None:
        cls = registry.for_value(value, warn=False)  # warned below, once the value is saved
    elif isinstance(materializer, str):
        cls = load_materializer(materializer)
    else:
        cls = materializer
    if materializer is not None:  # named, not chosen by the registry: check what it saves
        problem = value_problem(cls, value)
        if problem is not None:
            raise MaterializationError(
                f"Cannot save a value of type {type_path(data_type)!r} with {cls.__name__}: "
                f"{problem}"
            )
    try:
        if cls.SINGLE_FILE:
            # URIs from new_uri() are unique; this catches a URI handed in twice. A store that
            # knows the URI is one it issued and nothing was written to is not asked.
            issued_unwritten = getattr(store, "issued_unwritten", None)
            if not (issued_unwritten is not None and issued_unwritten(uri)) and store.exists(uri):
                raise MaterializationError(f"Artifact URI {uri!r} already exists.")
        else:
            try:
                store.makedirs(uri, exist_ok=False)
            except FileExistsError:
                raise MaterializationError(f"Artifact URI {uri!r} already exists.") from None
    except OSError as exc:  # the store cannot be reached: nothing was written
        raise MaterializationError(
            f"Cannot save a value of type {type_path(data_type)!r} with "
            f"{cls.__name__}: {_one_line(exc)}"
        ) from exc
    try:
        # A single file is hashed as it is written (no read back), when the watch can vouch
        # for the bytes (see ``wharf.artifacts.watched``); otherwise from the stored files.
        watch = WatchedStore(store, uri) if cls.SINGLE_FILE else None
        cls(uri, store if watch is None else watch).save(value)
        digest = None if watch is None else watch.content_hash()
        if digest is None:
            digest = content_hash(store, uri)
    except BaseException as exc:
        with suppress(OSError):  # keep the original error; a leftover is only garbage
            store.rmtree(uri)
        if not isinstance(exc, Exception) or isinstance(exc, MaterializationError):
            raise
        unpicklable = materializer is None and cls is registry.fallback
        raise MaterializationError(
            f"Cannot save a value of type {type_path(data_type)!r} with "
            f"{cls.__name__}: {_one_line(exc)}"
            + (UNPICKLABLE_HINT if unpicklable and not isinstance(exc, OSError) else "")
        ) from exc
    if materializer is None and cls is registry.fallback:
        registry.warn_pickled(value, warn_at)
    return SavedArtifact(uri, recorded_path(data_type), recorded_path(cls), digest)


def load_artifact(
    store: ArtifactStore, uri: str, data_type_path: str, materializer_path: str
) -> Any:
    """Load the artifact at ``uri`` with the materializer and type recorded at save time."""
    cls = load_materializer(materializer_path)
    try:
        data_type = load_type(data_type_path)
    except MaterializationError:
        if cls.NEEDS_DATA_TYPE:
            raise
        data_type = object
    try:
        return cls(uri, store).load(data_type)
    except MaterializationError:
        raise
    except Exception as exc:
        gone = isinstance(exc, FileNotFoundError) and not _exists(store, uri)
        raise MaterializationError(
            f"Cannot load artifact {uri!r} of type {data_type_path!r} with "
            f"{cls.__name__}: {_one_line(exc)}"
            + (_sentence_end(exc) + MISSING_FILES_HINT if gone else "")
        ) from exc


UNPICKLABLE_HINT = (
    ". No materializer saves this type, and the pickle fallback cannot: return what can be"
    " stored instead (plain data, the object's state), or write a Materializer for it and name"
    " it in the step: @step(output_materializers=YourMaterializer)."
)

MISSING_FILES_HINT = (
    " Its files are gone from the artifact store; the next run that needs it runs the step"
    " that produced it again (a cached step whose outputs are gone is not reused)."
)


def _exists(store: ArtifactStore, uri: str) -> bool:
    try:
        return store.exists(uri)
    except OSError:
        return True  # unknown: no hint rather than a wrong one


def _sentence_end(exc: BaseException) -> str:
    """A full stop after ``exc``'s line, unless it has one: a hint follows it."""
    return "" if _one_line(exc).endswith((".", "!", "?")) else "."


def _one_line(exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
