"""The ``@step`` decorator's checks of its options, made when the step is defined."""

from __future__ import annotations

from typing import Any

import pytest

from wharf import step
from wharf.artifacts.materializers.builtin import BuiltInMaterializer
from wharf.core.errors import StepInterfaceError


class NotAMaterializer:
    pass


def make() -> int:
    return 1


@pytest.mark.parametrize(
    "materializers",
    [NotAMaterializer, 5, {"output": NotAMaterializer}, {"output": None}],
    ids=["plain-class", "int", "mapped-plain-class", "mapped-none"],
)
def test_an_output_materializer_that_is_no_materializer_is_refused_at_definition(
    materializers: Any,
) -> None:
    with pytest.raises(StepInterfaceError, match="must be Materializer subclasses") as info:
        step(output_materializers=materializers)(make)
    assert "step 'make'" in str(info.value)


def test_output_materializers_are_recorded_as_import_paths() -> None:
    by_class = step(output_materializers=BuiltInMaterializer)(make)
    by_path = step(output_materializers={"output": "pkg.module:Saver"})(make)
    assert by_class.output_materializers == {
        "output": "wharf.artifacts.materializers.builtin:BuiltInMaterializer"
    }
    assert by_path.output_materializers == {"output": "pkg.module:Saver"}
