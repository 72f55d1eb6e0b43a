"""Hashing a single-file artifact while it is written: the hash ``save_artifact`` records is
always the one ``content_hash`` computes from the stored file, whether the watch could vouch
for the bytes (no read back) or not (then the file is read)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from wharf.artifacts import (
    LocalArtifactStore,
    Materializer,
    MaterializerRegistry,
    artifact_io,
    content_hash,
    save_artifact,
)
from wharf.artifacts.hashing import single_file_hash
from wharf.artifacts.watched import WatchedStore


class Custom(Materializer):
    """A single-file materializer whose way of writing is chosen per test."""

    ASSOCIATED_TYPES = (object,)
    SINGLE_FILE = True
    how = "write_bytes"

    def save(self, data: Any) -> None:
        store, uri = self.artifact_store, self.uri
        if self.how == "write_bytes":
            self.write_bytes("x", b"abc")
        elif self.how == "chunks":
            with store.open(uri, "wb") as f:
                for chunk in (b"a", bytearray(b"b"), memoryview(b"cd")):
                    f.write(chunk)
        elif self.how == "twice":
            self.write_bytes("x", b"first")
            self.write_bytes("x", b"second")
        elif self.how == "text":
            with store.open(uri, "w") as f:
                f.write("text é")
        elif self.how == "seek":
            with store.open(uri, "wb") as f:
                f.write(b"xxxx")
                f.seek(0)
                f.write(b"yy")
        elif self.how == "close":
            f = store.open(uri, "wb")
            f.write(b"closed by hand")
            f.close()
        elif self.how == "local_path":
            path = store.local_path(uri)  # type: ignore[attr-defined]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as raw:
                raw.write(b"behind the store's back")

    def load(self, data_type: type[Any]) -> Any:
        raise NotImplementedError


WATCHED = ["write_bytes", "chunks", "close"]
UNWATCHED = ["twice", "text", "seek", "local_path"]


@pytest.fixture
def no_read_back(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every re-read of a saved artifact (``content_hash`` in ``save_artifact``)."""
    calls: list[str] = []

    def counted(store: Any, uri: str) -> str:
        calls.append(uri)
        return content_hash(store, uri)

    monkeypatch.setattr(artifact_io, "content_hash", counted)
    return calls


@pytest.mark.parametrize("how", WATCHED + UNWATCHED)
def test_the_recorded_hash_is_the_files_hash(
    store: LocalArtifactStore,
    registry: MaterializerRegistry,
    monkeypatch: pytest.MonkeyPatch,
    no_read_back: list[str],
    how: str,
) -> None:
    monkeypatch.setattr(Custom, "how", how)
    uri = store.new_uri("a")
    saved = save_artifact(object(), store, uri, registry, materializer=Custom)
    assert saved.content_hash == content_hash(store, uri)
    assert no_read_back == ([] if how in WATCHED else [uri])


@pytest.mark.parametrize(
    "value", [0, -7, 2**80, 1.5, "é", b"\x00\xff", None, True, [1, "a"], {"k": (1, 2)}]
)
def test_builtin_values_are_hashed_without_a_read_back(
    store: LocalArtifactStore,
    registry: MaterializerRegistry,
    no_read_back: list[str],
    value: Any,
) -> None:
    uri = store.new_uri("v")
    saved = save_artifact(value, store, uri, registry)
    assert saved.content_hash == content_hash(store, uri)


def test_a_failed_write_publishes_no_digest(store: LocalArtifactStore) -> None:
    uri = store.new_uri("f")
    watch = WatchedStore(store, uri)
    with pytest.raises(RuntimeError), watch.open(uri, "wb") as f:
        f.write(b"half")
        raise RuntimeError("boom")
    assert watch.content_hash() is None and not store.exists(uri)


def test_single_file_hash_matches_content_hash(store: LocalArtifactStore) -> None:
    import hashlib

    uri = store.new_uri("s")
    with store.open(uri, "wb") as f:
        f.write(b"payload")
    assert single_file_hash(hashlib.sha256(b"payload").digest()) == content_hash(store, uri)
