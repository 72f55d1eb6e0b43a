from __future__ import annotations

import hashlib

import pytest

from wharf.artifacts.hashing import content_hash
from wharf.artifacts.store import LocalArtifactStore, join_uri


def _write(store: LocalArtifactStore, uri: str, files: dict[str, bytes]) -> str:
    store.makedirs(uri)
    for relative, data in files.items():
        with store.open(join_uri(uri, *relative.split("/")), "wb") as f:
            f.write(data)
    return uri


def _tree(store: LocalArtifactStore, files: dict[str, bytes]) -> str:
    return _write(store, store.new_uri("h"), files)


def _reference(files: dict[str, bytes]) -> str:
    """The documented definition, written out independently."""
    outer = hashlib.sha256(b"wharf-content-v1\0")
    for relative in sorted(files):
        name = relative.encode()
        outer.update(len(name).to_bytes(8, "big") + name)
        outer.update(hashlib.sha256(files[relative]).digest())
    return outer.hexdigest()


def test_matches_the_documented_definition(store: LocalArtifactStore) -> None:
    files = {"b.bin": b"\x00\x01", "a.json": b"[1]", "sub/c": b"", "sub/deeper/d": b"d" * 10}
    assert content_hash(store, _tree(store, files)) == _reference(files)


def test_pinned_value_for_a_small_artifact(store: LocalArtifactStore) -> None:
    # Changing this value invalidates every cache key ever computed: bump the header instead.
    uri = _tree(store, {"data.json": b"7"})
    assert (
        content_hash(store, uri)
        == "13361ea3386b6dfd2852c4a53ee4070aa17d22c57a678693141d916f7a716c54"
    )


def test_stable_across_locations_and_creation_order(store: LocalArtifactStore) -> None:
    files = {"x": b"1", "y/z": b"2", "a": b"3"}
    first = _tree(store, files)
    second = _tree(store, dict(reversed(list(files.items()))))
    assert content_hash(store, first) == content_hash(store, second)
    assert content_hash(store, first) == content_hash(store, first)


@pytest.mark.parametrize(
    "changed",
    [
        {"x": b"1!", "y/z": b"2"},  # a byte changed
        {"x2": b"1", "y/z": b"2"},  # a file renamed
        {"y/x": b"1", "y/z": b"2"},  # a file moved
        {"x": b"1", "y/z": b"2", "e": b""},  # an empty file added
        {"x": b"1"},  # a file removed
    ],
)
def test_sensitive_to_bytes_names_and_layout(
    store: LocalArtifactStore, changed: dict[str, bytes]
) -> None:
    base = content_hash(store, _tree(store, {"x": b"1", "y/z": b"2"}))
    assert content_hash(store, _tree(store, changed)) != base


def test_name_and_content_boundaries_cannot_be_shifted(store: LocalArtifactStore) -> None:
    assert content_hash(store, _tree(store, {"ab": b"c"})) != content_hash(
        store, _tree(store, {"a": b"bc"})
    )


def test_empty_directories_are_ignored(store: LocalArtifactStore) -> None:
    plain = _tree(store, {"f": b"1"})
    with_empty = _tree(store, {"f": b"1"})
    store.makedirs(join_uri(with_empty, "empty", "nested"))
    assert content_hash(store, plain) == content_hash(store, with_empty)


def test_single_file_uri_hashes_its_bytes_only(store: LocalArtifactStore) -> None:
    tree = _tree(store, {"one.bin": b"payload", "two.bin": b"payload"})
    one = content_hash(store, join_uri(tree, "one.bin"))
    assert one == content_hash(store, join_uri(tree, "two.bin"))
    assert one == _reference({"": b"payload"})
    assert one != content_hash(store, _tree(store, {"one.bin": b"payload"}))


def test_large_files_are_streamed_and_hashed_exactly(store: LocalArtifactStore) -> None:
    big = bytes(range(256)) * (3 * 4096 + 7)  # > 3 MiB: several chunks, ragged end
    uri = _tree(store, {"big": big})
    assert content_hash(store, uri) == _reference({"big": big})


def test_empty_directory(store: LocalArtifactStore) -> None:
    uri = _tree(store, {})
    assert content_hash(store, uri) == hashlib.sha256(b"wharf-content-v1\0").hexdigest()


def test_missing_uri_raises_file_not_found(store: LocalArtifactStore) -> None:
    with pytest.raises(FileNotFoundError):
        content_hash(store, store.new_uri("missing"))
