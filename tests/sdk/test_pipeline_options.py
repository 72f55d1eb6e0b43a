"""A pipeline's options, checked when the pipeline is defined: a bad value is refused there in
one line naming the pipeline, not taken for something else (a truthy string for True)."""

from __future__ import annotations

from typing import Any

import pytest

from wharf import pipeline
from wharf.core.errors import PipelineDefinitionError


def body() -> None:
    pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dynamic": "yes"}, "dynamic of pipeline 'body' must be True or False, not 'yes'"),
        ({"dynamic": None}, "dynamic of pipeline 'body' must be True or False, not None"),
        (
            {"enable_cache": "no"},
            "enable_cache of pipeline 'body' must be True, False or None, not 'no'",
        ),
        ({"enable_cache": 0}, "enable_cache of pipeline 'body' must be True, False or None"),
        (
            {"raise_on_failure": "no"},
            "raise_on_failure of pipeline 'body' must be True or False, not 'no'",
        ),
    ],
    ids=["str-dynamic", "none-dynamic", "str-enable-cache", "int-enable-cache", "str-raise"],
)
def test_a_non_bool_switch_is_refused_at_definition_in_one_line(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(PipelineDefinitionError, match=message) as info:
        pipeline(**options)(body)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("options", [{"dynamic": True}, {"enable_cache": None}, {}])
def test_bool_switches_are_kept(options: dict[str, Any]) -> None:
    defined = pipeline(**options)(body)
    assert defined.dynamic is options.get("dynamic", False)
    assert defined.config.enable_cache is options.get("enable_cache")
