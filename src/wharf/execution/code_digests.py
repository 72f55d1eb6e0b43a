"""File hashes remembered between code archive scans, so an unchanged code base is not re-read.

Owns :class:`FileHashes`: one JSON file per source root (``<dir>/<sha256 of the root's
path>.json``). Invariants: a remembered hash is used only for a file unchanged since and not
changed within the tick of its hashing; the record is replaced atomically, and a missing,
unreadable or malformed record means "nothing remembered", never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

RACY_SECONDS = 2.0
_VERSION = 1


def _signature(info: os.stat_result) -> list[int]:
    return [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]


class FileHashes:
    """The remembered hashes of one source root: each relative path's size, modification and
    change times (ns), inode and SHA-256, as they were when it was hashed, and when the record
    was written (only when something changed)."""

    def __init__(
        self, path: Path, root: str, entries: dict[str, list[Any]], written_ns: int
    ) -> None:
        self._path = path
        self._root = root
        self._entries = entries
        self._trusted_before = written_ns - int(RACY_SECONDS * 1e9)
        self._changed = False

    @classmethod
    def load(cls, directory: Path, root: Path) -> FileHashes:
        name = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:32] + ".json"
        path = directory / name
        try:
            data = json.loads(path.read_bytes())
            if data.get("version") == _VERSION and data.get("root") == str(root):
                return cls(path, str(root), dict(data["files"]), int(data["written_ns"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            pass  # nothing remembered
        return cls(path, str(root), {}, 0)

    def get(self, name: str, info: os.stat_result) -> bytes | None:
        """The remembered hash of ``name`` if the file is unchanged since, else None: size,
        both times and inode all unchanged, and its modification time at least
        :data:`RACY_SECONDS` before the record was written (a file changed within the same
        timestamp tick as its hashing is re-read, as git does with "racily clean" entries)."""
        entry = self._entries.get(name)
        if entry is None or entry[:4] != _signature(info):
            return None
        if info.st_mtime_ns >= self._trusted_before:
            return None  # changed within a tick of being hashed: not to be trusted
        try:
            return bytes.fromhex(entry[4])
        except (IndexError, ValueError, TypeError):
            return None

    def put(self, name: str, info: os.stat_result, file_hash: bytes) -> None:
        self._entries[name] = [*_signature(info), file_hash.hex()]
        self._changed = True

    def save(self) -> None:
        """Write the record if anything changed; a failure to write only loses the speed-up."""
        if not self._changed:
            return
        data = {
            "version": _VERSION,
            "root": self._root,
            "written_ns": time.time_ns(),
            "files": self._entries,
        }
        with contextlib.suppress(OSError):
            self._path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(data, out, separators=(",", ":"))
                os.replace(tmp, self._path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise
        self._changed = False
