"""The import-path helpers of ``wharf.artifacts.materializers.registry``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.artifacts.materializers.test_registry import ChildMaterializer, Outer
from wharf.artifacts import load_materializer, load_type, materializer_path, type_path
from wharf.artifacts.materializers import BuiltInMaterializer
from wharf.artifacts.materializers.numpy_materializer import NumpyMaterializer
from wharf.artifacts.materializers.pandas_materializer import PandasMaterializer
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
            ("wharf.no_such_module:X", "Cannot import type"),
            ("builtins:no_such_name", "Cannot import type"),
            ("os:sep", "is not a class"),
            (f"{__name__}:TestImportPaths.<locals>.X", "Cannot import type"),
        ],
    )
    def test_load_type_errors(self, path: str, message: str) -> None:
        with pytest.raises(MaterializationError, match=message):
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
            (f"{REGISTRY_TESTS}:NotAMaterializer", "is not a Materializer subclass"),
            ("builtins:len", "is not a Materializer subclass"),
            ("wharf.no_such_module:M", "Cannot import materializer"),
            ("nocolon", "Invalid materializer import path"),
        ],
    )
    def test_load_materializer_errors(self, path: str, message: str) -> None:
        with pytest.raises(MaterializationError, match=message):
            load_materializer(path)
