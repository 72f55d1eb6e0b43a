"""Hashing an artifact's file while it is written, so that saving it does not read it back.

Owns :class:`WatchedStore`, which :func:`wharf.artifacts.artifact_io.save_artifact` hands a
single-file materializer instead of the store itself.

Invariant: the watched hash is only ever what :func:`wharf.artifacts.hashing.content_hash` would
answer (the hash of the one file published at the URI, from exactly the bytes that went into
it); anything the watch cannot vouch for marks the save unwatched.
"""

from __future__ import annotations

import hashlib
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from wharf.artifacts.hashing import single_file_hash
from wharf.artifacts.store import ArtifactStore

if TYPE_CHECKING:  # kept out of import time
    from uuid import UUID


class WatchedStore:
    """``store`` as one single-file save sees it. ``uri`` is known to be empty (save_artifact
    checked), so asking whether it is a directory needs no I/O.

    Reads pass through. The artifact's file (at ``uri``) may be opened for writing in binary
    mode, and what is written to it is hashed on the way, in order. A second write of the
    file, a write to any other URI, text mode, a partial write, or any call outside the
    store's and the writer's plain contract (``fileno``, ``seek``, a store's ``local_path``
    ...) marks the save unwatched: the content hash is then computed from the stored file."""

    def __init__(self, store: ArtifactStore, uri: str) -> None:
        self._store = store
        self._uri = uri
        self._writes = 0
        self._published: bytes | None = None
        self.unwatched = False

    def content_hash(self) -> str | None:
        """The artifact's content hash from the bytes written, or None if the watch cannot
        tell it (then read the file)."""
        if self.unwatched or self._writes != 1 or self._published is None:
            return None
        return single_file_hash(self._published)

    def published(self, digest: bytes) -> None:
        self._published = digest

    # The store's contract: reads pass through, writes are watched.

    @property
    def id(self) -> UUID | None:
        return self._store.id

    @property
    def path(self) -> str:
        return self._store.path

    def open(self, uri: str, mode: str = "rb") -> IO[Any]:
        file = self._store.open(uri, mode)
        if mode in ("rb", "r"):
            return file
        if uri != self._uri or mode != "wb":
            self.unwatched = True
            return file
        self._writes += 1
        return _HashingWriter(file, self)  # type: ignore[return-value]

    def exists(self, uri: str) -> bool:
        return self._store.exists(uri)

    def isdir(self, uri: str) -> bool:
        if uri == self._uri and self._writes == 0:
            return False  # save_artifact found nothing there just before handing us the store
        return self._store.isdir(uri)

    def listdir(self, uri: str) -> list[str]:
        return self._store.listdir(uri)

    def makedirs(self, uri: str, exist_ok: bool = True) -> None:
        self.unwatched = True
        self._store.makedirs(uri, exist_ok)

    def rmtree(self, uri: str) -> None:
        self.unwatched = True
        self._store.rmtree(uri)

    def new_uri(self, *parts: str) -> str:
        return self._store.new_uri(*parts)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self.unwatched = True  # outside the contract: the watch cannot tell what it does
        return getattr(self._store, name)


class _HashingWriter:
    """The store's writer of the watched file, hashing every ``write`` in order."""

    def __init__(self, file: IO[Any], watch: WatchedStore) -> None:
        self._file = file
        self._watch = watch
        self._digest = hashlib.sha256()
        self._done = False

    def write(self, data: Any) -> int:
        written = self._file.write(data)
        try:
            size = memoryview(data).nbytes
            self._digest.update(data)
        except (TypeError, ValueError):  # not a contiguous buffer: leave it to a re-read
            self._watch.unwatched = True
            return written
        if written is not None and written != size:
            self._watch.unwatched = True
        return written

    def flush(self) -> None:
        self._file.flush()

    @property
    def closed(self) -> bool:
        return bool(self._file.closed)

    def close(self) -> None:
        self._file.close()  # publishes the file; raises if it could not
        self._published()

    def _published(self) -> None:
        if not self._done:
            self._done = True
            self._watch.published(self._digest.digest())

    def __enter__(self) -> _HashingWriter:
        self._file.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._file.__exit__(exc_type, exc, tb)
        if exc_type is None:
            self._published()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self._watch.unwatched = True  # seek, fileno, writelines ...: not watched
        return getattr(self._file, name)
