"""Content hashes of artifacts: :func:`content_hash`, the cache key's value of an input artifact.

Invariants: a pure function of the bytes (the same files give the same hash on every machine,
store and Python version, and any change to a file's bytes, name or location changes it); the
definition is versioned (``wharf-content-v1``) and :func:`single_file_hash` agrees with it; memory
use does not grow with artifact size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from wharf.artifacts.store import ArtifactStore, join_uri

_HEADER = b"wharf-content-v1\0"
_CHUNK_SIZE = 1 << 20


def content_hash(store: ArtifactStore, uri: str) -> str:
    """The hex SHA-256 content hash of the file or directory tree at ``uri``.

    Definition (version 1): SHA-256 over the header ``b"wharf-content-v1\\0"`` followed by,
    for each file under the URI in the order of its relative path (``/``-separated, compared
    as strings), the 8-byte big-endian length of the UTF-8 relative path, the path, and the
    SHA-256 digest of the file's bytes (read in chunks). A URI that is a single file has the
    relative path ``""``. Directories contribute only through their files (empty directories
    are ignored)."""
    outer = hashlib.sha256(_HEADER)
    # A single file has the relative path ""; a missing URI fails with FileNotFoundError.
    files = sorted(_walk(store, uri, "")) if store.isdir(uri) else [("", uri)]
    for relative, file_uri in files:
        name = relative.encode("utf-8", "surrogateescape")
        outer.update(len(name).to_bytes(8, "big"))
        outer.update(name)
        outer.update(_file_digest(store, file_uri))
    return outer.hexdigest()


def single_file_hash(file_digest: bytes) -> str:
    """:func:`content_hash` of a URI that is one file whose bytes have SHA-256 ``file_digest``."""
    outer = hashlib.sha256(_HEADER)
    outer.update((0).to_bytes(8, "big"))  # the relative path "" (length 0, no bytes)
    outer.update(file_digest)
    return outer.hexdigest()


def _walk(store: ArtifactStore, uri: str, prefix: str) -> Iterator[tuple[str, str]]:
    for name in store.listdir(uri):
        child = join_uri(uri, name)
        relative = f"{prefix}{name}"
        if store.isdir(child):
            yield from _walk(store, child, relative + "/")
        else:
            yield relative, child


def _file_digest(store: ArtifactStore, uri: str) -> bytes:
    digest = hashlib.sha256()
    with store.open(uri, "rb") as f:
        while chunk := f.read(_CHUNK_SIZE):
            digest.update(chunk)
    return digest.digest()
