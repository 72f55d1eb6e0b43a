from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Any, Literal, NewType, Optional, Protocol, TypedDict, TypeVar

import numpy as np
import pytest

from wharf.core.errors import StepInterfaceError
from wharf.core.output_types import check_output_type

T = TypeVar("T")
UserId = NewType("UserId", int)


class Row(TypedDict):
    a: int


class Sized(Protocol):  # not runtime_checkable: isinstance cannot check it
    def size(self) -> int: ...


def fails(annotation: Any, value: Any) -> str:
    with pytest.raises(StepInterfaceError) as info:
        check_output_type("train", "output", annotation, value)
    return str(info.value)


def test_a_str_returned_for_int_fails_with_one_line():
    message = fails(int, "7")
    assert message == "Step 'train' output 'output' is annotated int but returned str."


@pytest.mark.parametrize("annotation", [Any, object, T, Literal["a"], Sized])
def test_annotations_that_are_not_concrete_are_not_checked(annotation):
    check_output_type("s", "o", annotation, "anything")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (int, True),  # a bool is an int
        (float, 3),  # PEP 484 numeric tower
        (complex, 2.5),
        (complex, 1),
        (int, np.int64(3)),  # numbers.Integral
        (float, np.float32(0.5)),  # numbers.Real
        (float, Fraction(1, 3)),
        (list[int], ["not", "checked"]),  # element types are not checked
        (dict[str, int], {1: "x"}),
        (Sequence[int], (1, 2)),
        (Optional[int], None),  # noqa: UP045 (typing.Union, not types.UnionType)
        (int | None, 4),
        (int | str, "x"),
        (Annotated[int, "count"], 1),
        (Annotated[list[int], "xs"], []),
        (UserId, 5),
        (Row, {"a": 1}),
        (tuple[int, ...], (1,)),
        (None, None),
        (int | Any, "x"),  # a member that is not concrete: the union is not checked
    ],
)
def test_values_that_fit(annotation, value):
    check_output_type("s", "o", annotation, value)


@pytest.mark.parametrize(
    ("annotation", "value", "said"),
    [
        (int, 1.5, "annotated int but returned float"),
        (int, None, "annotated int but returned None"),
        (bool, 1, "annotated bool but returned int"),
        (float, "1.0", "annotated float but returned str"),
        (int, np.float64(1.0), "annotated int but returned float64"),
        (list[int], (1,), "annotated list[int] but returned tuple"),
        (Optional[int], "x", "annotated Optional[int] but returned str"),  # noqa: UP045
        (int | None, 1.5, "annotated int | None but returned float"),
        (Annotated[int, "count"], "x", "annotated int but returned str"),
        (UserId, "x", "annotated UserId but returned str"),
        (Row, [1], "annotated Row but returned list"),
        (tuple[int, ...], [1], "annotated tuple[int, ...] but returned list"),
    ],
)
def test_values_that_do_not_fit(annotation, value, said):
    assert said in fails(annotation, value)


def test_two_classes_of_one_name_are_told_apart_by_module():
    Model = type("Model", (), {"__module__": "mine"})
    Other = type("Model", (), {"__module__": "theirs"})
    assert "annotated mine.Model but returned theirs.Model" in fails(Model, Other())
