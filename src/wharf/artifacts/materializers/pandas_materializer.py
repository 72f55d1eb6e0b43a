"""Materializer for pandas ``DataFrame`` and ``Series``. Importing it imports pandas and numpy.

The registry imports this module lazily, the first time it meets a type from ``pandas``. The
format (``values.npz`` and ``schema.json``, no pickle) is described on
:class:`PandasMaterializer`.

Invariant: a frame is saved only if it loads back exactly; anything else is declined and falls
through to the pickle fallback.
"""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray
from pandas.api.types import pandas_dtype

from wharf.artifacts.materializers import json_codec
from wharf.artifacts.materializers.base import Materializer

_SCHEMA_FILE = "schema.json"
_VALUES_FILE = "values.npz"
_FORMAT = 1

_ArrayLike = np.ndarray[Any, Any] | ExtensionArray


class PandasMaterializer(Materializer):
    """``pandas.DataFrame`` and ``pandas.Series`` (exact types) in a lossless npz+JSON format.

    Without pyarrow, pandas has no lossless columnar format (CSV and Excel lose dtypes, JSON
    rounds floats, HDF5 needs PyTables, pickle ties the artifact to the pandas and Python
    versions), so this writes its own, built only on numpy's ``.npy`` format and JSON:

    - ``values.npz``: one ``.npy`` member per numeric, boolean, datetime or timedelta array
      (any unit), plus the codes of categoricals, the data and mask of nullable
      ``Int*``/``UInt*``/``Float*``/``boolean`` arrays and the UTC epoch values of tz-aware
      datetimes;
    - ``schema.json``, written last: kind, length, column and row index (``RangeIndex``,
      ``MultiIndex``, or any index of a supported dtype with its name and ``freq``), each
      column's dtype, string and ``object`` columns as JSON items in the lossless encoding of
      :mod:`~wharf.artifacts.materializers.json_codec`, and ``attrs``.

    Columns are stored by position, so duplicate labels survive. Declined (pickle fallback):
    subclasses, ``object`` columns holding non-plain values (``Decimal``, custom objects),
    period, interval, sparse and pyarrow-backed dtypes, and labels or ``attrs`` that are not
    plain data. Flags (``allows_duplicate_labels``) are not stored.
    """

    ASSOCIATED_TYPES = (pd.DataFrame, pd.Series)

    @classmethod
    def can_save(cls, value: object) -> bool:
        if type(value) is not pd.DataFrame and type(value) is not pd.Series:
            return False
        try:
            _Encoder().frame(value)
        except (json_codec.NotPlainDataError, RecursionError):
            return False
        return True

    def save(self, data: Any) -> None:
        encoder = _Encoder()
        schema = encoder.frame(data)
        with self.artifact_store.open(self.file_uri(_VALUES_FILE), "wb") as f:
            np.savez(f, allow_pickle=False, **encoder.arrays)
        self.write_bytes(_SCHEMA_FILE, json.dumps(schema, separators=(",", ":")).encode("ascii"))

    def load(self, data_type: type[Any]) -> pd.DataFrame | pd.Series[Any]:
        schema = json.loads(self.read_bytes(_SCHEMA_FILE))
        if schema.get("format") != _FORMAT:
            raise ValueError(f"unknown pandas artifact format {schema.get('format')!r}")
        with (
            self.artifact_store.open(self.file_uri(_VALUES_FILE), "rb") as f,
            np.load(f, allow_pickle=False) as npz,
        ):
            arrays = {name: npz[name] for name in npz.files}
        return _Decoder(arrays).frame(schema)


