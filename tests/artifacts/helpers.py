"""Helpers shared by the artifact tests."""

from __future__ import annotations

from typing import Any

from wharf.artifacts import (
    LocalArtifactStore,
    MaterializerRegistry,
    SavedArtifact,
    load_artifact,
    save_artifact,
)


def roundtrip(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> tuple[SavedArtifact, Any]:
    """Save ``value`` under a fresh URI and load it back the way the engine does."""
    saved = save_artifact(value, store, store.new_uri("test"), registry)
    return saved, load_artifact(store, saved.uri, saved.data_type, saved.materializer)


def assert_same(a: Any, b: Any) -> None:
    """Equal *and* of the same type all the way down (``1 == 1.0 == True`` is not enough)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, float):
        assert repr(a) == repr(b)  # also tells -0.0 from 0.0 and matches NaN
    elif isinstance(a, dict):
        assert len(a) == len(b)
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            assert_same(ka, kb)
            assert_same(va, vb)
    elif isinstance(a, set | frozenset):
        assert _canonical(a) == _canonical(b)
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    else:
        assert a == b


def _canonical(x: Any) -> Any:
    """A sortable, type-exact stand-in for hashable values (NaN equals NaN here)."""
    if isinstance(x, set | frozenset):
        return type(x).__name__, tuple(sorted(map(_canonical, x)))
    if isinstance(x, tuple):
        return "tuple", tuple(map(_canonical, x))
    return type(x).__name__, repr(x)
