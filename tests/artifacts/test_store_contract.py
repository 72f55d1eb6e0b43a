"""The artifact-store contract, run against every store: the local directory store, the fsspec
store on ``file://`` and the fsspec store on S3 (a real moto server over HTTP, a fresh bucket per
test). Save, load, exists, list, remove, crash safety, content hashes, every materializer."""

from __future__ import annotations

import enum
import gc
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.artifacts.s3_server import MotoServer
from wharf.artifacts import (
    ArtifactStore,
    LocalArtifactStore,
    MaterializerRegistry,
    content_hash,
    fsspec_store,
    load_artifact,
    save_artifact,
)
from wharf.artifacts.fsspec_store import FsspecArtifactStore
from wharf.artifacts.materializers import base, cloudpickle_materializer
from wharf.core.errors import InputError, MaterializationError

STORES = ["local", "fsspec-file", "s3"]


class Colour(enum.Enum):
    RED = 1


@pytest.fixture(params=STORES)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return LocalArtifactStore(tmp_path / "store")
    if request.param == "fsspec-file":
        return FsspecArtifactStore(f"file://{tmp_path}/store")
    server: MotoServer = request.getfixturevalue("s3_server")
    bucket = server.new_bucket()
    return FsspecArtifactStore(f"s3://{bucket}/root", options={"endpoint_url": server.endpoint})


VALUES: list[Any] = [
    None,
    True,
    42,
    -0.5,
    "text ünïcode",
    b"\x00bytes",
    Colour.RED,
    {"a": [1, 2.5, None], "b": (1, "x")},
    [1, "two", 3.0],
    {1, 2, 3},
    frozenset({"x"}),
    np.arange(12, dtype=np.int32).reshape(3, 4),
    np.float64(2.5),
    pd.DataFrame({"x": [1, 2, 3], "y": ["a", "b", "c"]}),
    pd.Series([1.5, 2.5], name="s"),
    Fraction(1, 3),  # the pickle fallback (a directory artifact)
]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and bool(np.array_equal(a, b))
    if isinstance(a, pd.DataFrame):
        return isinstance(b, pd.DataFrame) and a.equals(b)
    if isinstance(a, pd.Series):
        return isinstance(b, pd.Series) and a.equals(b) and a.name == b.name
    return type(a) is type(b) and bool(a == b)


@pytest.mark.filterwarnings("ignore:Type .* is pickled")
@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_every_materializer_saves_and_loads(
    any_store: ArtifactStore, registry: MaterializerRegistry, value: Any, tmp_path: Path
) -> None:
    saved = save_artifact(value, any_store, any_store.new_uri("p", "run"), registry)
    loaded = load_artifact(any_store, saved.uri, saved.data_type, saved.materializer)
    assert _equal(value, loaded), (value, loaded)
    # The hash (computed while writing, or read back) is the hash of what is stored, and the
    # same on every store (a pure function of the bytes and names). A pandas artifact's zip
    # holds a timestamp, and zipfile lays it out differently on unseekable (upload) files.
    assert saved.content_hash == content_hash(any_store, saved.uri)
    if isinstance(value, pd.DataFrame | pd.Series):
        return
    reference = LocalArtifactStore(tmp_path / "reference")
    again = save_artifact(value, reference, reference.new_uri("p"), registry)
    assert again.content_hash == saved.content_hash


def test_files_directories_listing_and_removal(any_store: ArtifactStore) -> None:
    uri = any_store.new_uri("pipe", "run")
    assert uri.startswith(any_store.path + "/pipe/run/")
    assert not any_store.exists(uri)
    with any_store.open(f"{uri}/a.txt", "w") as f:
        f.write("héllo")
    with any_store.open(f"{uri}/sub/b.bin", "wb") as f:
        f.write(b"\x01\x02")
    assert any_store.exists(uri) and any_store.isdir(uri)
    assert any_store.exists(f"{uri}/a.txt") and not any_store.isdir(f"{uri}/a.txt")
    assert sorted(any_store.listdir(uri)) == ["a.txt", "sub"]
    assert any_store.listdir(f"{uri}/sub") == ["b.bin"]
    with any_store.open(f"{uri}/a.txt", "r") as f:
        assert f.read() == "héllo"
    with any_store.open(f"{uri}/sub/b.bin", "rb") as f:
        assert f.read() == b"\x01\x02"
    any_store.rmtree(f"{uri}/a.txt")
    assert not any_store.exists(f"{uri}/a.txt")
    any_store.rmtree(uri)
    assert not any_store.exists(uri)
    any_store.rmtree(uri)  # removing nothing is not an error
    with pytest.raises(FileNotFoundError):
        any_store.open(f"{uri}/a.txt", "rb")


def test_makedirs_refuses_an_existing_artifact(any_store: ArtifactStore) -> None:
    uri = any_store.new_uri("p")
    any_store.makedirs(uri, exist_ok=False)
    with any_store.open(f"{uri}/f", "wb") as f:
        f.write(b"x")
    with pytest.raises(FileExistsError):
        any_store.makedirs(uri, exist_ok=False)
    any_store.makedirs(uri)  # exist_ok


def test_uris_outside_the_root_are_refused(any_store: ArtifactStore) -> None:
    root = any_store.path
    for uri in (root + "/../elsewhere", root + "x/y", "/etc/passwd", root + "/a/../../b"):
        with pytest.raises(InputError):
            any_store.open(uri, "wb")
    with pytest.raises(InputError):
        any_store.rmtree(root)


