"""The annotation checks of step values: returned outputs, parameters given to a step call,
and upstream artifacts passed as inputs (by their stored class, or by their output's
annotation)."""

from collections.abc import Sequence
from fractions import Fraction
from typing import Annotated, Any, Literal, NewType, Optional, Protocol, TypedDict, TypeVar

import numpy as np
import pytest

from wharf.core.errors import StepInterfaceError
from wharf.core.type_checks import (
    check_input_annotation,
    check_input_class,
    check_output_type,
    check_parameter_type,
)

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


# ---------------------------------------------------------------- parameters of a step call


def refused_parameter(annotation: Any, value: Any) -> str:
    with pytest.raises(StepInterfaceError) as info:
        check_parameter_type("train", "epochs", annotation, value)
    return str(info.value)


def test_a_str_given_for_int_is_refused_with_one_line():
    message = refused_parameter(int, "ten")
    assert message == "Step 'train' parameter 'epochs' is annotated int but was given str."


@pytest.mark.parametrize(
    ("annotation", "value"),
    [(float, 3), (int, True), (list[int], ["x"]), (int | None, None), (Any, "x"), (Sized, 1)],
)
def test_parameters_follow_the_rules_of_outputs(annotation, value):
    check_parameter_type("s", "p", annotation, value)


@pytest.mark.parametrize(
    ("annotation", "value", "said"),
    [
        (int, 1.5, "annotated int but was given float"),
        (int, None, "annotated int but was given None"),
        (tuple[int, int], [1, 2], "annotated tuple[int, int] but was given list"),
        (Optional[str], 3, "annotated Optional[str] but was given int"),  # noqa: UP045
    ],
)
def test_parameters_that_do_not_fit(annotation, value, said):
    assert said in refused_parameter(annotation, value)


# ---------------------------------------------------------------- upstream artifacts


def test_an_artifact_stored_as_a_str_is_refused_for_int():
    with pytest.raises(StepInterfaceError) as info:
        check_input_class("train", "epochs", int, str, "output 'output' of step 'load'")
    assert str(info.value) == (
        "Step 'train' parameter 'epochs' is annotated int but was given str "
        "(output 'output' of step 'load')."
    )


@pytest.mark.parametrize(
    ("annotation", "value_class"),
    [(float, int), (int, np.int64), (int | None, type(None)), (list[str], list), (Any, str)],
)
def test_artifacts_whose_class_fits(annotation, value_class):
    check_input_class("s", "p", annotation, value_class, "output 'o' of step 'u'")


@pytest.mark.parametrize(
    ("annotation", "output_annotation", "said"),
    [
        (int, str, "annotated int but was given str"),
        (float, str, "annotated float but was given str"),
        (str, int | None, "annotated str but was given int | None"),
        (
            dict[str, int],
            Annotated[list[int], "rows"],
            "annotated dict[str, int] but was given list[int]",
        ),
    ],
)
def test_an_output_annotated_so_that_no_value_fits_is_refused(annotation, output_annotation, said):
    with pytest.raises(StepInterfaceError, match="output 'o' of step 'u'") as info:
        check_input_annotation("s", "p", annotation, output_annotation, "output 'o' of step 'u'")
    assert said in str(info.value)


class Base:
    pass


class Mixin:
    pass


@pytest.mark.parametrize(
    ("annotation", "output_annotation"),
    [
        (float, int),  # the numeric tower
        (int, float),  # a '-> float' step may return an int (the tower)
        (bool, int),  # an int output may be a bool
        (int, bool),
        (int | None, int),
        (int, int | None),  # may be an int
        (int, Any),  # unknown: an output without annotation
        (Any, str),
        (Base, Mixin),  # a class deriving from both fits: only builtin classes are told apart
        (int, Mixin),
        (Sized, str),
        (list[int], list[str]),  # origins only
    ],
)
def test_an_output_annotated_so_that_a_value_may_fit_is_accepted(annotation, output_annotation):
    check_input_annotation("s", "p", annotation, output_annotation, "output 'o' of step 'u'")
