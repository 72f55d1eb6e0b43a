"""Artifact stores: where artifact bytes live.

Owns the :class:`ArtifactStore` contract (the subset of ``fsspec.AbstractFileSystem`` the
materializers need, so :mod:`wharf.artifacts.fsspec_store` implements it by delegating) and its
local-disk implementation :class:`LocalArtifactStore`.

Invariants every store keeps: a URI is an absolute location under the store's root, ``/``
between parent and child (:func:`join_uri`), and any other URI is refused with ``InputError``
before any I/O; a file opened for writing becomes visible at its URI only when closed without an
error, so a file seen at its URI is always complete; ``new_uri`` returns a URI nobody else will
get (128 random bits) and does no I/O.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
from typing import IO, TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from wharf.artifacts.publishing import PublishingFile
from wharf.core.errors import InputError
from wharf.core.ids import new_id

if TYPE_CHECKING:  # kept out of import time
    from collections.abc import Mapping
    from pathlib import Path
    from uuid import UUID

_READ_MODES = frozenset({"r", "rb"})
_WRITE_MODES = frozenset({"w", "wb"})


def join_uri(base: str, *names: str) -> str:
    """``base`` followed by ``names``, separated by ``/`` (valid for local and remote stores)."""
    return "/".join((base.rstrip("/"), *names))


@runtime_checkable
class ArtifactStore(Protocol):
    """Where artifacts are stored. URIs are absolute locations under :attr:`path`.

    Errors: a URI outside the root raises ``InputError``; I/O failures raise ``OSError``
    subclasses (``FileNotFoundError`` for a missing file), as ``fsspec`` does.
    """

    @property
    def id(self) -> UUID | None:
        """The id of the stack component this store belongs to, if registered."""
        ...

    @property
    def path(self) -> str:
        """The root URI; every artifact URI lies under it."""
        ...

    def open(self, uri: str, mode: str = "rb") -> IO[Any]:
        """Open a file: ``"rb"``/``"r"`` to read, ``"wb"``/``"w"`` to write (text is UTF-8).

        Writing creates missing parent directories and is atomic: the file appears at ``uri``
        only when it is closed without an exception.
        """
        ...

    def exists(self, uri: str) -> bool: ...

    def isdir(self, uri: str) -> bool: ...

    def makedirs(self, uri: str, exist_ok: bool = True) -> None:
        """Create the directory ``uri`` and its parents; ``FileExistsError`` if it exists and
        ``exist_ok`` is false."""
        ...

    def listdir(self, uri: str) -> list[str]:
        """Names (not URIs) of the entries of directory ``uri``, in no particular order."""
        ...

    def rmtree(self, uri: str) -> None:
        """Remove the file or directory tree at ``uri``; nothing happens if it does not exist."""
        ...

    def new_uri(self, *parts: str) -> str:
        """A fresh, unique URI ``<root>/<parts...>/<random hex>``; nothing is created."""
        ...


class LocalArtifactStore:
    """An :class:`ArtifactStore` on a local (or locally mounted) file system.

    The traversal check is lexical (``os.path.normpath``), which keeps it free of system calls;
    symbolic links placed *inside* the root are trusted. With ``fsync=True`` every written file
    (and its directory entry) is flushed to disk before it is published, which survives power
    loss at the cost of a disk flush per file; the default survives process crashes only.
    """

    OPTIONS = ("path",)
    """Every configuration key of a ``local`` artifact store component."""

    def __init__(self, root: Path | str, id: UUID | None = None, *, fsync: bool = False) -> None:
        self._root = os.path.abspath(os.fspath(root))
        self._prefix = os.path.join(self._root, "")
        self._id = id
        self._fsync = fsync

    @classmethod
    def check_configuration(cls, configuration: Mapping[str, Any]) -> None:
        """Refuse an unknown key when the component is registered (a typo would be ignored), as
        the ``local_process`` flavor does; the ``path`` itself is checked by
        ``wharf.sdk.stacks``."""
        for key in configuration:
            if key not in cls.OPTIONS:
                close = difflib.get_close_matches(key, cls.OPTIONS, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise InputError(
                    f"Unknown local option '{key}'{hint}; known: {', '.join(cls.OPTIONS)}."
                )

    def __repr__(self) -> str:
        return f"LocalArtifactStore({self._root!r}, id={self._id!r})"

    @property
    def id(self) -> UUID | None:
        return self._id

    @property
    def path(self) -> str:
        return self._root

    def local_path(self, uri: str) -> str:
        """The normalised file-system path of ``uri``; ``InputError`` if it is outside the root."""
        if not isinstance(uri, str) or "\0" in uri or not os.path.isabs(uri):
            raise InputError(f"Artifact URI must be an absolute path, got {uri!r}.")
        path = os.path.normpath(uri)
        if path != self._root and not path.startswith(self._prefix):
            raise InputError(f"Artifact URI {uri!r} is outside the artifact store {self._root!r}.")
        return path

    def open(self, uri: str, mode: str = "rb") -> IO[Any]:
        path = self.local_path(uri)
        if mode in _READ_MODES:
            return open(path, mode, encoding=None if "b" in mode else "utf-8")
        if mode in _WRITE_MODES:
            return cast(IO[Any], _AtomicWriter(path, binary="b" in mode, fsync=self._fsync))
        raise InputError(f"Unsupported artifact file mode {mode!r}; use 'rb', 'r', 'wb' or 'w'.")

    def exists(self, uri: str) -> bool:
        return os.path.exists(self.local_path(uri))

    def isdir(self, uri: str) -> bool:
        return os.path.isdir(self.local_path(uri))

    def makedirs(self, uri: str, exist_ok: bool = True) -> None:
        os.makedirs(self.local_path(uri), exist_ok=exist_ok)

    def listdir(self, uri: str) -> list[str]:
        return os.listdir(self.local_path(uri))

    def rmtree(self, uri: str) -> None:
        path = self.local_path(uri)
        if path == self._root:
            raise InputError("Refusing to remove the root of the artifact store.")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=False)
        elif os.path.lexists(path):
            os.remove(path)

    def new_uri(self, *parts: str) -> str:
        return self.local_path(os.path.join(self._root, *parts, new_id().hex))


class _AtomicWriter(PublishingFile):
    """A write-only file that is published under its final path by ``close()``.

    Bytes go to ``.<name>.<random>.tmp`` in the same directory; ``close()`` renames it over the
    final path (``os.replace`` is atomic on POSIX and Windows). Abandoning it (see
    :class:`~wharf.artifacts.publishing.PublishingFile`) deletes the temporary file instead.
    """

    def __init__(self, path: str, *, binary: bool, fsync: bool) -> None:
        self._path = path
        self._fsync = fsync
        parent, name = os.path.split(path)
        self._tmp = os.path.join(parent, f".{name}.{os.urandom(6).hex()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(self._tmp, flags, 0o666)
        except FileNotFoundError:
            os.makedirs(parent, exist_ok=True)
            fd = os.open(self._tmp, flags, 0o666)
        try:
            self._file = (
                open(fd, "wb") if binary else open(fd, "w", encoding="utf-8")  # noqa: SIM115
            )
        except BaseException:
            os.close(fd)
            os.remove(self._tmp)
            raise
        self._done = False

    def _publish(self) -> None:
        """Flush, then rename the temporary file over the final path."""
        try:
            self._file.flush()
            if self._fsync:
                os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self._path)
        except BaseException:
            self._abandon()
            raise
        if self._fsync:
            _fsync_dir(os.path.dirname(self._path))

    def _abandon(self) -> None:
        try:
            self._file.close()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._tmp)


def _fsync_dir(path: str) -> None:
    if os.name != "posix":  # pragma: no cover - directories cannot be opened on Windows
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
