"""The fsspec store on S3 (a real moto server over HTTP): one object per small artifact, aborted
uploads, and the failures users meet (no bucket, wrong credentials, server gone) as one line."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.artifacts.s3_server import MotoServer
from wharf.artifacts import MaterializerRegistry, load_artifact, save_artifact
from wharf.artifacts.fsspec_store import ArtifactStoreError, FsspecArtifactStore
from wharf.core.errors import MaterializationError


def _store(server: MotoServer, bucket: str) -> FsspecArtifactStore:
    return FsspecArtifactStore(f"s3://{bucket}/root", options={"endpoint_url": server.endpoint})


def test_a_small_artifact_is_one_object_and_no_marker(
    s3_server: MotoServer, s3_bucket: str, registry: MaterializerRegistry
) -> None:
    store = _store(s3_server, s3_bucket)
    saved = save_artifact({"a": 1}, store, store.new_uri("pipe", "run"), registry)
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert keys == [saved.uri.removeprefix(f"s3://{s3_bucket}/")]


def test_an_aborted_large_upload_leaves_no_parts(s3_server: MotoServer, s3_bucket: str) -> None:
    store = _store(s3_server, s3_bucket)
    uri = store.new_uri("big")
    with pytest.raises(KeyError), store.open(uri, "wb") as f:
        f.write(b"z" * (40 * 2**20))
        raise KeyError("killed mid-upload")
    client = s3_server.client()
    assert client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads", []) == []
    assert client.list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0


def test_a_bucket_that_does_not_exist(
    s3_server: MotoServer, registry: MaterializerRegistry
) -> None:
    store = _store(s3_server, "no-such-bucket")
    with pytest.raises(MaterializationError) as caught:
        save_artifact([1, 2], store, store.new_uri("p"), registry)
    message = str(caught.value)
    assert "'s3://no-such-bucket/root'" in message and s3_server.endpoint in message
    assert "bucket does not exist" in message.lower() and "\n" not in message


def test_wrong_credentials_are_one_clear_error(
    tmp_path: object, registry: MaterializerRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "1")  # then moto checks signatures
    server = MotoServer()
    try:
        bucket = server.new_bucket()  # the one unauthenticated action
        monkeypatch.setenv("WRONG_KEY", "AKIANOTAKEY")
        monkeypatch.setenv("WRONG_SECRET", "not-the-secret")
        store = FsspecArtifactStore(
            f"s3://{bucket}/root",
            options={
                "endpoint_url": server.endpoint,
                "key_env": "WRONG_KEY",
                "secret_env": "WRONG_SECRET",
            },
        )
        with pytest.raises(MaterializationError) as caught:
            save_artifact(np.arange(3), store, store.new_uri("p"), registry)
        message = str(caught.value)
        assert f"'s3://{bucket}/root' at {server.endpoint}" in message
        assert "PermissionError" in message or "InvalidAccessKeyId" in message, message
    finally:
        server.stop()


def test_a_stopped_server_fails_fast_with_the_store_named(
    registry: MaterializerRegistry,
) -> None:
    server = MotoServer()
    bucket = server.new_bucket()
    store = _store(server, bucket)
    saved = save_artifact(7, store, store.new_uri("p"), registry)
    server.stop()
    started = time.monotonic()
    with pytest.raises(MaterializationError) as caught:
        load_artifact(store, saved.uri, saved.data_type, saved.materializer)
    with pytest.raises(MaterializationError) as saving:
        save_artifact(8, store, store.new_uri("p"), registry)
    assert time.monotonic() - started < 20  # a few short retries, not a retry storm
    for error in (caught.value, saving.value):
        message = str(error)
        assert f"Artifact store 's3://{bucket}/root' at {server.endpoint} cannot" in message
        assert "Could not connect" in message and "\n" not in message
    assert isinstance(caught.value.__cause__, ArtifactStoreError)


def test_a_large_save_streams_without_a_copy_of_the_artifact(
    s3_server: MotoServer, s3_bucket: str, registry: MaterializerRegistry
) -> None:
    import tracemalloc

    # Memory is bounded by the part size (here S3's minimum, 5 MiB) and numpy's 16 MiB write
    # chunks, not by the artifact's size.
    store = FsspecArtifactStore(
        f"s3://{s3_bucket}/root",
        options={"endpoint_url": s3_server.endpoint, "default_block_size": 5 * 2**20},
    )
    save_artifact(np.zeros(12 * 2**20, np.uint8), store, store.new_uri("warm"), registry)
    peaks = {}
    for mib in (40, 96):  # botocore's models are loaded by now
        array = np.zeros(mib * 2**20, dtype=np.uint8)
        tracemalloc.start()
        try:
            saved = save_artifact(array, store, store.new_uri("big"), registry)
            _, peaks[mib] = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        del array
    assert peaks[96] < 80 * 2**20, peaks  # less than the artifact ...
    assert peaks[96] < peaks[40] + 8 * 2**20, peaks  # ... and not growing with it
    assert store.exists(saved.uri)


def test_a_writer_killed_mid_upload_publishes_nothing(
    s3_server: MotoServer, s3_bucket: str
) -> None:
    import subprocess
    import sys

    store = _store(s3_server, s3_bucket)
    uri = store.new_uri("killed")
    script = f"""
