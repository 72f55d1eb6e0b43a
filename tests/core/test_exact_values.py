"""``wharf.core.exact_values``: parameters written to a stored spec's JSON come back as they
were given, of the same types; values plain JSON keeps are stored unchanged."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from wharf.config.spec import PipelineSpec, StepConfig, StepSpec
from wharf.core.exact_values import MARK, decode, encode, readable

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.sampled_from([math.inf, -math.inf])
    | st.text()  # surrogates included
)
_keys = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(_keys, inner, max_size=4)
        | st.builds(lambda v: {MARK: v}, inner)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down (``1 == 1.0 == True`` does not count)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(
            same(k, j) and same(a[k], b[j]) for k, j in zip(a, b, strict=True)
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@given(st.dictionaries(st.text(min_size=1).filter(str.isidentifier), values, max_size=4))
def test_every_value_comes_back_as_given_through_json_text(given_values: dict[str, Any]) -> None:
    stored = json.dumps(encode(given_values), allow_nan=False)  # strict JSON, valid UTF-8
    stored.encode("utf-8")
    assert same(decode(json.loads(stored)), given_values)


def test_a_value_plain_json_keeps_is_stored_as_it_is() -> None:
    plain = {"n": 1, "f": 0.5, "s": "é", "l": [1, {"a": None}], "d": {"k": [True]}}
    assert encode(plain) == plain


def test_what_json_changes_is_stored_tagged_and_read_back() -> None:
    given_values = {
        "shape": (3, 4),
        "by_id": {1: "a", None: (2,)},
        "nan": math.nan,
        "text": "bad \udcff",
        "looks_tagged": {MARK: ["tuple", [1]]},
    }
    stored = encode(given_values)
    assert stored["shape"] == {MARK: ["tuple", [3, 4]]}
    assert all(set(v) == {MARK} for v in stored.values())
    back = decode(json.loads(json.dumps(stored, allow_nan=False)))
    assert same(back["shape"], (3, 4)) and same(back["by_id"], {1: "a", None: (2,)})
    assert math.isnan(back["nan"]) and back["text"] == "bad \udcff"
    assert back["looks_tagged"] == {MARK: ["tuple", [1]]}


def test_a_spec_read_from_its_json_has_the_values_given() -> None:
    """What an isolated or Kubernetes step reads: the snapshot's spec, from its JSON text."""
    step = StepSpec(
        name="s",
        source="m:s",
        code_hash="0" * 64,
        parameters={"shape": (3, 4), "by_id": {1: "a"}},
        config=StepConfig(caching_parameters={"grid": (1, 2)}),
    )
    spec = PipelineSpec(name="p", parameters={"seeds": (1, 2)}, steps={"s": step})
    read = PipelineSpec.model_validate_json(spec.model_dump_json())
    assert read == spec
    assert same(read.steps["s"].parameters, {"shape": (3, 4), "by_id": {1: "a"}})
    assert same(read.steps["s"].config.caching_parameters, {"grid": (1, 2)})
    assert same(read.parameters, {"seeds": (1, 2)})
    assert PipelineSpec.model_validate(spec.model_dump(mode="json")) == spec


def test_readable_values_write_a_lone_surrogate_out() -> None:
    shown = readable({"s": "bad \udcff", "t": ("x", {1: "\ud800"})})
    assert shown == {"s": "bad \\udcff", "t": ["x", {1: "\\ud800"}]}
    json.dumps(shown).encode("utf-8")
