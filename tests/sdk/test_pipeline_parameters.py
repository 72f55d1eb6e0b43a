"""A parameter that is no JSON value, of a pipeline or of a step called in one, is refused in one
line that names it, its type and what to pass instead, without json's own traceback chained."""

from __future__ import annotations

from pathlib import Path

import pytest

from wharf import pipeline, step
from wharf.core.errors import StepInterfaceError


class Config:
    pass


@pipeline
def given(cfg: object = None) -> None:
    pass


@pipeline
def defaulted(root: Path = Path("/data")) -> None:
    pass


def test_a_non_json_argument_names_its_type_and_chains_nothing() -> None:
    with pytest.raises(StepInterfaceError) as info:
        given.compile(cfg=Config())
    message = str(info.value)
    assert "Pipeline parameter 'cfg' of 'given' is a Config that JSON cannot write" in message
    assert "Object of type Config" in message
    assert "(its default)" not in message
    assert "\n" not in message
    assert info.value.__cause__ is None and info.value.__context__ is None


def test_a_positional_argument_is_not_called_a_default() -> None:
    with pytest.raises(StepInterfaceError) as info:
        given.compile(Config())
    assert "(its default)" not in str(info.value)


def test_a_non_json_default_says_it_is_the_default() -> None:
    with pytest.raises(StepInterfaceError, match=r"'root' of 'defaulted' \(its default\)"):
        defaulted.compile()


@step
def takes(cfg: object = None) -> int:
    return 1


@pipeline
def passes_an_object() -> None:
    takes(cfg=Config())


def test_a_non_json_step_argument_chains_nothing() -> None:
    with pytest.raises(
        StepInterfaceError, match="Parameter 'cfg' of step 'takes' is a Config"
    ) as info:
        passes_an_object.compile()
    assert info.value.__cause__ is None and info.value.__context__ is None