class _Encoder:
    """Turns a frame into a JSON schema plus named numpy arrays; raises ``NotPlainDataError``."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray[Any, Any]] = {}

    def frame(self, data: pd.DataFrame | pd.Series[Any]) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "format": _FORMAT,
            "length": len(data),
            "index": self.index(data.index),
            "attrs": json_codec.encode(dict(data.attrs)),
        }
        if isinstance(data, pd.DataFrame):
            schema["kind"] = "DataFrame"
            schema["columns"] = self.index(data.columns)
            schema["values"] = [self.values(data.iloc[:, i]) for i in range(data.shape[1])]
        else:
            schema["kind"] = "Series"
            schema["name"] = json_codec.encode(data.name)
            schema["values"] = self.values(data)
        return schema

    def index(self, index: pd.Index[Any]) -> dict[str, Any]:
        if type(index) is pd.RangeIndex:
            return {
                "kind": "range",
                "start": index.start,
                "stop": index.stop,
                "step": index.step,
                "name": json_codec.encode(index.name),
            }
        if isinstance(index, pd.MultiIndex):
            return {
                "kind": "multi",
                "names": [json_codec.encode(name) for name in index.names],
                "levels": [self.values(index.get_level_values(i)) for i in range(index.nlevels)],
            }
        freq = getattr(index, "freqstr", None)
        return {
            "kind": "index",
            "name": json_codec.encode(index.name),
            "values": self.values(index),
            "freq": freq,
        }

    def values(self, data: pd.Series[Any] | pd.Index[Any]) -> dict[str, Any]:
        dtype = data.dtype
        if isinstance(dtype, np.dtype):
            array = np.asarray(data)
            if dtype.hasobject:
                return {"codec": "json", "items": json_codec.encode(array.tolist())}
            return {"codec": "npy", "array": self._add(array)}
        values: Any = data.array
        if isinstance(dtype, pd.CategoricalDtype):
            categorical: pd.Categorical = values
            return {
                "codec": "category",
                "codes": self._add(np.asarray(categorical.codes)),
                "categories": self.index(categorical.categories),
                "ordered": bool(categorical.ordered),
            }
        name = _reconstructible_name(dtype)
        if isinstance(dtype, pd.DatetimeTZDtype):
            utc = values.tz_convert("UTC").tz_localize(None)
            return {"codec": "datetimetz", "dtype": name, "array": self._add(np.asarray(utc))}
        if isinstance(dtype, pd.StringDtype):
            missing: Any = None
            items = values.to_numpy(dtype=object, na_value=missing).tolist()
            return {"codec": "string", "dtype": name, "items": json_codec.encode(items)}
        numpy_dtype = getattr(dtype, "numpy_dtype", None)
        if isinstance(dtype, _MASKED_DTYPES) and isinstance(numpy_dtype, np.dtype):
            filled = values.to_numpy(dtype=numpy_dtype, na_value=numpy_dtype.type(0))
            mask = np.asarray(values.isna(), dtype=bool)
            return {
                "codec": "masked",
                "dtype": name,
                "data": self._add(filled),
                "mask": self._add(mask),
            }
        raise json_codec.NotPlainDataError(f"unsupported pandas dtype {dtype}")

    def _add(self, array: np.ndarray[Any, Any]) -> str:
        name = f"a{len(self.arrays)}"
        self.arrays[name] = array
        return name


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray[Any, Any]]) -> None:
        self.arrays = arrays

    def frame(self, schema: dict[str, Any]) -> pd.DataFrame | pd.Series[Any]:
        index = self.index(schema["index"])
        attrs = json_codec.decode(schema["attrs"])
        result: pd.DataFrame | pd.Series[Any]
        if schema["kind"] == "Series":
            values = self.values(schema["values"])
            result = pd.Series(values, dtype=values.dtype, name=json_codec.decode(schema["name"]))
        else:
            columns = [self.values(spec) for spec in schema["values"]]
            if columns:
                series = {i: pd.Series(v, dtype=v.dtype, copy=False) for i, v in enumerate(columns)}
                result = pd.DataFrame(series, copy=False)
            else:
                result = pd.DataFrame(index=pd.RangeIndex(schema["length"]))
            result.columns = self.index(schema["columns"])
        result.index = index
        result.attrs = attrs
        return result

    def index(self, spec: dict[str, Any]) -> pd.Index[Any]:
        kind = spec.get("kind")
        if kind == "range":
            name = json_codec.decode(spec["name"])
            return pd.RangeIndex(spec["start"], spec["stop"], spec["step"], name=name)
        if kind == "multi":
            levels = [pd.Index(v, dtype=v.dtype) for v in map(self.values, spec["levels"])]
            names = [json_codec.decode(name) for name in spec["names"]]
            return pd.MultiIndex.from_arrays(levels, names=names)
        values = self.values(spec["values"])
        index: pd.Index[Any] = pd.Index(
            values, dtype=values.dtype, name=json_codec.decode(spec["name"])
        )
        freq = spec.get("freq")
        if freq is not None and isinstance(index, pd.DatetimeIndex):
            return pd.DatetimeIndex(index, freq=freq)
        if freq is not None and isinstance(index, pd.TimedeltaIndex):
            return pd.TimedeltaIndex(index, freq=freq)
        return index

    def values(self, spec: dict[str, Any]) -> _ArrayLike:
        codec = spec["codec"]
        if codec == "npy":
            return self.arrays[spec["array"]]
        if codec == "json":
            items = json_codec.decode(spec["items"])
            return np.fromiter(items, dtype=object, count=len(items))
        if codec == "category":
            categories = self.index(spec["categories"])
            categorical = pd.CategoricalDtype(categories, ordered=spec["ordered"])
            return pd.Categorical.from_codes(self.arrays[spec["codes"]], dtype=categorical)
        dtype: Any = pandas_dtype(spec["dtype"])  # an ExtensionDtype, checked at save time
        if codec == "datetimetz":
            naive: Any = pd.array(self.arrays[spec["array"]])
            return cast(ExtensionArray, naive.tz_localize("UTC").tz_convert(dtype.tz))
        if codec == "string":
            return cast(ExtensionArray, pd.array(json_codec.decode(spec["items"]), dtype=dtype))
        if codec == "masked":
            array_type = dtype.construct_array_type()
            return cast(
                ExtensionArray, array_type(self.arrays[spec["data"]], self.arrays[spec["mask"]])
            )
        raise ValueError(f"unknown column codec {codec!r}")


def _reconstructible_name(dtype: Any) -> str:
    name = str(dtype)
    try:
        same = pandas_dtype(name) == dtype
    except (TypeError, ValueError):
        same = False
    if not same:
        raise json_codec.NotPlainDataError(
            f"pandas dtype {dtype!r} cannot be rebuilt from its name"
        )
    return name


_MASKED_DTYPES = (
    pd.BooleanDtype,
    pd.Int8Dtype,
    pd.Int16Dtype,
    pd.Int32Dtype,
    pd.Int64Dtype,
    pd.UInt8Dtype,
    pd.UInt16Dtype,
    pd.UInt32Dtype,
    pd.UInt64Dtype,
    pd.Float32Dtype,
    pd.Float64Dtype,
)
