"""The import-path helpers of ``wharf.artifacts.materializers.registry``."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.artifacts.materializers.test_registry import ChildMaterializer, Outer
from wharf.artifacts import (
    load_artifact,
    load_materializer,
    load_type,
    materializer_path,
    type_path,
)
from wharf.artifacts.materializers import BuiltInMaterializer
from wharf.artifacts.materializers.numpy_materializer import NumpyMaterializer
from wharf.artifacts.materializers.pandas_materializer import PandasMaterializer
from wharf.artifacts.materializers.registry import UnresolvedClassError
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.errors import MaterializationError

REGISTRY_TESTS = "tests.artifacts.materializers.test_registry"


class TestImportPaths:
    @pytest.mark.parametrize(
        ("t", "path"),
        [
            (int, "builtins:int"),
            (type(None), "builtins:NoneType"),
            (Outer.Inner, f"{REGISTRY_TESTS}:Outer.Inner"),
            (np.ndarray, "numpy:ndarray"),
            (pd.DataFrame, f"{pd.DataFrame.__module__}:DataFrame"),
        ],
    )
    def test_type_paths_round_trip(self, t: type, path: str) -> None:
        assert type_path(t) == path
        assert load_type(path) is t

    @pytest.mark.parametrize(
        ("path", "message"),
        [
            ("no_colon", "expected 'module:name'"),
            (":int", "expected 'module:name'"),
            ("builtins:", "expected 'module:name'"),
            ("wharf.no_such_module:X", "is not imported in this process"),
            ("builtins:no_such_name", "Cannot import type"),
            ("os:sep", "is not a class"),
            (f"{__name__}:TestImportPaths.<locals>.X", "Cannot import type"),
        ],
    )
    def test_load_type_errors(self, path: str, message: str) -> None:
        with pytest.raises(MaterializationError, match=message):
            load_type(path)

    @pytest.mark.parametrize(
        ("path", "message"),
        [
            ("wharf.no_such_module:X", "is not imported in this process"),
            ("builtins:no_such_name", "has no attribute 'no_such_name'"),
            ("__main__:NoSuchClass", "a class of the pipeline's script, which this process"),
            ("__wharf_script__:NoSuchClass", "a class of the pipeline's script"),
        ],
    )
    def test_a_class_this_process_lacks_is_an_unresolved_class(
        self, path: str, message: str
    ) -> None:
        # the CLI tells these apart (it imports no user code) from a failing materializer; a
        # script's class was "module '__main__' has no attribute ...": the CLI's own __main__
        with pytest.raises(UnresolvedClassError, match=message):
            load_type(path)

    def test_materializer_paths_round_trip(self) -> None:
        for cls in (BuiltInMaterializer, NumpyMaterializer, PandasMaterializer, ChildMaterializer):
            assert load_materializer(materializer_path(cls)) is cls
        assert materializer_path(BuiltInMaterializer) == (
            "wharf.artifacts.materializers.builtin:BuiltInMaterializer"
        )

    @pytest.mark.parametrize(
        ("path", "message"),
        [
            (f"{REGISTRY_TESTS}:NotAMaterializer", "Unknown materializer"),
            ("builtins:len", "Unknown materializer"),
            ("wharf.no_such_module:M", "Unknown materializer"),
            ("nocolon", "Invalid materializer import path"),
        ],
    )
    def test_load_materializer_errors(self, path: str, message: str) -> None:
        with pytest.raises(MaterializationError, match=message):
            load_materializer(path)


class TestStoredPathsAreNeverImported:
    """A recorded import path is checked against the materializers this process defines before
    anything is imported: stored data cannot make a load import a module of its choosing."""

    @pytest.mark.parametrize("path", ["this:x", "wharf_never_imported_mod:M"])
    def test_an_unknown_materializer_path_imports_nothing(self, path: str) -> None:
        module = path.partition(":")[0]
        sys.modules.pop(module, None)
        with pytest.raises(MaterializationError, match="Unknown materializer"):
            load_materializer(path)
        assert module not in sys.modules

    def test_a_type_path_in_a_module_not_imported_imports_nothing(self) -> None:
        sys.modules.pop("this", None)
        with pytest.raises(MaterializationError, match="not imported"):
            load_type("this:x")
        assert "this" not in sys.modules

    def test_loading_an_artifact_recorded_with_a_foreign_materializer(self, tmp_path: Path) -> None:
        store = LocalArtifactStore(str(tmp_path))
        sys.modules.pop("this", None)
        with pytest.raises(MaterializationError, match="Unknown materializer 'this:x'"):
            load_artifact(store, str(tmp_path / "a"), "builtins:int", "this:x")
        with pytest.raises(MaterializationError, match="not imported"):
            load_artifact(
                store,
                str(tmp_path / "a"),
                "this:x",
                materializer_path(BuiltInMaterializer),
            )
        assert "this" not in sys.modules

    def test_a_materializer_defined_at_run_time_is_known(self) -> None:
        class Local(BuiltInMaterializer):
            pass

        assert load_materializer(materializer_path(Local)) is Local
