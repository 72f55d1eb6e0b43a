"""Artifact stores, materializers and content hashes.

The engine's view, per step output: ``uri = store.new_uri(...)``, then
``save_artifact(value, store, uri, registry)`` returns the :class:`SavedArtifact` (uri, data
type, materializer, content hash) to record; per step input, ``load_artifact(store, uri,
data_type, materializer)`` returns the value.

Module map (each module's docstring states its invariants):

- :mod:`~wharf.artifacts.store`: the ``ArtifactStore`` protocol and ``LocalArtifactStore``.
- :mod:`~wharf.artifacts.fsspec_store`: ``FsspecArtifactStore`` (S3, GCS, Azure, ``file://``;
  the ``fsspec`` flavor), configured as :mod:`~wharf.artifacts.fsspec_options` checks. Not
  imported by this package: fsspec is loaded only where such a store is used.
- :mod:`~wharf.artifacts.materializers`: the ``Materializer`` base class, implementations
  and (in ``materializers.registry``) ``MaterializerRegistry``, ``default_registry`` and the
  import-path helpers.
- :mod:`~wharf.artifacts.hashing`: ``content_hash``.
- :mod:`~wharf.artifacts.artifact_io`: ``save_artifact``, ``load_artifact``.

Importing this package imports neither numpy, pandas nor cloudpickle.
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