def test_a_failed_write_leaves_nothing(any_store: ArtifactStore) -> None:
    uri = any_store.new_uri("p")
    with pytest.raises(KeyError), any_store.open(uri, "wb") as f:
        f.write(b"half of it")
        raise KeyError("the producer failed")
    assert not any_store.exists(uri)


def test_a_writer_is_invisible_until_closed_and_dropped_writers_publish_nothing(
    any_store: ArtifactStore,
) -> None:
    uri = any_store.new_uri("p")
    writer = any_store.open(uri, "wb")
    writer.write(b"x" * 1000)
    writer.flush()
    assert not any_store.exists(uri)  # a reader never sees a partial file
    writer.close()
    with any_store.open(uri, "rb") as f:
        assert f.read() == b"x" * 1000
    dropped = any_store.new_uri("p")
    writer = any_store.open(dropped, "wb")
    writer.write(b"never finished")
    del writer
    gc.collect()
    assert not any_store.exists(dropped)


def test_a_failed_save_removes_what_it_wrote(
    any_store: ArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = any_store.new_uri("p")
    with pytest.raises(MaterializationError, match="second file failed"):
        save_artifact(1, any_store, uri, registry, materializer=_FailingAfterFirstFile)  # type: ignore[arg-type]
    assert not any_store.exists(uri)


class _FailingAfterFirstFile:
    """A directory-layout materializer that writes one file and then fails."""

    SINGLE_FILE = False
    NEEDS_DATA_TYPE = True

    def __init__(self, uri: str, store: ArtifactStore) -> None:
        self.uri, self.store = uri, store

    def save(self, data: Any) -> None:
        with self.store.open(f"{self.uri}/first", "wb") as f:
            f.write(b"written")
        raise RuntimeError("second file failed")


def test_a_large_artifact_streams_in_parts_and_hashes_while_written(
    any_store: ArtifactStore, registry: MaterializerRegistry
) -> None:
    array = np.random.default_rng(0).integers(0, 255, size=40 * 2**20, dtype=np.uint8)
    saved = save_artifact(array, any_store, any_store.new_uri("big"), registry)
    loaded = load_artifact(any_store, saved.uri, saved.data_type, saved.materializer)
    assert np.array_equal(array, loaded)
    assert saved.content_hash == content_hash(any_store, saved.uri)


def test_an_interrupted_large_upload_publishes_nothing(any_store: ArtifactStore) -> None:
    uri = any_store.new_uri("big")
    chunk = b"z" * (8 * 2**20)
    with pytest.raises(KeyError), any_store.open(uri, "wb") as f:
        for _ in range(5):  # 40 MiB: several parts of a multipart upload are sent
            f.write(chunk)
        raise KeyError("killed mid-upload")
    assert not any_store.exists(uri)


@pytest.mark.parametrize("value", [[1, 2], Fraction(1, 2)], ids=["single-file", "directory"])
@pytest.mark.filterwarnings("ignore:Type .* is pickled")
def test_a_uri_handed_in_twice_is_refused(
    any_store: ArtifactStore, registry: MaterializerRegistry, value: Any
) -> None:
    uri = any_store.new_uri("p")
    save_artifact(value, any_store, uri, registry)
    with pytest.raises(MaterializationError, match="already exists"):
        save_artifact(value, any_store, uri, registry)


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes and reads cut in odd-sized parts, so that a few MiB cross many part boundaries
    (inside numpy elements, pickle opcodes and UTF-8 characters)."""
    monkeypatch.setattr(fsspec_store, "_WRITE_CHUNK", 2**20 + 7)
    monkeypatch.setattr(base, "READ_CHUNK", 2**16 + 3)
    monkeypatch.setattr(cloudpickle_materializer, "READ_CHUNK", 2**16 + 3)


LARGE_VALUES: list[Any] = [
    np.random.default_rng(1).bytes(3 * 2**20 + 11),
    np.asfortranarray(np.random.default_rng(2).random((1001, 517))),
    {"weights": np.random.default_rng(3).random(400_003), "blob": b"\x01" * (2**20 + 5)},
    "ü€😀" * 300_001,
]


@pytest.mark.usefixtures("small_parts")
@pytest.mark.filterwarnings("ignore:Type .* is pickled")
@pytest.mark.parametrize("value", LARGE_VALUES, ids=lambda v: type(v).__name__)
def test_a_large_value_round_trips_across_part_boundaries(
    any_store: ArtifactStore, registry: MaterializerRegistry, value: Any
) -> None:
    saved = save_artifact(value, any_store, any_store.new_uri("big"), registry)
    loaded = load_artifact(any_store, saved.uri, saved.data_type, saved.materializer)
    if isinstance(value, dict):
        assert loaded.keys() == value.keys() and loaded["blob"] == value["blob"]
        assert np.array_equal(loaded["weights"], value["weights"])
    else:
        assert _equal(value, loaded)
    assert saved.content_hash == content_hash(any_store, saved.uri)


@pytest.mark.usefixtures("small_parts")
def test_a_large_text_file_round_trips_across_part_boundaries(any_store: ArtifactStore) -> None:
    text = "ü€😀a" * 500_003
    uri = any_store.new_uri("text")
    with any_store.open(uri, "w") as f:
        assert f.write(text) == len(text)
    with any_store.open(uri, "r") as f:
        assert f.read() == text
