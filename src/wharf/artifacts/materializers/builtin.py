"""Materializers for built-in scalars and plain containers; no third-party imports.

Both are single-file materializers: an artifact is one file at its URI, ``data.bin`` for
``bytes``, else ``data.json`` (the name is implied by the recorded type).

Invariants: the persisted format changes only in ways these classes still read everything
written before (otherwise add a new materializer class); subclasses of these types (other than
enums and named tuples) are declined, so the pickle fallback keeps them exact.
"""

from __future__ import annotations

import enum
import json
from typing import Any

from wharf.artifacts.materializers import json_codec
from wharf.artifacts.materializers.base import Materializer

_JSON_FILE = "data.json"
_BYTES_FILE = "data.bin"
_JSON_SCALARS = frozenset({type(None), bool, int, float, str})


class BuiltInMaterializer(Materializer):
    """``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` and scalar-valued enums:
    ``bytes`` as raw ``data.bin``, the others as ``data.json``; an enum is stored as its value
    and rebuilt from the recorded type."""

    ASSOCIATED_TYPES = (type(None), bool, int, float, str, bytes, enum.Enum)
    SINGLE_FILE = True

    @classmethod
    def can_save(cls, value: object) -> bool:
        t = type(value)
        if t is bytes:
            return True
        if isinstance(value, enum.Enum):
            value = value.value
            t = type(value)
        if t not in _JSON_SCALARS:
            return False
        return not isinstance(value, int) or value.bit_length() <= json_codec.MAX_INT_BITS

    def save(self, data: Any) -> None:
        if type(data) is bytes:
            self.write_bytes(_BYTES_FILE, data)
            return
        if isinstance(data, enum.Enum):
            data = data.value
        self.write_bytes(_JSON_FILE, json.dumps(data).encode("ascii"))

    def load(self, data_type: type[Any]) -> Any:
        if data_type is bytes:
            return self.read_bytes(_BYTES_FILE)
        value = json.loads(self.read_bytes(_JSON_FILE))
        if isinstance(data_type, type) and issubclass(data_type, enum.Enum):
            return data_type(value)
        return value


class BuiltInContainerMaterializer(Materializer):
    """``dict``, ``list``, ``tuple``, ``set``, ``frozenset`` and named tuples of plain data, as
    ``data.json`` in the lossless encoding of :mod:`~wharf.artifacts.materializers.json_codec`
    (every nested container type is restored); any other content declines the value."""

    ASSOCIATED_TYPES = (dict, list, tuple, set, frozenset)
    SINGLE_FILE = True

    @classmethod
    def can_save(cls, value: object) -> bool:
        if type(value) not in cls.ASSOCIATED_TYPES:
            if not (isinstance(value, tuple) and _is_namedtuple(type(value))):
                return False
            value = tuple(value)
        return json_codec.is_plain(value)

    def save(self, data: Any) -> None:
        if _is_namedtuple(type(data)):
            data = tuple(data)
        self.write_bytes(_JSON_FILE, json_codec.dumps(data).encode("ascii"))

    def load(self, data_type: type[Any]) -> Any:
        value = json_codec.loads(self.read_bytes(_JSON_FILE))
        if _is_namedtuple(data_type):
            return data_type._make(value)
        return value


def _is_namedtuple(t: type) -> bool:
    return isinstance(t, type) and issubclass(t, tuple) and hasattr(t, "_fields") and t is not tuple
