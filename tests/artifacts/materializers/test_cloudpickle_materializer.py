from __future__ import annotations

import json
import os
import re
import sys
import types
from typing import Any

import pytest

from wharf.artifacts import LocalArtifactStore, join_uri, load_artifact, save_artifact
from wharf.artifacts.materializers import CloudpickleMaterializer
from wharf.core.errors import MaterializationError

PATH = "wharf.artifacts.materializers.cloudpickle_materializer:CloudpickleMaterializer"


def test_round_trips_values_with_functions_and_local_classes(store: LocalArtifactStore) -> None:
    class Local:
        def __init__(self, f: Any) -> None:
            self.f = f

    uri = store.new_uri("p")
    materializer = CloudpickleMaterializer(uri, store)
    materializer.save(Local(lambda x: x + 1))
    loaded = materializer.load(object)
    assert loaded.f(1) == 2
    assert type(loaded).__name__ == "Local"


def test_records_the_versions_it_was_written_with(store: LocalArtifactStore) -> None:
    import cloudpickle

    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save({1, 2})
    assert sorted(os.listdir(uri)) == ["data.pkl", "versions.json"]
    with store.open(join_uri(uri, "versions.json"), "r") as f:
        versions = json.load(f)
    assert versions == {
        "python": ".".join(map(str, sys.version_info[:3])),
        "cloudpickle": cloudpickle.__version__,
    }


def test_load_needs_no_importable_type(store: LocalArtifactStore) -> None:
    assert CloudpickleMaterializer.NEEDS_DATA_TYPE is False
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save([1, 2])
    assert load_artifact(store, uri, "__main__:GoneClass", PATH) == [1, 2]


def test_unpickling_failure_names_both_versions(store: LocalArtifactStore) -> None:
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save("x")
    with store.open(join_uri(uri, "data.pkl"), "wb") as f:
        f.write(b"\x80\x05garbage")
    with store.open(join_uri(uri, "versions.json"), "w") as f:
        f.write('{"python": "3.0.0", "cloudpickle": "0.1"}')
    with pytest.raises(
        MaterializationError, match=re.escape("pickled with Python 3.0.0 with cloudpickle 0.1")
    ) as info:
        load_artifact(store, uri, "builtins:str", PATH)
    assert "\n" not in str(info.value)


def test_unpickling_failure_with_the_same_versions_blames_a_missing_name(
    store: LocalArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("wharf_test_gone_module")
    exec("class Gone:\n    pass\n", module.__dict__)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save(module.Gone())  # by reference: an importable module
    monkeypatch.delitem(sys.modules, module.__name__)
    with pytest.raises(MaterializationError) as info:
        load_artifact(store, uri, "wharf_test_gone_module:Gone", PATH)
    message = str(info.value)
    assert "No module named 'wharf_test_gone_module'" in message
    assert "pickled with these same versions" in message
    assert "a module or class it refers to by name is missing" in message
    assert ", this is Python" not in message


@pytest.mark.parametrize("keep", [20, 0], ids=["cut-short", "empty"])
def test_a_damaged_pickle_is_called_damaged_not_a_missing_name(
    store: LocalArtifactStore, keep: int
) -> None:
    # same versions: the blame went to "a module or class it refers to by name", which sends
    # the user looking for code when the file itself is cut short
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save({"weights": list(range(1000))})
    pickle_path = join_uri(uri, "data.pkl")
    with open(pickle_path, "rb") as f:
        head = f.read(keep)
    with open(pickle_path, "wb") as f:
        f.write(head)
    with pytest.raises(MaterializationError) as info:
        load_artifact(store, uri, "builtins:dict", PATH)
    message = str(info.value)
    assert "the pickle file is damaged (cut short or not a pickle)" in message
    assert "refers to by name" not in message
    assert "\n" not in message


def test_unpickling_failure_without_versions_file(store: LocalArtifactStore) -> None:
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save("x")
    os.remove(join_uri(uri, "versions.json"))
    with store.open(join_uri(uri, "data.pkl"), "wb") as f:
        f.write(b"not a pickle")
    with pytest.raises(MaterializationError, match="unknown versions"):
        load_artifact(store, uri, "builtins:str", PATH)


def test_explicit_use_does_not_warn(
    store: LocalArtifactStore, recwarn: pytest.WarningsRecorder
) -> None:
    from wharf.artifacts import default_registry

    saved = save_artifact(7, store, store.new_uri("p"), default_registry(), CloudpickleMaterializer)
    assert saved.materializer == PATH
    assert load_artifact(store, saved.uri, saved.data_type, saved.materializer) == 7
    assert not recwarn.list
