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
from wharf.artifacts.materializers.registry import ScriptClassError, load_materializer, load_type
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
    materializer_path = f"{recorded_as}:{name}"  # as a step names it

    assert load_materializer(materializer_path) is getattr(module, name)
    assert load_type(f"{recorded_as}:Point@train.py") is module.Point
    uri = store.new_uri("p")
    saved = save_artifact(module.Point(4), store, uri, registry, materializer=materializer_path)
    assert (saved.data_type, saved.materializer) == (
        f"{defined_in}:Point@train.py",
        f"{defined_in}:{name}@train.py",
    )
    recorded = (f"{recorded_as}:Point@train.py", f"{recorded_as}:{name}@train.py")
    assert load_artifact(store, uri, *recorded).x == 4


ENUM_SOURCE = """
import enum


class Color(enum.Enum):
    RED = 1
    GREEN = 2
"""

OTHER_ENUM_SOURCE = """
import enum


class Color(enum.Enum):  # another script's class of that name: 1 is BLUE here
    BLUE = 1
    RED = 2
"""


def script_of(
    monkeypatch: pytest.MonkeyPatch, name: str, path: str, source: str
) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def test_a_class_of_the_script_is_recorded_with_the_scripts_file_name_and_loads_only_there(
    store: LocalArtifactStore, registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another script's ``__main__`` may define another class of that name: it was used
    silently (an enum member of the same value, a named tuple with other fields)."""
    train = script_of(monkeypatch, "__main__", "/work/train.py", ENUM_SOURCE)
    saved = save_artifact(train.Color.RED, store, store.new_uri("c"), registry)
    assert saved.data_type == "__main__:Color@train.py"
    args = (store, saved.uri, saved.data_type, saved.materializer)

    analyse = script_of(monkeypatch, "__main__", "/work/analyse.py", OTHER_ENUM_SOURCE)
    with pytest.raises(ScriptClassError) as info:
        load_artifact(*args)
    assert str(info.value) == (
        "Cannot load type '__main__:Color@train.py': Color was defined in the __main__ of "
        "train.py, the script that made the artifact, so only a process running train.py has "
        "it (this process runs analyse.py, which has a Color of its own). Define the "
        "classes your steps return (and your materializers) in a module that your scripts "
        "import: artifacts saved after that load wherever it is imported."
    )
    assert info.value.script == "train.py"
    assert analyse.Color.BLUE  # untouched

    monkeypatch.delitem(sys.modules, "__main__")  # a notebook's __main__ has no file
    with pytest.raises(ScriptClassError, match=r"\(this process runs no script\)"):
        load_artifact(*args)

    # train.py again: in a step's process, from a code archive at another path
    live = script_of(monkeypatch, SCRIPT_MODULE, "/tmp/code/train.py", ENUM_SOURCE)
    assert load_artifact(*args) is live.Color.RED


def test_a_materializer_of_another_script_of_that_name_is_refused(
    tmp_path: Path, store: LocalArtifactStore, registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = MATERIALIZER_SOURCE.replace("ScriptPointMaterializer", "ProvenancePoints")
    train = script_of(monkeypatch, "__main__", str(tmp_path / "train.py"), source)
    uri = store.new_uri("p")
    saved = save_artifact(train.Point(4), store, uri, registry, train.ProvenancePoints)
    assert saved.materializer == "__main__:ProvenancePoints@train.py"

    script_of(monkeypatch, "__main__", str(tmp_path / "other.py"), source)
    with pytest.raises(ScriptClassError, match=r"^Cannot load materializer '__main__:Prov"):
        load_artifact(store, uri, saved.data_type, saved.materializer)


def test_a_script_class_recorded_without_its_script_warns_that_it_may_be_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Recorded by an older Wharf (or a script without a file): which script is not known."""
    analyse = script_of(monkeypatch, "__main__", "/work/analyse.py", OTHER_ENUM_SOURCE)
    with pytest.warns(UserWarning) as warned:
        assert load_type("__main__:Color") is analyse.Color
    (warning,) = warned
    assert str(warning.message).startswith(
        "Type '__main__:Color' was defined in the __main__ of the script that made the "
        "artifact, and its record does not say which script (saved by an older Wharf, or by a "
        "script without a file): this process uses the Color of analyse.py, another class of "
        "that name unless that is the same script."
    )
    assert warning.filename == __file__  # the caller's line, not Wharf's


def test_a_step_of_another_pipeline_script_is_refused_the_class(
    store: LocalArtifactStore, registry: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a step's own process the script is ``__wharf_script__`` (``__main__`` is Wharf's
    entry point): a step of evaluate.py given an output of train.py."""
    train = script_of(monkeypatch, "__main__", "/work/train.py", ENUM_SOURCE)
    saved = save_artifact(train.Color.GREEN, store, store.new_uri("c"), registry)
    script_of(monkeypatch, "__main__", "/venv/wharf/execution/entrypoint.py", "")
    script_of(monkeypatch, SCRIPT_MODULE, "/tmp/code/evaluate.py", OTHER_ENUM_SOURCE)
    with pytest.raises(ScriptClassError) as info:
        load_artifact(store, saved.uri, saved.data_type, saved.materializer)
    assert "(this process runs evaluate.py, which has a Color of its own)" in str(info.value)
