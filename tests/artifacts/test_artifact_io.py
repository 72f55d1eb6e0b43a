from __future__ import annotations

import hashlib
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from wharf.artifacts import (
    LocalArtifactStore,
    Materializer,
    MaterializerRegistry,
    SavedArtifact,
    content_hash,
    join_uri,
    load_artifact,
    materializer_path,
    save_artifact,
)
from wharf.artifacts.materializers import BuiltInContainerMaterializer, CloudpickleMaterializer
from wharf.core.errors import InputError, MaterializationError

BUILTIN = "wharf.artifacts.materializers.builtin:BuiltInMaterializer"


class WritesThenFails(Materializer):
    """Writes one complete file, starts a second one, then crashes mid-write."""

    ASSOCIATED_TYPES = (object,)

    def save(self, data: Any) -> None:
        self.write_bytes("complete.bin", b"done")
        with self.artifact_store.open(self.file_uri("half.bin"), "wb") as f:
            f.write(b"half")
            raise RuntimeError("disk on fire\nsecond line")

    def load(self, data_type: type[Any]) -> Any:
        raise NotImplementedError


class Interrupted(WritesThenFails):
    def save(self, data: Any) -> None:
        self.write_bytes("complete.bin", b"done")
        raise KeyboardInterrupt


class RaisesMaterializationError(WritesThenFails):
    def save(self, data: Any) -> None:
        self.write_bytes("complete.bin", b"done")
        raise MaterializationError("custom one-line reason")


class OneFileThenFails(Materializer):
    """A single-file materializer that crashes in the middle of writing its file."""

    ASSOCIATED_TYPES = (object,)
    SINGLE_FILE = True

    def save(self, data: Any) -> None:
        with self.artifact_store.open(self.file_uri("data.bin"), "wb") as f:
            f.write(b"half")
            raise RuntimeError("disk on fire")

    def load(self, data_type: type[Any]) -> Any:
        raise NotImplementedError


class TwoFilesInOne(Materializer):
    """Declares the single-file layout, then writes two files (both would be the URI)."""

    ASSOCIATED_TYPES = (object,)
    SINGLE_FILE = True

    def save(self, data: Any) -> None:
        self.write_bytes("first", b"1")
        self.write_bytes("second", b"2")

    def load(self, data_type: type[Any]) -> Any:
        return int(self.read_bytes("first"))


class Failing(Materializer):
    ASSOCIATED_TYPES = (object,)

    def save(self, data: Any) -> None:
        self.write_bytes("x", b"x")

    def load(self, data_type: type[Any]) -> Any:
        raise ValueError("bad\nbytes")


