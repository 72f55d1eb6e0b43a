"""A pipeline's name, checked when the pipeline is defined: it is a folder of the artifact
store and the first part of its artifacts' names."""

from __future__ import annotations

import pytest

from wharf import pipeline
from wharf.core.errors import PipelineDefinitionError


def body() -> None:
    pass


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../up", "slash or backslash"),
        ("a/b", "slash or backslash"),
        ("a\\b", "slash or backslash"),
        ("..", "or be '.' or '..'"),
        ("train::v2", "must not contain '::'"),
        (" padded", "whitespace"),
    ],
)
def test_a_pipeline_name_unfit_for_a_folder_or_an_artifact_name_is_refused(
    name: str, message: str
) -> None:
    with pytest.raises(PipelineDefinitionError, match=message):
        pipeline(name=name)(body)


def test_a_pipeline_name_with_dots_spaces_and_unicode_is_kept() -> None:
    assert pipeline(name="train v2.1 ünï")(body).name == "train v2.1 ünï"
