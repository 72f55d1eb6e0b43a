from __future__ import annotations

import json
import subprocess
import sys

import wharf.artifacts
import wharf.artifacts.materializers


def test_public_api_is_pinned() -> None:
    assert sorted(wharf.artifacts.__all__) == [
        "ArtifactStore",
        "LocalArtifactStore",
        "Materializer",
        "MaterializerRegistry",
        "SavedArtifact",
        "content_hash",
        "default_registry",
        "join_uri",
        "load_artifact",
        "load_materializer",
        "load_type",
        "materializer_path",
        "save_artifact",
        "type_path",
    ]
    assert sorted(wharf.artifacts.materializers.__all__) == [
        "BuiltInContainerMaterializer",
        "BuiltInMaterializer",
        "CloudpickleMaterializer",
        "Materializer",
    ]


_LAZY_CHECK = """
import json, sys, tempfile
import wharf.artifacts as a
after_import = sorted(m for m in ("numpy", "pandas", "cloudpickle") if m in sys.modules)
store = a.LocalArtifactStore(tempfile.mkdtemp())
registry = a.default_registry()
for value in (1, "s", [1, {"k": (2, 3)}], {1.5}, None, b"x"):
    saved = a.save_artifact(value, store, store.new_uri("p"), registry)
    assert a.load_artifact(store, saved.uri, saved.data_type, saved.materializer) == value
registry.for_type(dict)
after_use = sorted(m for m in ("numpy", "pandas", "cloudpickle") if m in sys.modules)
print(json.dumps([after_import, after_use]))
"""


def test_importing_and_using_wharf_artifacts_does_not_import_numpy_pandas_or_cloudpickle() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _LAZY_CHECK], capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == [[], []]


def test_numpy_values_import_only_the_numpy_materializer() -> None:
    code = (
        "import sys, numpy, wharf.artifacts as a\n"
        "r = a.default_registry()\n"
        "print(r.for_value(numpy.arange(2)).__name__, 'pandas' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["NumpyMaterializer", "False"]
