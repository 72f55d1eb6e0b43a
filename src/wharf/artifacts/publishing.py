"""The write-only file every artifact store hands out for ``"wb"`` and ``"w"``.

Owns :class:`PublishingFile`, the part of a store's writer that is the same for every store; each
store supplies only how it publishes and how it abandons (:mod:`wharf.artifacts.store`: rename a
temporary file; :mod:`wharf.artifacts.fsspec_store`: complete or abort an upload).

Invariants: the file is published at its final place by ``close()`` and nowhere before; leaving
a ``with`` block with an exception, :meth:`~PublishingFile.discard` or dropping the object
unclosed abandons it; a file is published or abandoned at most once, whichever comes first.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from types import TracebackType


class PublishingFile(ABC):
    """A write-only file published by ``close()``; every attribute not named here is the
    underlying file's (``self._file``).

    A subclass opens ``self._file`` in its ``__init__`` and then sets ``self._done = False``;
    until it does, the object is closed and closing or dropping it does nothing.
    """

    _file: Any
    _done: bool = True

    @abstractmethod
    def _publish(self) -> None:
        """Make what was written appear at the final place (cleaning up if that fails)."""

    @abstractmethod
    def _abandon(self) -> None:
        """Drop what was written; nothing appears at the final place."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never delegate private names (e.g. before __init__ ended)
            raise AttributeError(name)
        return getattr(self._file, name)

    @property
    def closed(self) -> bool:
        return self._done

    def close(self) -> None:
        """Publish the file at its final place."""
        if self._done:
            return
        self._done = True
        self._publish()

    def discard(self) -> None:
        """Drop everything written; nothing appears at the final place."""
        if self._done:
            return
        self._done = True
        self._abandon()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        if not self._done:
            with contextlib.suppress(Exception):
                self.discard()
