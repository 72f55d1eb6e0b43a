"""Materializer for numpy arrays and numpy scalars. Importing this module imports numpy.

The registry imports it lazily, the first time it meets a type from the ``numpy`` package, so
``import wharf.artifacts`` never loads numpy.

Invariant: files are written and read with ``allow_pickle=False``: portable across numpy
versions, and loading never executes code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wharf.artifacts.materializers.base import Materializer

_FILE = "data.npy"


class NumpyMaterializer(Materializer):
    """``numpy.ndarray`` (exact type, no object dtypes) and numpy scalars, as ``data.npy``
    in numpy's ``.npy`` format (a single-file materializer). A numpy scalar is stored as a 0-d
    array and returned as a scalar of the same dtype when the recorded type is a numpy scalar
    type. Object dtypes (they would need pickle) and subclasses of ``ndarray`` (masked arrays,
    matrices: their extra state would be lost) are declined: the pickle fallback takes them."""

    ASSOCIATED_TYPES = (np.ndarray, np.generic)
    SINGLE_FILE = True

    @classmethod
    def can_save(cls, value: object) -> bool:
        if type(value) is np.ndarray or isinstance(value, np.generic):
            return not value.dtype.hasobject
        return False

    def save(self, data: Any) -> None:
        with self.artifact_store.open(self.file_uri(_FILE), "wb") as f:
            np.save(f, np.asarray(data), allow_pickle=False)

    def load(self, data_type: type[Any]) -> Any:
        with self.artifact_store.open(self.file_uri(_FILE), "rb") as f:
            array = np.load(f, allow_pickle=False)
        if isinstance(data_type, type) and issubclass(data_type, np.generic):
            return array[()]
        return array
