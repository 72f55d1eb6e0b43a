from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import OrderedDict
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.artifacts.helpers import assert_same
from wharf.artifacts.materializers import json_codec
from wharf.artifacts.materializers.json_codec import NotPlainDataError

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary(max_size=20)
)
hashables = st.recursive(
    scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
plain_data = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=5), inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)


@given(plain_data)
def test_round_trip_keeps_values_and_every_nested_type(value: Any) -> None:
    assert_same(json_codec.loads(json_codec.dumps(value)), value)


@given(plain_data)
def test_output_is_json_text(value: Any) -> None:
    text = json_codec.dumps(value)
    assert text.isascii()
    json.loads(text)  # Python's JSON (NaN and Infinity allowed)


def test_native_json_for_lists_and_string_keyed_dicts() -> None:
    assert json_codec.dumps({"a": [1, 2.5, None, True, "x"]}) == '{"a":[1,2.5,null,true,"x"]}'


@pytest.mark.parametrize(
    "value",
    [
        {"$type": "tuple", "items": []},  # a dict that looks like a tag
        {1: "a", "1": "b"},
        {(1, 2): frozenset({3})},
        [b"\x00", (), set(), frozenset()],
        {"nested": {"deeper": ({"x": (1,)},)}},
        [0.1 + 0.2, -0.0, float("inf"), float("-inf"), float("nan"), 2**1000],
    ],
)
def test_edge_cases_round_trip(value: Any) -> None:
    assert_same(json_codec.loads(json_codec.dumps(value)), value)


def test_dict_order_is_preserved() -> None:
    assert list(json_codec.loads(json_codec.dumps({"b": 1, "a": 2, 3: 4}))) == ["b", "a", 3]


@pytest.mark.parametrize(
    "value",
    [
        object(),
        Decimal("1.5"),
        [1, object()],
        {"k": {1: Decimal(1)}},
        OrderedDict(a=1),
        type("IntSub", (int,), {})(3),
        2**20000,
        bytearray(b"x"),
    ],
    ids=[
        "object",
        "decimal",
        "nested-object",
        "nested-decimal",
        "ordered-dict",
        "int-subclass",
        "huge-int",
        "bytearray",
    ],
)
def test_non_plain_data_is_refused(value: Any) -> None:
    assert not json_codec.is_plain(value)
    with pytest.raises(NotPlainDataError):
        json_codec.encode(value)


def test_self_referencing_structures_are_not_plain() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert not json_codec.is_plain(loop)


def test_unknown_tag_is_an_error() -> None:
    with pytest.raises(ValueError, match="Unknown JSON tag"):
        json_codec.loads('{"$type": "complex", "items": []}')


def test_sets_encode_identically_under_any_hash_seed() -> None:
    code = (
        "from wharf.artifacts.materializers import json_codec; "
        "print(json_codec.dumps({'pear', 'apple', 'fig', ('t', 1), frozenset({'x', 'y', 'z'})}))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