import os
from wharf.artifacts.fsspec_store import FsspecArtifactStore
store = FsspecArtifactStore({store.path!r}, options={{"endpoint_url": {s3_server.endpoint!r}}})
f = store.open({uri!r}, "wb")
f.write(b"z" * (40 * 2**20))  # two parts uploaded, the rest buffered
os._exit(9)  # as if killed: no close, no cleanup
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, check=False, timeout=120
    )
    assert done.returncode == 9, done.stderr
    assert not store.exists(uri)
    assert s3_server.client().list_objects_v2(Bucket=s3_bucket).get("KeyCount") == 0


def test_another_store_object_sees_an_existing_artifact(
    s3_server: MotoServer, s3_bucket: str, registry: MaterializerRegistry
) -> None:
    uri = _store(s3_server, s3_bucket).new_uri("p")
    writer, other = _store(s3_server, s3_bucket), _store(s3_server, s3_bucket)
    save_artifact([1], writer, uri, registry)
    assert other.exists(uri) and not other.isdir(uri)
    with pytest.raises(MaterializationError, match="already exists"):
        save_artifact([2], other, uri, registry)


def test_threads_reaching_a_new_store_together_build_one_file_system(
    s3_server: MotoServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's steps issue URIs on one store at once: the S3 file system is built once."""
    import threading

    import fsspec.core

    built: list[str] = []
    real_url_to_fs = fsspec.core.url_to_fs

    def counting_url_to_fs(url: str, **options: object) -> object:
        built.append(url)
        return real_url_to_fs(url, **options)

    monkeypatch.setattr(fsspec.core, "url_to_fs", counting_url_to_fs)
    store = _store(s3_server, s3_bucket)
    start = threading.Barrier(16)
    uris: list[str] = []

    def issue() -> None:
        start.wait()
        uris.append(store.new_uri("pipe", "run"))

    threads = [threading.Thread(target=issue) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 1 and len(set(uris)) == 16


@pytest.mark.filterwarnings("ignore:Type .* is pickled")
def test_one_large_write_is_uploaded_in_parts_and_read_back_exactly(
    s3_server: MotoServer, s3_bucket: str, registry: MaterializerRegistry
) -> None:
    # One write() of a whole bytes value (and of a pickled array) crosses several 5 MiB parts.
    store = FsspecArtifactStore(
        f"s3://{s3_bucket}/root",
        options={"endpoint_url": s3_server.endpoint, "default_block_size": 5 * 2**20},
    )
    data = np.random.default_rng(0).bytes(11 * 2**20 + 5)
    saved = save_artifact(data, store, store.new_uri("bytes"), registry)
    key = saved.uri.removeprefix(f"s3://{s3_bucket}/")
    etag = s3_server.client().head_object(Bucket=s3_bucket, Key=key)["ETag"]
    assert etag.strip('"').endswith("-3")  # a multipart upload of three parts
    assert load_artifact(store, saved.uri, saved.data_type, saved.materializer) == data
    value = {"weights": np.random.default_rng(1).random(1_500_001)}  # 11.4 MiB
    saved = save_artifact(value, store, store.new_uri("pickled"), registry)
    loaded = load_artifact(store, saved.uri, saved.data_type, saved.materializer)
    assert np.array_equal(loaded["weights"], value["weights"])
