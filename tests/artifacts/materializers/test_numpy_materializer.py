from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.artifacts.helpers import roundtrip
from wharf.artifacts import LocalArtifactStore, MaterializerRegistry, join_uri, load_artifact
from wharf.artifacts.materializers.numpy_materializer import NumpyMaterializer

fixture_settings = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

dtypes = (
    hnp.integer_dtypes()
    | hnp.unsigned_integer_dtypes()
    | hnp.floating_dtypes()
    | hnp.complex_number_dtypes()
    | hnp.boolean_dtypes()
    | hnp.datetime64_dtypes()
    | hnp.timedelta64_dtypes()
    | hnp.unicode_string_dtypes()
    | hnp.byte_string_dtypes()
)


def _assert_identical(loaded: Any, value: Any) -> None:
    assert type(loaded) is type(value)
    assert loaded.dtype == value.dtype
    assert loaded.shape == value.shape
    np.testing.assert_array_equal(loaded, value, strict=True)


@fixture_settings
@given(array=hnp.arrays(dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)))
def test_arrays_round_trip(
    array: np.ndarray[Any, Any], store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(array, store, registry)
    assert saved.materializer.endswith(":NumpyMaterializer")
    assert saved.data_type == "numpy:ndarray"
    _assert_identical(loaded, array)


@fixture_settings
@given(
    scalar=hnp.from_dtype(np.dtype("float32"))
    | hnp.from_dtype(np.dtype("int16"))
    | st.just(np.str_("txt"))
)
def test_numpy_scalars_round_trip_as_scalars(
    scalar: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(scalar, store, registry)
    assert saved.materializer.endswith(":NumpyMaterializer")
    assert type(loaded) is type(scalar)
    np.testing.assert_array_equal(loaded, scalar)


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.int64).reshape(3, 4).T,  # not C-contiguous
        np.asfortranarray(np.ones((2, 3))),
        np.zeros((0, 5), dtype=np.float16),
        np.array(5.0),
        np.array([(1, 2.5, b"ab")], dtype=[("i", "i4"), ("f", "f8"), ("s", "S2")]),
        np.array(["2020-01-01T00:00", "NaT"], dtype="datetime64[m]"),
        np.array([np.nan, -0.0, np.inf]),
    ],
    ids=["transposed", "fortran", "empty", "0-d", "structured", "datetime", "special-floats"],
)
def test_special_arrays_round_trip(
    array: np.ndarray[Any, Any], store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    _, loaded = roundtrip(array, store, registry)
    _assert_identical(loaded, array)
    if array.dtype.kind == "f":
        assert np.signbit(loaded).tolist() == np.signbit(array).tolist()


def test_file_is_a_plain_npy_without_pickle(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(np.arange(3), store, registry)
    assert os.path.isfile(saved.uri)  # a single file, no directory of its own
    with store.open(saved.uri) as f:
        np.testing.assert_array_equal(np.load(f, allow_pickle=False), np.arange(3))


def test_arrays_written_in_the_directory_layout_still_load(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(np.float32(1.5), store, registry)
    old = store.new_uri("directory-layout")
    with store.open(join_uri(old, "data.npy"), "wb") as f:
        np.save(f, np.asarray(np.float32(1.5)), allow_pickle=False)
    loaded = load_artifact(store, old, saved.data_type, saved.materializer)
    assert type(loaded) is np.float32 and loaded == np.float32(1.5)


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "a", None], dtype=object),
        np.array([(1, {"k": 1})], dtype=[("i", "i4"), ("o", "O")]),
        np.ma.masked_array([1, 2, 3], mask=[False, True, False]),
    ],
    ids=["object", "structured-with-object", "masked"],
)
def test_object_arrays_and_subclasses_fall_through_to_pickle(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    assert not NumpyMaterializer.can_save(value)
    with pytest.warns(UserWarning, match="pickled"):
        saved, loaded = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":CloudpickleMaterializer")
    assert type(loaded) is type(value)
    if isinstance(value, np.ma.MaskedArray):
        assert loaded.mask.tolist() == value.mask.tolist()


def test_can_save_refuses_non_numpy_values() -> None:
    assert not NumpyMaterializer.can_save([1, 2])
