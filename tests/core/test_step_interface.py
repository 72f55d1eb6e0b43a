from typing import Annotated, Any

import pytest

from wharf.core.errors import StepInterfaceError
from wharf.core.step_interface import parse_interface, split_outputs


def test_single_unannotated_output():
    def f(a, b=2):
        return a

    iface = parse_interface(f, "f")
    assert list(iface.inputs) == ["a", "b"]
    assert iface.output_names == ("output",)
    assert iface.inputs["b"].has_default and iface.inputs["b"].default == 2


def test_none_means_no_outputs():
    def f() -> None:
        return None

    assert parse_interface(f, "f").output_names == ()


def test_named_single_and_tuple_outputs():
    def one() -> Annotated[int, "count"]:
        return 1

    def two() -> tuple[Annotated[int, "a"], Annotated[str, "b"]]:
        return 1, "x"

    def anon() -> tuple[int, str]:
        return 1, "x"

    def homogeneous() -> tuple[int, ...]:
        return (1,)

    assert parse_interface(one, "one").output_names == ("count",)
    assert parse_interface(two, "two").output_names == ("a", "b")
    assert parse_interface(anon, "anon").output_names == ("output_0", "output_1")
    assert parse_interface(homogeneous, "h").output_names == ("output",)


def test_rejects_varargs_and_duplicates():
    def f(*args: Any) -> int:
        return 1

    def g(**kw: Any) -> int:
        return 1

    def h() -> tuple[Annotated[int, "a"], Annotated[int, "a"]]:
        return 1, 2

    for func in (f, g):
        with pytest.raises(StepInterfaceError, match="args or"):
            parse_interface(func, "x")
    with pytest.raises(StepInterfaceError, match="duplicate output"):
        parse_interface(h, "h")


def test_bind_errors():
    def f(a: int, b: int = 1) -> int:
        return a

    iface = parse_interface(f, "f")
    assert iface.bind("f", (1,), {}) == {"a": 1, "b": 1}
    with pytest.raises(StepInterfaceError, match="missing a value for argument 'a'"):
        iface.bind("f", (), {})
    with pytest.raises(StepInterfaceError) as unexpected:
        iface.bind("f", (1,), {"c": 2})
    assert str(unexpected.value) == (
        "Step 'f' got an unexpected argument 'c'. Its parameters: a, b."
    )
    with pytest.raises(StepInterfaceError) as misspelt:
        parse_interface(lambda alpha, beta: 1, "g").bind("g", (), {"alpah": 2})
    assert str(misspelt.value) == (
        "Step 'g' got an unexpected argument 'alpah'; did you mean 'alpha'? "
        "Its parameters: alpha, beta."
    )
    no_inputs = parse_interface(lambda: 1, "g")
    with pytest.raises(StepInterfaceError) as none:
        no_inputs.bind("g", (), {"a": 2})
    assert str(none.value) == "Step 'g' got an unexpected argument 'a'; it takes none."
    with pytest.raises(StepInterfaceError, match="multiple values"):
        iface.bind("f", (1,), {"a": 2})
    with pytest.raises(StepInterfaceError, match=r"takes 2 arguments but 3 were given \(a, b\)\."):
        iface.bind("f", (1, 2, 3), {})


def test_split_outputs_checks_arity():
    def two() -> tuple[Annotated[int, "a"], Annotated[str, "b"]]:
        return 1, "x"

    iface = parse_interface(two, "two")
    assert split_outputs("two", iface, (1, "x")) == {"a": 1, "b": "x"}
    with pytest.raises(StepInterfaceError, match="declares 2 outputs"):
        split_outputs("two", iface, 5)


def test_a_value_returned_by_a_step_annotated_none_is_an_error_not_dropped():
    def f() -> None:
        return None

    iface = parse_interface(f, "f")
    assert split_outputs("f", iface, None) == {}
    with pytest.raises(StepInterfaceError, match=r"annotated '-> None' but returned int 5"):
        split_outputs("f", iface, 5)


def test_split_outputs_checks_each_output_against_its_annotation():
    def two() -> tuple[Annotated[int, "a"], Annotated[str, "b"]]:
        return 1, "x"

    def one() -> float:
        return 1

    iface = parse_interface(two, "two")
    assert split_outputs("two", iface, [1, "x"]) == {"a": 1, "b": "x"}
    with pytest.raises(StepInterfaceError, match="output 'b' is annotated str but returned int"):
        split_outputs("two", iface, (1, 2))
    assert split_outputs("one", parse_interface(one, "one"), 1) == {"output": 1}
    with pytest.raises(StepInterfaceError, match=r"^Step 'one' output 'output' is annotated float"):
        split_outputs("one", parse_interface(one, "one"), "1")


def test_check_parameter_refuses_a_value_that_does_not_fit_but_not_the_default():
    def train(epochs: int, seed: int = None, name: str = "x"):  # noqa: RUF013 (sloppy, as found)
        return epochs

    iface = parse_interface(train, "train")
    iface.check_parameter("train_2", "epochs", 3)
    iface.check_parameter("train_2", "seed", None)  # the step's own default: not checked
    with pytest.raises(StepInterfaceError) as info:
        iface.check_parameter("train_2", "epochs", "ten")
    assert (
        str(info.value) == "Step 'train_2' parameter 'epochs' is annotated int but was given str."
    )
    with pytest.raises(StepInterfaceError, match="parameter 'name' is annotated str but was given"):
        iface.check_parameter("train_2", "name", 1)
