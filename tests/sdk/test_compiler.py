"""Compiling a static pipeline: what a step's output handle allows while the pipeline is
defined."""

from __future__ import annotations

import pytest

from wharf import pipeline, step
from wharf.core.errors import PipelineDefinitionError


@step
def produce() -> int:
    return 1


@step
def consume(value: int) -> int:
    return value


def test_a_step_output_cannot_decide_a_condition_of_a_static_pipeline() -> None:
    @pipeline
    def branching() -> None:
        value = produce()
        if value:
            consume(value)

    with pytest.raises(PipelineDefinitionError, match="cannot decide a condition") as info:
        branching.compile()
    assert "Output 'output' of step 'produce'" in str(info.value)
    assert "dynamic=True" in str(info.value)


def test_a_step_output_handle_still_wires_steps_together() -> None:
    @pipeline
    def chained() -> None:
        consume(produce())

    spec = chained.compile()
    assert list(spec.steps) == ["produce", "consume"]


def test_a_step_output_orders_a_step_with_after() -> None:
    @pipeline
    def ordered() -> None:
        first = produce()
        produce(after=first)

    spec = ordered.compile()
    assert spec.steps["produce_2"].upstream == ("produce",)


def test_loading_a_step_output_in_a_static_pipeline_says_to_make_it_dynamic() -> None:
    @pipeline
    def loading() -> None:
        consume(produce().load())

    message = (
        "Output 'output' of step 'produce' has no value while a static pipeline is being "
        "defined, so it cannot be loaded; use @pipeline\\(dynamic=True\\)"
    )
    with pytest.raises(PipelineDefinitionError, match=message):
        loading.compile()


def test_a_misspelt_after_name_suggests_the_step_id_meant() -> None:
    @pipeline(name="ordered")
    def ordered() -> None:
        produce(id="train")
        produce(id="evaluate", after="trian")

    message = (
        "Step 'evaluate' runs after step 'trian', which pipeline 'ordered' does not have; "
        "did you mean 'train'? Its steps: train."
    )
    with pytest.raises(PipelineDefinitionError) as info:
        ordered.compile()
    assert str(info.value) == message
