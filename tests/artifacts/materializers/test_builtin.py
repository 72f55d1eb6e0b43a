from __future__ import annotations

import enum
import os
import warnings
from collections import OrderedDict, namedtuple
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.artifacts.helpers import assert_same, roundtrip
from tests.artifacts.materializers.test_json_codec import plain_data
from wharf.artifacts import LocalArtifactStore, MaterializerRegistry, join_uri, load_artifact
from wharf.artifacts.materializers import (
    BuiltInContainerMaterializer,
    BuiltInMaterializer,
    CloudpickleMaterializer,
)

fixture_settings = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


class Color(enum.IntEnum):
    RED = 1
    GREEN = 2


class Mood(enum.StrEnum):
    HAPPY = "happy"


class Shape(enum.Enum):
    SQUARE = 4.0
    NOTHING = None


class Tupled(enum.Enum):
    PAIR = (1, 2)


class Point(NamedTuple):
    x: int
    y: list[str]


LegacyPoint = namedtuple("LegacyPoint", "a b")


class DictSubclass(dict[str, int]):
    pass


class IntSubclass(int):
    pass


scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
)


@fixture_settings
@given(value=scalars)
def test_scalars_round_trip(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":BuiltInMaterializer")
    assert_same(loaded, value)


@pytest.mark.parametrize(
    ("value", "file", "content"),
    [
        (7, "data.json", b"7"),
        (None, "data.json", b"null"),
        ("é", "data.json", b'"\\u00e9"'),
        (0.1 + 0.2, "data.json", b"0.30000000000000004"),
        (b"\x00raw", "data.bin", b"\x00raw"),
    ],
)
def test_scalar_files(
    value: Any,
    file: str,
    content: bytes,
    store: LocalArtifactStore,
    registry: MaterializerRegistry,
) -> None:
    saved, _ = roundtrip(value, store, registry)
    assert os.path.isfile(saved.uri)  # a single file, no directory of its own
    with open(saved.uri, "rb") as f:
        assert f.read() == content
    # Artifacts written before the single-file layout are a directory holding that file.
    old = store.new_uri("directory-layout")
    store.makedirs(old)
    with store.open(join_uri(old, file), "wb") as f:
        f.write(content)
    assert_same(load_artifact(store, old, saved.data_type, saved.materializer), value)


@pytest.mark.parametrize(
    "value", [{"a": (1, 2)}, [None, "x"], frozenset({1})], ids=["dict", "list", "frozenset"]
)
def test_container_files_and_the_directory_layout(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, _ = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":BuiltInContainerMaterializer")
    with open(saved.uri, "rb") as f:
        content = f.read()
    old = store.new_uri("directory-layout")
    store.makedirs(old)
    with store.open(join_uri(old, "data.json"), "wb") as f:
        f.write(content)
    assert_same(load_artifact(store, old, saved.data_type, saved.materializer), value)


@pytest.mark.parametrize("member", [Color.GREEN, Mood.HAPPY, Shape.SQUARE, Shape.NOTHING])
def test_scalar_valued_enums_round_trip_by_value(
    member: enum.Enum, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(member, store, registry)
    assert saved.materializer.endswith(":BuiltInMaterializer")
    assert loaded is member


@fixture_settings
@given(value=plain_data)
def test_plain_containers_round_trip(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # plain data never falls back to pickle
        saved, loaded = roundtrip(value, store, registry)
    expected = (
        BuiltInContainerMaterializer
        if isinstance(value, tuple | list | dict | set | frozenset)
        else BuiltInMaterializer
    )
    assert saved.materializer.endswith(":" + expected.__name__)
    assert_same(loaded, value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2], "b": {"c": (3, None)}},
        [{1, 2}, frozenset({"x"}), (b"b",)],
        (),
        {1: "int key", (2, 3): "tuple key"},
        Point(1, ["a"]),
        LegacyPoint(a=(1,), b={"k": 2.5}),
    ],
)
def test_containers_round_trip(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    saved, loaded = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":BuiltInContainerMaterializer")
    assert_same(loaded, value)


@pytest.mark.parametrize(
    "value",
    [
        {"k": Ellipsis},
        [1, 2, {3: complex(1, 2)}],
        (1, OrderedDict(a=1)),
        DictSubclass(a=1),
        OrderedDict(a=1),
        IntSubclass(5),
        Tupled.PAIR,
        2**20000,
    ],
    ids=[
        "ellipsis",
        "complex",
        "nested-ordered",
        "dict-sub",
        "ordered",
        "int-sub",
        "enum-tuple",
        "huge",
    ],
)
def test_values_that_would_lose_information_fall_through_to_pickle(
    value: Any, store: LocalArtifactStore, registry: MaterializerRegistry
) -> None:
    assert not BuiltInMaterializer.can_save(value)
    assert not BuiltInContainerMaterializer.can_save(value)
    with pytest.warns(UserWarning, match="pickled"):
        saved, loaded = roundtrip(value, store, registry)
    assert saved.materializer.endswith(":" + CloudpickleMaterializer.__name__)
    assert type(loaded) is type(value)
    assert loaded == value


def test_container_materializer_declines_types_it_does_not_own() -> None:
    assert not BuiltInContainerMaterializer.can_save("text")
    assert not BuiltInMaterializer.can_save([1])
