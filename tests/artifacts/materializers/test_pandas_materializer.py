from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.artifacts.helpers import roundtrip
from wharf.artifacts import LocalArtifactStore, MaterializerRegistry, join_uri, load_artifact
from wharf.artifacts.materializers.pandas_materializer import PandasMaterializer
from wharf.core.errors import MaterializationError


def _frames() -> dict[str, pd.DataFrame]:
    n = 4
    return {
        "ordinary": pd.DataFrame(
            {
                "int": np.arange(n, dtype=np.int64),
                "int8": np.arange(n, dtype=np.int8),
                "uint": np.arange(n, dtype=np.uint32),
                "float": [0.1 + 0.2, np.nan, -0.0, 1e308],
                "float32": np.linspace(0, 1, n, dtype=np.float32),
                "complex": np.array([1 + 2j] * n),
                "bool": [True, False, True, False],
                "str": ["a", None, "ü", ""],
                "object": pd.Series([1, "x", None, (1, 2)], dtype=object),
                "datetime": pd.to_datetime(["2020-01-01", "NaT", "2021-06-01", "1970-01-01"]),
                "datetime_ns": pd.Series(pd.date_range("2000", periods=n, unit="ns")),
                "tz": pd.date_range("2020-03-29", periods=n, freq="h", tz="Europe/Paris"),
                "tz_fixed": pd.date_range(
                    "2020", periods=n, tz=dt.timezone(dt.timedelta(hours=-3))
                ),
                "timedelta": pd.to_timedelta([1, 2, None, 4], unit="s"),
                "category": pd.Categorical(["x", "y", None, "x"], categories=["y", "x", "z"]),
                "ordered": pd.Categorical([3, 1, 2, 1], ordered=True),
                "Int64": pd.array([1, None, 3, 4], dtype="Int64"),
                "UInt8": pd.array([1, None, 3, 4], dtype="UInt8"),
                "Float64": pd.array([0.5, None, 1.5, 2.5], dtype="Float64"),
                "boolean": pd.array([True, None, False, True], dtype="boolean"),
                "string": pd.array(["a", None, "c", "d"], dtype="string"),
            }
        ),
        "custom_index": pd.DataFrame(
            {"v": [1.0, 2.0, 3.0]}, index=pd.Index(["r1", "r2", "r3"], name="row")
        ),
        "int_index_and_named_columns": pd.DataFrame(
            [[1, 2], [3, 4]], index=[10, 20], columns=pd.Index(["a", "b"], name="cols")
        ),
        "range_index_with_step": pd.DataFrame(
            {"v": [1, 2]}, index=pd.RangeIndex(10, 30, 10, name="r")
        ),
        "datetime_index_with_freq": pd.DataFrame(
            {"v": range(3)}, index=pd.date_range("2024-01-01", periods=3, freq="D", name="day")
        ),
        "tz_index": pd.DataFrame(
            {"v": range(2)}, index=pd.date_range("2024-01-01", periods=2, tz="UTC")
        ),
        "timedelta_index": pd.DataFrame(
            {"v": range(2)}, index=pd.timedelta_range("1s", periods=2, freq="s")
        ),
        "categorical_index": pd.DataFrame(
            {"v": [1, 2, 3]}, index=pd.CategoricalIndex(["a", "b", "a"], name="c")
        ),
        "multi_index": pd.DataFrame(
            {"v": [1.5, 2.5, 3.5]},
            index=pd.MultiIndex.from_tuples([(1, "a"), (1, "b"), (2, "a")], names=["n", None]),
        ),
        "multi_columns": pd.DataFrame(
            [[1, 2, 3]], columns=pd.MultiIndex.from_tuples([("a", 1), ("a", 2), ("b", 1)])
        ),
        "duplicate_columns": pd.DataFrame([[1, "x", 2.0]], columns=["a", "a", "b"]),
        "integer_column_labels": pd.DataFrame(np.eye(3)),
        "empty": pd.DataFrame(),
        "no_columns": pd.DataFrame(index=pd.Index([3, 1, 2])),
        "no_rows": pd.DataFrame(
            {"a": pd.Series([], dtype="int32"), "b": pd.Series([], dtype="str")}
        ),
    }


FRAMES = _frames()


def _assert_frame_identical(loaded: Any, frame: pd.DataFrame) -> None:
    assert type(loaded) is pd.DataFrame
    pd.testing.assert_frame_equal(
        loaded,
        frame,
        check_exact=True,
        check_index_type=True,
        check_column_type=True,
        check_freq=True,
        check_flags=True,
    )
    assert loaded.attrs == frame.attrs


