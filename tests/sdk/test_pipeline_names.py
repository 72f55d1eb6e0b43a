"""A pipeline's name, checked when the pipeline is defined: it is a folder of the artifact
store and the first part of its artifacts' names."""

from __future__ import annotations

from typing import Annotated

import pytest

from wharf import pipeline, step
from wharf.core.errors import PipelineDefinitionError
from wharf.core.names import MAX_NAME_LENGTH, MAX_PIPELINE_NAME_LENGTH


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


def test_a_pipeline_name_too_long_for_its_runs_names_is_refused_with_the_limit() -> None:
    pipeline(name="x" * MAX_PIPELINE_NAME_LENGTH)(body)  # its runs' names just fit
    with pytest.raises(PipelineDefinitionError) as refused:
        pipeline(name="x" * 250)(body)
    message = str(refused.value)
    assert "\n" not in message and f"at most {MAX_PIPELINE_NAME_LENGTH} characters" in message
    assert "got 250" in message


@step
def long_output() -> Annotated[int, "a_rather_long_output_name"]:
    return 1


@pytest.mark.parametrize(
    ("pipeline_name", "step_name"),
    [("p", "y" * 250), ("x" * MAX_PIPELINE_NAME_LENGTH, "s")],
    ids=["long-step", "long-pipeline"],
)
def test_a_step_whose_artifact_names_would_not_fit_is_refused_when_compiled(
    pipeline_name: str, step_name: str
) -> None:
    @pipeline(name=pipeline_name)
    def flow() -> None:
        long_output(id=step_name)

    with pytest.raises(PipelineDefinitionError) as refused:
        flow.compile()
    message = str(refused.value)
    assert "\n" not in message and f"more than the {MAX_NAME_LENGTH}" in message
    assert "'a_rather_long_output_name'" in message
