"""File hashes remembered between code archive scans, so an unchanged code base is not re-read.

One JSON file per source root (``<dir>/<sha256 of the root's path>.json``) maps each relative
path to its size, modification and change times (ns), inode and SHA-256, as they were when it
was hashed, and records when the file was written.

Invariants:

- A remembered hash is used only when size, both times and inode are all unchanged, and the
  file's modification time lies at least :data:`RACY_SECONDS` before the record was written:
  a file changed within the same timestamp tick as its hashing is never trusted (it is re-read
  next time, as git does with "racily clean" entries).
- The record is replaced atomically (a temporary file renamed over it); a missing, unreadable
  or malformed record means "nothing remembered", never an error. It is written only when
  something changed.
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
    """The remembered hashes of one source root; see the module docstring."""

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
        """The remembered hash of ``name`` if the file is unchanged since, else None."""
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