@pytest.mark.parametrize("name", list(FRAMES))
def test_data_frames_round_trip_with_dtypes_and_index(
    name: str, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    frame = FRAMES[name]
    saved, loaded = roundtrip(frame, store, registry)
    assert saved.materializer.endswith(":PandasMaterializer")
    _assert_frame_identical(loaded, frame)


def test_every_ordinary_dtype_is_kept(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    frame = FRAMES["ordinary"]
    _, loaded = roundtrip(frame, store, registry)
    assert loaded.dtypes.to_dict() == frame.dtypes.to_dict()
    assert loaded["float"].iloc[0] == 0.1 + 0.2  # no decimal rounding


def test_attrs_round_trip(store: LocalArtifactStore, registry: MaterializerRegistry) -> None:
    frame = pd.DataFrame({"a": [1]})
    frame.attrs = {"source": "s3://x", "version": (1, 2)}
    _, loaded = roundtrip(frame, store, registry)
    assert loaded.attrs == frame.attrs


@pytest.mark.parametrize(
    "series",
    [
        pd.Series([1, 2, 3], name="n"),
        pd.Series([1.5, None], name=("tuple", 1), index=pd.Index(["a", "b"], name="i")),
        pd.Series(pd.Categorical(["a", "b"]), name=None),
        pd.Series(pd.array([1, None], dtype="Int64")),
        pd.Series(["x", None, "z"], dtype="str"),
        pd.Series([], dtype="float64"),
        pd.Series(range(3), index=pd.MultiIndex.from_arrays([[1, 1, 2], ["a", "b", "c"]])),
    ],
)
def test_series_round_trip(
    series: pd.Series[Any], store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(series, store, registry)
    assert saved.materializer.endswith(":PandasMaterializer")
    assert saved.data_type == f"{pd.Series.__module__}:Series"
    assert type(loaded) is pd.Series
    pd.testing.assert_series_equal(loaded, series, check_exact=True, check_index_type=True)


def test_files_are_npz_without_pickle_and_a_json_schema(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(FRAMES["ordinary"], store, registry)
    assert sorted(os.listdir(saved.uri)) == ["schema.json", "values.npz"]
    with store.open(join_uri(saved.uri, "values.npz")) as f, np.load(f, allow_pickle=False) as npz:
        assert all(npz[name].dtype != object for name in npz.files)
    with store.open(join_uri(saved.uri, "schema.json"), "r") as f:
        schema = json.load(f)
    assert schema["format"] == 1 and schema["kind"] == "DataFrame"


def test_equal_frames_have_equal_content_hashes(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    first, _ = roundtrip(_frames()["ordinary"], store, registry)
    second, _ = roundtrip(_frames()["ordinary"], store, registry)
    changed = _frames()["ordinary"]
    changed.iloc[0, 0] = 99
    third, _ = roundtrip(changed, store, registry)
    assert first.content_hash == second.content_hash != third.content_hash


class MyFrame(pd.DataFrame):
    pass


@pytest.mark.parametrize(
    "value",
    [
        pd.DataFrame({"d": [Decimal("1.1")]}),
        pd.DataFrame({"p": pd.period_range("2020", periods=2, freq="M")}),
        pd.DataFrame({"i": pd.interval_range(0, 2)}),
        pd.DataFrame({"s": pd.arrays.SparseArray([0, 1])}),
        pd.DataFrame({"a": [1]}, index=pd.Index([dt.date(2020, 1, 1)], dtype=object)),
        pd.Series([1], name=Decimal(1)),
        MyFrame({"a": [1]}),
    ],
    ids=["decimal", "period", "interval", "sparse", "date-objects", "odd-name", "subclass"],
)
def test_frames_it_cannot_represent_exactly_fall_through_to_pickle(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    assert not PandasMaterializer.can_save(value)
    with pytest.warns(UserWarning, match="pickled"):
        saved, loaded = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":CloudpickleMaterializer")
    assert type(loaded) is type(value)


def test_frame_with_non_plain_attrs_falls_through(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    frame = pd.DataFrame({"a": [1]})
    frame.attrs["when"] = dt.datetime(2020, 1, 1)
    assert not PandasMaterializer.can_save(frame)


def test_missing_schema_means_incomplete(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(FRAMES["custom_index"], store, registry)
    os.remove(join_uri(saved.uri, "schema.json"))  # as if the save had stopped before it
    with pytest.raises(MaterializationError, match="FileNotFoundError"):
        load_artifact(store, saved.uri, saved.data_type, saved.materializer)


def test_unknown_format_version_is_refused(
    store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(FRAMES["custom_index"], store, registry)
    with store.open(join_uri(saved.uri, "schema.json"), "w") as f:
        f.write('{"format": 99}')
    with pytest.raises(MaterializationError, match="unknown pandas artifact format 99"):
        load_artifact(store, saved.uri, saved.data_type, saved.materializer)
