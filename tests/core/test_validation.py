"""Pydantic validation errors in plain words: field names as written, no pydantic wording."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wharf.core.validation import PATTERN_WORDS, describe_errors, describe_validation_error
from wharf.resource_manager.domain.units import KIND_PATTERN, NAME_PATTERN

PYDANTIC_WORDING = (
    "Input should",
    "after validation",
    "validation error",
    "constrained-",
    "[type=",
)


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME_PATTERN)
    capacity: dict[str, int | str] = Field(default_factory=dict)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    rank: int = 0
    classes: tuple[Item, ...] = Field(min_length=1)
    quantity: int | str = Field(default=0)
    mode: Literal["a", "b"] = "a"
    owner: UUID | None = None
    api_key: str = Field(default="", pattern=r"^k")


def describe(data: object) -> str:
    with pytest.raises(ValidationError) as caught:
        Body.model_validate(data)
    text = describe_validation_error(caught.value, title="pool", model=Body)
    assert "\n" not in text
    for words in PYDANTIC_WORDING:
        assert words not in text, text
    return text


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"name": "p", "classes": []}, "Invalid pool: 'classes' must not be empty"),
        (
            {"name": "p", "classes": [{"name": "a", "capacity": {"GPU": [1]}}]},
            "Invalid pool: 'classes[0].capacity.GPU' must be a whole number",
        ),
        (
            {"name": "p", "classes": [{"name": "bad name!"}]},
            "'classes[0].name' must start with a letter or digit",
        ),
        ({"name": "p", "classes": [{"name": "a"}], "rank": "x"}, "'rank' must be a whole number"),
        (
            {"nme": "p", "classes": [{"name": "a"}]},
            "'nme' is not a known field (did you mean 'name'?)",
        ),
        ({"classes": [{"name": "a"}]}, "Invalid pool: 'name' is required"),
        (
            {"name": "p", "classes": [{"name": "a"}], "mode": "c"},
            "'mode' must be 'a' or 'b' (got 'c')",
        ),
        (
            {"name": "p", "classes": [{"name": "a"}], "owner": "me"},
            "'owner' must be an id (a UUID)",
        ),
    ],
)
def test_messages_name_the_field_in_plain_words(data: object, expected: str) -> None:
    assert expected in describe(data)


def test_a_failing_list_item_is_not_also_reported_as_an_empty_list() -> None:
    text = describe({"name": "p", "classes": [{"name": "a", "extra": 1}]})
    assert text == "Invalid pool: 'classes[0].extra' is not a known field"


def test_union_branches_give_one_message_per_field_the_most_telling_one() -> None:
    text = describe({"name": "p", "classes": [{"name": "a"}], "quantity": [1]})
    assert text.count("'quantity'") == 1


def test_secrets_are_not_echoed() -> None:
    text = describe({"name": "p", "classes": [{"name": "a"}], "api_key": "hunter2"})
    assert "'api_key'" in text and "hunter2" not in text


def test_api_locations_drop_their_body_prefix_and_keep_own_validator_messages() -> None:
    errors = [
        {"type": "greater_than_equal", "loc": ("query", "size"), "msg": "x", "ctx": {"ge": 1}},
        {
            "type": "value_error",
            "loc": ("body", "subject_selector"),
            "msg": "Value error, needs a selector",
        },
    ]
    text = describe_errors(errors, title="request", drop_prefix=("body", "query", "path"))
    assert (
        text == "Invalid request: 'size' must be at least 1; 'subject_selector': needs a selector"
    )


def test_the_name_patterns_have_plain_words() -> None:
    assert NAME_PATTERN in PATTERN_WORDS and KIND_PATTERN in PATTERN_WORDS
