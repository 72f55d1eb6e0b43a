"""The :class:`Materializer` base class: how one kind of value becomes files and back.

A materializer instance is bound to one artifact URI in one artifact store; the contract for
implementations is the class docstring.

Invariant: the import path of a materializer class is stored with every artifact it wrote;
moving or renaming a class makes those artifacts unloadable.
"""

from __future__ import annotations

import io
import shutil
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from wharf.artifacts.store import ArtifactStore, join_uri
from wharf.core.errors import MaterializationError

READ_CHUNK = 2**20
"""Bytes read from a store at once by :meth:`Materializer.read_bytes`."""


class Materializer(ABC):
    """Saves values of ``ASSOCIATED_TYPES`` under ``uri`` and loads them back.

    Layouts: an artifact is a directory at its URI holding the named files, except with
    ``SINGLE_FILE = True``: then it is that one file at the URI itself (one inode per output
    rather than two). The layout is read from the store (a directory at the URI is the
    directory layout), so directory-layout artifacts still load. Content hashes cover file
    names (:mod:`wharf.artifacts.hashing`), so equal bytes in the two layouts hash differently.

    Contract for implementations:

    - ``ASSOCIATED_TYPES`` lists the types the materializer is registered for; the registry
      also offers it every subclass of those types, and :meth:`can_save` may then decline a
      value (a subclass it cannot rebuild, a container holding non-JSON values...) so that the
      next candidate, finally the pickle fallback, is used. A step that names the
      materializer for an output must output those types too (``(object,)``: any type;
      :mod:`~wharf.artifacts.materializers.associated_types`).
    - ``save`` writes only through ``self.artifact_store`` and only to :meth:`file_uri` names;
      it need not create the directory (writes create their parents). Each file write is
      atomic, and the engine removes whatever was written if ``save`` raises.
    - ``SINGLE_FILE = True`` promises that ``save`` writes exactly one file (its name may
      depend on the value) and that ``load`` can tell from ``data_type`` alone which name it
      wrote: in the single-file layout every name maps to the URI itself.
    - ``load(data_type)`` returns a value equal to the one saved, of type ``data_type`` (the
      type recorded at save time). ``NEEDS_DATA_TYPE = False`` declares that the files alone
      suffice, so an artifact can be loaded even where its recorded type cannot be imported.
    """

    ASSOCIATED_TYPES: ClassVar[tuple[type, ...]] = ()
    NEEDS_DATA_TYPE: ClassVar[bool] = True
    SINGLE_FILE: ClassVar[bool] = False

    def __init__(self, uri: str, artifact_store: ArtifactStore) -> None:
        self.uri = uri
        self.artifact_store = artifact_store
        self._is_file: bool | None = None
        self._file_name: str | None = None  # the one name used in the single-file layout

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
        """The URI of the file ``name`` of this artifact: ``uri`` itself in the single-file
        layout, else ``uri/name``."""
        if self.SINGLE_FILE and self._single_file_layout():
            if self._file_name is None:
                self._file_name = name
            elif name != self._file_name:  # both would be the URI: one would overwrite the other
                raise MaterializationError(
                    f"{type(self).__name__} declares SINGLE_FILE = True but uses two files, "
                    f"{self._file_name!r} and {name!r}; set SINGLE_FILE = False."
                )
            return self.uri
        return join_uri(self.uri, name)

    def _single_file_layout(self) -> bool:
        if self._is_file is None:
            # Nothing at the URI yet (a save) or a file: single-file layout. A directory is an
            # artifact written before this materializer became SINGLE_FILE.
            self._is_file = not self.artifact_store.isdir(self.uri)
        return self._is_file

    def write_bytes(self, name: str, data: bytes) -> None:
        with self.artifact_store.open(self.file_uri(name), "wb") as f:
            f.write(data)

    def read_bytes(self, name: str) -> bytes:
        """The bytes of the file ``name``. A local file is read at once (into the one
        ``bytes`` returned); any other a part at a time, since a remote store's reader would
        hold the whole file twice while fetching it. The parts go to a ``BytesIO`` whose
        ``getvalue()`` hands over its own buffer, not a copy."""
        buffer = io.BytesIO()
        with self.artifact_store.open(self.file_uri(name), "rb") as f:
            if isinstance(f, io.BufferedReader):
                data: bytes = f.read()
                return data
            shutil.copyfileobj(f, buffer, READ_CHUNK)
        return buffer.getvalue()
