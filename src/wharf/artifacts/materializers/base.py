"""The :class:`Materializer` base class: how one kind of value becomes files and back.

A materializer instance is bound to one artifact URI (a directory) in one artifact store.
``save`` writes the value as one or more files inside that directory; ``load`` reads them back.

Contract for implementations:

- ``ASSOCIATED_TYPES`` lists the types the materializer is registered for; the registry also
  offers it every subclass of those types, and :meth:`Materializer.can_save` may then decline a
  value (for example a subclass it cannot rebuild, or a container holding non-JSON values) so
  that the next candidate, finally the pickle fallback, is used.
- ``save`` writes only through ``self.artifact_store`` and only inside ``self.uri``; it does not
  need to create the directory (writes create their parents). Each file write is atomic, and
  the engine removes the directory if ``save`` raises.
- ``load(data_type)`` returns a value equal to the one saved, of type ``data_type`` (the type
  recorded at save time). ``NEEDS_DATA_TYPE = False`` declares that the files alone suffice, so
  an artifact can be loaded even where its recorded type cannot be imported.
- The import path of a materializer class is stored with every artifact it wrote; moving or
  renaming a class makes those artifacts unloadable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from wharf.artifacts.store import ArtifactStore, join_uri


class Materializer(ABC):
    """Saves values of ``ASSOCIATED_TYPES`` under ``uri`` and loads them back."""

    ASSOCIATED_TYPES: ClassVar[tuple[type, ...]] = ()
    NEEDS_DATA_TYPE: ClassVar[bool] = True

    def __init__(self, uri: str, artifact_store: ArtifactStore) -> None:
        self.uri = uri
        self.artifact_store = artifact_store

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r})"

    @classmethod
    def can_save(cls, value: object) -> bool:
        """Whether this materializer can save ``value`` losslessly (its type already matched)."""
        return True

    @abstractmethod
    def save(self, data: Any) -> None:
        """Write ``data`` under ``self.uri``."""

    @abstractmethod
    def load(self, data_type: type[Any]) -> Any:
        """Read the value under ``self.uri``; ``data_type`` is the type recorded at save time."""

    def file_uri(self, name: str) -> str:
        """The URI of the file ``name`` inside this artifact."""
        return join_uri(self.uri, name)

    def write_bytes(self, name: str, data: bytes) -> None:
        with self.artifact_store.open(self.file_uri(name), "wb") as f:
            f.write(data)

    def read_bytes(self, name: str) -> bytes:
        with self.artifact_store.open(self.file_uri(name), "rb") as f:
            data: bytes = f.read()
        return data
