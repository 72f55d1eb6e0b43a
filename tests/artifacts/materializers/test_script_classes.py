"""Classes of the user's script in pickled artifacts, and the script's materializers and types
by recorded import path, under the script's two module names: ``__main__`` (the script's own
process) and ``__wharf_script__`` (a step's own process).

A script is simulated by a module of that name with a ``__file__``, put in ``sys.modules``; the
e2e tests (``tests/e2e/test_script_classes.py``) run real scripts in real processes."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf.artifacts import LocalArtifactStore, load_artifact, save_artifact
from wharf.artifacts.materializers import CloudpickleMaterializer
from wharf.artifacts.materializers.registry import load_materializer, load_type
from wharf.artifacts.materializers.script_classes import SCRIPT_MODULE

PICKLE = "wharf.artifacts.materializers.cloudpickle_materializer:CloudpickleMaterializer"

SOURCE = """
from dataclasses import dataclass


def helper(x):
    return 2 * x


@dataclass
class DC:
    a: int

    def double(self):
        return helper(self.a)
"""

Script = Callable[[str, str], types.ModuleType]


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Iterator[Script]:
    """Make a script: ``script(module name, file path)`` executes :data:`SOURCE` as that module
    (in ``sys.modules`` for the test)."""

    def make(name: str, path: str) -> types.ModuleType:
        module = types.ModuleType(name)
        module.__file__ = path
        monkeypatch.setitem(sys.modules, name, module)
        exec(compile(SOURCE, path, "exec"), module.__dict__)
        return module

    yield make
    import cloudpickle

    if SCRIPT_MODULE in cloudpickle.list_registry_pickle_by_value():  # saving registered it
        cloudpickle.unregister_pickle_by_value(types.ModuleType(SCRIPT_MODULE))


def save(store: LocalArtifactStore, value: Any) -> str:
    uri = store.new_uri("p")
    CloudpickleMaterializer(uri, store).save(value)
    return uri


def load(store: LocalArtifactStore, uri: str) -> Any:
    return load_artifact(store, uri, "builtins:object", PICKLE)


def test_a_class_of_the_script_in_a_step_process_loads_where_there_is_no_script(
    script: Script, store: LocalArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = script(SCRIPT_MODULE, "/work/train.py")
    uri = save(store, module.DC(3))
    monkeypatch.delitem(sys.modules, SCRIPT_MODULE)  # the Client's process: no script

    loaded = load(store, uri)
    assert type(loaded).__qualname__ == "DC"
    assert (loaded.a, loaded.double()) == (3, 6)  # with the script's function, by value


@pytest.mark.parametrize(
    ("saved_as", "loaded_as"),
    [("__main__", "__main__"), ("__main__", SCRIPT_MODULE), (SCRIPT_MODULE, "__main__")],
)
def test_a_class_of_the_script_loads_as_the_live_class_where_the_script_runs(
    script: Script,
    store: LocalArtifactStore,
    monkeypatch: pytest.MonkeyPatch,
    saved_as: str,
    loaded_as: str,
) -> None:
    uri = save(store, script(saved_as, "/home/me/train.py").DC(3))
    monkeypatch.delitem(sys.modules, saved_as)
    # the script again in another process (a cached step), at another path (a code archive)
    live = script(loaded_as, "/tmp/code/train.py")

    loaded = load(store, uri)
    assert type(loaded) is live.DC
    assert loaded == live.DC(3)


def test_another_script_with_a_class_of_that_name_gets_the_pickled_class(
    script: Script, store: LocalArtifactStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = save(store, script(SCRIPT_MODULE, "/work/train.py").DC(3))
    monkeypatch.delitem(sys.modules, SCRIPT_MODULE)
    other = script("__main__", "/work/analyse.py")

    loaded = load(store, uri)
    assert type(loaded) is not other.DC
    assert (type(loaded).__qualname__, loaded.a) == ("DC", 3)


MATERIALIZER_SOURCE = """
from wharf.artifacts.materializers.base import Materializer


class Point:
    def __init__(self, x):
        self.x = x


class ScriptPointMaterializer(Materializer):
    ASSOCIATED_TYPES = (Point,)

    def save(self, data):
        self.write_bytes("x", str(data.x).encode())

    def load(self, data_type):
        return data_type(int(self.read_bytes("x")))
"""


@pytest.mark.parametrize(
    ("recorded_as", "defined_in"), [("__main__", SCRIPT_MODULE), (SCRIPT_MODULE, "__main__")]
)
def test_a_materializer_and_type_of_the_script_resolve_under_either_name(
    tmp_path: Path,
    store: LocalArtifactStore,
    registry: Any,
    monkeypatch: pytest.MonkeyPatch,
    recorded_as: str,
    defined_in: str,
) -> None:
    module = types.ModuleType(defined_in)
    module.__file__ = str(tmp_path / "train.py")
    monkeypatch.setitem(sys.modules, defined_in, module)
    name = f"PointMaterializerIn{defined_in.strip('_').title()}"  # one per case: classes live on
    exec(MATERIALIZER_SOURCE.replace("ScriptPointMaterializer", name), module.__dict__)
    materializer_path = f"{recorded_as}:{name}"

    assert load_materializer(materializer_path) is getattr(module, name)
    assert load_type(f"{recorded_as}:Point") is module.Point
    uri = store.new_uri("p")
    saved = save_artifact(module.Point(4), store, uri, registry, materializer=materializer_path)
    assert load_artifact(store, uri, f"{recorded_as}:Point", materializer_path).x == 4
    assert saved.materializer == f"{defined_in}:{name}"