def test_save_returns_what_the_metadata_store_records(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("pipeline", "step", "output")
    saved = save_artifact({"a": [1, 2]}, store, uri, registry)
    assert saved == SavedArtifact(
        uri=uri,
        data_type="builtins:dict",
        materializer="wharf.artifacts.materializers.builtin:BuiltInContainerMaterializer",
        content_hash=content_hash(store, uri),
    )
    assert load_artifact(store, uri, saved.data_type, saved.materializer) == {"a": [1, 2]}


def test_equal_values_get_equal_hashes_and_different_values_do_not(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    def digest(value: Any) -> str:
        return save_artifact(value, store, store.new_uri("h"), registry).content_hash

    assert digest(7) == digest(7)
    assert digest(7) != digest(8)
    assert digest({"a", "b", "c"}) == digest({"c", "b", "a"})
    assert digest(1) != digest(True) != digest(1.0)


@pytest.mark.parametrize(
    "override", [BuiltInContainerMaterializer, materializer_path(BuiltInContainerMaterializer)]
)
def test_explicit_materializer_overrides_the_registry(
    store: LocalArtifactStore, registry: MaterializerRegistry, override: Any
) -> None:
    saved = save_artifact([1], store, store.new_uri("o"), registry, materializer=override)
    assert saved.materializer == materializer_path(BuiltInContainerMaterializer)


def test_single_file_artifacts_are_one_file_at_the_uri(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("pipeline", "run")
    saved = save_artifact({"a": 1}, store, uri, registry)
    assert os.path.isfile(uri)
    # The run's directory holds the artifact and nothing else (no temporary files left).
    assert os.listdir(os.path.dirname(uri)) == [os.path.basename(uri)]
    with open(uri, "rb") as f:
        payload = f.read()
    outer = hashlib.sha256(b"wharf-content-v1\0" + (0).to_bytes(8, "big"))
    outer.update(hashlib.sha256(payload).digest())
    assert saved.content_hash == outer.hexdigest()  # hashed as a single file (relative path "")


def test_multi_file_artifacts_keep_a_directory(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("pickled")
    save_artifact([1], store, uri, registry, CloudpickleMaterializer)
    assert sorted(os.listdir(uri)) == ["data.pkl", "versions.json"]


def test_an_existing_directory_is_refused_for_single_file_artifacts(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("taken")
    store.makedirs(uri)
    with pytest.raises(MaterializationError, match="already exists"):
        save_artifact(1, store, uri, registry)
    assert os.path.isdir(uri) and os.listdir(uri) == []


def test_a_crash_in_a_single_file_save_leaves_nothing(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("crash")
    with pytest.raises(MaterializationError, match="RuntimeError: disk on fire"):
        save_artifact(1, store, uri, registry, materializer=OneFileThenFails)
    assert os.listdir(os.path.dirname(uri)) == []


def test_an_existing_uri_is_refused_and_left_alone(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved = save_artifact(1, store, store.new_uri("x"), registry)
    with pytest.raises(MaterializationError, match="already exists"):
        save_artifact(2, store, saved.uri, registry)
    assert load_artifact(store, saved.uri, saved.data_type, saved.materializer) == 1


def test_a_uri_outside_the_store_is_refused(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    with pytest.raises(InputError, match="outside"):
        save_artifact(1, store, join_uri(store.path, "..", "escape"), registry)


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    ("value", "type_name"),
    [(_generator(), "builtins:generator"), (threading.Lock(), "_thread:lock")],
    ids=["generator", "lock"],
)
def test_unserialisable_values_raise_one_clear_line_and_leave_nothing(
    store: LocalArtifactStore, registry: MaterializerRegistry, value: Any, type_name: str
) -> None:
    uri = store.new_uri("bad")
    with (
        warnings.catch_warnings(record=True) as caught,
        pytest.raises(MaterializationError) as info,
    ):
        warnings.simplefilter("always")
        save_artifact(value, store, uri, registry)
    assert caught == []  # no "pickled with cloudpickle" warning on top of the failure
    message = str(info.value)
    assert "\n" not in message
    assert f"Cannot save a value of type '{type_name}' with CloudpickleMaterializer" in message
    assert "TypeError" in message
    assert message.endswith(  # what a newcomer can do about it
        ". No materializer saves this type, and the pickle fallback cannot: return what can be "
        "stored instead (plain data, the object's state), or write a Materializer for it and "
        "name it in the step: @step(output_materializers=YourMaterializer)."
    )
    assert isinstance(info.value.__cause__, TypeError)
    assert not os.path.lexists(uri)


def test_a_crash_in_save_leaves_nothing_at_the_uri(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("crash")
    with pytest.raises(MaterializationError) as info:
        save_artifact(1, store, uri, registry, materializer=WritesThenFails)
    assert str(info.value) == (
        "Cannot save a value of type 'builtins:int' with WritesThenFails: "
        "RuntimeError: disk on fire second line"
    )
    assert not os.path.lexists(uri)
    assert os.listdir(os.path.dirname(uri)) == []


def test_base_exceptions_clean_up_and_propagate_unchanged(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("interrupt")
    with pytest.raises(KeyboardInterrupt):
        save_artifact(1, store, uri, registry, materializer=Interrupted)
    assert not os.path.lexists(uri)


def test_materialization_errors_from_a_materializer_propagate_unchanged(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    uri = store.new_uri("m")
    with pytest.raises(MaterializationError, match=r"^custom one-line reason$"):
        save_artifact(1, store, uri, registry, materializer=RaisesMaterializationError)
    assert not os.path.lexists(uri)


class TestLoadErrors:
    def test_missing_artifact(self, store: LocalArtifactStore) -> None:
        uri = store.new_uri("missing")
        with pytest.raises(MaterializationError) as info:
            load_artifact(store, uri, "builtins:int", BUILTIN)
        assert str(info.value).startswith(f"Cannot load artifact {uri!r} of type 'builtins:int'")
        assert "FileNotFoundError" in str(info.value)

    def test_loader_errors_become_one_line(self, store: LocalArtifactStore) -> None:
        uri = store.new_uri("f")
        Failing(uri, store).save(None)
        with pytest.raises(MaterializationError, match=r"ValueError: bad bytes$") as info:
            load_artifact(store, uri, "builtins:int", materializer_path(Failing))
        assert "\n" not in str(info.value)

    def test_unknown_materializer_path(self, store: LocalArtifactStore) -> None:
        with pytest.raises(MaterializationError, match="Unknown materializer"):
            load_artifact(store, store.new_uri("x"), "builtins:int", "wharf.nothing:Here")

    def test_unimportable_type_fails_for_materializers_that_need_it(
        self, store: LocalArtifactStore, registry: MaterializerRegistry
    ) -> None:
        saved = save_artifact(1, store, store.new_uri("x"), registry)
        with pytest.raises(MaterializationError, match="Cannot import type"):
            load_artifact(store, saved.uri, "__main__:Gone", saved.materializer)

    def test_unimportable_type_is_fine_for_pickles(
        self, store: LocalArtifactStore, registry: MaterializerRegistry
    ) -> None:
        saved = save_artifact([1], store, store.new_uri("x"), registry, CloudpickleMaterializer)
        assert load_artifact(store, saved.uri, "__main__:Gone", saved.materializer) == [1]


def test_loading_an_artifact_whose_files_are_gone_says_how_to_make_it_again(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    """Deleted from the store by hand: the producing step runs again when next needed."""
    saved = save_artifact({"a": 1}, store, store.new_uri("gone"), registry)
    store.rmtree(saved.uri)
    with pytest.raises(MaterializationError) as info:
        load_artifact(store, saved.uri, saved.data_type, saved.materializer)
    message = str(info.value)
    assert "FileNotFoundError" in message
    assert (
        ". Its files are gone from the artifact store; the next run that needs it runs the "
        "step that produced it again" in message
    )  # a sentence of its own
    assert "\n" not in message


def test_a_single_file_materializer_that_writes_two_files_is_refused_and_leaves_nothing(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    """The second file would silently replace the first (the run would load the wrong bytes)."""
    uri = store.new_uri("two")
    with pytest.raises(MaterializationError, match="declares SINGLE_FILE = True but uses two"):
        save_artifact(1, store, uri, registry, materializer=TwoFilesInOne)
    assert os.listdir(os.path.dirname(uri)) == []
