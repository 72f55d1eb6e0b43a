"""Artifact stores, materializers and content hashes.

The engine's view, per step output: ``uri = store.new_uri(...)``, then
``save_artifact(value, store, uri, registry)`` returns the :class:`SavedArtifact` to record; per
step input, ``load_artifact(store, uri, data_type, materializer)`` returns the value
(:mod:`~wharf.artifacts.artifact_io`). Stores: :mod:`~wharf.artifacts.store` and
:mod:`~wharf.artifacts.fsspec_store`; materializers and their registry:
:mod:`~wharf.artifacts.materializers`; hashes: :mod:`~wharf.artifacts.hashing`.

Invariant: importing this package imports neither fsspec, numpy, pandas nor cloudpickle.
"""

from wharf.artifacts.artifact_io import SavedArtifact, load_artifact, save_artifact
from wharf.artifacts.hashing import content_hash
from wharf.artifacts.materializers.base import Materializer
from wharf.artifacts.materializers.registry import (
    MaterializerRegistry,
    default_registry,
    load_materializer,
    load_type,
    materializer_path,
    type_path,
)
from wharf.artifacts.store import ArtifactStore, LocalArtifactStore, join_uri

__all__ = [
    "ArtifactStore",
    "LocalArtifactStore",
    "Materializer",
    "MaterializerRegistry",
    "SavedArtifact",
    "content_hash",
    "default_registry",
    "join_uri",
    "load_artifact",
    "load_materializer",
    "load_type",
    "materializer_path",
    "save_artifact",
    "type_path",
]
